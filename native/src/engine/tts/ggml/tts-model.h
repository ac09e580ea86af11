// GGML text-to-speech through llama.cpp's libmtmd audio generation: a backbone GGUF (libllama) plus its mmproj GGUF
// (speaker encoder, generator and decoder): Pocket TTS (architecture `pockettts`) and Qwen3-TTS (`qwen3tts`). Requests are
// sequences on the model's one llama_context (tts/ggml/generator.h): a serial synthesis steps its own sequence, a
// batch session steps all of its sequences together; the steps of both run in turn on the model's executor thread
// (the clip/mtmd calls and the llama_context are not thread-safe).
#pragma once

#include "common/error.h"
#include "common/executor.h"
#include "common/pcm-sink.h"
#include "tts/ggml/generator.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct llama_model;
struct llama_context;
struct mtmd_context;

struct voxd_tts_ggml_request;

struct voxd_tts_ggml_load_options {
    std::string model;     // the backbone GGUF
    std::string mmproj;    // its mmproj GGUF
    int threads   = 0;     // 0: voxd_default_threads()
    int sequences = 1;     // requests the context holds at once
    bool libmtmd  = false; // Pocket TTS: libmtmd's one-request generator and decoder (voxd_tts_generator_options)
};

// A loaded model. Shared (shared_ptr) by its owner (the JS TtsGgmlModel), its batch sessions and every request in
// flight: freed when the last of them lets go, never under a running step. Members are declared in reverse order of
// destruction (the generator, which points into both contexts, goes first; the model, which both contexts point
// into, goes last).
struct voxd_tts_ggml_model : std::enable_shared_from_this<voxd_tts_ggml_model> {
    static constexpr int max_sequences = 64; // llama.cpp allows 256; each costs its KV cells

    // Checks both files' architectures and loads them. Throws voxd_error "model_load_failed" or "invalid_argument".
    static std::shared_ptr<voxd_tts_ggml_model> load(const voxd_tts_ggml_load_options & options);

    // A request holding one of the model's sequences (`batch`: for a batch session, which takes the lowest ids).
    // Throws voxd_error "invalid_argument" (a reference clip too short to hear a voice in) or "batch_full".
    std::shared_ptr<voxd_tts_ggml_request> start_request(voxd_tts_gen_request request, bool batch);

    // One step of `seqs` on the executor thread, the cores leased for it. A failure of the shared decode ends every
    // request of the step with it, each with the last line libmtmd logged.
    void step(const std::vector<voxd_tts_sequence *> & seqs);

    // One request alone, stepped to its end on the calling thread's turn; its audio goes to `sink` a decoder window
    // at a time. Throws voxd_error.
    void synthesize(voxd_tts_ggml_request & request, voxd_pcm_sink & sink, const voxd_abort_ptr & abort);

    int sequences() const;         // the context's
    static uint32_t random_seed(); // for a request that names none: never UINT32_MAX

    voxd_llama_model_ptr model;              // owns the backbone weights
    voxd_llama_context_ptr lctx;             // owns the KV cache; borrows `model`
    voxd_mtmd_context_ptr mctx;              // owns the mmproj weights; borrows `model`
    std::unique_ptr<voxd_tts_generator> gen; // borrows `lctx` and `mctx`

    std::string arch;    // general.architecture of the backbone
    std::string variant; // the generator's model variant (e.g. "english"), "" when none
    int sample_rate      = 0;
    int cpu_threads      = 1; // the CPU threads a step keeps busy: the cores it leases (common/cpu-gate.h)
    int64_t weight_bytes = 0; // the backbone's, the generator's own and the mmproj file's

    voxd_executor executor; // runs every generator step, one at a time (the contexts are not thread-safe); stopped
                            // by the environment's cleanup hook at the latest (voxd_env_threads)

    std::mutex pool_mutex;                  // guards free_seq_ids
    std::vector<llama_seq_id> free_seq_ids; // the context's sequences no request holds
};

// A sequence with one of the model's seq_ids, handed back to the pool when the last holder (its runner, a step in
// flight) lets go.
struct voxd_tts_ggml_request {
    voxd_tts_ggml_request(std::shared_ptr<voxd_tts_ggml_model> data, voxd_tts_gen_request request, llama_seq_id seq_id);
    ~voxd_tts_ggml_request();
    voxd_tts_ggml_request(const voxd_tts_ggml_request &)             = delete;
    voxd_tts_ggml_request & operator=(const voxd_tts_ggml_request &) = delete;

    std::shared_ptr<voxd_tts_ggml_model> data;
    voxd_tts_sequence seq;
};
