// Speech-to-text on a whisper.cpp model file. Transcriptions go to the model's batcher (voxd-whisper-batch.h), which
// decodes concurrent requests together; word timestamps, which it does not make, take whisper.cpp's own path: one
// whisper_context of weights, loaded on the first such request, and one whisper_state per transcription in flight.
#pragma once

#include "voxd-async.h"
#include "voxd-whisper-batch.h"

#include <mutex>
#include <string>
#include <vector>

#include "whisper.h"

// Shared (shared_ptr) by the JS WhisperModel and every transcription in flight: the weights are freed when
// the last of them lets go, never under a running worker.
struct voxd_whisper_model_data {
    ~voxd_whisper_model_data();

    struct context_deleter {
        void operator()(whisper_context * ctx) const;
    };
    struct state_deleter {
        void operator()(whisper_state * state) const;
    };
    using context_ptr = std::unique_ptr<whisper_context, context_deleter>;
    using state_ptr   = std::unique_ptr<whisper_state, state_deleter>;

    std::unique_ptr<voxd_whisper_batcher> batcher; // our graphs: every request without word timestamps
    std::string path;
    whisper_context_params cparams{}; // for whisper.cpp's context, loaded on first use
    size_t max_idle = 2;              // idle whisper.cpp states kept for reuse: each holds compute buffers and KV caches

    whisper_context * context(); // whisper.cpp's, loaded now if needed (throws voxd_error); any thread
    state_ptr acquire();         // an idle state or a newly allocated one
    void release(state_ptr st);  // back to the pool, or freed beyond max_idle

private:
    std::mutex m_mutex; // guards m_ctx, m_idle
    context_ptr m_ctx;  // declared before `m_idle`: idle states are freed first
    std::vector<state_ptr> m_idle;
};

// JS: `WhisperModel.load(path, { useGpu?, flashAttn?, gpuDevice?, maxIdleStates?, maxBatch?, threads? }) ->
// Promise<WhisperModel>`; `model.info()`; `model.timings()` (the batcher's sums);
// `model.transcribe(samples16k, params?, onSegment?, abort?) -> Promise<{ language, segments }>`;
// `model.release()` drops this object's hold on the weights (transcriptions in flight finish first).
class voxd_whisper_model : public Napi::ObjectWrap<voxd_whisper_model> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_whisper_model(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
    Napi::Value release(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_whisper_model_data> loaded(Napi::Env env) const; // throws "closed" after release()

    std::shared_ptr<voxd_whisper_model_data> m_model;
    voxd_external_memory m_memory; // the weights, reported to V8 while this object holds them
};

// Exports WhisperModel.
void voxd_whisper_init(Napi::Env env, Napi::Object exports);
