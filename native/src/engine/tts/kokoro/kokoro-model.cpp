// Kokoro's graphs and the forward pass (kokoro-model.h). Two layouts: token- or frame-major [C, L] (each position's
// channels contiguous) for ALBERT, the LSTMs and the layer norms over channels; time-major [T, C] (PyTorch's own
// memory order) for the convolutions and the instance norms of the prosody branches, decoder and generator.
#include "tts/kokoro/kokoro-model.h"

#include "common/cpu-gate.h"
#include "tts/kokoro/kokoro-dsp.h"
#include "tts/kokoro/kokoro-weights.h"

#include "ggml-alloc.h"

#include <cmath>
#include <cstring>
#include <mutex>

namespace {

// The most frames an input may take (upstream has no limit, but the generator's memory grows with them: about
// 0.7 MB a frame): 90 s of audio. The speech service splits text into sentences far below it.
constexpr int64_t k_max_frames   = 90 * VOXD_KOKORO_SAMPLE_RATE / VOXD_KOKORO_FRAME_SAMPLES;
constexpr size_t k_nodes_per_row = 8192;

voxd_error synthesis_error(const std::string & why) {
    return voxd_error("synthesis_failed", "Kokoro: " + why);
}

// One stage's graph over every row, its inputs (uploaded once allocated) and the outputs each row reads back.
class stage_graph {
public:
    stage_graph(const voxd_kokoro_model & m, size_t rows) : m(m), g(k_nodes_per_row * rows) {}

    ggml_context * ctx() { return g.ctx; }

    ggml_tensor * input(ggml_type type, std::initializer_list<int64_t> ne, const void * data) {
        std::vector<int64_t> dims(ne);
        ggml_tensor * t = ggml_new_tensor(g.ctx, type, (int) dims.size(), dims.data());
        ggml_set_input(t);
        m_inputs.emplace_back(t, data);
        return t;
    }
    ggml_tensor * input_f32(std::initializer_list<int64_t> ne, const std::vector<float> & data) { return input(GGML_TYPE_F32, ne, data.data()); }
    ggml_tensor * input_i32(const std::vector<int32_t> & data) { return input(GGML_TYPE_I32, { (int64_t) data.size() }, data.data()); }

    // Marks `t` as an output to read after compute().
    ggml_tensor * output(ggml_tensor * t) {
        ggml_set_output(t);
        ggml_build_forward_expand(g.gf, t);
        return t;
    }

    // Runs the graph; returns how long it took (microseconds).
    uint64_t compute(ggml_gallocr_t alloc, const char * what) {
        if (!ggml_gallocr_alloc_graph(alloc, g.gf)) {
            throw synthesis_error(std::string("cannot allocate the ") + what + " graph");
        }
        for (const auto & [tensor, data] : m_inputs) {
            ggml_backend_tensor_set(tensor, data, 0, ggml_nbytes(tensor));
        }
        const voxd_cpu_gate::lease cores(m.threads);
        return voxd_graph_compute(m.w, g.gf, what);
    }

    static std::vector<float> read(const ggml_tensor * t) {
        std::vector<float> v((size_t) ggml_nelements(t));
        ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
        return v;
    }

private:
    const voxd_kokoro_model & m;
    voxd_graph_ctx g;
    std::vector<std::pair<ggml_tensor *, const void *>> m_inputs;
};

// The layers, as ggml ops.
struct layers {
    const voxd_kokoro_model & m;
    ggml_context * ctx;

    // ---- token- or frame-major [C, L] ----

    ggml_tensor * linear(ggml_tensor * x, const voxd_kokoro_linear & l) const { return ggml_add(ctx, ggml_mul_mat(ctx, l.w, x), l.b); }

    ggml_tensor * layer_norm(ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps) const {
        return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, eps), w), b);
    }

    // transformers' gelu_new, the tanh form, from exact ops (ggml_gelu reads a half-precision table on CPU)
    ggml_tensor * gelu_new(ggml_tensor * x) const {
        ggml_tensor * cube  = ggml_mul(ctx, ggml_sqr(ctx, x), x);
        ggml_tensor * inner = ggml_scale(ctx, ggml_add(ctx, x, ggml_scale(ctx, cube, 0.044715f)), (float) std::sqrt(2.0 / M_PI));
        return ggml_mul(ctx, ggml_scale(ctx, x, 0.5f), ggml_scale_bias(ctx, ggml_tanh(ctx, inner), 1.0f, 1.0f));
    }

    // The style's gamma and beta for `channels` channels, each [channels] (or [1, channels] when `time_major`).
    std::pair<ggml_tensor *, ggml_tensor *> style_affine(const voxd_kokoro_ada_norm & n, ggml_tensor * s, int64_t channels, bool time_major) const {
        ggml_tensor * h = linear(s, n.fc); // [2C]
        if (time_major) {
            h = ggml_reshape_2d(ctx, h, 1, 2 * channels);
            return { ggml_view_2d(ctx, h, 1, channels, h->nb[1], 0), ggml_view_2d(ctx, h, 1, channels, h->nb[1], (size_t) channels * h->nb[1]) };
        }
        return { ggml_view_1d(ctx, h, channels, 0), ggml_view_1d(ctx, h, channels, (size_t) channels * sizeof(float)) };
    }

    // (1 + gamma) x + beta
    ggml_tensor * modulate(ggml_tensor * x, std::pair<ggml_tensor *, ggml_tensor *> gb) const {
        return ggml_add(ctx, ggml_mul(ctx, x, ggml_scale_bias(ctx, gb.first, 1.0f, 1.0f)), gb.second);
    }

    // AdaLayerNorm: a layer norm over channels without its own affine, modulated by the style
    ggml_tensor * ada_layer_norm(ggml_tensor * x, const voxd_kokoro_ada_norm & n, ggml_tensor * s) const {
        return modulate(ggml_norm(ctx, x, 1e-5f), style_affine(n, s, x->ne[0], false));
    }

    // A bidirectional LSTM over the columns of x [in, L] -> [2H, L]
    ggml_tensor * lstm(ggml_tensor * x, const voxd_kokoro_lstm & l) const {
        ggml_tensor * xp     = ggml_add(ctx, ggml_mul_mat(ctx, l.w_ih, x), l.b_ih);
        ggml_tensor * args[] = { xp, l.w_hh, l.b_hh };
        return ggml_custom_4d(ctx, GGML_TYPE_F32, 2 * l.w_hh->ne[0], x->ne[1], 1, 1, args, 3, voxd_kokoro_lstm_op, 2, nullptr);
    }

    // The style vector repeated for every column of a [C, L] tensor.
    ggml_tensor * columns_of(ggml_tensor * s, int64_t n) const { return ggml_repeat_4d(ctx, s, s->ne[0], n, 1, 1); }

    ggml_tensor * transpose(ggml_tensor * x) const { return ggml_cont(ctx, ggml_transpose(ctx, x)); }

    // ---- time-major [T, C] ----

    ggml_tensor * conv(ggml_tensor * x, const voxd_kokoro_conv & c) const {
        ggml_tensor * cols = ggml_im2col(ctx, c.w, x, c.stride, 0, c.pad, 0, c.dilation, 0, false, GGML_TYPE_F32); // [K Cin, T']
        ggml_tensor * w    = ggml_reshape_2d(ctx, c.w, c.w->ne[0] * c.w->ne[1], c.w->ne[2]);
        // ggml's fast CPU product (tinyBLAS) takes the first operand's rows in multiples of 4: the output times when
        // they are, else the output channels, and the product transposed back
        ggml_tensor * y = cols->ne[1] % 4 == 0 ? ggml_mul_mat(ctx, cols, w) : transpose(ggml_mul_mat(ctx, w, cols)); // [T', Cout]
        return c.b ? ggml_add(ctx, y, c.b) : y;
    }

    ggml_tensor * conv_transpose(ggml_tensor * x, const voxd_kokoro_conv_transpose & c) const {
        ggml_tensor * cols = ggml_mul_mat(ctx, c.w, transpose(x)); // [Cout K, T]
        return ggml_add(ctx, ggml_col2im_1d(ctx, cols, c.stride, c.cout, c.pad), c.b);
    }

    // AdaIN: instance norm over time per channel, its affine when the checkpoint has one, modulated by the style
    ggml_tensor * adain(ggml_tensor * x, const voxd_kokoro_ada_norm & n, ggml_tensor * s) const {
        ggml_tensor * xn = ggml_norm(ctx, x, 1e-5f);
        if (n.norm_w) {
            xn = ggml_add(ctx, ggml_mul(ctx, xn, n.norm_w), n.norm_b);
        }
        return modulate(xn, style_affine(n, s, x->ne[1], true));
    }

    ggml_tensor * leaky(ggml_tensor * x, float slope) const { return ggml_leaky_relu(ctx, x, slope, false); }

    // Snake: x + sin(a x)^2 / a
    ggml_tensor * snake(ggml_tensor * x, ggml_tensor * alpha, ggml_tensor * inv_alpha) const {
        return ggml_add(ctx, x, ggml_mul(ctx, ggml_sqr(ctx, ggml_sin(ctx, ggml_mul(ctx, x, alpha))), inv_alpha));
    }

    // a[t] and b[t] alternating: [2T, C] from two [T, C]
    ggml_tensor * interleave(ggml_tensor * a, ggml_tensor * b) const {
        const int64_t T = a->ne[0], C = a->ne[1];
        ggml_tensor * pairs = ggml_concat(ctx, ggml_reshape_3d(ctx, ggml_cont(ctx, a), 1, T, C), ggml_reshape_3d(ctx, ggml_cont(ctx, b), 1, T, C), 0);
        return ggml_reshape_2d(ctx, pairs, 2 * T, C);
    }

    // The depthwise transposed convolution (kernel 3, stride 2, padding 1, output padding 1) of an upsampling block:
    // y[2i] = w1 x[i], y[2i+1] = w2 x[i] + w0 x[i+1] (x past its end is 0), plus the bias.
    ggml_tensor * pool(ggml_tensor * x, const voxd_kokoro_res_block & b) const {
        const int64_t T    = x->ne[0];
        ggml_tensor * next = ggml_pad_ext(ctx, ggml_view_2d(ctx, x, T - 1, x->ne[1], x->nb[1], sizeof(float)), 0, 1, 0, 0, 0, 0, 0, 0);
        ggml_tensor * even = ggml_mul(ctx, x, b.pool_w[1]);
        ggml_tensor * odd  = ggml_add(ctx, ggml_mul(ctx, x, b.pool_w[2]), ggml_mul(ctx, next, b.pool_w[0]));
        return ggml_add(ctx, interleave(even, odd), b.pool_b);
    }

    // AdainResBlk1d: (residual + shortcut) / sqrt(2)
    ggml_tensor * res_block(ggml_tensor * x, const voxd_kokoro_res_block & b, ggml_tensor * s) const {
        ggml_tensor * r = leaky(adain(x, b.norm1, s), 0.2f);
        if (b.upsample) {
            r = pool(r, b);
        }
        r                = conv(r, b.conv1);
        r                = conv(leaky(adain(r, b.norm2, s), 0.2f), b.conv2);
        ggml_tensor * sc = b.upsample ? interleave(x, x) : x;
        if (b.shortcut.w) {
            sc = conv(sc, b.shortcut);
        }
        return ggml_scale(ctx, ggml_add(ctx, r, sc), 1.0f / std::sqrt(2.0f));
    }

    // AdaINResBlock1: three dilated stages, each added to its input
    ggml_tensor * snake_block(ggml_tensor * x, const voxd_kokoro_snake_block & b, ggml_tensor * s) const {
        for (int j = 0; j < 3; j++) {
            ggml_tensor * t = snake(adain(x, b.adain1[j], s), b.alpha1[j], b.inv_alpha1[j]);
            t               = conv(t, b.convs1[j]);
            t               = snake(adain(t, b.adain2[j], s), b.alpha2[j], b.inv_alpha2[j]);
            x               = ggml_add(ctx, conv(t, b.convs2[j]), x);
        }
        return x;
    }

    // The mean of three blocks over the same input
    ggml_tensor * mean_of_blocks(ggml_tensor * x, const voxd_kokoro_snake_block * blocks, ggml_tensor * s) const {
        ggml_tensor * sum = snake_block(x, blocks[0], s);
        sum               = ggml_add(ctx, sum, snake_block(x, blocks[1], s));
        sum               = ggml_add(ctx, sum, snake_block(x, blocks[2], s));
        return ggml_scale(ctx, sum, 1.0f / 3.0f);
    }

    // ---- the model's parts ----

    // ALBERT over the tokens: [H, L]
    ggml_tensor * albert(ggml_tensor * ids, ggml_tensor * positions) const {
        const int64_t L = ids->ne[0], H = m.bert_hidden, nh = m.bert_heads, dh = H / nh;
        ggml_tensor * type0 = ggml_view_1d(ctx, m.type_emb, m.type_emb->ne[0], 0);
        ggml_tensor * e     = ggml_add(ctx, ggml_add(ctx, ggml_get_rows(ctx, m.word_emb, ids), type0), ggml_get_rows(ctx, m.pos_emb, positions));
        ggml_tensor * x     = linear(layer_norm(e, m.emb_ln_w, m.emb_ln_b, 1e-12f), m.map_in);
        const float scale   = 1.0f / std::sqrt((float) dh);
        for (int layer = 0; layer < m.bert_layers; layer++) {
            auto heads        = [&](const voxd_kokoro_linear & l) { return ggml_reshape_3d(ctx, linear(x, l), dh, nh, L); };
            ggml_tensor * q   = ggml_cont(ctx, ggml_permute(ctx, heads(m.q), 0, 2, 1, 3));                // [dh, L, nh]
            ggml_tensor * k   = ggml_cont(ctx, ggml_permute(ctx, heads(m.k), 0, 2, 1, 3));                // [dh, L, nh]
            ggml_tensor * vt  = ggml_cont(ctx, ggml_permute(ctx, heads(m.v), 1, 2, 0, 3));                // [L, dh, nh]
            ggml_tensor * kq  = ggml_soft_max_ext(ctx, ggml_mul_mat(ctx, k, q), nullptr, scale, 0.0f);    // [Lk, Lq, nh]
            ggml_tensor * att = ggml_cont(ctx, ggml_permute(ctx, ggml_mul_mat(ctx, vt, kq), 0, 2, 1, 3)); // [dh, nh, L]
            ggml_tensor * a   = layer_norm(ggml_add(ctx, x, linear(ggml_reshape_2d(ctx, att, H, L), m.dense)), m.attn_ln_w, m.attn_ln_b, 1e-12f);
            x                 = layer_norm(ggml_add(ctx, linear(gelu_new(linear(a, m.ffn)), m.ffn_out), a), m.full_ln_w, m.full_ln_b, 1e-12f);
        }
        return x;
    }
};

// The input's given stage `name` in place of `computed`, which it must match in size.
std::vector<float> given_or(const voxd_kokoro_input & in, const char * name, std::vector<float> computed) {
    auto it = in.given.find(name);
    if (it == in.given.end()) {
        return computed;
    }
    if (it->second.size() != computed.size()) {
        throw voxd_error("invalid_argument",
                         std::string("the given ") + name + " has " + std::to_string(it->second.size()) + " values, not " + std::to_string(computed.size()));
    }
    return it->second;
}

// What stage 1 leaves for the rest of a row's pass.
struct text_result {
    std::vector<float> sigmoid_sums; // [L]
    std::vector<float> d;            // the duration encoder's output [640, L]
    std::vector<float> t_en;         // the text encoder's output [512, L]
};

} // namespace

std::shared_ptr<voxd_kokoro_model> voxd_kokoro_load(const voxd_kokoro_load_options & options) {
    auto m = std::make_shared<voxd_kokoro_model>();
    // the CPU: the LSTM recurrences are a custom op of ggml's CPU backend
    m->w.backend.reset(ggml_backend_cpu_init());
    if (!m->w.backend) {
        throw voxd_error("model_load_failed", "cannot initialise ggml's CPU backend");
    }
    voxd_kokoro_load_weights(*m, options);
    for (auto & alloc : m->alloc) {
        alloc.reset(ggml_gallocr_new(ggml_backend_get_default_buffer_type(m->w.backend.get())));
        if (!alloc) {
            throw voxd_error("model_load_failed", "cannot initialise ggml's allocator");
        }
    }
    m->threads = options.threads > 0 ? options.threads : voxd_default_threads();
    ggml_backend_cpu_set_n_threads(m->w.backend.get(), m->threads);
    return m;
}

int voxd_kokoro_vocab_size(const voxd_kokoro_model & model) {
    return model.n_vocab;
}

int64_t voxd_kokoro_weight_bytes(const voxd_kokoro_model & model) {
    return model.weight_bytes;
}

std::vector<voxd_kokoro_output> voxd_kokoro_synthesize(voxd_kokoro_model & m, const std::vector<voxd_kokoro_input> & inputs, bool keep_stages,
                                                       const voxd_abort_ptr & abort) {
    const std::lock_guard<std::mutex> turn(m.mutex); // the graphs' allocators are the model's
    const size_t n       = inputs.size();
    const int max_tokens = std::min(VOXD_KOKORO_MAX_TOKENS, m.max_pos);
    for (const voxd_kokoro_input & in : inputs) {
        if (in.ids.size() < 3 || (int) in.ids.size() > max_tokens) {
            throw voxd_error("invalid_argument", "Kokoro takes 1 to " + std::to_string(max_tokens - 2) + " phoneme tokens (got " +
                                                     std::to_string((int64_t) in.ids.size() - 2) + ")");
        }
        for (int32_t id : in.ids) {
            if (id < 0 || id >= m.n_vocab) {
                throw voxd_error("invalid_argument", "token id " + std::to_string(id) + " is outside Kokoro's vocabulary");
            }
        }
        if (in.style.size() != VOXD_KOKORO_STYLE_DIM) {
            throw voxd_error("invalid_argument", "a Kokoro style vector has " + std::to_string(VOXD_KOKORO_STYLE_DIM) + " values");
        }
        if (!(in.speed >= VOXD_KOKORO_MIN_SPEED && in.speed <= VOXD_KOKORO_MAX_SPEED)) {
            throw voxd_error("invalid_argument", "Kokoro's speed must be from 0.25 to 4");
        }
    }
    std::vector<voxd_kokoro_output> out(n);
    // the style's halves: the decoder's, then the predictor's
    std::vector<std::vector<float>> s_dec(n), s_pred(n);
    for (size_t r = 0; r < n; r++) {
        s_dec[r].assign(inputs[r].style.begin(), inputs[r].style.begin() + VOXD_KOKORO_STYLE_DIM / 2);
        s_pred[r].assign(inputs[r].style.begin() + VOXD_KOKORO_STYLE_DIM / 2, inputs[r].style.end());
    }
    std::vector<std::vector<int32_t>> pos(n);
    for (size_t r = 0; r < n; r++) {
        pos[r].resize(inputs[r].ids.size());
        for (size_t i = 0; i < pos[r].size(); i++) {
            pos[r][i] = (int32_t) i;
        }
    }

    // ---- stage 1: text ----
    std::vector<text_result> text(n);
    {
        stage_graph g(m, n);
        layers nn{ m, g.ctx() };
        struct row_outputs {
            ggml_tensor *sums, *d, *t_en, *bert, *bert_enc, *logits;
        };
        std::vector<row_outputs> rows(n);
        for (size_t r = 0; r < n; r++) {
            const int64_t L     = (int64_t) inputs[r].ids.size();
            ggml_tensor * ids   = g.input_i32(inputs[r].ids);
            ggml_tensor * posn  = g.input_i32(pos[r]);
            ggml_tensor * s     = g.input_f32({ VOXD_KOKORO_STYLE_DIM / 2 }, s_pred[r]);
            ggml_tensor * bert  = nn.albert(ids, posn);
            ggml_tensor * d_en  = nn.linear(bert, m.bert_encoder);
            ggml_tensor * s_col = nn.columns_of(s, L);
            ggml_tensor * x     = ggml_concat(g.ctx(), d_en, s_col, 0);
            for (int i = 0; i < 3; i++) {
                x = ggml_concat(g.ctx(), nn.ada_layer_norm(nn.lstm(x, m.dur_lstm[i]), m.dur_norm[i], s), s_col, 0);
            }
            ggml_tensor * logits = nn.linear(nn.lstm(x, m.pred_lstm), m.duration_proj); // [50, L]
            ggml_tensor * sums   = ggml_sum_rows(g.ctx(), ggml_sigmoid(g.ctx(), logits));

            ggml_tensor * t = ggml_get_rows(g.ctx(), m.text_emb, ids); // [512, L]
            for (int i = 0; i < 3; i++) {
                t = nn.transpose(nn.conv(nn.transpose(t), m.text_cnn[i]));
                t = nn.leaky(nn.layer_norm(t, m.text_ln_gamma[i], m.text_ln_beta[i], 1e-5f), 0.2f);
            }
            t       = nn.lstm(t, m.text_lstm);
            rows[r] = { g.output(sums), g.output(x), g.output(t), nullptr, nullptr, nullptr };
            if (keep_stages) {
                rows[r].bert     = g.output(bert);
                rows[r].bert_enc = g.output(d_en);
                rows[r].logits   = g.output(logits);
            }
        }
        voxd_check_abort(abort);
        m.timings.text_us += g.compute(m.alloc[0].get(), "Kokoro text encoder");
        for (size_t r = 0; r < n; r++) {
            text[r] = { stage_graph::read(rows[r].sums), stage_graph::read(rows[r].d), stage_graph::read(rows[r].t_en) };
            if (keep_stages) {
                auto & st                    = out[r].stages;
                st["bert"]                   = stage_graph::read(rows[r].bert);
                st["bert_encoder"]           = stage_graph::read(rows[r].bert_enc);
                st["predictor_text_encoder"] = text[r].d;
                st["duration_logits"]        = stage_graph::read(rows[r].logits);
                // PyTorch's [512, L]: the transpose of ours
                const size_t L          = inputs[r].ids.size();
                std::vector<float> & te = st["text_encoder"];
                te.resize(text[r].t_en.size());
                for (size_t l = 0; l < L; l++) {
                    for (size_t c = 0; c < 512; c++) {
                        te[c * L + l] = text[r].t_en[l * 512 + c];
                    }
                }
            }
        }
    }

    // ---- stage 2: durations, and the frames' token indices ----
    std::vector<std::vector<int32_t>> frame_token(n);
    for (size_t r = 0; r < n; r++) {
        out[r].durations = voxd_kokoro_durations(text[r].sigmoid_sums, inputs[r].speed);
        int64_t frames   = 0;
        for (int32_t d : out[r].durations) {
            frames += d;
        }
        if (frames > k_max_frames) {
            throw voxd_error("invalid_argument", "Kokoro would speak this text for " +
                                                     std::to_string(frames * VOXD_KOKORO_FRAME_SAMPLES / VOXD_KOKORO_SAMPLE_RATE) + " s, more than the " +
                                                     std::to_string(k_max_frames * VOXD_KOKORO_FRAME_SAMPLES / VOXD_KOKORO_SAMPLE_RATE) +
                                                     " s one piece may take");
        }
        frame_token[r].reserve((size_t) frames);
        for (size_t t = 0; t < out[r].durations.size(); t++) {
            frame_token[r].insert(frame_token[r].end(), (size_t) out[r].durations[t], (int32_t) t);
        }
    }

    // ---- stage 3: prosody ----
    std::vector<std::vector<float>> f0(n), energy(n);
    {
        stage_graph g(m, n);
        layers nn{ m, g.ctx() };
        std::vector<std::pair<ggml_tensor *, ggml_tensor *>> rows(n);
        for (size_t r = 0; r < n; r++) {
            const int64_t L   = (int64_t) inputs[r].ids.size();
            ggml_tensor * d   = g.input_f32({ 640, L }, text[r].d);
            ggml_tensor * idx = g.input_i32(frame_token[r]);
            ggml_tensor * s   = g.input_f32({ VOXD_KOKORO_STYLE_DIM / 2 }, s_pred[r]);
            ggml_tensor * x   = nn.transpose(nn.lstm(ggml_get_rows(g.ctx(), d, idx), m.shared_lstm)); // [T, 512]
            ggml_tensor *fx = x, *nx = x;
            for (int i = 0; i < 3; i++) {
                fx = nn.res_block(fx, m.f0_blocks[i], s);
                nx = nn.res_block(nx, m.n_blocks[i], s);
            }
            rows[r] = { g.output(nn.conv(fx, m.f0_proj)), g.output(nn.conv(nx, m.n_proj)) };
        }
        voxd_check_abort(abort);
        m.timings.prosody_us += g.compute(m.alloc[1].get(), "Kokoro prosody predictor");
        for (size_t r = 0; r < n; r++) {
            f0[r]     = given_or(inputs[r], "decoder_in_F0", stage_graph::read(rows[r].first));
            energy[r] = given_or(inputs[r], "decoder_in_N", stage_graph::read(rows[r].second));
            if (keep_stages) {
                out[r].stages["decoder_in_F0"] = f0[r];
                out[r].stages["decoder_in_N"]  = energy[r];
            }
        }
    }

    // ---- stage 4: the harmonic source, the decoder and the generator, the inverse STFT ----
    std::vector<std::vector<float>> har(n);
    for (size_t r = 0; r < n; r++) {
        const voxd_stage_timer timer(m.timings.source_us);
        std::vector<float> source =
            voxd_kokoro_harmonic_source(f0[r].data(), (int) f0[r].size(), m.source_w.data(), m.source_b, inputs[r].seed, inputs[r].noise);
        har[r] = given_or(inputs[r], "generator_har", voxd_kokoro_source_spectrum(source));
        if (keep_stages) {
            out[r].stages["generator_source"] = std::move(source);
        }
    }
    voxd_check_abort(abort);
    {
        stage_graph g(m, n);
        layers nn{ m, g.ctx() };
        std::vector<std::pair<ggml_tensor *, ggml_tensor *>> rows(n);
        for (size_t r = 0; r < n; r++) {
            const int64_t L     = (int64_t) inputs[r].ids.size();
            const int64_t T     = (int64_t) frame_token[r].size();
            const int64_t F     = 60 * 2 * T + 1; // spectrum frames
            ggml_tensor * t_en  = g.input_f32({ 512, L }, text[r].t_en);
            ggml_tensor * idx   = g.input_i32(frame_token[r]);
            ggml_tensor * curve = g.input_f32({ 2 * T, 1 }, f0[r]);
            ggml_tensor * en    = g.input_f32({ 2 * T, 1 }, energy[r]);
            ggml_tensor * h     = g.input_f32({ F, 22 }, har[r]);
            ggml_tensor * s     = g.input_f32({ VOXD_KOKORO_STYLE_DIM / 2 }, s_dec[r]);

            ggml_tensor * asr  = nn.transpose(ggml_get_rows(g.ctx(), t_en, idx)); // [T, 512]
            ggml_tensor * f0_t = nn.conv(curve, m.f0_conv);                       // [T, 1]
            ggml_tensor * n_t  = nn.conv(en, m.n_conv);
            ggml_tensor * x    = nn.res_block(ggml_concat(g.ctx(), ggml_concat(g.ctx(), asr, f0_t, 1), n_t, 1), m.encode, s);
            ggml_tensor * res  = nn.conv(asr, m.asr_res);
            for (int i = 0; i < 4; i++) {
                ggml_tensor * cat = ggml_concat(g.ctx(), ggml_concat(g.ctx(), ggml_concat(g.ctx(), x, res, 1), f0_t, 1), n_t, 1);
                x                 = nn.res_block(cat, m.decode[i], s);
            }
            // the generator
            x                  = nn.leaky(x, 0.1f);
            ggml_tensor * src0 = nn.snake_block(nn.conv(h, m.noise_convs[0]), m.noise_res[0], s);
            x                  = nn.mean_of_blocks(ggml_add(g.ctx(), nn.conv_transpose(x, m.ups[0]), src0), &m.resblocks[0], s);
            x                  = nn.leaky(x, 0.1f);
            ggml_tensor * src1 = nn.snake_block(nn.conv(h, m.noise_convs[1]), m.noise_res[1], s);
            x                  = ggml_pad_reflect_1d(g.ctx(), nn.conv_transpose(x, m.ups[1]), 1, 0);
            x                  = nn.mean_of_blocks(ggml_add(g.ctx(), x, src1), &m.resblocks[3], s);
            ggml_tensor * post = nn.conv(nn.leaky(x, 0.01f), m.conv_post); // [F, 22]
            rows[r]            = { g.output(post), keep_stages ? g.output(asr) : nullptr };
        }
        voxd_check_abort(abort);
        m.timings.decoder_us += g.compute(m.alloc[2].get(), "Kokoro decoder");
        for (size_t r = 0; r < n; r++) {
            const std::vector<float> post = stage_graph::read(rows[r].first);
            {
                const voxd_stage_timer timer(m.timings.istft_us);
                out[r].audio = voxd_kokoro_inverse_stft(post.data(), (int) (post.size() / 22));
            }
            m.timings.frames += frame_token[r].size();
            if (keep_stages) {
                out[r].stages["decoder_in_asr"] = stage_graph::read(rows[r].second);
                out[r].stages["generator_har"]  = std::move(har[r]);
                out[r].stages["generator_post"] = post;
            }
        }
    }
    m.timings.calls++;
    m.timings.rows += n;
    return out;
}

const voxd_kokoro_timings & voxd_kokoro_get_timings(const voxd_kokoro_model & model) {
    return model.timings;
}
