// One job's decoding state in the batcher: its caches, features, window, prompt and sampling. Engine-internal.
#pragma once

#include "common/error.h"
#include "stt/whisper-batch-model.h"

#include "ggml-backend.h"

#include <memory>
#include <random>
#include <string>
#include <vector>

// A job's caches: self-attention keys and values for the text context, cross-attention ones for one window.
struct voxd_whisper_caches {
    ggml_context * ctx        = nullptr; // owned
    ggml_backend_buffer_t buf = nullptr; // owned
    std::vector<ggml_tensor *> k, v, ck, cv;

    voxd_whisper_caches(const voxd_whisper_batch_model & m) {
        const int n_layer   = m.n_text_layer;
        ggml_init_params ip = { (size_t) (4 * n_layer) * ggml_tensor_overhead(), nullptr, true };
        ctx                 = ggml_init(ip);
        if (!ctx) {
            throw voxd_error("transcription_failed", "cannot allocate the decoder caches");
        }
        for (int l = 0; l < n_layer; l++) {
            // position-major: n_state values per position
            k.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F16, m.n_state, m.n_text_ctx));
            v.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F16, m.n_state, m.n_text_ctx));
            ck.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F16, m.n_state, m.n_audio_ctx));
            cv.push_back(ggml_new_tensor_2d(ctx, GGML_TYPE_F16, m.n_state, m.n_audio_ctx));
        }
        buf = ggml_backend_alloc_ctx_tensors(ctx, m.w.backend.get());
        if (!buf) {
            ggml_free(ctx);
            throw voxd_error("transcription_failed", "cannot allocate the decoder caches (out of memory?)");
        }
    }
    ~voxd_whisper_caches() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
    voxd_whisper_caches(const voxd_whisper_caches &)             = delete;
    voxd_whisper_caches & operator=(const voxd_whisper_caches &) = delete;
};

struct voxd_whisper_sequence {
    std::shared_ptr<voxd_whisper_task> task;
    std::unique_ptr<voxd_whisper_caches> caches;

    std::vector<float> mel; // n_mels x n_mel_frames
    int n_mel_frames = 0;
    int n_content    = 0; // frames of audio (the rest is padding)
    int seek         = 0; // the current window's first frame

    std::string language;      // empty until known
    std::vector<int32_t> init; // <|startoftranscript|> [language, task]
    std::vector<int32_t> past; // text conditioning the next window: the prompt, then the previous windows
    std::vector<int32_t> prompt_tokens;
    std::vector<float> temperatures;

    enum class phase { encode, detect, decode } state = phase::encode;
    int attempt                                       = 0;
    std::vector<int32_t> feed; // tokens to decode at the next step
    int n_past = 0;
    std::vector<voxd_whisper_token> sampled;
    double sum_logprob    = 0.0;
    double no_speech_prob = 0.0;
    std::mt19937 rng;

    float temperature() const { return temperatures[(size_t) attempt]; }
};
