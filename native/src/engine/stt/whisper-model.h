// A whisper.cpp model file. Transcriptions go to the model's batcher (stt/whisper-batch.h), which decodes
// concurrent requests together; word timestamps, which it does not make, take whisper.cpp's own path: one
// whisper_context of weights, loaded on the first such request, and one whisper_state per transcription in flight
// (stt/whisper-transcription.h).
#pragma once

#include "common/error.h"
#include "common/idle-pool.h"
#include "stt/whisper-batch.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "whisper.h"

// How to load a model; what is not set keeps whisper.cpp's defaults (batch: voxd_whisper_batch_options').
struct voxd_whisper_load_options {
    std::optional<bool> use_gpu;
    std::optional<bool> flash_attn; // whisper.cpp's path only
    std::optional<int> gpu_device;
    size_t max_idle_states = 2;
    voxd_whisper_batch_options batch; // use_gpu and gpu_device are taken from above when set
};

// A loaded model file: the batcher's weights, and whisper.cpp's context for word timestamps, loaded on first use.
// Shared (shared_ptr) by its owner (the JS WhisperModel) and every transcription in flight: the weights are freed
// when the last of them lets go, never under a running transcription.
class voxd_whisper_model {
public:
    // Checks the file's layout and loads the batcher's weights. Throws voxd_error "model_load_failed".
    static std::shared_ptr<voxd_whisper_model> load(const std::string & path, const voxd_whisper_load_options & options);
    ~voxd_whisper_model();

    struct context_deleter {
        void operator()(whisper_context * ctx) const;
    };
    struct state_deleter {
        void operator()(whisper_state * state) const;
    };
    using context_ptr = std::unique_ptr<whisper_context, context_deleter>;
    using state_ptr   = std::unique_ptr<whisper_state, state_deleter>;

    const std::string & path() const { return m_path; }
    int64_t weight_bytes() const; // the file's size: every weight is read into memory
    bool use_gpu() const { return m_cparams.use_gpu; }
    voxd_whisper_batcher & batcher() const { return *m_batcher; } // every request without word timestamps

    // The short code of a language given by code or English name, or "" when the model does not know it.
    std::string language_code(std::string name) const;
    // The languages the model can transcribe, by short code (only "en" for an English-only model).
    std::vector<std::string> languages() const;
    // whisper.cpp's size name ("tiny", "base", ... "large"; "unknown"), by encoder depth.
    const char * size_name() const;

    whisper_context * context(); // whisper.cpp's, loaded now if needed (throws voxd_error); any thread
    state_ptr acquire();         // an idle state or a newly allocated one
    void release(state_ptr st);  // back to the pool, or freed beyond max_idle

private:
    voxd_whisper_model() = default;

    std::unique_ptr<voxd_whisper_batcher> m_batcher;
    std::string m_path;
    whisper_context_params m_cparams{}; // for whisper.cpp's context, loaded on first use

    std::mutex m_mutex;               // guards m_ctx
    context_ptr m_ctx;                // declared before `m_idle`: idle states are freed first
    voxd_idle_pool<state_ptr> m_idle; // whisper.cpp states kept for reuse: each holds compute buffers and KV caches
};
