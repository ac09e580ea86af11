#include "stt/parakeet-batch-model.h"

#include "common/error.h"
#include "common/ggml-file-tensors.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <cmath>

namespace {

const std::string SPM_SPACE = "\xE2\x96\x81"; // U+2581, SentencePiece's word marker

// A piece as it joins a transcript: control pieces vanish, word markers become spaces.
std::string piece_text(const std::string & piece) {
    if (piece == "<unk>" || piece == "<s>" || piece == "</s>" || piece == "[BLANK]") {
        return "";
    }
    std::string text;
    for (size_t i = 0; i < piece.size();) {
        if (piece.compare(i, SPM_SPACE.size(), SPM_SPACE) == 0) {
            text += ' ';
            i += SPM_SPACE.size();
        } else {
            text += piece[i++];
        }
    }
    return text;
}

bool starts_word(const std::string & piece) {
    return piece.compare(0, SPM_SPACE.size(), SPM_SPACE) == 0 || (!piece.empty() && piece[0] == '_');
}

// One punctuation mark, with or without a word marker: not spoken, so libparakeet times it at the end of the word
// before it.
bool is_punctuation(const std::string & piece) {
    const std::string bare = piece.compare(0, SPM_SPACE.size(), SPM_SPACE) == 0 ? piece.substr(SPM_SPACE.size())
                             : !piece.empty() && piece[0] == '_'                ? piece.substr(1)
                                                                                : piece;
    return bare.size() == 1 && std::string(".,!?;:'\"-()[]{}").find(bare[0]) != std::string::npos;
}

} // namespace

std::unique_ptr<voxd_parakeet_batch_model> voxd_parakeet_batch_load(const std::string & path, const voxd_parakeet_batch_options & options) {
    voxd_ggml_file_reader file(path);
    auto fail     = [&](const std::string & why) { return file.fail(why); };
    auto read_i32 = [&]() { return file.read_i32(); };
    auto m        = std::make_unique<voxd_parakeet_batch_model>();
    (void) read_i32(); // magic, checked
    int32_t * hp[] = { &m->n_vocab,     &m->n_audio_ctx, &m->n_state,  &m->n_head, &m->n_layer,       &m->n_mels,      &m->ftype,        &m->n_fft,
                       &m->subsampling, &m->n_channels,  &m->n_kernel, &m->n_pred, &m->n_pred_layers, &m->n_durations, &m->n_max_symbols };
    for (int32_t * v : hp) {
        *v = read_i32();
    }
    // the file check held the rest of the hparams to what libparakeet's graphs assume
    if (m->n_fft & (m->n_fft - 1)) {
        throw fail("the FFT size is not a power of two");
    }

    const int32_t n_mel = read_i32();
    const int32_t n_fb  = read_i32();
    m->filters          = file.read_floats((size_t) n_mel * n_fb);
    m->window           = file.read_floats((size_t) read_i32());
    if (m->window.empty()) { // a periodic Hann window, computed as libparakeet does
        m->window.resize((size_t) m->n_fft);
        for (int i = 0; i < m->n_fft; i++) {
            m->window[(size_t) i] = (float) (0.5 * (1.0 - cosf((float) ((2.0 * M_PI * i) / m->n_fft))));
        }
    }
    for (int i = 0; i < m->n_durations; i++) {
        m->durations.push_back(read_i32());
    }
    const int32_t n_pieces = read_i32();
    for (int32_t i = 0; i < n_pieces; i++) {
        m->pieces.push_back(file.read_string((size_t) read_i32()));
    }
    m->pieces.push_back("[BLANK]");
    for (const std::string & piece : m->pieces) {
        m->texts.push_back(piece_text(piece));
        m->word_starts.push_back(starts_word(piece));
        m->punctuation.push_back(is_punctuation(piece));
    }

    // the tables libparakeet fills at load, with the same float arithmetic
    int bits = 0;
    while ((1 << bits) < m->n_fft) {
        bits++;
    }
    for (int i = 0; i < m->n_fft; i++) {
        int reversed = 0;
        for (int b = 0; b < bits; b++) {
            reversed |= ((i >> b) & 1) << (bits - 1 - b);
        }
        m->fft_order.push_back(reversed);
        const double theta = (2 * M_PI * i) / m->n_fft;
        m->cos_table.push_back(cosf((float) theta));
        m->sin_table.push_back(sinf((float) theta));
    }
    const float log_10000 = logf(10000.0f);
    for (int k = 0; k < m->n_state / 2; k++) {
        m->pos_freqs.push_back(expf(-(float(k * 2) * log_10000 / float(m->n_state))));
    }

    // tensors: metadata first, then one backend buffer, then the data
    const int n_tensors = 12 + 29 * m->n_layer + 1 + 3 * m->n_pred_layers + 6;
    ggml_init_params ip = { (size_t) n_tensors * ggml_tensor_overhead(), nullptr, true };
    m->w.ctx.reset(ggml_init(ip));
    m->w.backend.reset(voxd_graph_backend_init(options.use_gpu, options.gpu_device, m->w.is_cpu));
    if (!m->w.ctx || !m->w.backend) {
        throw fail("cannot initialise ggml");
    }
    voxd_ggml_file_tensors tensors(file, m->w.ctx.get());
    // weights that our graphs multiply may be of any type ggml multiplies; the rest (convolution kernels, biases,
    // norms, the BatchNorm statistics) are f32, as libparakeet creates them
    auto matrix = [&](const std::string & name, std::initializer_list<int64_t> shape) { return tensors.get(name, shape); };
    auto f32    = [&](const std::string & name, std::initializer_list<int64_t> shape) {
        ggml_tensor * t = tensors.get(name, shape);
        if (t->type != GGML_TYPE_F32) {
            throw fail("tensor '" + name + "' must be f32");
        }
        return t;
    };
    const int64_t d = m->n_state, c = m->n_channels, p = m->n_pred, v = m->n_vocab;
    const std::string pre = "encoder.pre_encode.";
    m->conv0_w            = f32(pre + "conv.0.weight", { 3, 3, 1, c });
    m->conv0_b            = f32(pre + "conv.0.bias", { 1, 1, c });
    m->conv2_w            = f32(pre + "conv.2.weight", { 3, 3, 1, c });
    m->conv2_b            = f32(pre + "conv.2.bias", { 1, 1, c });
    m->conv3_w            = f32(pre + "conv.3.weight", { 1, 1, c, c });
    m->conv3_b            = f32(pre + "conv.3.bias", { 1, 1, c });
    m->conv5_w            = f32(pre + "conv.5.weight", { 3, 3, 1, c });
    m->conv5_b            = f32(pre + "conv.5.bias", { 1, 1, c });
    m->conv6_w            = f32(pre + "conv.6.weight", { 1, 1, c, c });
    m->conv6_b            = f32(pre + "conv.6.bias", { 1, 1, c });
    m->pre_out_w          = matrix(pre + "out.weight", { (m->n_mels / VOXD_PARAKEET_SUBSAMPLING) * c, d });
    m->pre_out_b          = f32(pre + "out.bias", { d });
    for (int i = 0; i < m->n_layer; i++) {
        const std::string l = "encoder.layers." + std::to_string(i) + ".";
        voxd_parakeet_layer x{};
        x.norm_ff1_w  = f32(l + "norm_feed_forward1.weight", { d });
        x.norm_ff1_b  = f32(l + "norm_feed_forward1.bias", { d });
        x.ff1_up      = matrix(l + "feed_forward1.linear1.weight", { d, 4 * d });
        x.ff1_down    = matrix(l + "feed_forward1.linear2.weight", { 4 * d, d });
        x.norm_attn_w = f32(l + "norm_self_att.weight", { d });
        x.norm_attn_b = f32(l + "norm_self_att.bias", { d });
        x.q_w         = matrix(l + "self_attn.linear_q.weight", { d, d });
        x.k_w         = matrix(l + "self_attn.linear_k.weight", { d, d });
        x.v_w         = matrix(l + "self_attn.linear_v.weight", { d, d });
        x.out_w       = matrix(l + "self_attn.linear_out.weight", { d, d });
        x.pos_w       = matrix(l + "self_attn.linear_pos.weight", { d, d });
        x.bias_u      = f32(l + "self_attn.pos_bias_u", { d / m->n_head, m->n_head });
        x.bias_v      = f32(l + "self_attn.pos_bias_v", { d / m->n_head, m->n_head });
        x.norm_conv_w = f32(l + "norm_conv.weight", { d });
        x.norm_conv_b = f32(l + "norm_conv.bias", { d });
        x.pw1_w       = matrix(l + "conv.pointwise_conv1.weight", { d, 2 * d });
        x.dw_w        = f32(l + "conv.depthwise_conv.weight", { m->n_kernel, d });
        x.bn_w        = f32(l + "conv.batch_norm.weight", { d });
        x.bn_b        = f32(l + "conv.batch_norm.bias", { d });
        x.bn_mean     = f32(l + "conv.batch_norm.running_mean", { d });
        x.bn_var      = f32(l + "conv.batch_norm.running_var", { d });
        x.pw2_w       = matrix(l + "conv.pointwise_conv2.weight", { d, d });
        x.norm_ff2_w  = f32(l + "norm_feed_forward2.weight", { d });
        x.norm_ff2_b  = f32(l + "norm_feed_forward2.bias", { d });
        x.ff2_up      = matrix(l + "feed_forward2.linear1.weight", { d, 4 * d });
        x.ff2_down    = matrix(l + "feed_forward2.linear2.weight", { 4 * d, d });
        x.norm_out_w  = f32(l + "norm_out.weight", { d });
        x.norm_out_b  = f32(l + "norm_out.bias", { d });
        m->layers.push_back(x);
    }
    const std::string pred = "decoder.prediction.";
    m->embed               = matrix(pred + "embed.weight", { p, v + 1 });
    for (int i = 0; i < m->n_pred_layers; i++) {
        const std::string l = pred + "dec_rnn.lstm.";
        const std::string n = std::to_string(i);
        m->lstm.push_back({ matrix(l + "weight_ih_l" + n, { p, 4 * p }), matrix(l + "weight_hh_l" + n, { p, 4 * p }), f32(l + "bias_h_l" + n, { 4 * p }) });
    }
    m->joint_pred_w = matrix("joint.pred.weight", { p, p });
    m->joint_pred_b = f32("joint.pred.bias", { p });
    m->joint_enc_w  = matrix("joint.enc.weight", { d, p });
    m->joint_enc_b  = f32("joint.enc.bias", { p });
    m->joint_net_w  = matrix("joint.joint_net.2.weight", { p, v + 1 + m->n_durations });
    m->joint_net_b  = f32("joint.joint_net.2.bias", { v + 1 + m->n_durations });

    m->w.buf.reset(tensors.load(m->w.backend.get()));
    m->encoder_alloc.reset(ggml_gallocr_new(ggml_backend_get_default_buffer_type(m->w.backend.get())));
    m->decoder_alloc.reset(ggml_gallocr_new(ggml_backend_get_default_buffer_type(m->w.backend.get())));
    if (!m->encoder_alloc || !m->decoder_alloc) {
        throw fail("cannot initialise ggml's allocator");
    }
    m->threads = options.threads > 0 ? options.threads : voxd_default_threads();
    if (m->w.is_cpu) {
        ggml_backend_cpu_set_n_threads(m->w.backend.get(), m->threads);
    }
    return m;
}

// ---- mel ----

namespace {

// The DFT of n_fft real values, complex results interleaved in `out`: radix-2 decimation in time, each butterfly
// computed with the same operations, in the same order, as libparakeet's recursive FFT computes it, so the spectra
// agree to the bit.
void fft(const voxd_parakeet_batch_model & m, const float * in, std::vector<float> & out) {
    const int n = m.n_fft;
    out.assign((size_t) 2 * n, 0.0f);
    for (int i = 0; i < n; i++) {
        out[(size_t) 2 * m.fft_order[(size_t) i]] = in[i]; // a length-1 transform: the value, imaginary part 0
    }
    for (int size = 2; size <= n; size *= 2) {
        const int half = size / 2, step = n / size;
        for (int base = 0; base < n; base += size) {
            for (int k = 0; k < half; k++) {
                const float w_re = m.cos_table[(size_t) (k * step)];
                const float w_im = -m.sin_table[(size_t) (k * step)];
                float * e        = &out[(size_t) 2 * (base + k)];
                float * o        = &out[(size_t) 2 * (base + k + half)];
                const float e_re = e[0], e_im = e[1], o_re = o[0], o_im = o[1];
                e[0] = e_re + w_re * o_re - w_im * o_im;
                e[1] = e_im + w_re * o_im + w_im * o_re;
                o[0] = e_re - w_re * o_re + w_im * o_im;
                o[1] = e_im - w_re * o_im - w_im * o_re;
            }
        }
    }
}

} // namespace

std::vector<float> voxd_parakeet_mel(const voxd_parakeet_batch_model & m, const std::vector<float> & samples, int & n_frames) {
    const int n_samples = (int) samples.size(), n_fft = m.n_fft, n_bins = n_fft / 2 + 1, n_mels = m.n_mels;
    const int window_size = (int) m.window.size(), pad = n_fft / 2;

    // pre-emphasis (x[i] - 0.97 x[i-1]), centred between n_fft / 2 zeros on each side
    std::vector<float> x((size_t) n_samples + 2 * (size_t) pad, 0.0f);
    for (int i = n_samples - 1; i >= 0; i--) {
        x[(size_t) (pad + i)] = i > 0 ? samples[(size_t) i] - 0.97f * samples[(size_t) i - 1] : samples[0];
    }
    n_frames = (int) ((x.size() - (size_t) n_fft) / VOXD_PARAKEET_HOP + 1);

    std::vector<float> mel((size_t) n_frames * n_mels);
    std::vector<float> frame((size_t) n_fft), spectrum, power((size_t) n_bins);
    const int window_left = (n_fft - window_size) / 2;
    for (int i = 0; i < n_frames; i++) {
        const size_t offset = (size_t) i * VOXD_PARAKEET_HOP;
        std::fill(frame.begin(), frame.end(), 0.0f);
        const int n_in = (int) std::min<size_t>((size_t) window_size, x.size() - offset);
        for (int j = 0; j < n_in; j++) {
            frame[(size_t) (window_left + j)] = m.window[(size_t) j] * x[offset + (size_t) (window_left + j)];
        }
        fft(m, frame.data(), spectrum);
        for (int j = 0; j < n_bins; j++) {
            power[(size_t) j] = spectrum[(size_t) 2 * j] * spectrum[(size_t) 2 * j] + spectrum[(size_t) 2 * j + 1] * spectrum[(size_t) 2 * j + 1];
        }
        for (int b = 0; b < n_mels; b++) {
            const float * f = &m.filters[(size_t) b * n_bins];
            const float * s = power.data();
            double sum      = 0.0;
            int k           = 0;
            for (; k < n_bins - 3; k += 4) { // four products summed in float, then added in double, as libparakeet does
                sum += s[k + 0] * f[k + 0] + s[k + 1] * f[k + 1] + s[k + 2] * f[k + 2] + s[k + 3] * f[k + 3];
            }
            for (; k < n_bins; k++) {
                sum += s[k] * f[k];
            }
            mel[(size_t) i * n_mels + b] = (float) std::log(sum + 5.960464477539063e-08); // + 2^-24
        }
    }

    // each band to zero mean and unit deviation over the frames the samples fill
    const int valid = n_samples / VOXD_PARAKEET_HOP;
    for (int b = 0; b < n_mels; b++) {
        double sum = 0.0, sq = 0.0;
        for (int i = 0; i < valid; i++) {
            sum += (double) mel[(size_t) i * n_mels + b];
        }
        const double mean = sum / valid;
        for (int i = 0; i < valid; i++) {
            const double diff = (double) mel[(size_t) i * n_mels + b] - mean;
            sq += diff * diff;
        }
        const double denominator = std::sqrt(sq / (valid - 1.0)) + 1e-5;
        for (int i = 0; i < n_frames; i++) {
            float & value = mel[(size_t) i * n_mels + b];
            value         = (float) (((double) value - mean) / denominator);
        }
    }
    return mel;
}

// ---- a clip's tensors ----

void voxd_parakeet_clip::allocate(const voxd_parakeet_batch_model & m) {
    const size_t n_tensors = 2 + 2 * (size_t) m.n_pred_layers;
    ggml_init_params ip    = { n_tensors * ggml_tensor_overhead(), nullptr, true };
    ctx.reset(ggml_init(ip));
    if (!ctx) {
        throw voxd_error("transcription_failed", "cannot allocate a clip's state");
    }
    enc_out = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, m.n_state, n_frames);
    for (int l = 0; l < m.n_pred_layers; l++) {
        h.push_back(ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, m.n_pred));
        c.push_back(ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, m.n_pred));
    }
    pred = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_F32, m.n_pred);
    buf.reset(ggml_backend_alloc_ctx_tensors(ctx.get(), m.w.backend.get()));
    if (!buf) {
        throw voxd_error("transcription_failed", "out of memory for a clip's encoder output (" + std::to_string(n_frames) + " frames)");
    }
    ggml_backend_buffer_clear(buf.get(), 0); // the prediction network starts from zero states
}
