// A synthesis that streams PCM to JS while it runs, shared by the TTS bindings (flite, GGML TTS): the engine
// appends samples to this sink on a worker and marks them ready; JS receives them through a thread-safe function,
// every sample exactly once, in order and before the promise resolves, none after a rejection.
#pragma once

#include "async.h"

#include "common/pcm-sink.h"

#include <napi.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

class voxd_pcm_stream_job : public voxd_pcm_sink, public std::enable_shared_from_this<voxd_pcm_stream_job> {
public:
    // `synthesize` runs the engine into this sink on a worker; it throws voxd_error to reject. `abort` is the flag it
    // checks between units of work: set here too once JS can take no more audio.
    voxd_pcm_stream_job(std::function<void(voxd_pcm_sink &)> synthesize, voxd_abort_ptr abort)
        : m_synthesize(std::move(synthesize)), m_abort(std::move(abort)) {}

    // Main thread: queues `job` on a worker and returns the promise of all its samples as one Float32Array. When
    // `on_audio` is a function it also receives them in chunks while the worker runs. `work_name` and `audio_name`
    // name the async resources (static strings).
    static Napi::Promise start(Napi::Env env, std::shared_ptr<voxd_pcm_stream_job> job, const Napi::Value & on_audio, const char * work_name,
                               const char * audio_name) {
        // the final flush calls the callback directly; the reference lives in the settle lambda, on the main thread
        std::shared_ptr<Napi::FunctionReference> callback;
        if (on_audio.IsFunction()) {
            Napi::Function fn = on_audio.As<Napi::Function>();
            callback          = std::make_shared<Napi::FunctionReference>(Napi::Persistent(fn));
            job->m_tsfn       = Napi::ThreadSafeFunction::New(env, fn, audio_name, 0 /* unbounded queue */, 1 /* the worker */);
            job->m_streaming  = true;
        }
        return voxd_async_worker<bool>::run(
            env, work_name,
            [job]() {
                job->execute();
                return true;
            },
            [job, callback](Napi::Env env, bool &) -> Napi::Value {
                if (callback) {
                    job->deliver(env, callback->Value(), true); // audio still queued in the TSFN arrives before the result
                }
                return job->result_to_js(env);
            });
    }

    // Worker thread: appends the samples and marks them deliverable (voxd_pcm_sink).
    void append(const float * samples, size_t n) override {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_samples.insert(m_samples.end(), samples, samples + n);
    }

    void ready(size_t min_new) override {
        if (!m_streaming) {
            return;
        }
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_samples.size() - m_ready < std::max<size_t>(min_new, 1)) {
                return;
            }
            m_ready = m_samples.size();
        }
        m_tsfn.NonBlockingCall([job = shared_from_this()](Napi::Env env, Napi::Function fn) { job->deliver(env, fn, false); });
    }

private:
    // Worker thread: runs the synthesis.
    void execute() {
        struct tsfn_release {
            voxd_pcm_stream_job & job;
            ~tsfn_release() {
                if (job.m_streaming)
                    job.m_tsfn.Release();
            }
        } guard{ *this };
        try {
            m_synthesize(*this);
        } catch (...) {
            m_failed.store(true); // set before the rejection, so no audio reaches JS after it
            throw;
        }
    }

    // Main thread: hands the samples made ready (or, with `everything`, all) and not yet delivered to `fn`, in
    // order. Called by queued TSFN calls and once more before the promise resolves, so every sample arrives exactly
    // once and before the result.
    void deliver(Napi::Env env, Napi::Function fn, bool everything) {
        if (m_failed.load()) {
            return;
        }
        try {
            Napi::Float32Array chunk;
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                const size_t end = everything ? m_samples.size() : m_ready;
                if (end <= m_delivered) {
                    return;
                }
                chunk = Napi::Float32Array::New(env, end - m_delivered);
                std::copy(m_samples.begin() + (std::ptrdiff_t) m_delivered, m_samples.begin() + (std::ptrdiff_t) end, chunk.Data());
                m_delivered = end;
            }
            fn.Call({ chunk });
        } catch (const Napi::Error &) {
            // The engine's wrapper catches its own callback's errors, so this failed because JS can no longer run: the
            // environment is being torn down (a worker_thread terminated). Node waits for work in flight before it
            // runs cleanup hooks, so the synthesis is stopped here rather than left to run to its end. The error must
            // not escape into libuv.
            m_abort->store(true);
        }
    }

    Napi::Value result_to_js(Napi::Env env) {
        std::lock_guard<std::mutex> lock(m_mutex);
        Napi::Float32Array out = Napi::Float32Array::New(env, m_samples.size());
        std::copy(m_samples.begin(), m_samples.end(), out.Data());
        return out;
    }

    std::function<void(voxd_pcm_sink &)> m_synthesize;
    voxd_abort_ptr m_abort;

    std::mutex m_mutex; // guards m_samples, m_ready and m_delivered
    std::vector<float> m_samples;

    // Created by start() with one thread reference, owned by the worker, released when execute() ends.
    Napi::ThreadSafeFunction m_tsfn;
    bool m_streaming = false;

    size_t m_ready     = 0; // samples JS may receive now
    size_t m_delivered = 0; // samples JS has received
    std::atomic<bool> m_failed{ false };
};
