#include "tts/kokoro/kokoro-weights.h"

#include "common/torch-checkpoint.h"

#include <cmath>
#include <functional>
#include <map>
#include <utility>

namespace {

constexpr int k_hidden = 512; // the predictor's and decoder's width: fixed by the model code, as is the rest below
constexpr int k_style  = 128; // each half of a style vector

using shape_t = std::vector<int64_t>;

std::string shape_text(const shape_t & shape) {
    std::string s = "[";
    for (size_t i = 0; i < shape.size(); i++) {
        s += (i ? ", " : "") + std::to_string(shape[i]);
    }
    return s + "]";
}

// Reads tensors by their module path without the checkpoint's `module.` prefixes ("decoder.generator.ups.0") and
// makes ggml tensors whose data is computed (read, folded, laid out) only once the buffer exists, one at a time.
class loader {
public:
    loader(voxd_kokoro_model & m, const std::string & path) : m_model(m), m_path(path), m_checkpoint(path) {
        for (const auto & [name, info] : m_checkpoint.tensors()) {
            (void) info;
            const size_t dot = name.find('.');
            std::string key  = name;
            if (dot != std::string::npos && name.compare(dot + 1, 7, "module.") == 0) {
                key = name.substr(0, dot + 1) + name.substr(dot + 8);
            }
            m_names[key] = name;
        }
        const size_t n_tensors = 4096;
        ggml_init_params ip    = { ggml_tensor_overhead() * n_tensors, nullptr, true };
        m.w.ctx.reset(ggml_init(ip));
        if (!m.w.ctx) {
            throw fail("cannot allocate the weights' metadata");
        }
    }

    voxd_error fail(const std::string & why) const { return voxd_error("model_load_failed", m_path + ": " + why); }

    bool has(const std::string & name) const { return m_names.count(name) != 0; }

    shape_t shape(const std::string & name) const {
        auto it = m_names.find(name);
        if (it == m_names.end()) {
            throw fail("no tensor " + name + " (is this a Kokoro checkpoint?)");
        }
        return m_checkpoint.info(it->second).shape;
    }

    // The tensor's values, which must have `expected` as its shape.
    std::vector<float> read(const std::string & name, const shape_t & expected) const {
        const shape_t actual = shape(name);
        if (actual != expected) {
            throw fail(name + " has shape " + shape_text(actual) + ", expected " + shape_text(expected));
        }
        return m_checkpoint.read_f32(m_names.at(name));
    }

    // A convolution's weight `prefix.weight`, or its weight norm folded in: g * v / |v|, the norm taken over every
    // dimension but the first (old-style weight_g / weight_v, or the parametrization's original0 / original1).
    std::vector<float> read_normed(const std::string & prefix, const shape_t & expected) const {
        std::string g_name = prefix + ".weight_g", v_name = prefix + ".weight_v";
        if (!has(v_name)) {
            g_name = prefix + ".parametrizations.weight.original0";
            v_name = prefix + ".parametrizations.weight.original1";
        }
        if (!has(v_name)) {
            return read(prefix + ".weight", expected);
        }
        std::vector<float> v = read(v_name, expected);
        shape_t g_shape(expected.size(), 1);
        g_shape[0]                 = expected[0];
        const std::vector<float> g = read(g_name, g_shape);
        const size_t per_row       = v.size() / (size_t) expected[0];
        for (int64_t r = 0; r < expected[0]; r++) {
            float * row = &v[(size_t) r * per_row];
            double sq   = 0.0;
            for (size_t i = 0; i < per_row; i++) {
                sq += (double) row[i] * row[i];
            }
            const float norm = (float) std::sqrt(sq);
            for (size_t i = 0; i < per_row; i++) {
                row[i] = g[(size_t) r] * (row[i] / norm);
            }
        }
        return v;
    }

    ggml_tensor * add(const shape_t & ne, std::function<std::vector<float>()> values) {
        ggml_tensor * t = ggml_new_tensor(m_model.w.ctx.get(), GGML_TYPE_F32, (int) ne.size(), ne.data());
        m_recipes.emplace_back(t, std::move(values));
        return t;
    }

    // ---- layers ----

    voxd_kokoro_linear linear(const std::string & prefix, int64_t in, int64_t out) {
        voxd_kokoro_linear l;
        l.w = add({ in, out }, [this, prefix, in, out] { return read(prefix + ".weight", { out, in }); });
        l.b = add({ out }, [this, prefix, out] { return read(prefix + ".bias", { out }); });
        return l;
    }

    voxd_kokoro_conv conv(const std::string & prefix, int64_t cout, int64_t cin, int64_t k, int pad, int dilation = 1, int stride = 1, bool bias = true) {
        voxd_kokoro_conv c;
        c.w = add({ k, cin, cout }, [this, prefix, cout, cin, k] { return read_normed(prefix, { cout, cin, k }); });
        if (bias) {
            c.b = add({ 1, cout }, [this, prefix, cout] { return read(prefix + ".bias", { cout }); });
        }
        c.pad      = pad;
        c.dilation = dilation;
        c.stride   = stride;
        return c;
    }

    voxd_kokoro_conv_transpose conv_transpose(const std::string & prefix, int64_t cin, int64_t cout, int64_t k, int stride, int pad) {
        voxd_kokoro_conv_transpose c;
        // PyTorch's [Cin, Cout, K] to [Cin, Cout * K] with Cin fastest: a transpose
        c.w      = add({ cin, cout * k }, [this, prefix, cin, cout, k] {
            const std::vector<float> w = read_normed(prefix, { cin, cout, k });
            std::vector<float> t(w.size());
            for (int64_t ci = 0; ci < cin; ci++) {
                for (int64_t j = 0; j < cout * k; j++) {
                    t[(size_t) (j * cin + ci)] = w[(size_t) (ci * cout * k + j)];
                }
            }
            return t;
        });
        c.b      = add({ 1, cout }, [this, prefix, cout] { return read(prefix + ".bias", { cout }); });
        c.stride = stride;
        c.pad    = pad;
        c.cout   = (int) cout;
        return c;
    }

    voxd_kokoro_lstm lstm(const std::string & prefix, int64_t in, int64_t hidden) {
        voxd_kokoro_lstm l;
        auto both = [this, prefix](const std::string & name, const shape_t & shape) {
            std::vector<float> forward        = read(prefix + "." + name, shape);
            const std::vector<float> backward = read(prefix + "." + name + "_reverse", shape);
            forward.insert(forward.end(), backward.begin(), backward.end());
            return forward;
        };
        l.w_ih = add({ in, 8 * hidden }, [both, in, hidden] { return both("weight_ih_l0", { 4 * hidden, in }); });
        l.b_ih = add({ 8 * hidden }, [both, hidden] { return both("bias_ih_l0", { 4 * hidden }); });
        l.w_hh = add({ hidden, 8 * hidden }, [both, hidden] { return both("weight_hh_l0", { 4 * hidden, hidden }); });
        l.b_hh = add({ 8 * hidden }, [both, hidden] { return both("bias_hh_l0", { 4 * hidden }); });
        return l;
    }

    // AdaIN1d (`instance`: its optional affine InstanceNorm, absent from the released checkpoint) or AdaLayerNorm.
    voxd_kokoro_ada_norm ada_norm(const std::string & prefix, int64_t channels, bool instance) {
        voxd_kokoro_ada_norm n;
        n.fc = linear(prefix + ".fc", k_style, 2 * channels);
        if (instance && has(prefix + ".norm.weight")) {
            n.norm_w = add({ 1, channels }, [this, prefix, channels] { return read(prefix + ".norm.weight", { channels }); });
            n.norm_b = add({ 1, channels }, [this, prefix, channels] { return read(prefix + ".norm.bias", { channels }); });
        }
        return n;
    }

    voxd_kokoro_res_block res_block(const std::string & p, int64_t dim_in, int64_t dim_out, bool upsample) {
        voxd_kokoro_res_block b;
        b.norm1 = ada_norm(p + ".norm1", dim_in, true);
        b.norm2 = ada_norm(p + ".norm2", dim_out, true);
        b.conv1 = conv(p + ".conv1", dim_out, dim_in, 3, 1);
        b.conv2 = conv(p + ".conv2", dim_out, dim_out, 3, 1);
        if (dim_in != dim_out) {
            b.shortcut = conv(p + ".conv1x1", dim_out, dim_in, 1, 0, 1, 1, false);
        }
        b.upsample = upsample;
        if (upsample) {
            // a depthwise transposed convolution: weight [C, 1, 3], one [1, C] tensor per tap
            auto taps = std::make_shared<std::vector<float>>();
            for (int k = 0; k < 3; k++) {
                b.pool_w[k] = add({ 1, dim_in }, [this, p, dim_in, k, taps] {
                    if (taps->empty()) {
                        *taps = read_normed(p + ".pool", { dim_in, 1, 3 });
                    }
                    std::vector<float> tap((size_t) dim_in);
                    for (int64_t c = 0; c < dim_in; c++) {
                        tap[(size_t) c] = (*taps)[(size_t) (c * 3 + k)];
                    }
                    if (k == 2) {
                        taps->clear(); // the last tap read: let the copy go
                    }
                    return tap;
                });
            }
            b.pool_b = add({ 1, dim_in }, [this, p, dim_in] { return read(p + ".pool.bias", { dim_in }); });
        }
        return b;
    }

    voxd_kokoro_snake_block snake_block(const std::string & p, int64_t channels, int kernel) {
        static const int dilations[3] = { 1, 3, 5 };
        voxd_kokoro_snake_block b;
        for (int j = 0; j < 3; j++) {
            const std::string n = "." + std::to_string(j);
            const int d         = dilations[j];
            b.convs1[j]         = conv(p + ".convs1" + n, channels, channels, kernel, (kernel * d - d) / 2, d);
            b.convs2[j]         = conv(p + ".convs2" + n, channels, channels, kernel, (kernel - 1) / 2);
            b.adain1[j]         = ada_norm(p + ".adain1" + n, channels, true);
            b.adain2[j]         = ada_norm(p + ".adain2" + n, channels, true);
            auto alpha          = [this, channels](const std::string & name, bool inverse) {
                return add({ 1, channels }, [this, name, channels, inverse] {
                    std::vector<float> a = read(name, { 1, channels, 1 });
                    if (inverse) {
                        for (float & x : a) {
                            x = 1.0f / x;
                        }
                    }
                    return a;
                });
            };
            b.alpha1[j]     = alpha(p + ".alpha1" + n, false);
            b.inv_alpha1[j] = alpha(p + ".alpha1" + n, true);
            b.alpha2[j]     = alpha(p + ".alpha2" + n, false);
            b.inv_alpha2[j] = alpha(p + ".alpha2" + n, true);
        }
        return b;
    }

    // Allocates the buffer and fills every tensor.
    void finish() {
        m_model.w.buf.reset(ggml_backend_alloc_ctx_tensors(m_model.w.ctx.get(), m_model.w.backend.get()));
        if (!m_model.w.buf) {
            throw fail("cannot allocate the weights");
        }
        for (auto & [tensor, values] : m_recipes) {
            const std::vector<float> data = values();
            if (data.size() != (size_t) ggml_nelements(tensor)) {
                throw fail("internal: a tensor's values do not fit its shape");
            }
            ggml_backend_tensor_set(tensor, data.data(), 0, ggml_nbytes(tensor));
            m_model.weight_bytes += (int64_t) ggml_nbytes(tensor);
        }
        m_recipes.clear();
    }

private:
    voxd_kokoro_model & m_model;
    std::string m_path;
    voxd_torch_checkpoint m_checkpoint;
    std::map<std::string, std::string> m_names; // module path -> the checkpoint's name
    std::vector<std::pair<ggml_tensor *, std::function<std::vector<float>()>>> m_recipes;
};

} // namespace

void voxd_kokoro_load_weights(voxd_kokoro_model & m, const voxd_kokoro_load_options & options) {
    loader r(m, options.checkpoint);

    // ALBERT: the widths from the tensors, the layer and head counts from the configuration
    const shape_t word      = r.shape("bert.embeddings.word_embeddings.weight");
    const shape_t map       = r.shape("bert.encoder.embedding_hidden_mapping_in.weight");
    const std::string layer = "bert.encoder.albert_layer_groups.0.albert_layers.0.";
    const shape_t ffn       = r.shape(layer + "ffn.weight");
    const shape_t pos       = r.shape("bert.embeddings.position_embeddings.weight");
    if (word.size() != 2 || map.size() != 2 || ffn.size() != 2 || pos.size() != 2) {
        throw r.fail("the ALBERT embeddings are not matrices");
    }
    const int64_t E = word[1], H = map[0], F = ffn[0];
    m.n_vocab     = (int) word[0];
    m.max_pos     = (int) pos[0];
    m.bert_hidden = (int) H;
    m.bert_layers = options.bert_layers;
    m.bert_heads  = options.bert_heads;
    if (m.bert_layers < 1 || m.bert_layers > 64 || m.bert_heads < 1 || H % m.bert_heads != 0) {
        throw r.fail("ALBERT's hidden size " + std::to_string(H) + " does not split into " + std::to_string(m.bert_heads) + " heads");
    }
    auto vec       = [&r](const std::string & name, int64_t n) { return r.add({ n }, [&r, name, n] { return r.read(name, { n }); }); };
    m.word_emb     = r.add({ E, m.n_vocab }, [&r, E, &m] { return r.read("bert.embeddings.word_embeddings.weight", { m.n_vocab, E }); });
    m.pos_emb      = r.add({ E, m.max_pos }, [&r, E, &m] { return r.read("bert.embeddings.position_embeddings.weight", { m.max_pos, E }); });
    m.type_emb     = r.add({ E, 2 }, [&r, E] { return r.read("bert.embeddings.token_type_embeddings.weight", { 2, E }); });
    m.emb_ln_w     = vec("bert.embeddings.LayerNorm.weight", E);
    m.emb_ln_b     = vec("bert.embeddings.LayerNorm.bias", E);
    m.map_in       = r.linear("bert.encoder.embedding_hidden_mapping_in", E, H);
    m.q            = r.linear(layer + "attention.query", H, H);
    m.k            = r.linear(layer + "attention.key", H, H);
    m.v            = r.linear(layer + "attention.value", H, H);
    m.dense        = r.linear(layer + "attention.dense", H, H);
    m.attn_ln_w    = vec(layer + "attention.LayerNorm.weight", H);
    m.attn_ln_b    = vec(layer + "attention.LayerNorm.bias", H);
    m.ffn          = r.linear(layer + "ffn", H, F);
    m.ffn_out      = r.linear(layer + "ffn_output", F, H);
    m.full_ln_w    = vec(layer + "full_layer_layer_norm.weight", H);
    m.full_ln_b    = vec(layer + "full_layer_layer_norm.bias", H);
    m.bert_encoder = r.linear("bert_encoder", H, k_hidden);

    // prosody predictor
    const int64_t d_in = k_hidden + k_style;
    for (int i = 0; i < 3; i++) {
        m.dur_lstm[i] = r.lstm("predictor.text_encoder.lstms." + std::to_string(2 * i), d_in, k_hidden / 2);
        m.dur_norm[i] = r.ada_norm("predictor.text_encoder.lstms." + std::to_string(2 * i + 1), k_hidden, false);
    }
    m.pred_lstm     = r.lstm("predictor.lstm", d_in, k_hidden / 2);
    m.shared_lstm   = r.lstm("predictor.shared", d_in, k_hidden / 2);
    m.duration_proj = r.linear("predictor.duration_proj.linear_layer", k_hidden, 50);
    for (const char * branch : { "F0", "N" }) {
        voxd_kokoro_res_block * blocks = branch[0] == 'F' ? m.f0_blocks : m.n_blocks;
        const std::string p            = std::string("predictor.") + branch + ".";
        blocks[0]                      = r.res_block(p + "0", k_hidden, k_hidden, false);
        blocks[1]                      = r.res_block(p + "1", k_hidden, k_hidden / 2, true);
        blocks[2]                      = r.res_block(p + "2", k_hidden / 2, k_hidden / 2, false);
    }
    m.f0_proj = r.conv("predictor.F0_proj", 1, k_hidden / 2, 1, 0);
    m.n_proj  = r.conv("predictor.N_proj", 1, k_hidden / 2, 1, 0);

    // text encoder
    m.text_emb = r.add({ k_hidden, m.n_vocab }, [&r, &m] { return r.read("text_encoder.embedding.weight", { m.n_vocab, k_hidden }); });
    for (int i = 0; i < 3; i++) {
        const std::string p = "text_encoder.cnn." + std::to_string(i);
        m.text_cnn[i]       = r.conv(p + ".0", k_hidden, k_hidden, 5, 2);
        m.text_ln_gamma[i]  = vec(p + ".1.gamma", k_hidden);
        m.text_ln_beta[i]   = vec(p + ".1.beta", k_hidden);
    }
    m.text_lstm = r.lstm("text_encoder.lstm", k_hidden, k_hidden / 2);

    // decoder
    m.f0_conv = r.conv("decoder.F0_conv", 1, 1, 3, 1, 1, 2);
    m.n_conv  = r.conv("decoder.N_conv", 1, 1, 3, 1, 1, 2);
    m.asr_res = r.conv("decoder.asr_res.0", 64, k_hidden, 1, 0);
    m.encode  = r.res_block("decoder.encode", k_hidden + 2, 1024, false);
    for (int i = 0; i < 4; i++) {
        m.decode[i] = r.res_block("decoder.decode." + std::to_string(i), 1024 + 2 + 64, i == 3 ? 512 : 1024, i == 3);
    }
    const std::string g         = "decoder.generator.";
    m.source_w                  = r.read(g + "m_source.l_linear.weight", { 1, 9 });
    m.source_b                  = r.read(g + "m_source.l_linear.bias", { 1 })[0];
    m.noise_convs[0]            = r.conv(g + "noise_convs.0", 256, 22, 12, 3, 1, 6);
    m.noise_convs[1]            = r.conv(g + "noise_convs.1", 128, 22, 1, 0);
    m.noise_res[0]              = r.snake_block(g + "noise_res.0", 256, 7);
    m.noise_res[1]              = r.snake_block(g + "noise_res.1", 128, 11);
    m.ups[0]                    = r.conv_transpose(g + "ups.0", 512, 256, 20, 10, 5);
    m.ups[1]                    = r.conv_transpose(g + "ups.1", 256, 128, 12, 6, 3);
    static const int kernels[3] = { 3, 7, 11 };
    for (int i = 0; i < 6; i++) {
        m.resblocks[i] = r.snake_block(g + "resblocks." + std::to_string(i), i < 3 ? 256 : 128, kernels[i % 3]);
    }
    m.conv_post = r.conv(g + "conv_post", 22, 128, 7, 3);

    r.finish();
}
