// GGML text-to-speech through llama.cpp's libmtmd audio generation: a backbone GGUF (libllama) plus its mmproj GGUF
// (speaker encoder, generator and decoder): Pocket TTS (architecture `pockettts`) and Qwen3-TTS (`qwen3tts`). Requests are
// sequences on the model's one llama_context (voxd-tts-ggml-gen.h): a serial synthesis steps its own sequence, a
// batch session steps all of its sequences together; the steps of both run in turn on the model's executor thread
// (the clip/mtmd calls and the llama_context are not thread-safe).
#pragma once

#include "voxd-async.h"
#include "voxd-executor.h"
#include "voxd-tts-ggml-gen.h"

#include "ggml.h"

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct llama_model;
struct llama_context;
struct mtmd_context;

// Shared (shared_ptr) by the JS TtsGgmlModel, its batch sessions and every synthesis in flight: freed when the last
// of them lets go, never under a running worker. Members are declared in reverse order of destruction (the
// generator, which points into both contexts, goes first; the model, which both contexts point into, goes last).
struct voxd_tts_ggml_data {
    struct model_deleter {
        void operator()(llama_model * model) const;
    };
    struct context_deleter {
        void operator()(llama_context * ctx) const;
    };
    struct mtmd_deleter {
        void operator()(mtmd_context * ctx) const;
    };

    std::unique_ptr<llama_model, model_deleter> model;    // owns the backbone weights
    std::unique_ptr<llama_context, context_deleter> lctx; // owns the KV cache; borrows `model`
    std::unique_ptr<mtmd_context, mtmd_deleter> mctx;     // owns the mmproj weights; borrows `model`
    std::unique_ptr<voxd_tts_generator> gen;              // borrows `lctx` and `mctx`

    std::string arch;    // general.architecture of the backbone
    std::string variant; // the generator's model variant (e.g. "english"), "" when none
    int sample_rate = 0;
    int cpu_threads = 1; // the CPU threads a step keeps busy: the cores it leases (voxd-cpu-gate.h)

    voxd_executor executor; // runs every generator step, one at a time (the contexts are not thread-safe); stopped
                            // by the environment's cleanup hook at the latest (voxd_env_threads)

    std::mutex pool_mutex;                  // guards free_seq_ids
    std::vector<llama_seq_id> free_seq_ids; // the context's sequences no request holds
};

// A sequence with one of the model's seq_ids, handed back to the pool when the last holder (its runner, a step in
// flight) lets go.
struct voxd_tts_ggml_request {
    voxd_tts_ggml_request(std::shared_ptr<voxd_tts_ggml_data> data, voxd_tts_gen_request request, llama_seq_id seq_id);
    ~voxd_tts_ggml_request();
    voxd_tts_ggml_request(const voxd_tts_ggml_request &)             = delete;
    voxd_tts_ggml_request & operator=(const voxd_tts_ggml_request &) = delete;

    std::shared_ptr<voxd_tts_ggml_data> data;
    voxd_tts_sequence seq;
};

// JS: `TtsGgmlModel.load({ model, mmproj, threads?, sequences?, generator? }) -> Promise<TtsGgmlModel>`; `model.info()` ->
// `{ arch, sampleRate, variant, sequences }`; `model.synthesize(request, onAudio?, abort?) -> Promise<Float32Array>`;
// `model.createBatch() -> TtsGgmlBatch`; `model.timings()` -> where generation time went; `model.release()`. A request is `{ text, reference?, language?, seed?, temperature?,
// maxFrames? }`.
class voxd_tts_ggml_model : public Napi::ObjectWrap<voxd_tts_ggml_model> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_tts_ggml_model(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value synthesize(const Napi::CallbackInfo & info);
    Napi::Value create_batch(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
    Napi::Value release(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_tts_ggml_data> loaded(Napi::Env env) const; // throws "closed" after release()

    std::shared_ptr<voxd_tts_ggml_data> m_data;
    voxd_external_memory m_memory; // the backbone and mmproj weights, reported to V8 while this object holds them
};

// JS: `batch.add(request) -> slot` (throws `invalid_argument`, or `batch_full` when the model has no free
// sequence); `batch.cancel(slot)`; `batch.step() -> Promise<[{ slot, samples } | { slot, error }]>` (one frame for
// every request, new ones prepared first; the finished ones with all their audio, or their own error);
// `batch.active`; `batch.close()`.
class voxd_tts_ggml_batch : public Napi::ObjectWrap<voxd_tts_ggml_batch> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_tts_ggml_batch(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_tts_ggml_data> m_data; // set by createBatch(); null after close()

private:
    Napi::Value add(const Napi::CallbackInfo & info);
    Napi::Value cancel(const Napi::CallbackInfo & info);
    Napi::Value step(const Napi::CallbackInfo & info);
    Napi::Value active(const Napi::CallbackInfo & info);
    Napi::Value close(const Napi::CallbackInfo & info);

    std::map<int, std::shared_ptr<voxd_tts_ggml_request>> m_requests; // by slot; the JS thread's only
    int m_next_slot = 0;
    bool m_stepping = false;
};

// Exports TtsGgmlModel (and the TtsGgmlBatch class its sessions are). `log` receives libmtmd's log lines (the addon's engine log callback); the engine also
// keeps the last error line of the calling thread for its error messages.
void voxd_tts_ggml_init(Napi::Env env, Napi::Object exports, ggml_log_callback log);
