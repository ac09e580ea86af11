// A whisper.cpp Parakeet TDT model file: checked against what libparakeet's format leaves unchecked, then loaded by
// the batcher (stt/parakeet-batch.h), which decodes every transcription, concurrent ones together; a clip's tokens
// are the same alone or beside others, and the same as parakeet-cli's on the same file (docs/architecture.md
// "Parakeet").
#pragma once

#include "stt/parakeet-batch.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// What the file says, for the JS side (languages, size) and for the checks before loading.
struct voxd_parakeet_info {
    int32_t n_vocab       = 0;
    int32_t n_audio_ctx   = 0; // mel frames libparakeet's short path holds (5000: 50 s): longer uploads are cut at pauses
    int32_t n_audio_state = 0;
    int32_t n_audio_head  = 0;
    int32_t n_audio_layer = 0;
    int32_t n_mels        = 0;
    int32_t ftype         = 0;
    // Some vocabulary piece holds a letter beyond ASCII: v3's multilingual tokenizer (v2's is English only).
    bool multilingual = false;
};

// Shared (shared_ptr) by its owner (the JS ParakeetModel) and every transcription in flight: the weights are freed
// when the last of them lets go, never under a running transcription.
class voxd_parakeet_model {
public:
    // Checks the file's layout (libparakeet's format trusts it) and loads the batcher's weights. Throws voxd_error
    // "model_load_failed".
    static std::shared_ptr<voxd_parakeet_model> load(const std::string & path, const voxd_parakeet_batch_options & options);
    ~voxd_parakeet_model();
    voxd_parakeet_model(const voxd_parakeet_model &)             = delete;
    voxd_parakeet_model & operator=(const voxd_parakeet_model &) = delete;

    const voxd_parakeet_info & info() const { return m_info; }
    int64_t weight_bytes() const { return m_weight_bytes; }
    voxd_parakeet_batcher & batcher() const { return *m_batcher; } // every transcription

private:
    voxd_parakeet_model() = default;

    voxd_parakeet_info m_info;
    int64_t m_weight_bytes = 0;
    std::unique_ptr<voxd_parakeet_batcher> m_batcher;
};
