// A JS call whose work runs on an engine's batcher thread and ends there (parakeet-binding.cpp, audio-lm-binding.cpp):
// its end settles a promise on the main thread through a thread-safe function, which can carry the job's progress
// to a JS callback first (queued calls run in order, every one before the settlement). The job holds the model, so a
// released model's weights stay until its last job ends; each queued call holds the job, so the job (and usually
// the model's last hold) ends on the main thread.
#pragma once

#include "async.h"

#include <atomic>
#include <memory>
#include <string>
#include <utility>

template <typename Derived, typename Model> class voxd_batched_job : public std::enable_shared_from_this<Derived> {
public:
    voxd_batched_job(std::shared_ptr<Model> model, voxd_abort_ptr abort) : m_model(std::move(model)), m_abort(std::move(abort)) {}

    // Main thread: the job's promise, settled through a thread-safe function over `progress` (the caller's callback,
    // or undefined for none) with one thread reference, which the settlement releases exactly once.
    Napi::Promise start(Napi::Env env, const char * name, const Napi::Value & progress) {
        const Napi::Function fn = progress.IsFunction() ? progress.As<Napi::Function>() : Napi::Function::New(env, [](const Napi::CallbackInfo &) {});
        m_tsfn                  = Napi::ThreadSafeFunction::New(env, fn, name, 0 /* unbounded queue */, 1 /* the settlement */);
        m_deferred              = std::make_unique<Napi::Promise::Deferred>(Napi::Promise::Deferred::New(env));
        return m_deferred->Promise();
    }

    bool is_aborted() const { return m_abort->load(std::memory_order_relaxed); }

    // Any thread: rejects the promise with a coded error.
    void reject(const std::string & code, const std::string & message) {
        settle([code, message](Napi::Env env, Napi::Promise::Deferred & deferred) { deferred.Reject(voxd_make_js_error(env, code, message).Value()); });
    }

protected:
    // Any thread: resolves the promise with to_js(env), called on the main thread.
    template <typename F> void resolve(F to_js) {
        settle([to_js = std::move(to_js)](Napi::Env env, Napi::Promise::Deferred & deferred) { deferred.Resolve(to_js(env)); });
    }

    // Any thread: calls the progress callback with args(env) on the main thread, unless the job has settled or its
    // caller gave up.
    template <typename F> void report(F args) {
        if (m_settled.load()) {
            return;
        }
        m_tsfn.NonBlockingCall([job = this->shared_from_this(), args = std::move(args)](Napi::Env env, Napi::Function fn) {
            if (job->is_aborted()) {
                return;
            }
            try {
                fn.Call(args(env));
            } catch (const Napi::Error &) {
                // cleared; it must not escape into libuv (the engine's wrapper catches its own)
            }
        });
    }

private:
    template <typename F> void settle(F finish) {
        if (m_settled.exchange(true)) {
            return;
        }
        m_tsfn.NonBlockingCall([job = this->shared_from_this(), finish = std::move(finish)](Napi::Env env, Napi::Function) {
            try {
                finish(env, *job->m_deferred);
            } catch (const Napi::Error &) {
                // the promise stays pending only if V8 itself failed; nothing may escape into libuv
            }
        });
        m_tsfn.Release();
    }

    Napi::ThreadSafeFunction m_tsfn;
    std::unique_ptr<Napi::Promise::Deferred> m_deferred; // main thread only
    std::shared_ptr<Model> m_model;
    voxd_abort_ptr m_abort;
    std::atomic<bool> m_settled{ false };
};
