// Worker-thread plumbing shared by every binding: promise-returning async work, engine errors as coded JS errors,
// the AbortFlag class JS holds to cancel work in flight, and what the addon keeps per environment.
#pragma once

#include "common/error.h"

#include <napi.h>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

class voxd_executor;

// What the addon keeps running in one environment beyond a call: the executor threads of its engines (a GGML TTS
// model's). The environment's cleanup hook (addon.cpp) stops and joins them when the environment is torn down
// (a worker_thread ends, or the process exits at the end of its event loop), whether JS, a finalizer that has not
// run yet or a leaked reference still holds their engine, so no thread outlives its environment. Everything else the
// addon owns in an environment is held by its JS objects and freed by their finalizers, which Node runs at teardown
// too. JS thread only.
class voxd_env_threads {
public:
    // Registers an executor; weak, so registering keeps nothing alive.
    void track(std::weak_ptr<voxd_executor> executor);

    // Stops and joins every executor still alive: each first finishes the tasks queued on it, later ones are refused.
    void stop_all() noexcept;

private:
    std::vector<std::weak_ptr<voxd_executor>> m_executors;
};

// Per-environment state of the addon: the constructors of exported classes, so native code can create
// instances (a worker resolving with a new object) and recognise its own objects among JS values; the threads the
// environment's cleanup hook stops.
struct voxd_addon_data {
    std::unordered_map<std::string, Napi::FunctionReference> classes;
    // shared with the environment's cleanup hook: whichever of the two ends last frees it
    std::shared_ptr<voxd_env_threads> threads = std::make_shared<voxd_env_threads>();

    Napi::Function class_of(const std::string & name) const { return classes.at(name).Value(); }
};

// Registers `executor` with the environment's cleanup hook (voxd_env_threads). JS thread only.
void voxd_track_executor(Napi::Env env, std::weak_ptr<voxd_executor> executor);

// Exports `ctor` as `exports[name]` and keeps it in the environment's voxd_addon_data.
void voxd_export_class(Napi::Env env, Napi::Object exports, const char * name, Napi::Function ctor);

// The constructor registered under `name` for this environment.
Napi::Function voxd_class(Napi::Env env, const char * name);

// JS: `new AbortFlag()`, `.abort()`, `.aborted`.
class voxd_abort_flag : public Napi::ObjectWrap<voxd_abort_flag> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_abort_flag(const Napi::CallbackInfo & info);

    voxd_abort_ptr flag() const { return m_flag; }

    // Returns the flag of an optional AbortFlag argument, or a fresh never-set flag when absent.
    static voxd_abort_ptr from_value(const Napi::Value & value);

private:
    Napi::Value abort(const Napi::CallbackInfo & info);
    Napi::Value aborted(const Napi::CallbackInfo & info);

    voxd_abort_ptr m_flag = voxd_never_aborted();
};

// Native memory that a JS object keeps alive (a model's weights), reported to V8 so that its garbage collector weighs
// the object by it: added by set(), taken back once by reset(), by the next set() or when the object is collected.
// JS thread only.
class voxd_external_memory {
public:
    voxd_external_memory()                                         = default;
    voxd_external_memory(const voxd_external_memory &)             = delete;
    voxd_external_memory & operator=(const voxd_external_memory &) = delete;
    ~voxd_external_memory() { reset(); }

    void set(Napi::Env env, int64_t bytes) {
        reset();
        m_env   = env;
        m_bytes = bytes;
        Napi::MemoryManagement::AdjustExternalMemory(env, bytes);
    }
    void reset() {
        if (m_env && m_bytes) {
            Napi::MemoryManagement::AdjustExternalMemory(Napi::Env(m_env), -m_bytes);
        }
        m_env   = nullptr;
        m_bytes = 0;
    }

private:
    napi_env m_env  = nullptr; // borrowed: the environment outlives its objects
    int64_t m_bytes = 0;
};

Napi::Error voxd_make_js_error(Napi::Env env, const std::string & code, const std::string & message);

// Runs `work` on a libuv worker thread and settles a Promise: resolves with `to_js(result)` on the main
// thread, rejects with a coded Error when `work` throws. `work` must not touch any napi value.
template <typename T> class voxd_async_worker : public Napi::AsyncWorker {
public:
    using work_fn  = std::function<T()>;
    using to_js_fn = std::function<Napi::Value(Napi::Env, T &)>;

    static Napi::Promise run(Napi::Env env, const char * name, work_fn work, to_js_fn to_js) {
        auto * worker         = new voxd_async_worker(env, name, std::move(work), std::move(to_js)); // owned by libuv until done
        Napi::Promise promise = worker->m_deferred.Promise();
        worker->Queue();
        return promise;
    }

protected:
    void Execute() override {
        try {
            m_result = m_work();
        } catch (const voxd_error & e) {
            m_code = e.code;
            SetError(e.what());
        } catch (const std::bad_alloc &) {
            m_code = "out_of_memory";
            SetError("out of memory");
        } catch (const std::exception & e) {
            m_code = "native_error";
            SetError(e.what());
        }
    }

    void OnOK() override {
        Napi::Env env = Env();
        try {
            m_deferred.Resolve(m_to_js(env, m_result));
        } catch (const Napi::Error & e) {
            m_deferred.Reject(e.Value());
        }
    }

    void OnError(const Napi::Error & e) override { m_deferred.Reject(voxd_make_js_error(Env(), m_code, e.Message()).Value()); }

private:
    voxd_async_worker(Napi::Env env, const char * name, work_fn work, to_js_fn to_js)
        : Napi::AsyncWorker(env, name), m_deferred(Napi::Promise::Deferred::New(env)), m_work(std::move(work)), m_to_js(std::move(to_js)) {}

    Napi::Promise::Deferred m_deferred;
    work_fn m_work;
    to_js_fn m_to_js;
    T m_result{};
    std::string m_code = "native_error";
};

// Runs `work` on a libuv worker thread with no promise of its own, for work that reports through its own channel
// (a batched job's thread-safe function). `work` must not throw.
void voxd_run_in_background(Napi::Env env, const char * name, std::function<void()> work);

// An optional integer option `key` of `options` in [lo, hi] (undefined or null: none); throws a JS `invalid_argument`
// error naming `where` (the call) otherwise.
std::optional<int> voxd_integer_option(Napi::Env env, const Napi::Object & options, const char * key, int lo, int hi, const char * where);

// A typed array (Napi::Float32Array, Napi::Int32Array, ...) over `values` without a copy: its ArrayBuffer owns the
// vector and frees it when collected (an empty one has no data to hand over).
template <typename Array, typename T> Array voxd_owned_array(Napi::Env env, std::vector<T> && values) {
    if (values.empty()) {
        return Array::New(env, 0);
    }
    auto owned               = std::make_unique<std::vector<T>>(std::move(values));
    const size_t n           = owned->size();
    Napi::ArrayBuffer buffer = Napi::ArrayBuffer::New(
        env, owned->data(), n * sizeof(T), [](Napi::Env, void *, std::vector<T> * v) { delete v; }, owned.get());
    owned.release(); // now owned by `buffer`
    return Array::New(env, n, buffer, 0);
}

// Copies a Float32Array argument (the JS buffer may be reused or collected while the worker runs).
std::vector<float> voxd_copy_samples(const Napi::Value & value, const char * what);
