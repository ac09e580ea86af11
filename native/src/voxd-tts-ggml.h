// GGML text-to-speech through llama.cpp's libmtmd audio generation: a backbone GGUF (libllama) plus its mmproj GGUF
// (speaker encoder, generator and decoder), driven by the mtmd helper's gen-audio pipeline exactly as llama.cpp's
// tools/tts does. Pocket TTS (architecture `pockettts`) only, for now; one synthesis at a time per model (the
// clip/mtmd calls and the single llama_context are not thread-safe), serialised by a mutex inside.
#pragma once

#include "voxd-async.h"

#include "ggml.h"

#include <memory>
#include <mutex>
#include <string>

struct llama_model;
struct llama_context;
struct mtmd_context;
struct mtmd_helper_gen_audio;

// Shared (shared_ptr) by the JS TtsGgmlModel and every synthesis in flight: freed when the last of them lets go,
// never under a running worker. Members are declared in reverse order of destruction (the helper, which points
// into both contexts, goes first; the model, which both contexts point into, goes last).
struct voxd_tts_ggml_data {
    struct model_deleter   { void operator()(llama_model * model) const; };
    struct context_deleter { void operator()(llama_context * ctx) const; };
    struct mtmd_deleter    { void operator()(mtmd_context * ctx) const; };
    struct gen_deleter     { void operator()(mtmd_helper_gen_audio * gen) const; };

    std::unique_ptr<llama_model, model_deleter>           model; // owns the backbone weights
    std::unique_ptr<llama_context, context_deleter>       lctx;  // owns the KV cache; borrows `model`
    std::unique_ptr<mtmd_context, mtmd_deleter>           mctx;  // owns the mmproj weights; borrows `model`
    std::unique_ptr<mtmd_helper_gen_audio, gen_deleter>   gen;   // borrows `lctx` and `mctx`

    std::string arch;          // general.architecture of the backbone
    std::string variant;       // the generator's model variant (e.g. "english"), "" when none
    int         sample_rate = 0;
    int         n_embd      = 0;
    int         n_batch     = 0;

    std::mutex mutex; // held by a synthesis from start to end: one at a time per model
};

// JS: `TtsGgmlModel.load({ model, mmproj, threads? }) -> Promise<TtsGgmlModel>`; `model.info()` ->
// `{ arch, sampleRate, variant }`; `model.synthesize({ text, reference?, seed?, maxFrames? }, onAudio?, abort?)
// -> Promise<Float32Array>`; `model.release()`.
class voxd_tts_ggml_model : public Napi::ObjectWrap<voxd_tts_ggml_model> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_tts_ggml_model(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value synthesize(const Napi::CallbackInfo & info);
    Napi::Value release(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_tts_ggml_data> loaded(Napi::Env env) const; // throws "closed" after release()

    std::shared_ptr<voxd_tts_ggml_data> m_data;
};

// Exports TtsGgmlModel. `log` receives libmtmd's log lines (the addon's engine log callback); the engine also
// keeps the last error line of the calling thread for its error messages.
void voxd_tts_ggml_init(Napi::Env env, Napi::Object exports, ggml_log_callback log);
