// Kokoro's weights as ggml tensors, read from the PyTorch checkpoint (kokoro-weights.cpp) and used by the graphs
// (kokoro-model.cpp). Layouts: a linear layer's weight is [in, out]; a convolution's [K, Cin, Cout] (PyTorch's memory
// order), its bias [1, Cout] (the graphs keep time-major activations [T, C] there); weight norm is folded in at load.
#pragma once

#include "common/ggml-graph.h"
#include "tts/kokoro/kokoro-model.h"

#include <mutex>
#include <string>

struct voxd_kokoro_linear {
    ggml_tensor * w = nullptr; // [in, out]
    ggml_tensor * b = nullptr; // [out]
};

struct voxd_kokoro_conv {
    ggml_tensor * w = nullptr; // [K, Cin, Cout]
    ggml_tensor * b = nullptr; // [1, Cout], or none
    int stride      = 1;
    int pad         = 0;
    int dilation    = 1;
};

// A transposed convolution as a weight product and an overlap-add (ggml_col2im_1d).
struct voxd_kokoro_conv_transpose {
    ggml_tensor * w = nullptr; // [Cin, Cout * K]: column co * K + k is the kernel tap k of output channel co
    ggml_tensor * b = nullptr; // [1, Cout]
    int stride      = 1;
    int pad         = 0;
    int cout        = 0;
};

// A bidirectional LSTM layer: the input projections of both directions in one product.
struct voxd_kokoro_lstm {
    ggml_tensor * w_ih = nullptr; // [in, 8H]: forward gates, then backward
    ggml_tensor * b_ih = nullptr; // [8H]
    ggml_tensor * w_hh = nullptr; // [H, 8H]
    ggml_tensor * b_hh = nullptr; // [8H]
};

// AdaIN (instance norm, an affine transform when the checkpoint has one, then (1 + gamma) x + beta from the style)
// or AdaLayerNorm (the same over channels): fc maps the 128 style values to gamma and beta.
struct voxd_kokoro_ada_norm {
    voxd_kokoro_linear fc;          // [128, 2C]
    ggml_tensor * norm_w = nullptr; // [1, C], or none
    ggml_tensor * norm_b = nullptr;
};

// StyleTTS 2's AdainResBlk1d: two AdaIN + convolution stages beside a shortcut, optionally doubling the length.
struct voxd_kokoro_res_block {
    voxd_kokoro_ada_norm norm1, norm2;
    voxd_kokoro_conv conv1, conv2;
    voxd_kokoro_conv shortcut; // a 1x1 convolution where the channel count changes; w null otherwise
    bool upsample           = false;
    ggml_tensor * pool_w[3] = {}; // the depthwise transposed convolution of an upsampling block: a [1, C] per tap
    ggml_tensor * pool_b    = nullptr;
};

// HiFi-GAN's ResBlock1 with AdaIN and Snake activations (the generator's AdaINResBlock1).
struct voxd_kokoro_snake_block {
    voxd_kokoro_ada_norm adain1[3], adain2[3];
    voxd_kokoro_conv convs1[3], convs2[3];
    ggml_tensor * alpha1[3]     = {}; // [1, C]
    ggml_tensor * alpha2[3]     = {};
    ggml_tensor * inv_alpha1[3] = {}; // 1 / alpha, as upstream computes it
    ggml_tensor * inv_alpha2[3] = {};
};

struct voxd_kokoro_model {
    voxd_graph_weights w;
    int threads = 1;

    // ALBERT: one layer's weights applied bert_layers times
    int bert_layers = 0, bert_heads = 0, bert_hidden = 0, n_vocab = 0, max_pos = 0;
    ggml_tensor *word_emb = nullptr, *pos_emb = nullptr, *type_emb = nullptr; // [128, rows]
    ggml_tensor *emb_ln_w = nullptr, *emb_ln_b = nullptr;
    voxd_kokoro_linear map_in, q, k, v, dense, ffn, ffn_out;
    ggml_tensor *attn_ln_w = nullptr, *attn_ln_b = nullptr, *full_ln_w = nullptr, *full_ln_b = nullptr;
    voxd_kokoro_linear bert_encoder;

    // prosody predictor
    voxd_kokoro_lstm dur_lstm[3];
    voxd_kokoro_ada_norm dur_norm[3];
    voxd_kokoro_lstm pred_lstm, shared_lstm;
    voxd_kokoro_linear duration_proj;
    voxd_kokoro_res_block f0_blocks[3], n_blocks[3];
    voxd_kokoro_conv f0_proj, n_proj;

    // text encoder
    ggml_tensor * text_emb = nullptr; // [512, vocab]
    voxd_kokoro_conv text_cnn[3];
    ggml_tensor *text_ln_gamma[3] = {}, *text_ln_beta[3] = {}; // [512]
    voxd_kokoro_lstm text_lstm;

    // decoder
    voxd_kokoro_conv f0_conv, n_conv, asr_res;
    voxd_kokoro_res_block encode, decode[4];
    std::vector<float> source_w; // the harmonic merge (9 -> 1), read by the host
    float source_b = 0.0f;
    voxd_kokoro_conv noise_convs[2];
    voxd_kokoro_snake_block noise_res[2], resblocks[6];
    voxd_kokoro_conv_transpose ups[2];
    voxd_kokoro_conv conv_post;

    int64_t weight_bytes = 0;
    voxd_kokoro_timings timings;
    ggml_gallocr_ptr alloc[3]; // one per graph stage, so each keeps its buffers between calls
    std::mutex mutex;          // held by a synthesis: the allocators serve one at a time
};

// Builds `m`'s tensors from the checkpoint into its weights' context and buffer. Throws voxd_error.
void voxd_kokoro_load_weights(voxd_kokoro_model & m, const voxd_kokoro_load_options & options);
