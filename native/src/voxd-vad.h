// Silero voice activity detection through whisper.cpp's VAD API.
#pragma once

#include "voxd-async.h"

#include <mutex>
#include <vector>

struct whisper_vad_context;

// whisper_vad_context holds both weights and LSTM state, so each concurrent user needs its own context.
// The pool keeps idle contexts of one model file for reuse; it is shared (shared_ptr) by the JS model object,
// its streams and any worker in flight, so releasing the model never frees a context in use.
class voxd_vad_pool {
public:
    explicit voxd_vad_pool(std::string path) : m_path(std::move(path)) {}
    ~voxd_vad_pool();

    struct context_deleter {
        void operator()(whisper_vad_context * ctx) const;
    };
    using context_ptr = std::unique_ptr<whisper_vad_context, context_deleter>;

    context_ptr acquire();         // an idle context (state reset) or a newly loaded one
    void release(context_ptr ctx); // back to the pool, or freed beyond max_idle

    static constexpr size_t max_idle = 4;

private:
    std::string m_path;
    std::mutex m_mutex;
    std::vector<context_ptr> m_idle;
};

// JS: `VadModel.load(path) -> Promise<VadModel>`; `model.segments(samples, params, abort?)`;
// `model.openStream() -> Promise<VadStream>`.
class voxd_vad_model : public Napi::ObjectWrap<voxd_vad_model> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_vad_model(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value segments(const Napi::CallbackInfo & info);
    Napi::Value open_stream(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_vad_pool> m_pool;
};

// JS: a streaming detector that carries LSTM state between calls. `stream.process(samples16k)` resolves to
// one speech probability per complete 512-sample frame; a partial frame is kept for the next call.
class voxd_vad_stream : public Napi::ObjectWrap<voxd_vad_stream> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_vad_stream(const Napi::CallbackInfo & info);

    static constexpr int frame_samples = 512; // 32 ms at 16 kHz: Silero's window

private:
    Napi::Value process(const Napi::CallbackInfo & info);
    Napi::Value reset(const Napi::CallbackInfo & info);
    Napi::Value close(const Napi::CallbackInfo & info);

    // State that workers touch: guarded by `mutex` so overlapping process() calls run in order.
    struct state {
        std::mutex mutex;
        std::shared_ptr<voxd_vad_pool> pool;
        voxd_vad_pool::context_ptr ctx;
        std::vector<float> pending; // samples of an incomplete frame

        ~state(); // returns the context to the pool once neither JS nor a worker holds the state
    };
    std::shared_ptr<state> m_state;

    friend class voxd_vad_model;
};

// Exports VadModel and VadStream.
void voxd_vad_init(Napi::Env env, Napi::Object exports);
