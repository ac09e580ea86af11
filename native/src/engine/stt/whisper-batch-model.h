// The batched Whisper's own copy of a whisper.cpp model file (stt/whisper-batch.h): the hparams, the vocabulary and
// its special tokens, the mel filters, and the weights in one backend buffer; with the prompt tokenizer. Engine-
// internal: what the batcher's parts (mel, graphs, decoding rules, scheduling) share.
#pragma once

#include "common/ggml-graph.h"
#include "stt/whisper-batch.h"

#include "ggml-alloc.h"
#include "ggml.h"

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

// ---- constants of the Whisper format ----

constexpr int VOXD_WHISPER_N_FFT             = 400; // 25 ms at 16 kHz
constexpr int VOXD_WHISPER_HOP               = 160; // 10 ms: one mel frame = one centisecond
constexpr int VOXD_WHISPER_N_BINS            = VOXD_WHISPER_N_FFT / 2 + 1;
constexpr int VOXD_WHISPER_WINDOW_S          = 30;
constexpr int VOXD_WHISPER_MAX_TS            = 1500; // timestamp tokens cover 0..30 s in steps of 20 ms
constexpr int VOXD_WHISPER_MAX_INIT_TS       = 50;   // the first timestamp of a window is at most 1 s
constexpr float VOXD_WHISPER_LOGPROB_THOLD   = -1.0f;
constexpr float VOXD_WHISPER_ENTROPY_THOLD   = 2.4f; // whisper.cpp's repetition check
constexpr float VOXD_WHISPER_NO_SPEECH_THOLD = 0.6f;

struct voxd_whisper_layer {
    ggml_tensor *attn_ln_w, *attn_ln_b;
    ggml_tensor *q_w, *q_b, *k_w, *v_w, *v_b, *o_w, *o_b;
    ggml_tensor *cross_ln_w = nullptr, *cross_ln_b = nullptr; // decoder only
    ggml_tensor *cq_w = nullptr, *cq_b = nullptr, *ck_w = nullptr, *cv_w = nullptr, *cv_b = nullptr, *co_w = nullptr, *co_b = nullptr;
    ggml_tensor *mlp_ln_w, *mlp_ln_b, *mlp0_w, *mlp0_b, *mlp1_w, *mlp1_b;
};

struct voxd_whisper_batch_model {
    // hparams, in file order
    int32_t n_vocab, n_audio_ctx, n_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype;

    // special tokens (whisper.cpp's layout: the English-only ids, shifted by one and by the language count for
    // multilingual vocabularies)
    bool multilingual = false;
    int n_langs       = 1;
    int32_t eot, sot, translate, transcribe, solm, prev, nosp, notimestamps, beg, space = -1;
    std::vector<std::string> vocab;               // bytes of each regular token
    std::unordered_map<std::string, int32_t> ids; // bytes -> token
    size_t max_token_len = 0;

    std::vector<float> mel_filters; // n_mels x N_BINS

    ggml_tensor *conv1_w, *conv1_b, *conv2_w, *conv2_b, *enc_pos, *enc_ln_w, *enc_ln_b;
    ggml_tensor *dec_pos, *tok_emb, *dec_ln_w, *dec_ln_b;
    std::vector<voxd_whisper_layer> enc, dec;

    voxd_graph_weights w; // backend, weights
    int threads = 1;
    // compute buffers, kept from step to step (they grow to the largest graph seen)
    ggml_gallocr_ptr encoder_alloc;
    ggml_gallocr_ptr decoder_alloc;

    int32_t lang_token(int lang_id) const { return sot + 1 + lang_id; }
};

// Reads a whisper.cpp file (checked beforehand by whisper-model.cpp's file check) into backend memory. Throws
// voxd_error "model_load_failed".
std::unique_ptr<voxd_whisper_batch_model> voxd_whisper_batch_load(const std::string & path, const voxd_whisper_batch_options & options);

// GPT-2's pre-tokenizer split, then the longest vocabulary entry at each position, as whisper.cpp tokenizes.
std::vector<int32_t> voxd_whisper_tokenize(const voxd_whisper_batch_model & m, const std::string & text);
