// The batched Parakeet's own copy of a whisper.cpp Parakeet TDT file (stt/parakeet-batch.h): the hparams, the
// vocabulary, the mel filters and window, the TDT durations, and the weights in one backend buffer; and one clip's
// decoding state. Engine-internal: what the batcher's parts (mel, graphs, scheduling) share.
#pragma once

#include "common/ggml-graph.h"
#include "stt/parakeet-batch.h"

#include "ggml-alloc.h"
#include "ggml.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

constexpr int VOXD_PARAKEET_HOP         = 160; // samples per mel frame (10 ms at 16 kHz)
constexpr int VOXD_PARAKEET_SUBSAMPLING = 8;   // mel frames per encoder frame (three stride-2 convolutions)

struct voxd_parakeet_layer {
    ggml_tensor *norm_ff1_w, *norm_ff1_b, *ff1_up, *ff1_down;
    ggml_tensor *norm_attn_w, *norm_attn_b, *q_w, *k_w, *v_w, *out_w, *pos_w, *bias_u, *bias_v;
    ggml_tensor *norm_conv_w, *norm_conv_b, *pw1_w, *dw_w, *bn_w, *bn_b, *bn_mean, *bn_var, *pw2_w;
    ggml_tensor *norm_ff2_w, *norm_ff2_b, *ff2_up, *ff2_down;
    ggml_tensor *norm_out_w, *norm_out_b;
};

struct voxd_parakeet_lstm_layer {
    ggml_tensor *ih_w, *hh_w, *bias; // the four gates packed i, f, o, c; one bias (input and hidden folded)
};

struct voxd_parakeet_batch_model {
    // hparams, in file order
    int32_t n_vocab, n_audio_ctx, n_state, n_head, n_layer, n_mels, ftype, n_fft, subsampling, n_channels, n_kernel, n_pred, n_pred_layers, n_durations,
        n_max_symbols;

    std::vector<float> filters;      // n_mels x (n_fft / 2 + 1)
    std::vector<float> window;       // the file's analysis window (a periodic Hann window of n_fft if it has none)
    std::vector<float> cos_table;    // cos(2 pi i / n_fft), the FFT's twiddles
    std::vector<float> sin_table;    // sin(2 pi i / n_fft)
    std::vector<int> fft_order;      // where each sample goes before the FFT's first stage (its bit-reversed index)
    std::vector<float> pos_freqs;    // the relative positional encoding's frequencies (n_state / 2)
    std::vector<int32_t> durations;  // encoder frames each duration index advances
    std::vector<std::string> pieces; // n_vocab SentencePiece pieces, then the blank
    std::vector<std::string> texts;  // each piece as it joins a transcript
    std::vector<bool> word_starts;   // the piece begins a word
    std::vector<bool> punctuation;   // the piece is one punctuation mark (timed at the end of the word before it)
    int32_t blank() const { return n_vocab; }

    ggml_tensor *conv0_w, *conv0_b, *conv2_w, *conv2_b, *conv3_w, *conv3_b, *conv5_w, *conv5_b, *conv6_w, *conv6_b, *pre_out_w, *pre_out_b;
    std::vector<voxd_parakeet_layer> layers;
    ggml_tensor * embed;
    std::vector<voxd_parakeet_lstm_layer> lstm;
    ggml_tensor *joint_pred_w, *joint_pred_b, *joint_enc_w, *joint_enc_b, *joint_net_w, *joint_net_b;

    voxd_graph_weights w; // backend, weights
    int threads = 1;
    // compute buffers, kept from step to step (they grow to the largest graph seen)
    ggml_gallocr_ptr encoder_alloc;
    ggml_gallocr_ptr decoder_alloc;
};

// Reads a Parakeet file (checked beforehand by stt/parakeet-model.cpp) into backend memory. Throws voxd_error
// "model_load_failed".
std::unique_ptr<voxd_parakeet_batch_model> voxd_parakeet_batch_load(const std::string & path, const voxd_parakeet_batch_options & options);

// Parakeet's log-mel features as libparakeet computes them, to the bit (its graphs start from these): pre-emphasis,
// centred 512-point frames every 10 ms under the file's window, power spectrum, the file's filters, natural log, then
// each band normalised to zero mean and unit deviation over the clip's whole frames. `n_frames` rows of n_mels values.
std::vector<float> voxd_parakeet_mel(const voxd_parakeet_batch_model & m, const std::vector<float> & samples, int & n_frames);

// One clip: its mel, then its encoder output and the prediction network's state (in a buffer of its own on the
// model's backend), and the tokens decoded so far.
struct voxd_parakeet_clip {
    std::shared_ptr<voxd_parakeet_task> task;
    int max_tokens = 0;

    std::vector<float> mel; // n_mel_frames x n_mels; freed once encoded
    int n_mel_frames = 0;
    int n_frames     = 0; // encoder frames

    // on the backend, from the clip's first encoding on
    ggml_context_ptr ctx;
    ggml_backend_buffer_ptr buf;
    ggml_tensor * enc_out = nullptr; // n_state x n_frames
    std::vector<ggml_tensor *> h, c; // each LSTM layer's hidden and cell state
    ggml_tensor * pred = nullptr;    // the prediction network's projected output for the last token
    bool encoded       = false;

    // the greedy TDT decoder
    int frame       = 0;  // current encoder frame
    int symbols     = 0;  // tokens emitted at this frame
    int32_t pending = -1; // a token the prediction network must take before the next joint (the blank first)
    std::vector<voxd_parakeet_token> tokens;

    // Allocates the tensors above on `m`'s backend (throws voxd_error "transcription_failed").
    void allocate(const voxd_parakeet_batch_model & m);
};
