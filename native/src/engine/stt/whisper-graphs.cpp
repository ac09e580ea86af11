// The batched Whisper's graphs: the encoder over several jobs' windows at once and the decoder over the new tokens
// of every active sequence, both built so that a row meets the same kernels alone as in any batch.
#include "stt/whisper-batch.h"
#include "stt/whisper-batch-model.h"
#include "stt/whisper-sequence.h"

#include "common/error.h"
#include "common/executor.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <cmath>
#include <cstring>

namespace {

ggml_tensor * linear(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b) {
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    return b ? ggml_add(ctx, y, b) : y;
}

// Attention of one sequence's rows `q` (n_state x n_q) over the first n_kv positions of position-major f16 keys
// and values (n_state x n_ctx), with an optional mask (n_kv x n_q, f16). One op per sequence, so a sequence's
// attention has the same shape, and the same kernels, alone or in a batch.
ggml_tensor * attend(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, int64_t n_kv, int n_head, ggml_tensor * mask) {
    const int64_t n_state = q->ne[0], n_q = q->ne[1], d = n_state / n_head;
    ggml_tensor * Q   = ggml_permute(ctx, ggml_reshape_3d(ctx, ggml_cont(ctx, q), d, n_head, n_q), 0, 2, 1, 3); // d x n_q x n_head
    ggml_tensor * K   = ggml_view_3d(ctx, k, d, n_kv, n_head, k->nb[1], ggml_element_size(k) * d, 0);           // d x n_kv x n_head
    ggml_tensor * V   = ggml_view_3d(ctx, v, d, n_kv, n_head, v->nb[1], ggml_element_size(v) * d, 0);
    ggml_tensor * out = ggml_flash_attn_ext(ctx, Q, K, V, mask, 1.0f / std::sqrt((float) d), 0.0f, 0.0f); // d x n_head x n_q
    return ggml_reshape_2d(ctx, out, n_state, n_q);
}

ggml_tensor * mlp(ggml_context * ctx, ggml_tensor * x, const voxd_whisper_layer & l) {
    ggml_tensor * h = voxd_layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b);
    h               = ggml_gelu(ctx, linear(ctx, h, l.mlp0_w, l.mlp0_b));
    return ggml_add(ctx, x, linear(ctx, h, l.mlp1_w, l.mlp1_b));
}

// GELU(conv1d(x) + b), kernel 3, padding 1, of x = length x channels x batch; the result is length x batch x
// channels. (ggml_conv_1d reshapes its product as if the batch were the outer dimension, which it is not.)
ggml_tensor * conv_gelu(ggml_context * ctx, ggml_tensor * w, ggml_tensor * b, ggml_tensor * x, int stride) {
    ggml_tensor * cols = ggml_im2col(ctx, w, x, stride, 0, 1, 0, 1, 0, false, GGML_TYPE_F16); // (k in_ch) x length x batch
    ggml_tensor * y    = ggml_mul_mat(ctx, ggml_reshape_2d(ctx, cols, cols->ne[0], cols->ne[1] * cols->ne[2]),
                                      ggml_reshape_2d(ctx, w, w->ne[0] * w->ne[1], w->ne[2])); // (length batch) x out_ch
    y                  = ggml_reshape_3d(ctx, y, cols->ne[1], cols->ne[2], w->ne[2]);
    return ggml_gelu(ctx, ggml_add(ctx, y, ggml_reshape_3d(ctx, b, 1, 1, w->ne[2])));
}

} // namespace

// Runs the encoder on one window of each sequence (stacked along the rows of every weight product) and writes each
// one's cross-attention keys and values.
void voxd_whisper_batcher::encode(const std::vector<voxd_whisper_sequence *> & seqs) {
    voxd_whisper_batch_model & m = *m_model;
    const int64_t B = (int64_t) seqs.size(), n_ctx = m.n_audio_ctx, n_frames = 2 * n_ctx, s = m.n_state;
    voxd_graph_ctx g(4096 + (size_t) (m.n_audio_layer + m.n_text_layer) * 64 * (size_t) B);
    ggml_context * ctx = g.ctx;

    ggml_tensor * mel = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n_frames, m.n_mels, B);
    ggml_set_input(mel);
    ggml_tensor * cur = conv_gelu(ctx, m.conv1_w, m.conv1_b, mel, 1);                                                // n_frames x B x s
    cur               = conv_gelu(ctx, m.conv2_w, m.conv2_b, ggml_cont(ctx, ggml_permute(ctx, cur, 0, 2, 1, 3)), 2); // n_ctx x B x s
    cur               = ggml_cont(ctx, ggml_permute(ctx, cur, 1, 2, 0, 3));                                          // s x n_ctx x B
    cur               = ggml_add(ctx, cur, m.enc_pos);
    ggml_tensor * x   = ggml_reshape_2d(ctx, cur, s, n_ctx * B);

    for (const voxd_whisper_layer & l : m.enc) {
        ggml_tensor * h = voxd_layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b);
        ggml_tensor * q = linear(ctx, h, l.q_w, l.q_b);
        ggml_tensor * k = ggml_cast(ctx, linear(ctx, h, l.k_w, nullptr), GGML_TYPE_F16);
        ggml_tensor * v = ggml_cast(ctx, linear(ctx, h, l.v_w, l.v_b), GGML_TYPE_F16);
        std::vector<ggml_tensor *> parts;
        for (int64_t b = 0; b < B; b++) {
            parts.push_back(attend(ctx, voxd_columns(ctx, q, b * n_ctx, n_ctx), voxd_columns(ctx, k, b * n_ctx, n_ctx), voxd_columns(ctx, v, b * n_ctx, n_ctx),
                                   n_ctx, m.n_audio_head, nullptr));
        }
        x = ggml_add(ctx, x, linear(ctx, voxd_concat_columns(ctx, parts), l.o_w, l.o_b));
        x = mlp(ctx, x, l);
    }
    x = voxd_layer_norm(ctx, x, m.enc_ln_w, m.enc_ln_b);

    for (int l = 0; l < m.n_text_layer; l++) {
        ggml_tensor * ck = linear(ctx, x, m.dec[(size_t) l].ck_w, nullptr);
        ggml_tensor * cv = linear(ctx, x, m.dec[(size_t) l].cv_w, m.dec[(size_t) l].cv_b);
        for (int64_t b = 0; b < B; b++) {
            voxd_whisper_caches & c = *seqs[(size_t) b]->caches;
            ggml_build_forward_expand(g.gf, ggml_cpy(ctx, voxd_columns(ctx, ck, b * n_ctx, n_ctx), c.ck[(size_t) l]));
            ggml_build_forward_expand(g.gf, ggml_cpy(ctx, voxd_columns(ctx, cv, b * n_ctx, n_ctx), c.cv[(size_t) l]));
        }
    }

    if (!ggml_gallocr_alloc_graph(m.encoder_alloc.get(), g.gf)) {
        throw voxd_error("transcription_failed", "cannot allocate the encoder's buffers (out of memory?)");
    }
    std::vector<float> input((size_t) (n_frames * m.n_mels));
    for (int64_t b = 0; b < B; b++) {
        const voxd_whisper_sequence & seq = *seqs[(size_t) b];
        for (int r = 0; r < m.n_mels; r++) {
            const float * row = seq.mel.data() + (size_t) r * seq.n_mel_frames + seq.seek;
            std::copy(row, row + n_frames, input.begin() + (ptrdiff_t) (r * n_frames));
        }
        ggml_backend_tensor_set(mel, input.data(), (size_t) b * input.size() * sizeof(float), input.size() * sizeof(float));
    }
    const uint64_t us = voxd_graph_compute(m.w, g.gf, "encoder");
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    m_timings.encode_us += us;
    m_timings.encode_calls++;
    m_timings.encode_windows += (uint64_t) B;
}

// Decodes the fed tokens of every sequence in one graph and applies each one's logits of its last row.
void voxd_whisper_batcher::decode(const std::vector<voxd_whisper_sequence *> & seqs) {
    voxd_whisper_batch_model & m = *m_model;
    const int64_t S = (int64_t) seqs.size(), s = m.n_state;
    std::vector<int32_t> tokens, positions, last_rows;
    for (voxd_whisper_sequence * seq : seqs) {
        for (size_t i = 0; i < seq->feed.size(); i++) {
            tokens.push_back(seq->feed[i]);
            positions.push_back(seq->n_past + (int32_t) i);
        }
        last_rows.push_back((int32_t) tokens.size() - 1);
    }
    const int64_t n_real = (int64_t) tokens.size();
    while ((int64_t) tokens.size() < VOXD_MIN_PRODUCT_ROWS) { // padding rows (batch invariance): results dropped
        tokens.push_back(m.sot);
        positions.push_back(0);
    }
    const int64_t R = (int64_t) tokens.size();
    while ((int64_t) last_rows.size() < VOXD_MIN_PRODUCT_ROWS) {
        last_rows.push_back(last_rows[0]);
    }

    voxd_graph_ctx g(1024 + (size_t) m.n_text_layer * (64 + 96 * (size_t) S));
    ggml_context * ctx     = g.ctx;
    ggml_tensor * t_tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, R);
    ggml_tensor * t_pos    = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, R);
    ggml_tensor * t_last   = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, (int64_t) last_rows.size());
    for (ggml_tensor * t : { t_tokens, t_pos, t_last }) {
        ggml_set_input(t);
    }
    // causal masks, for sequences decoding several tokens (a prompt): a lone token sees every cached position
    std::vector<ggml_tensor *> masks;
    for (voxd_whisper_sequence * seq : seqs) {
        const int64_t n = (int64_t) seq->feed.size();
        masks.push_back(n > 1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F16, seq->n_past + n, n) : nullptr);
        if (masks.back()) {
            ggml_set_input(masks.back());
        }
    }
    ggml_tensor * x = ggml_add(ctx, ggml_get_rows(ctx, m.tok_emb, t_tokens), ggml_get_rows(ctx, m.dec_pos, t_pos));

    for (int il = 0; il < m.n_text_layer; il++) {
        const voxd_whisper_layer & l = m.dec[(size_t) il];
        ggml_tensor * h              = voxd_layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b);
        ggml_tensor * q              = linear(ctx, h, l.q_w, l.q_b);
        ggml_tensor * k              = linear(ctx, h, l.k_w, nullptr);
        ggml_tensor * v              = linear(ctx, h, l.v_w, l.v_b);
        std::vector<ggml_tensor *> parts;
        int64_t r0 = 0;
        for (size_t i = 0; i < seqs.size(); i++) {
            const voxd_whisper_sequence & seq = *seqs[i];
            const int64_t n                   = (int64_t) seq.feed.size();
            ggml_tensor * kc                  = seq.caches->k[(size_t) il];
            ggml_tensor * vc                  = seq.caches->v[(size_t) il];
            // this step's keys and values into the caches first: the attention below reads them back
            for (auto [from, to] : { std::pair{ k, kc }, std::pair{ v, vc } }) {
                ggml_build_forward_expand(g.gf, ggml_cpy(ctx, voxd_columns(ctx, from, r0, n), voxd_columns(ctx, to, seq.n_past, n)));
            }
            parts.push_back(attend(ctx, voxd_columns(ctx, q, r0, n), kc, vc, seq.n_past + n, m.n_text_head, masks[i]));
            r0 += n;
        }
        if (R > n_real) {
            parts.push_back(voxd_columns(ctx, v, n_real, R - n_real)); // padding rows: any finite value of their shape
        }
        x = ggml_add(ctx, x, linear(ctx, voxd_concat_columns(ctx, parts), l.o_w, l.o_b));

        h = voxd_layer_norm(ctx, x, l.cross_ln_w, l.cross_ln_b);
        q = linear(ctx, h, l.cq_w, l.cq_b);
        parts.clear();
        r0 = 0;
        for (voxd_whisper_sequence * seq : seqs) {
            const int64_t n         = (int64_t) seq->feed.size();
            voxd_whisper_caches & c = *seq->caches;
            parts.push_back(attend(ctx, voxd_columns(ctx, q, r0, n), c.ck[(size_t) il], c.cv[(size_t) il], m.n_audio_ctx, m.n_text_head, nullptr));
            r0 += n;
        }
        if (R > n_real) {
            parts.push_back(voxd_columns(ctx, q, n_real, R - n_real));
        }
        x = ggml_add(ctx, x, linear(ctx, voxd_concat_columns(ctx, parts), l.co_w, l.co_b));
        x = mlp(ctx, x, l);
    }
    x                    = voxd_layer_norm(ctx, x, m.dec_ln_w, m.dec_ln_b);
    ggml_tensor * logits = ggml_mul_mat(ctx, m.tok_emb, ggml_get_rows(ctx, x, t_last)); // n_vocab x rows
    ggml_set_output(logits);
    ggml_build_forward_expand(g.gf, logits);

    if (!ggml_gallocr_alloc_graph(m.decoder_alloc.get(), g.gf)) {
        throw voxd_error("transcription_failed", "cannot allocate the decoder's buffers (out of memory?)");
    }
    ggml_backend_tensor_set(t_tokens, tokens.data(), 0, tokens.size() * sizeof(int32_t));
    ggml_backend_tensor_set(t_pos, positions.data(), 0, positions.size() * sizeof(int32_t));
    ggml_backend_tensor_set(t_last, last_rows.data(), 0, last_rows.size() * sizeof(int32_t));
    for (size_t i = 0; i < seqs.size(); i++) {
        if (ggml_tensor * mask = masks[i]) {
            const int64_t n_kv = mask->ne[0], n_past = seqs[i]->n_past;
            std::vector<ggml_fp16_t> data((size_t) ggml_nelements(mask));
            for (int64_t r = 0; r < mask->ne[1]; r++) {
                for (int64_t c = 0; c < n_kv; c++) {
                    data[(size_t) (r * n_kv + c)] = ggml_fp32_to_fp16(c <= n_past + r ? 0.0f : -INFINITY);
                }
            }
            ggml_backend_tensor_set(mask, data.data(), 0, data.size() * sizeof(ggml_fp16_t));
        }
    }
    const uint64_t us = voxd_graph_compute(m.w, g.gf, "decoder");
    {
        std::lock_guard<std::mutex> lock(m_timings_mutex);
        m_timings.decode_us += us;
        m_timings.decode_calls++;
        m_timings.decode_rows += (uint64_t) n_real;
    }
    std::vector<float> out((size_t) (m.n_vocab * S));
    ggml_backend_tensor_get(logits, out.data(), 0, out.size() * sizeof(float));
    uint64_t sample_us = 0;
    {
        voxd_stage_timer timer(sample_us);
        for (int64_t i = 0; i < S; i++) {
            voxd_whisper_sequence & seq = *seqs[(size_t) i];
            seq.n_past += (int) seq.feed.size();
            seq.feed.clear();
            apply_logits(seq, out.data() + i * m.n_vocab);
        }
    }
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    m_timings.sample_us += sample_us;
}
