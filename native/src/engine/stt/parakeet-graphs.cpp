// The batched Parakeet's graphs: the encoder over several clips at once and one TDT step of every clip being
// decoded, both built so that a clip's every product, convolution and attention has the operands, the shapes and
// therefore the kernels it has alone, and in libparakeet (docs/architecture.md "Parakeet").
#include "stt/parakeet-batch-model.h"

#include "common/error.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <cmath>

namespace {

// The subsampling of one clip's mel (n_mels x frames): three stride-2 3x3 convolutions (the second and third
// depthwise, each followed by a pointwise one) with ReLUs, flattened to (n_mels / 8 * channels) x encoder frames.
// Per clip: a convolution pads at the clip's own edges.
ggml_tensor * subsample(ggml_context * ctx, const voxd_parakeet_batch_model & m, ggml_tensor * mel) {
    ggml_tensor * x = ggml_relu(ctx, ggml_add(ctx, ggml_conv_2d(ctx, m.conv0_w, mel, 2, 2, 1, 1, 1, 1), m.conv0_b));
    x               = ggml_add(ctx, ggml_conv_2d_dw_direct(ctx, m.conv2_w, x, 2, 2, 1, 1, 1, 1), m.conv2_b);
    x               = ggml_relu(ctx, ggml_add(ctx, ggml_conv_2d(ctx, m.conv3_w, x, 1, 1, 0, 0, 1, 1), m.conv3_b));
    x               = ggml_add(ctx, ggml_conv_2d_dw_direct(ctx, m.conv5_w, x, 2, 2, 1, 1, 1, 1), m.conv5_b);
    x               = ggml_relu(ctx, ggml_add(ctx, ggml_conv_2d(ctx, m.conv6_w, x, 1, 1, 0, 0, 1, 1), m.conv6_b)); // freq x time x chan
    x               = ggml_cont(ctx, ggml_permute(ctx, x, 0, 2, 1, 3));                                            // freq x chan x time
    return ggml_reshape_2d(ctx, x, x->ne[0] * x->ne[1], x->ne[2]);
}

// The macaron feed-forward block (half its output added back).
ggml_tensor * feed_forward(ggml_context * ctx, ggml_tensor * x, ggml_tensor * norm_w, ggml_tensor * norm_b, ggml_tensor * up, ggml_tensor * down) {
    ggml_tensor * h = voxd_layer_norm(ctx, x, norm_w, norm_b);
    h               = ggml_mul_mat(ctx, down, ggml_silu(ctx, ggml_mul_mat(ctx, up, h)));
    return ggml_add(ctx, x, ggml_scale(ctx, h, 0.5f));
}

// Self-attention of one clip with relative positions (Transformer-XL's, as FastConformer has it): q, k, v are the
// clip's columns (n_state x T) of the stacked projections, `pos` its projected positional encodings (n_state x
// (2T - 1), relative positions T-1 down to -(T-1)). One op chain per clip at its exact length: the probs . V
// product's inner dimension is T, so padding a clip would change its kernel.
ggml_tensor * attend(ggml_context * ctx, const voxd_parakeet_batch_model & m, const voxd_parakeet_layer & l, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                     ggml_tensor * pos) {
    const int64_t T = q->ne[1], W = pos->ne[1], H = m.n_head, dh = m.n_state / H;
    q = ggml_reshape_3d(ctx, q, dh, H, T);
    k = ggml_reshape_3d(ctx, k, dh, H, T);
    v = ggml_reshape_3d(ctx, v, dh, H, T);
    // keys x queries x heads: the content term (queries with bias u) and the position term (queries with bias v)
    ggml_tensor * content = ggml_mul_mat(ctx, ggml_permute(ctx, k, 0, 2, 1, 3), ggml_permute(ctx, ggml_add(ctx, q, l.bias_u), 0, 2, 1, 3));
    ggml_tensor * p       = ggml_cont(ctx, ggml_permute(ctx, ggml_reshape_3d(ctx, pos, dh, H, W), 0, 2, 1, 3));
    ggml_tensor * by_pos  = ggml_mul_mat(ctx, p, ggml_cont(ctx, ggml_permute(ctx, ggml_add(ctx, q, l.bias_v), 0, 2, 1, 3))); // W x T x H
    // query i, key j reads relative position i - j, at column T-1-i+j: a row's window starts one column earlier for
    // each later query
    by_pos               = ggml_cont(ctx, ggml_view_3d(ctx, by_pos, T, T, H, by_pos->nb[1] - by_pos->nb[0], by_pos->nb[2], (size_t) (T - 1) * by_pos->nb[0]));
    ggml_tensor * scores = ggml_scale(ctx, ggml_add(ctx, content, by_pos), (float) (1.0 / std::sqrt((double) dh)));
    ggml_tensor * out    = ggml_mul_mat(ctx, ggml_soft_max(ctx, scores), ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3))); // T x dh x H
    return ggml_cont_2d(ctx, ggml_permute(ctx, out, 2, 0, 1, 3), m.n_state, T);
}

// The depthwise time convolution of one clip's GLU output (n_state x T), zero-padded at the clip's own edges.
ggml_tensor * depthwise(ggml_context * ctx, const voxd_parakeet_batch_model & m, const voxd_parakeet_layer & l, ggml_tensor * x) {
    const int pad   = (m.n_kernel - 1) / 2;
    ggml_tensor * t = ggml_pad_ext(ctx, ggml_cont(ctx, ggml_transpose(ctx, x)), pad, pad, 0, 0, 0, 0, 0, 0); // (T + k - 1) x n_state
    ggml_tensor * y = ggml_ssm_conv(ctx, t, l.dw_w);                                                         // n_state x T x 1
    return ggml_reshape_2d(ctx, y, y->ne[0], y->ne[1]);
}

// One LSTM layer on a column `x`, updating the clip's state `h`, `c` in place; returns the new hidden state.
ggml_tensor * lstm(ggml_context * ctx, ggml_cgraph * gf, const voxd_parakeet_lstm_layer & l, ggml_tensor * x, ggml_tensor * h, ggml_tensor * c) {
    const int64_t P      = h->ne[0];
    const size_t row     = ggml_row_size(GGML_TYPE_F32, P);
    ggml_tensor * gates  = ggml_add(ctx, ggml_mul_mat(ctx, l.ih_w, x), ggml_add(ctx, ggml_mul_mat(ctx, l.hh_w, h), l.bias));
    ggml_tensor * ifo    = ggml_sigmoid(ctx, ggml_view_1d(ctx, gates, 3 * P, 0));
    ggml_tensor * in     = ggml_view_1d(ctx, ifo, P, 0);
    ggml_tensor * forget = ggml_view_1d(ctx, ifo, P, row);
    ggml_tensor * out    = ggml_view_1d(ctx, ifo, P, 2 * row);
    ggml_tensor * cell   = ggml_tanh(ctx, ggml_view_1d(ctx, gates, P, 3 * row));
    ggml_tensor * c_new  = ggml_add(ctx, ggml_mul(ctx, forget, c), ggml_mul(ctx, in, cell));
    ggml_tensor * h_new  = ggml_mul(ctx, out, ggml_tanh(ctx, c_new));
    ggml_build_forward_expand(gf, ggml_cpy(ctx, c_new, c));
    ggml_build_forward_expand(gf, ggml_cpy(ctx, h_new, h));
    return h_new;
}

} // namespace

// Runs the encoder on the clips (their frames side by side in every position-wise product) and writes each one's
// output into its own buffer.
void voxd_parakeet_batcher::encode(const std::vector<voxd_parakeet_clip *> & clips) {
    voxd_parakeet_batch_model & m = *m_model;
    const size_t B                = clips.size();
    voxd_graph_ctx g(1024 + (size_t) m.n_layer * (128 + 96 * B) + 128 * B);
    ggml_context * ctx = g.ctx;

    std::vector<ggml_tensor *> mels, parts;
    std::vector<int64_t> first, pos_first; // each clip's first column in the stacked frames and positions
    int64_t n_columns = 0, n_positions = 0;
    for (voxd_parakeet_clip * clip : clips) {
        ggml_tensor * mel = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, m.n_mels, clip->n_mel_frames);
        ggml_set_input(mel);
        mels.push_back(mel);
        parts.push_back(subsample(ctx, m, mel));
        if (parts.back()->ne[1] != clip->n_frames) {
            throw voxd_error("transcription_failed", "the subsampling made an unexpected number of frames");
        }
        first.push_back(n_columns);
        pos_first.push_back(n_positions);
        n_columns += clip->n_frames;
        n_positions += 2 * (int64_t) clip->n_frames - 1;
    }
    // each clip's sinusoidal encodings of relative positions T-1 .. -(T-1), side by side
    ggml_tensor * positions = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, m.n_state, n_positions);
    ggml_set_input(positions);

    ggml_tensor * x = ggml_add(ctx, ggml_mul_mat(ctx, m.pre_out_w, voxd_concat_columns(ctx, parts)), m.pre_out_b);
    for (const voxd_parakeet_layer & l : m.layers) {
        x = feed_forward(ctx, x, l.norm_ff1_w, l.norm_ff1_b, l.ff1_up, l.ff1_down);

        ggml_tensor * h   = voxd_layer_norm(ctx, x, l.norm_attn_w, l.norm_attn_b);
        ggml_tensor * q   = ggml_mul_mat(ctx, l.q_w, h);
        ggml_tensor * k   = ggml_mul_mat(ctx, l.k_w, h);
        ggml_tensor * v   = ggml_mul_mat(ctx, l.v_w, h);
        ggml_tensor * pos = ggml_mul_mat(ctx, l.pos_w, positions);
        parts.clear();
        for (size_t b = 0; b < B; b++) {
            const int64_t T = clips[b]->n_frames;
            parts.push_back(attend(ctx, m, l, voxd_columns(ctx, q, first[b], T), voxd_columns(ctx, k, first[b], T), voxd_columns(ctx, v, first[b], T),
                                   voxd_columns(ctx, pos, pos_first[b], 2 * T - 1)));
        }
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, l.out_w, voxd_concat_columns(ctx, parts)));

        // convolution module: pointwise, GLU, depthwise (per clip), BatchNorm, SiLU, pointwise
        h               = ggml_mul_mat(ctx, l.pw1_w, voxd_layer_norm(ctx, x, l.norm_conv_w, l.norm_conv_b));
        const int64_t d = m.n_state;
        ggml_tensor * gl =
            ggml_mul(ctx, ggml_view_2d(ctx, h, d, h->ne[1], h->nb[1], 0), ggml_sigmoid(ctx, ggml_view_2d(ctx, h, d, h->ne[1], h->nb[1], d * h->nb[0])));
        parts.clear();
        for (size_t b = 0; b < B; b++) {
            parts.push_back(depthwise(ctx, m, l, voxd_columns(ctx, gl, first[b], clips[b]->n_frames)));
        }
        h = ggml_div(ctx, ggml_sub(ctx, voxd_concat_columns(ctx, parts), l.bn_mean), ggml_sqrt(ctx, l.bn_var));
        h = ggml_silu(ctx, ggml_add(ctx, ggml_mul(ctx, h, l.bn_w), l.bn_b));
        x = ggml_add(ctx, x, ggml_mul_mat(ctx, l.pw2_w, h));

        x = feed_forward(ctx, x, l.norm_ff2_w, l.norm_ff2_b, l.ff2_up, l.ff2_down);
        x = voxd_layer_norm(ctx, x, l.norm_out_w, l.norm_out_b);
    }
    for (size_t b = 0; b < B; b++) {
        ggml_build_forward_expand(g.gf, ggml_cpy(ctx, voxd_columns(ctx, x, first[b], clips[b]->n_frames), clips[b]->enc_out));
    }

    if (!ggml_gallocr_alloc_graph(m.encoder_alloc.get(), g.gf)) {
        throw voxd_error("transcription_failed", "out of memory for the encoder's buffers");
    }
    std::vector<float> pos_data((size_t) m.n_state * (size_t) n_positions);
    for (size_t b = 0; b < B; b++) {
        const int64_t T = clips[b]->n_frames;
        ggml_backend_tensor_set(mels[b], clips[b]->mel.data(), 0, clips[b]->mel.size() * sizeof(float));
        for (int64_t w = 0; w < 2 * T - 1; w++) {
            const float rel = (float) (T - 1 - w);
            float * col     = &pos_data[(size_t) (pos_first[b] + w) * (size_t) m.n_state];
            for (size_t i = 0; i < m.pos_freqs.size(); i++) { // sin and cos interleaved
                col[2 * i]     = sinf(m.pos_freqs[i] * rel);
                col[2 * i + 1] = cosf(m.pos_freqs[i] * rel);
            }
        }
    }
    ggml_backend_tensor_set(positions, pos_data.data(), 0, pos_data.size() * sizeof(float));
    const uint64_t us = voxd_graph_compute(m.w, g.gf, "encoder");

    std::lock_guard<std::mutex> lock(m_timings_mutex);
    m_timings.encode_us += us;
    m_timings.encode_calls++;
    m_timings.encode_clips += B;
}

// One TDT step of each clip: the prediction network on the token its last step emitted (the blank first), then the
// joint network on its current frame, each with its own one-column products (as libparakeet computes them: several
// columns would take another kernel); then the greedy rule on each clip's log-probabilities.
void voxd_parakeet_batcher::decode(const std::vector<voxd_parakeet_clip *> & clips) {
    voxd_parakeet_batch_model & m = *m_model;
    voxd_graph_ctx g(64 + clips.size() * (48 + 24 * (size_t) m.n_pred_layers));
    ggml_context * ctx = g.ctx;

    std::vector<std::pair<ggml_tensor *, int32_t>> tokens;
    std::vector<ggml_tensor *> outputs;
    for (voxd_parakeet_clip * clip : clips) {
        ggml_tensor * pred = clip->pred;
        if (clip->pending >= 0) {
            ggml_tensor * token = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1);
            ggml_set_input(token);
            tokens.emplace_back(token, clip->pending);
            ggml_tensor * x = ggml_get_rows(ctx, m.embed, token);
            for (size_t l = 0; l < m.lstm.size(); l++) {
                x = lstm(ctx, g.gf, m.lstm[l], x, clip->h[l], clip->c[l]);
            }
            pred = ggml_add(ctx, ggml_mul_mat(ctx, m.joint_pred_w, x), m.joint_pred_b);
            ggml_build_forward_expand(g.gf, ggml_cpy(ctx, pred, clip->pred));
        }
        ggml_tensor * frame  = ggml_view_1d(ctx, clip->enc_out, m.n_state, (size_t) clip->frame * clip->enc_out->nb[1]);
        ggml_tensor * enc    = ggml_add(ctx, ggml_mul_mat(ctx, m.joint_enc_w, frame), m.joint_enc_b);
        ggml_tensor * joint  = ggml_relu(ctx, ggml_add(ctx, enc, pred));
        ggml_tensor * logits = ggml_add(ctx, ggml_mul_mat(ctx, m.joint_net_w, joint), m.joint_net_b);
        ggml_tensor * logp   = ggml_log(ctx, ggml_soft_max(ctx, logits)); // over the tokens, the blank and the durations together
        ggml_set_output(logp);
        ggml_build_forward_expand(g.gf, logp);
        outputs.push_back(logp);
    }

    if (!ggml_gallocr_alloc_graph(m.decoder_alloc.get(), g.gf)) {
        throw voxd_error("transcription_failed", "out of memory for the decoder's buffers");
    }
    for (const auto & [tensor, id] : tokens) {
        ggml_backend_tensor_set(tensor, &id, 0, sizeof(id));
    }
    const uint64_t us = voxd_graph_compute(m.w, g.gf, "decoder");
    {
        std::lock_guard<std::mutex> lock(m_timings_mutex);
        m_timings.decode_us += us;
        m_timings.decode_calls++;
        m_timings.decode_rows += clips.size();
        m_timings.max_step_rows = std::max<uint64_t>(m_timings.max_step_rows, clips.size());
    }
    std::vector<float> log_probs;
    for (size_t b = 0; b < clips.size(); b++) {
        log_probs.resize((size_t) ggml_nelements(outputs[b]));
        ggml_backend_tensor_get(outputs[b], log_probs.data(), 0, log_probs.size() * sizeof(float));
        clips[b]->pending = -1;
        advance(*clips[b], log_probs.data());
    }
}
