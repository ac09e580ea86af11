#include "tts/ggml/pocket-graphs.h"

#include "common/error.h"
#include "common/ggml-graph.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "gguf.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <type_traits>

namespace {

// What the reference fixes and the mmproj does not carry (libmtmd hardcodes the same values).
constexpr int k_flow_steps        = 1;     // lsd_decode steps per latent
constexpr float k_eos_threshold   = -4.0f; // end-of-speech logit threshold
constexpr int k_tfm_context       = 250;   // the decoder transformer's attention window, in positions
constexpr float k_rope_theta      = 10000.0f;
constexpr int k_decoder_strides[] = { 6, 5, 4 }; // SEANet decoder stages, first to last
constexpr int k_upsample          = 16;          // frames to transformer positions
constexpr float k_flow_norm_eps   = 1e-6f;
constexpr int k_max_blocks        = 64; // flow blocks and decoder layers; the graphs below are sized for this many

// A causal convolution as one weight product: `w` is [taps x in, out] with the input channels fastest, so row t of
// the product's input is the `taps` columns ending at t of the channel-first input (a view, not a copy).
struct conv_weights {
    ggml_tensor * w = nullptr; // [taps * in, out] f16
    ggml_tensor * b = nullptr; // [out] f32, or none
    int taps        = 1;
    int stride      = 1; // > 1: a transposed convolution rewritten as a causal one with `stride` x `out` channels
};

struct tfm_layer {
    ggml_tensor *ln1_w, *ln1_b, *q, *k, *v, *o, *ls1, *ln2_w, *ln2_b, *up, *down, *ls2;
};

struct flow_block {
    ggml_tensor *norm_w, *norm_b, *up_w, *up_b, *down_w, *down_b, *ada_w, *ada_b;
};

struct seanet_stage {
    conv_weights up, res1, res2;
};

// A slice of a decoder state: `channels` x `cols` floats at `offset`.
struct state_slot {
    int64_t channels, cols;
    size_t offset;
};

} // namespace

struct voxd_pocket_weights {
    int n_embd = 0, n_latent = 0, n_flow = 0, n_mimi = 0, n_head = 0;
    float eps = 1e-5f;

    // flow net
    ggml_tensor *in_proj_w, *in_proj_b, *cond_w, *cond_b, *final_ada_w, *final_ada_b, *final_proj_w, *final_proj_b;
    ggml_tensor *eos_w, *eos_b, *input_linear;
    std::vector<flow_block> blocks;
    ggml_tensor * time_cond = nullptr; // [n_flow, k_flow_steps]: the averaged timestep embeddings of each step

    // decoder
    ggml_tensor *emb_mean, *emb_std, *quant_out;
    std::vector<ggml_tensor *> upsample; // per tap (newest first): [n_mimi, k_upsample] f32
    std::vector<tfm_layer> layers;
    conv_weights conv_in, conv_out;
    std::vector<seanet_stage> stages;

    // decoder state layout
    state_slot up_slot{}, in_slot{}, out_slot{};
    std::vector<state_slot> k_slots, v_slots, stage_up_slots, stage_res_slots;
    size_t state_size = 0;

    voxd_graph_weights store;   // backend, weights
    ggml_gallocr_ptr gen_alloc; // kept from call to call (grows to the largest graph)
    ggml_gallocr_ptr dec_alloc;
};

namespace {

// Reads the mmproj's tensors as floats and lays them out for the graphs.
class weight_reader {
public:
    explicit weight_reader(const std::string & path) : m_path(path), m_in(path, std::ios::binary) {
        ggml_context * meta = nullptr;
        gguf_init_params params{ true, &meta };
        m_gguf.reset(gguf_init_from_file(path.c_str(), params));
        m_meta.reset(meta);
        if (!m_gguf || !m_in) {
            throw fail("cannot read it as GGUF");
        }
    }

    voxd_error fail(const std::string & why) const { return voxd_error("model_load_failed", "mmproj " + m_path + ": " + why); }

    bool has(const std::string & name) const { return gguf_find_tensor(m_gguf.get(), name.c_str()) >= 0; }

    // The tensor's shape (ne0 first); throws when it is missing or not of `dims` dimensions.
    std::vector<int64_t> shape(const std::string & name, int dims) const {
        const ggml_tensor * t = ggml_get_tensor(m_meta.get(), name.c_str());
        if (!t) {
            throw fail("no tensor " + name + " (not a Pocket TTS generator?)");
        }
        if (ggml_n_dims(t) > dims) {
            throw fail("tensor " + name + " has " + std::to_string(ggml_n_dims(t)) + " dimensions, not " + std::to_string(dims));
        }
        return { t->ne[0], t->ne[1], t->ne[2], t->ne[3] };
    }

    uint32_t u32(const char * key) const { return gguf_get_val_u32(m_gguf.get(), key_of(key, GGUF_TYPE_UINT32)); }
    float f32(const char * key) const { return gguf_get_val_f32(m_gguf.get(), key_of(key, GGUF_TYPE_FLOAT32)); }

    std::vector<float> floats(const std::string & name) {
        const ggml_tensor * t = ggml_get_tensor(m_meta.get(), name.c_str());
        if (!t) {
            throw fail("no tensor " + name + " (not a Pocket TTS generator?)");
        }
        const ggml_type_traits * traits = ggml_get_type_traits(t->type);
        if (t->type != GGML_TYPE_F32 && !traits->to_float) {
            throw fail("tensor " + name + " is of type " + ggml_type_name(t->type) + ", which ggml cannot read as floats");
        }
        const int64_t id = gguf_find_tensor(m_gguf.get(), name.c_str());
        std::vector<char> raw(ggml_nbytes(t));
        m_in.clear();
        m_in.seekg((std::streamoff)(gguf_get_data_offset(m_gguf.get()) + gguf_get_tensor_offset(m_gguf.get(), id)));
        if (!m_in.read(raw.data(), (std::streamsize) raw.size())) {
            throw fail("tensor " + name + " is truncated");
        }
        std::vector<float> out((size_t) ggml_nelements(t));
        if (t->type == GGML_TYPE_F32) {
            std::memcpy(out.data(), raw.data(), raw.size());
        } else {
            traits->to_float(raw.data(), out.data(), (int64_t) out.size());
        }
        for (float v : out) {
            // matrices are stored as f16 (weight_builder), whose largest finite value is 65504
            if (!std::isfinite(v) || std::fabs(v) > 65504.0f) {
                throw fail("tensor " + name + " holds a value that is not finite or too large for f16");
            }
        }
        return out;
    }

private:
    // The key's id; throws when it is missing or of another type (gguf's getters assert on the type).
    int64_t key_of(const char * key, gguf_type type) const {
        const int64_t id = gguf_find_key(m_gguf.get(), key);
        if (id < 0 || gguf_get_kv_type(m_gguf.get(), id) != type) {
            throw fail(std::string("no ") + key + " of type " + gguf_type_name(type));
        }
        return id;
    }

    std::string m_path;
    std::ifstream m_in;
    gguf_context_ptr m_gguf;
    ggml_context_ptr m_meta; // the tensors' metadata
};

// Tensors declared while loading and their values, set once the backend buffer exists.
class weight_builder {
public:
    explicit weight_builder(ggml_context * ctx) : m_ctx(ctx) {} // borrows ctx, which owns the tensors

    ggml_tensor * add(ggml_type type, const std::vector<int64_t> & ne, std::vector<float> values) {
        ggml_tensor * t = ggml_new_tensor(m_ctx, type, (int) ne.size(), ne.data());
        m_values.emplace_back(t, std::move(values));
        return t;
    }

    void upload() {
        std::vector<ggml_fp16_t> half;
        for (auto & [t, values] : m_values) {
            if (t->type == GGML_TYPE_F16) {
                half.resize(values.size());
                ggml_fp32_to_fp16_row(values.data(), half.data(), (int64_t) values.size());
                ggml_backend_tensor_set(t, half.data(), 0, half.size() * sizeof(ggml_fp16_t));
            } else {
                ggml_backend_tensor_set(t, values.data(), 0, values.size() * sizeof(float));
            }
        }
        m_values.clear();
    }

private:
    ggml_context * m_ctx;
    std::vector<std::pair<ggml_tensor *, std::vector<float>>> m_values;
};

// The averaged timestep embedding of flow step `step`: the reference's TimestepEmbedder on s (first embedder) and
// t (second), computed once at load since it depends on the weights only.
std::vector<float> time_condition(weight_reader & r, int n_flow, int step) {
    std::vector<float> sum((size_t) n_flow, 0.0f);
    for (int e = 0; e < 2; e++) {
        const std::string p  = "a.gen.flow.time." + std::to_string(e) + ".";
        const float time     = (float) (step + e) / (float) k_flow_steps; // s for the first, t for the second
        std::vector<float> f = r.floats(p + "freqs");
        std::vector<float> emb(2 * f.size());
        for (size_t i = 0; i < f.size(); i++) {
            emb[i]            = std::cos(f[i] * time);
            emb[i + f.size()] = std::sin(f[i] * time);
        }
        const auto linear = [&](const std::string & name, const std::vector<float> & x) {
            const std::vector<float> w = r.floats(name + ".weight");
            std::vector<float> y       = r.floats(name + ".bias");
            if (w.size() != x.size() * y.size()) {
                throw r.fail(name + " does not fit its input");
            }
            for (size_t o = 0; o < y.size(); o++) {
                double acc = 0.0;
                for (size_t i = 0; i < x.size(); i++) {
                    acc += (double) w[o * x.size() + i] * x[i];
                }
                y[o] += (float) acc;
            }
            return y;
        };
        std::vector<float> h = linear(p + "up", emb);
        for (float & v : h) {
            v = v / (1.0f + std::exp(-v)); // SiLU
        }
        h = linear(p + "down", h);
        // the reference's "RMSNorm" divides by the unbiased variance of the values, not their mean square
        double mean = 0.0;
        for (float v : h) {
            mean += v;
        }
        mean /= (double) h.size();
        double var = 0.0;
        for (float v : h) {
            var += (v - mean) * (v - mean);
        }
        var                           = var / (double) (h.size() - 1) + 1e-5;
        const std::vector<float> norm = r.floats(p + "norm");
        if (h.size() != (size_t) n_flow || norm.size() != h.size()) {
            throw r.fail(p + "* do not match the flow net's width");
        }
        for (size_t i = 0; i < h.size(); i++) {
            sum[i] += (float) (h[i] / std::sqrt(var)) * norm[i] / 2.0f;
        }
    }
    return sum;
}

// An [in, out] weight matrix (GGUF ne0 = in) as f16.
ggml_tensor * matrix(weight_reader & r, weight_builder & b, const std::string & name, int64_t in, int64_t out) {
    const std::vector<int64_t> ne = r.shape(name, 2);
    if (ne[0] != in || ne[1] != out) {
        throw r.fail(name + " is " + std::to_string(ne[0]) + " x " + std::to_string(ne[1]) + ", not " + std::to_string(in) + " x " + std::to_string(out));
    }
    return b.add(GGML_TYPE_F16, { in, out }, r.floats(name));
}

ggml_tensor * row_vector(weight_reader & r, weight_builder & b, const std::string & name, int64_t n) {
    const std::vector<int64_t> ne = r.shape(name, 1);
    if (ne[0] != n) {
        throw r.fail(name + " has " + std::to_string(ne[0]) + " values, not " + std::to_string(n));
    }
    return b.add(GGML_TYPE_F32, { n }, r.floats(name));
}

// A causal convolution's kernel [K, in, out] as [K * in, out], input channels fastest.
conv_weights causal_conv_weights(weight_reader & r, weight_builder & b, const std::string & name, int64_t in, int64_t out) {
    const std::vector<int64_t> ne = r.shape(name + ".weight", 3);
    const int64_t k               = ne[0];
    if (ne[1] != in || ne[2] != out) {
        throw r.fail(name + ".weight does not have " + std::to_string(in) + " inputs and " + std::to_string(out) + " outputs");
    }
    const std::vector<float> src = r.floats(name + ".weight");
    std::vector<float> dst(src.size());
    for (int64_t o = 0; o < out; o++) {
        for (int64_t i = 0; i < in; i++) {
            for (int64_t t = 0; t < k; t++) {
                dst[(size_t) (o * k * in + t * in + i)] = src[(size_t) (t + k * i + k * in * o)];
            }
        }
    }
    conv_weights c;
    c.w    = b.add(GGML_TYPE_F16, { k * in, out }, std::move(dst));
    c.b    = row_vector(r, b, name + ".bias", out);
    c.taps = (int) k;
    return c;
}

// A transposed convolution's kernel [K, out, in] of stride s (K = taps x s) as a causal convolution's [taps x in,
// s x out]: output channel j x out + o at input step t is output sample t x s + j, which sums tap j + r x s over
// input t - r; the input block of the oldest column (t - taps + 1) comes first.
conv_weights transposed_conv_weights(weight_reader & r, weight_builder & b, const std::string & name, int64_t in, int64_t out, int stride) {
    const std::vector<int64_t> ne = r.shape(name + ".weight", 3);
    const int64_t k               = ne[0];
    if (ne[1] != out || ne[2] != in || k % stride != 0) {
        throw r.fail(name + ".weight is not a transposed convolution of " + std::to_string(in) + " to " + std::to_string(out) + " channels at stride " +
                     std::to_string(stride));
    }
    const int64_t taps           = k / stride;
    const std::vector<float> src = r.floats(name + ".weight");
    std::vector<float> dst(src.size());
    for (int64_t j = 0; j < stride; j++) {
        for (int64_t o = 0; o < out; o++) {
            for (int64_t blk = 0; blk < taps; blk++) {
                const int64_t tap = j + (taps - 1 - blk) * stride;
                for (int64_t i = 0; i < in; i++) {
                    dst[(size_t) ((j * out + o) * taps * in + blk * in + i)] = src[(size_t) (tap + k * o + k * out * i)];
                }
            }
        }
    }
    conv_weights c;
    c.w      = b.add(GGML_TYPE_F16, { taps * in, stride * out }, std::move(dst));
    c.b      = row_vector(r, b, name + ".bias", out);
    c.taps   = (int) taps;
    c.stride = stride;
    return c;
}

void add_slot(voxd_pocket_weights & w, state_slot & slot, int64_t channels, int64_t cols) {
    slot = { channels, cols, w.state_size };
    w.state_size += (size_t) (channels * cols);
}

std::unique_ptr<voxd_pocket_weights> load(const std::string & path, int n_embd, int threads, bool use_gpu) {
    weight_reader r(path);
    auto w      = std::make_unique<voxd_pocket_weights>();
    w->n_embd   = n_embd;
    w->n_latent = (int) r.shape("a.gen.input_linear.weight", 2)[0];
    w->n_flow   = (int) r.shape("a.gen.flow.input_proj.weight", 2)[1];
    w->n_mimi   = (int) r.shape("a.gen.wav.quant_out.weight", 2)[1];
    w->n_head   = (int) r.u32("clip.gen.audio.attention.head_count");
    w->eps      = r.f32("clip.gen.audio.attention.layer_norm_epsilon");
    if (w->n_head <= 0 || w->n_mimi % w->n_head != 0 || (w->n_mimi / w->n_head) % 2 != 0) {
        throw r.fail("the decoder's head count does not divide its width into even heads");
    }
    // the decoder's layers as libmtmd counts them; the flow net's blocks as present (the file has no count)
    const int n_layers = (int) r.u32("clip.gen.audio.block_count");
    int n_blocks       = 0;
    while (r.has("a.gen.flow.blk." + std::to_string(n_blocks) + ".up.weight")) {
        n_blocks++;
    }
    const int64_t n_up_taps = r.shape("a.gen.wav.upsample.weight", 3)[0] / k_upsample;
    if (n_blocks == 0 || n_blocks > k_max_blocks || n_layers <= 0 || n_layers > k_max_blocks || n_up_taps <= 0 || n_up_taps > 8) {
        throw r.fail("flow blocks, decoder layers or upsampling taps out of range (not a Pocket TTS generator?)");
    }

    const size_t n_tensors = 64 + (size_t) n_blocks * 8 + (size_t) n_layers * 12 + (size_t) n_up_taps;
    ggml_init_params ip    = { n_tensors * ggml_tensor_overhead(), nullptr, true };
    w->store.ctx.reset(ggml_init(ip));
    w->store.backend.reset(voxd_graph_backend_init(use_gpu, 0, w->store.is_cpu));
    if (!w->store.ctx || !w->store.backend) {
        throw r.fail("cannot initialise ggml");
    }
    weight_builder b(w->store.ctx.get());
    const int64_t e = n_embd, h = w->n_flow, z = w->n_latent, m = w->n_mimi;

    // flow net
    w->in_proj_w = matrix(r, b, "a.gen.flow.input_proj.weight", z, h);
    w->in_proj_b = row_vector(r, b, "a.gen.flow.input_proj.bias", h);
    w->cond_w    = matrix(r, b, "a.gen.flow.cond_embd.weight", e, h);
    w->cond_b    = row_vector(r, b, "a.gen.flow.cond_embd.bias", h);
    for (int i = 0; i < n_blocks; i++) {
        const std::string p = "a.gen.flow.blk." + std::to_string(i) + ".";
        w->blocks.push_back({ row_vector(r, b, p + "norm.weight", h), row_vector(r, b, p + "norm.bias", h), matrix(r, b, p + "up.weight", h, h),
                              row_vector(r, b, p + "up.bias", h), matrix(r, b, p + "down.weight", h, h), row_vector(r, b, p + "down.bias", h),
                              matrix(r, b, p + "ada.weight", h, 3 * h), row_vector(r, b, p + "ada.bias", 3 * h) });
    }
    w->final_ada_w  = matrix(r, b, "a.gen.flow.final.ada.weight", h, 2 * h);
    w->final_ada_b  = row_vector(r, b, "a.gen.flow.final.ada.bias", 2 * h);
    w->final_proj_w = matrix(r, b, "a.gen.flow.final.proj.weight", h, z);
    w->final_proj_b = row_vector(r, b, "a.gen.flow.final.proj.bias", z);
    w->eos_w        = matrix(r, b, "a.gen.out_eos.weight", e, 1);
    w->eos_b        = row_vector(r, b, "a.gen.out_eos.bias", 1);
    w->input_linear = matrix(r, b, "a.gen.input_linear.weight", z, e);
    std::vector<float> cond;
    for (int s = 0; s < k_flow_steps; s++) {
        const std::vector<float> c = time_condition(r, (int) h, s);
        cond.insert(cond.end(), c.begin(), c.end());
    }
    w->time_cond = b.add(GGML_TYPE_F32, { h, k_flow_steps }, std::move(cond));

    // decoder: latent -> mimi width, depthwise upsampling, transformer, SEANet
    w->emb_mean  = row_vector(r, b, "a.gen.emb_mean", z);
    w->emb_std   = row_vector(r, b, "a.gen.emb_std", z);
    w->quant_out = matrix(r, b, "a.gen.wav.quant_out.weight", z, m);
    {
        const std::vector<int64_t> ne = r.shape("a.gen.wav.upsample.weight", 3);
        if (ne[1] != 1 || ne[2] != m || ne[0] != n_up_taps * k_upsample) {
            throw r.fail("a.gen.wav.upsample.weight is not a depthwise transposed convolution of stride " + std::to_string(k_upsample));
        }
        const std::vector<float> src = r.floats("a.gen.wav.upsample.weight");
        for (int64_t tap = 0; tap < ne[0] / k_upsample; tap++) { // tap r applies to input t - r
            std::vector<float> dst((size_t) (m * k_upsample));
            for (int64_t j = 0; j < k_upsample; j++) {
                for (int64_t c = 0; c < m; c++) {
                    dst[(size_t) (j * m + c)] = src[(size_t) (j + tap * k_upsample + ne[0] * c)];
                }
            }
            w->upsample.push_back(b.add(GGML_TYPE_F32, { m, k_upsample }, std::move(dst)));
        }
    }
    const int64_t ff = r.shape("a.gen.wav.tfm.blk.0.ffn_up.weight", 2)[1];
    for (int i = 0; i < n_layers; i++) {
        const std::string p = "a.gen.wav.tfm.blk." + std::to_string(i) + ".";
        w->layers.push_back({ row_vector(r, b, p + "ln1.weight", m), row_vector(r, b, p + "ln1.bias", m), matrix(r, b, p + "attn_q.weight", m, m),
                              matrix(r, b, p + "attn_k.weight", m, m), matrix(r, b, p + "attn_v.weight", m, m), matrix(r, b, p + "attn_out.weight", m, m),
                              row_vector(r, b, p + "ls1.weight", m), row_vector(r, b, p + "ln2.weight", m), row_vector(r, b, p + "ln2.bias", m),
                              matrix(r, b, p + "ffn_up.weight", m, ff), matrix(r, b, p + "ffn_down.weight", ff, m), row_vector(r, b, p + "ls2.weight", m) });
    }
    const int64_t top = r.shape("a.gen.wav.seanet.conv_in.weight", 3)[2];
    w->conv_in        = causal_conv_weights(r, b, "a.gen.wav.seanet.conv_in", m, top);
    int64_t dim       = top;
    for (int i = 0; i < (int) std::size(k_decoder_strides); i++) {
        const std::string p = "a.gen.wav.seanet.blk." + std::to_string(i) + ".";
        const int64_t mid   = r.shape(p + "res_conv1.weight", 3)[2];
        w->stages.push_back({ transposed_conv_weights(r, b, p + "scale_conv", dim, dim / 2, k_decoder_strides[i]),
                              causal_conv_weights(r, b, p + "res_conv1", dim / 2, mid), causal_conv_weights(r, b, p + "res_conv2", mid, dim / 2) });
        if (w->stages.back().res2.taps != 1) {
            throw r.fail(p + "res_conv2 is not pointwise");
        }
        dim /= 2;
    }
    w->conv_out = causal_conv_weights(r, b, "a.gen.wav.seanet.conv_out", dim, 1);

    // the decoder state: each causal convolution's last taps - 1 input columns, the transformer's key/value window
    add_slot(*w, w->up_slot, m, (int64_t) w->upsample.size() - 1);
    for (int i = 0; i < n_layers; i++) {
        w->k_slots.emplace_back();
        w->v_slots.emplace_back();
        add_slot(*w, w->k_slots.back(), m, k_tfm_context - 1);
        add_slot(*w, w->v_slots.back(), m, k_tfm_context - 1);
    }
    add_slot(*w, w->in_slot, m, w->conv_in.taps - 1);
    dim = top;
    for (const seanet_stage & s : w->stages) {
        w->stage_up_slots.emplace_back();
        w->stage_res_slots.emplace_back();
        add_slot(*w, w->stage_up_slots.back(), dim, s.up.taps - 1);
        add_slot(*w, w->stage_res_slots.back(), dim / 2, s.res1.taps - 1);
        dim /= 2;
    }
    add_slot(*w, w->out_slot, dim, w->conv_out.taps - 1);

    w->store.buf.reset(ggml_backend_alloc_ctx_tensors(w->store.ctx.get(), w->store.backend.get()));
    if (!w->store.buf) {
        throw r.fail("cannot allocate the generator's weights (out of memory?)");
    }
    b.upload();
    w->gen_alloc.reset(ggml_gallocr_new(ggml_backend_get_default_buffer_type(w->store.backend.get())));
    w->dec_alloc.reset(ggml_gallocr_new(ggml_backend_get_default_buffer_type(w->store.backend.get())));
    if (!w->gen_alloc || !w->dec_alloc) {
        throw r.fail("cannot initialise ggml's allocator");
    }
    if (w->store.is_cpu) {
        ggml_backend_cpu_set_n_threads(w->store.backend.get(), threads > 0 ? threads : voxd_default_threads());
        // flash attention row by row over each sequence's own window, never tiled across rows (batch invariance)
        ggml_backend_cpu_set_use_ref(w->store.backend.get(), true);
    }
    return w;
}

// A graph under construction and its context; compute() allocates it, sets its inputs and runs it.
struct graph_builder {
    ggml_context_ptr ctx;
    ggml_cgraph * gf = nullptr; // owned by ctx

    explicit graph_builder(size_t n_nodes) {
        ggml_init_params ip = { n_nodes * ggml_tensor_overhead() + ggml_graph_overhead_custom(n_nodes, false), nullptr, true };
        ctx.reset(ggml_init(ip));
        if (!ctx) {
            throw voxd_error("synthesis_failed", "cannot build the generator's graph");
        }
        gf = ggml_new_graph_custom(ctx.get(), n_nodes, false);
    }

    ggml_tensor * input(ggml_type type, const std::vector<int64_t> & ne) {
        ggml_tensor * t = ggml_new_tensor(ctx.get(), type, (int) ne.size(), ne.data());
        ggml_set_input(t);
        return t;
    }

    ggml_tensor * output(ggml_tensor * t) {
        ggml_set_output(t);
        ggml_build_forward_expand(gf, t);
        return t;
    }

    void compute(const voxd_pocket_weights & w, const ggml_gallocr_ptr & alloc, const std::vector<std::pair<ggml_tensor *, const void *>> & inputs) {
        // a GPU backend aborts the process on an op it lacks; these graphs have not been run on every GPU backend
        for (int i = 0; !w.store.is_cpu && i < ggml_graph_n_nodes(gf); i++) {
            if (!ggml_backend_supports_op(w.store.backend.get(), ggml_graph_node(gf, i))) {
                throw voxd_error("synthesis_failed", std::string("the GPU backend cannot run the generator's ") + ggml_op_desc(ggml_graph_node(gf, i)));
            }
        }
        if (!ggml_gallocr_alloc_graph(alloc.get(), gf)) {
            throw voxd_error("synthesis_failed", "cannot allocate the generator's graph (out of memory?)");
        }
        for (const auto & [t, data] : inputs) {
            ggml_backend_tensor_set(t, data, 0, ggml_nbytes(t));
        }
        if (ggml_backend_graph_compute(w.store.backend.get(), gf) != GGML_STATUS_SUCCESS) {
            throw voxd_error("synthesis_failed", "the generator's graph failed");
        }
    }
};

#if defined(__GNUC__)
typedef float float4 __attribute__((vector_size(16)));
typedef int32_t int4 __attribute__((vector_size(16)));
#endif

template <typename I, typename F> I to_int(F f) {
#if defined(__GNUC__)
    if constexpr (!std::is_same_v<I, int32_t>) {
        return __builtin_convertvector(f, I);
    } else
#endif
    {
        return (I) f;
    }
}

// ELU on the CPU: ggml's calls libm's expm1f per value, which took a fifth of the decoder's time. e^x - 1 for x <= 0
// by range reduction (x = k ln 2 + r, |r| <= ln 2 / 2), a degree-6 polynomial for e^r and 2^k from exponent bits,
// within about 1e-7 of expm1f, 4 values at a time where the compiler has vector types (GCC, Clang). The exponential
// is taken of x clamped to [-87, 0], so every lane's arithmetic is defined; positive values and NaN pass through.
// Rows are split between threads whole and a value's place in its row fixes its path, so it is computed the same
// whatever the tensor's other rows (batch invariance).
template <typename F, typename I> F elu_values(F x, F zero, F one) {
    F v          = x > -87.0f ? x : zero - 87.0f;
    v            = v < zero ? v : zero;
    const F k    = (v * 1.44269504f + 12582912.0f) - 12582912.0f; // round to nearest (the 1.5 x 2^23 trick)
    const F r    = (v - k * 0.693145751953125f) - k * 1.428606765330187e-6f;
    const F p    = one + r * (one + r * (0.5f + r * (1.0f / 6 + r * (1.0f / 24 + r * (1.0f / 120 + r * (1.0f / 720))))));
    const I bits = (I) ((to_int<I>(k) + 127) << 23);
    F scale;
    std::memcpy(&scale, &bits, sizeof(scale));
    return (x > zero) | (x != x) ? x : p * scale - one;
}

void elu_rows(ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void * /*userdata*/) {
    const int64_t width = a->ne[0], rows = ggml_nrows(a);
    for (int64_t row = ith; row < rows; row += nth) {
        const float * x = (const float *) a->data + row * width;
        float * y       = (float *) dst->data + row * width;
        int64_t i       = 0;
#if defined(__GNUC__)
        for (; i + 4 <= width; i += 4) {
            float4 v;
            std::memcpy(&v, x + i, sizeof(v));
            const float4 out = elu_values<float4, int4>(v, float4{}, float4{} + 1.0f);
            std::memcpy(y + i, &out, sizeof(out));
        }
#endif
        for (; i < width; i++) {
            y[i] = elu_values<float, int32_t>(x[i], 0.0f, 1.0f);
        }
    }
}

// x * (1 + scale) + shift; `scale` is a strided view, which ggml's CPU scale op does not take (hence the copy)
ggml_tensor * modulate(ggml_context * ctx, ggml_tensor * x, ggml_tensor * shift, ggml_tensor * scale) {
    return ggml_add(ctx, ggml_mul(ctx, x, ggml_scale_bias(ctx, ggml_cont(ctx, scale), 1.0f, 1.0f)), shift);
}

// Row `i` of `n` equal parts of each column of `mod` ([n x width, rows]): a [width, rows] view.
ggml_tensor * part(ggml_context * ctx, ggml_tensor * mod, int64_t width, int i) {
    return ggml_view_2d(ctx, mod, width, mod->ne[1], mod->nb[1], (size_t) i * width * ggml_element_size(mod));
}

ggml_tensor * norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b, float eps) {
    x = ggml_norm(ctx, x, eps);
    return w ? ggml_add(ctx, ggml_mul(ctx, x, w), b) : x;
}

// The decoder graph's pieces over [channels, time, sequences] activations, with the state slots they read and
// write.
struct decoder_graph {
    const voxd_pocket_weights & w;
    graph_builder & g;
    ggml_tensor * state_in; // [state_size, sequences], owned by g's context
    // each slot's next value, a view in g's context; the slots are w's
    std::vector<std::pair<const state_slot *, ggml_tensor *>> state_out;

    ggml_context * ctx() const { return g.ctx.get(); }

    ggml_tensor * elu(ggml_tensor * x) const {
        if (!w.store.is_cpu) {
            return ggml_elu(ctx(), x);
        }
        return ggml_map_custom1(ctx(), ggml_is_contiguous(x) ? x : ggml_cont(ctx(), x), elu_rows, GGML_N_TASKS_MAX, nullptr); // elu_rows reads packed rows
    }

    // The slot's columns of every sequence: [channels, cols, sequences].
    ggml_tensor * slot_in(const state_slot & s) const {
        return ggml_view_3d(ctx(), state_in, s.channels, s.cols, state_in->ne[1], s.channels * sizeof(float), state_in->nb[1], s.offset * sizeof(float));
    }

    // Prepends the slot's columns to x ([C, T, N]) and keeps the last ones of the result as the slot's next value.
    ggml_tensor * with_left_context(ggml_tensor * x, const state_slot & s) {
        if (s.cols == 0) {
            return x;
        }
        ggml_tensor * xp = ggml_concat(ctx(), slot_in(s), x, 1);
        state_out.emplace_back(&s, ggml_view_3d(ctx(), xp, s.channels, s.cols, xp->ne[2], xp->nb[1], xp->nb[2], (size_t) x->ne[1] * xp->nb[1]));
        return xp;
    }

    // x: [in, T, N] -> [out, T, N] (a transposed convolution: [out / stride, T x stride, N]).
    ggml_tensor * conv(ggml_tensor * x, const conv_weights & c, const state_slot * s) {
        const int64_t in = x->ne[0], t = x->ne[1], n = x->ne[2];
        ggml_tensor * y;
        if (c.taps == 1) {
            y = ggml_mul_mat(ctx(), c.w, ggml_reshape_2d(ctx(), ggml_is_contiguous(x) ? x : ggml_cont(ctx(), x), in, t * n));
        } else {
            ggml_tensor * xp = with_left_context(x, *s);
            // row t: the taps columns ending at t, overlapping the next row's. ggml_view_3d sizes a view as if its
            // rows were packed, so it is made one column wide and then widened: its last row ends where xp ends.
            ggml_tensor * cols = ggml_view_3d(ctx(), xp, in, t, n, xp->nb[1], xp->nb[2], 0);
            cols->ne[0]        = in * c.taps;
            if (!w.store.is_cpu) {
                cols = ggml_cont(ctx(), cols); // GPU backends take no overlapping rows
            }
            y = ggml_mul_mat(ctx(), c.w, cols);
        }
        y = ggml_reshape_3d(ctx(), y, c.w->ne[1] / c.stride, t * c.stride, n);
        return ggml_add(ctx(), y, c.b);
    }

    ggml_tensor * upsample(ggml_tensor * x) {
        const int64_t m = x->ne[0], t = x->ne[1], n = x->ne[2];
        ggml_tensor * xp  = with_left_context(x, w.up_slot);
        ggml_tensor * out = nullptr;
        for (size_t tap = 0; tap < w.upsample.size(); tap++) {
            const size_t first = w.upsample.size() - 1 - tap; // input t - tap
            ggml_tensor * col  = ggml_view_4d(ctx(), xp, m, 1, t, n, xp->nb[1], xp->nb[1], xp->nb[2], first * xp->nb[1]);
            ggml_tensor * y    = ggml_mul(ctx(), ggml_repeat_4d(ctx(), col, m, k_upsample, t, n), w.upsample[tap]);
            out                = out ? ggml_add(ctx(), out, y) : y;
        }
        return ggml_reshape_3d(ctx(), out, m, k_upsample * t, n);
    }

    // x: [m, L, N]; positions and mask per sequence
    ggml_tensor * transformer(ggml_tensor * x, ggml_tensor * pos, ggml_tensor * mask) {
        const int64_t m = x->ne[0], len = x->ne[1], n = x->ne[2], dh = m / w.n_head, prefix = k_tfm_context - 1;
        ggml_tensor * cur = ggml_reshape_2d(ctx(), x, m, len * n);
        for (size_t il = 0; il < w.layers.size(); il++) {
            const tfm_layer & l = w.layers[il];
            ggml_tensor * h     = norm(ctx(), cur, l.ln1_w, l.ln1_b, w.eps);
            ggml_tensor * q     = ggml_mul_mat(ctx(), l.q, h);
            ggml_tensor * k     = ggml_mul_mat(ctx(), l.k, h);
            ggml_tensor * v     = ggml_mul_mat(ctx(), l.v, h);
            q = ggml_rope_ext(ctx(), ggml_reshape_3d(ctx(), q, dh, w.n_head, len * n), pos, nullptr, (int) dh, GGML_ROPE_TYPE_NORMAL, 0, k_rope_theta, 1.0f,
                              0.0f, 1.0f, 0.0f, 0.0f);
            k = ggml_rope_ext(ctx(), ggml_reshape_3d(ctx(), k, dh, w.n_head, len * n), pos, nullptr, (int) dh, GGML_ROPE_TYPE_NORMAL, 0, k_rope_theta, 1.0f,
                              0.0f, 1.0f, 0.0f, 0.0f);
            // the cached window of each sequence, then this window's keys and values; the last `prefix` stay
            ggml_tensor * k_all = with_left_context(ggml_reshape_3d(ctx(), k, m, len, n), w.k_slots[il]);
            ggml_tensor * v_all = with_left_context(ggml_reshape_3d(ctx(), v, m, len, n), w.v_slots[il]);
            const int64_t n_kv  = prefix + len;
            ggml_tensor * q4    = ggml_permute(ctx(), ggml_reshape_4d(ctx(), q, dh, w.n_head, len, n), 0, 2, 1, 3);
            ggml_tensor * k4    = ggml_cast(ctx(), ggml_permute(ctx(), ggml_reshape_4d(ctx(), k_all, dh, w.n_head, n_kv, n), 0, 2, 1, 3), GGML_TYPE_F16);
            ggml_tensor * v4    = ggml_cast(ctx(), ggml_permute(ctx(), ggml_reshape_4d(ctx(), v_all, dh, w.n_head, n_kv, n), 0, 2, 1, 3), GGML_TYPE_F16);
            ggml_tensor * att   = ggml_flash_attn_ext(ctx(), q4, k4, v4, mask, 1.0f / std::sqrt((float) dh), 0.0f, 0.0f);
            ggml_prec_set_acc(att, GGML_PREC_F32);
            att = ggml_mul_mat(ctx(), l.o, ggml_reshape_2d(ctx(), att, m, len * n));
            cur = ggml_add(ctx(), cur, ggml_mul(ctx(), att, l.ls1));
            h   = norm(ctx(), cur, l.ln2_w, l.ln2_b, w.eps);
            h   = ggml_mul_mat(ctx(), l.down, ggml_gelu(ctx(), ggml_mul_mat(ctx(), l.up, h)));
            cur = ggml_add(ctx(), cur, ggml_mul(ctx(), h, l.ls2));
        }
        return ggml_reshape_3d(ctx(), cur, m, len, n);
    }

    ggml_tensor * seanet(ggml_tensor * x) {
        ggml_tensor * cur = conv(x, w.conv_in, &w.in_slot);
        for (size_t i = 0; i < w.stages.size(); i++) {
            const seanet_stage & s = w.stages[i];
            cur                    = conv(elu(cur), s.up, &w.stage_up_slots[i]);
            ggml_tensor * h        = conv(elu(cur), s.res1, &w.stage_res_slots[i]);
            cur                    = ggml_add(ctx(), cur, conv(elu(h), s.res2, nullptr));
        }
        return conv(elu(cur), w.conv_out, &w.out_slot);
    }
};

} // namespace

voxd_pocket_graphs::voxd_pocket_graphs(const std::string & mmproj, int n_embd, int threads, bool use_gpu) : m_w(load(mmproj, n_embd, threads, use_gpu)) {
    if (m_w->store.is_cpu) {
        return;
    }
    // the graphs have not met every GPU backend: a frame and a window now, and the CPU if an op is missing there
    try {
        const std::vector<float> state((size_t) n_embd, 0.0f), latents((size_t) m_w->n_latent, 0.0f);
        voxd_pocket_frame frame;
        frame.h_state = state.data();
        generate({ &frame });
        voxd_pocket_decoder_state cold;
        std::vector<float> audio;
        std::vector<voxd_pocket_window> windows{ { &latents, &cold, &audio, {} } };
        decode(windows);
        if (!windows[0].error.empty()) {
            throw voxd_error("synthesis_failed", windows[0].error);
        }
    } catch (const voxd_error &) {
        m_w = load(mmproj, n_embd, threads, false);
    }
}

voxd_pocket_graphs::~voxd_pocket_graphs() = default;

size_t voxd_pocket_graphs::weight_bytes() const {
    return ggml_backend_buffer_get_size(m_w->store.buf.get());
}

void voxd_pocket_graphs::generate(const std::vector<voxd_pocket_frame *> & frames) {
    if (frames.empty()) {
        return;
    }
    const voxd_pocket_weights & w = *m_w;
    const int64_t e = w.n_embd, z = w.n_latent, h = w.n_flow;
    const int64_t rows = std::max<int64_t>((int64_t) frames.size(), VOXD_MIN_PRODUCT_ROWS); // padding rows: zeros, dropped

    std::vector<float> states((size_t) (e * rows), 0.0f), noise((size_t) (z * rows), 0.0f);
    for (size_t i = 0; i < frames.size(); i++) {
        std::copy(frames[i]->h_state, frames[i]->h_state + e, states.begin() + (ptrdiff_t) i * e);
        // the reference starts the flow from Gaussian noise of variance `temperature`, drawn as libmtmd does
        std::mt19937 rng(frames[i]->seed);
        std::normal_distribution<float> dist(0.0f, std::sqrt(frames[i]->temperature));
        for (int64_t j = 0; j < z; j++) {
            noise[(size_t) (i * z + j)] = dist(rng);
        }
    }

    graph_builder g(64 + 32 * (size_t) w.blocks.size());
    ggml_context * ctx = g.ctx.get();
    ggml_tensor * t_h  = g.input(GGML_TYPE_F32, { e, rows });
    ggml_tensor * t_z  = g.input(GGML_TYPE_F32, { z, rows });

    ggml_tensor * eos  = g.output(ggml_add(ctx, ggml_mul_mat(ctx, w.eos_w, t_h), w.eos_b));
    ggml_tensor * cond = ggml_add(ctx, ggml_mul_mat(ctx, w.cond_w, t_h), w.cond_b);
    ggml_tensor * cur  = t_z;
    for (int step = 0; step < k_flow_steps; step++) {
        // one velocity evaluation from (s, t) = (step, step + 1) / steps
        ggml_tensor * time = ggml_view_1d(ctx, w.time_cond, h, (size_t) step * w.time_cond->nb[1]);
        ggml_tensor * y    = ggml_silu(ctx, ggml_add(ctx, cond, time));
        ggml_tensor * x    = ggml_add(ctx, ggml_mul_mat(ctx, w.in_proj_w, cur), w.in_proj_b);
        for (const flow_block & blk : w.blocks) {
            ggml_tensor * mod = ggml_add(ctx, ggml_mul_mat(ctx, blk.ada_w, y), blk.ada_b); // shift, scale, gate
            ggml_tensor * r   = modulate(ctx, norm(ctx, x, blk.norm_w, blk.norm_b, k_flow_norm_eps), part(ctx, mod, h, 0), part(ctx, mod, h, 1));
            r                 = ggml_add(ctx, ggml_mul_mat(ctx, blk.up_w, r), blk.up_b);
            r                 = ggml_add(ctx, ggml_mul_mat(ctx, blk.down_w, ggml_silu(ctx, r)), blk.down_b);
            x                 = ggml_add(ctx, x, ggml_mul(ctx, part(ctx, mod, h, 2), r));
        }
        ggml_tensor * mod = ggml_add(ctx, ggml_mul_mat(ctx, w.final_ada_w, y), w.final_ada_b); // shift, scale
        x                 = modulate(ctx, norm(ctx, x, nullptr, nullptr, k_flow_norm_eps), part(ctx, mod, h, 0), part(ctx, mod, h, 1));
        x                 = ggml_add(ctx, ggml_mul_mat(ctx, w.final_proj_w, x), w.final_proj_b);
        cur               = ggml_add(ctx, cur, ggml_scale(ctx, x, 1.0f / (float) k_flow_steps));
    }
    ggml_tensor * latent = g.output(cur);
    ggml_tensor * embd   = g.output(ggml_mul_mat(ctx, w.input_linear, latent));
    g.compute(w, w.gen_alloc, { { t_h, states.data() }, { t_z, noise.data() } });

    std::vector<float> eos_out((size_t) rows);
    ggml_backend_tensor_get(eos, eos_out.data(), 0, eos_out.size() * sizeof(float));
    for (size_t i = 0; i < frames.size(); i++) {
        voxd_pocket_frame & f = *frames[i];
        f.latent.resize((size_t) z);
        f.embd.resize((size_t) e);
        ggml_backend_tensor_get(latent, f.latent.data(), i * latent->nb[1], (size_t) z * sizeof(float));
        ggml_backend_tensor_get(embd, f.embd.data(), i * embd->nb[1], (size_t) e * sizeof(float));
        f.eos = eos_out[i] > k_eos_threshold;
    }
}

int voxd_pocket_graphs::decode(std::vector<voxd_pocket_window> & windows) {
    std::map<size_t, std::vector<voxd_pocket_window *>> by_length;
    for (voxd_pocket_window & win : windows) {
        const size_t n_frames = win.latents->size() / (size_t) m_w->n_latent;
        if (n_frames == 0 || win.latents->size() % (size_t) m_w->n_latent != 0) {
            win.error = "the decoder got a window of " + std::to_string(win.latents->size()) + " values, not whole frames";
        } else {
            by_length[n_frames].push_back(&win);
        }
    }
    for (const auto & [n_frames, group] : by_length) {
        try {
            decode_group(group, (int) n_frames);
        } catch (const std::exception & e) {
            for (voxd_pocket_window * win : group) {
                win->error = e.what();
            }
        }
    }
    return (int) by_length.size();
}

void voxd_pocket_graphs::decode_group(const std::vector<voxd_pocket_window *> & windows, int n_frames) {
    const voxd_pocket_weights & w = *m_w;
    const int64_t n = (int64_t) windows.size(), z = w.n_latent, len = (int64_t) n_frames * k_upsample, prefix = k_tfm_context - 1, n_kv = prefix + len;

    std::vector<float> feats, states;
    feats.reserve((size_t) (z * n_frames * n));
    states.reserve(w.state_size * (size_t) n);
    std::vector<int32_t> pos;
    std::vector<ggml_fp16_t> mask((size_t) (n_kv * len * n));
    const ggml_fp16_t keep = ggml_fp32_to_fp16(0.0f), drop = ggml_fp32_to_fp16(-INFINITY);
    for (int64_t s = 0; s < n; s++) {
        const voxd_pocket_window & win = *windows[(size_t) s];
        feats.insert(feats.end(), win.latents->begin(), win.latents->end());
        if (win.state->values.size() == w.state_size) {
            states.insert(states.end(), win.state->values.begin(), win.state->values.end());
        } else {
            states.resize(states.size() + w.state_size, 0.0f); // a cold start: silence before the first frame
        }
        const int64_t base = win.state->pos;
        for (int64_t i = 0; i < len; i++) {
            pos.push_back((int32_t) (base + i));
            // query i (cache column prefix + i) sees the window's last k_tfm_context positions up to itself, but no
            // cache column before the sequence's first position
            for (int64_t j = 0; j < n_kv; j++) {
                const bool visible                        = j >= i && j <= prefix + i && j >= prefix - base;
                mask[(size_t) ((s * len + i) * n_kv + j)] = visible ? keep : drop;
            }
        }
    }

    graph_builder g(256 + 64 * (size_t) w.layers.size() + 16 * w.upsample.size());
    ggml_context * ctx   = g.ctx.get();
    ggml_tensor * t_feat = g.input(GGML_TYPE_F32, { z, (int64_t) n_frames, n });
    ggml_tensor * t_pos  = g.input(GGML_TYPE_I32, { len * n });
    ggml_tensor * t_mask = g.input(GGML_TYPE_F16, { n_kv, len, 1, n });
    decoder_graph d{ w, g, g.input(GGML_TYPE_F32, { (int64_t) w.state_size, n }), {} };

    ggml_tensor * cur = ggml_add(ctx, ggml_mul(ctx, t_feat, w.emb_std), w.emb_mean); // denormalised latents
    cur               = ggml_mul_mat(ctx, w.quant_out, cur);
    cur               = d.upsample(cur);
    cur               = d.transformer(cur, t_pos, t_mask);
    ggml_tensor * pcm = g.output(ggml_clamp(ctx, d.seanet(cur), -1.0f, 1.0f)); // [1, samples, N]
    std::vector<ggml_tensor *> outs;
    for (auto & [slot, view] : d.state_out) {
        outs.push_back(g.output(ggml_cont(ctx, view)));
    }
    g.compute(w, w.dec_alloc, { { t_feat, feats.data() }, { t_pos, pos.data() }, { t_mask, mask.data() }, { d.state_in, states.data() } });

    const int64_t samples = pcm->ne[1];
    for (int64_t s = 0; s < n; s++) {
        const voxd_pocket_window & win = *windows[(size_t) s];
        const size_t first             = win.audio->size();
        win.audio->resize(first + (size_t) samples);
        ggml_backend_tensor_get(pcm, win.audio->data() + first, (size_t) s * pcm->nb[2], (size_t) samples * sizeof(float));
        for (size_t i = first; i < win.audio->size(); i++) {
            float & v = (*win.audio)[i];
            v         = std::isfinite(v) ? v : 0.0f;
        }
        win.state->values.resize(w.state_size);
        for (size_t o = 0; o < outs.size(); o++) {
            const state_slot & slot = *d.state_out[o].first;
            const size_t count      = (size_t) (slot.channels * slot.cols);
            ggml_backend_tensor_get(outs[o], win.state->values.data() + slot.offset, (size_t) s * outs[o]->nb[2], count * sizeof(float));
        }
        win.state->pos += len;
    }
}
