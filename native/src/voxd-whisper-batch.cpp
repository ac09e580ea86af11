#include "voxd-whisper-batch.h"

#include "voxd-async.h"
#include "voxd-cpu-gate.h"
#include "voxd-executor.h"
#include "voxd-ggml-graph.h"

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "whisper.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <regex>
#include <unordered_map>

// ---- constants of the Whisper format ----

static constexpr int VOXD_WHISPER_N_FFT             = 400; // 25 ms at 16 kHz
static constexpr int VOXD_WHISPER_HOP               = 160; // 10 ms: one mel frame = one centisecond
static constexpr int VOXD_WHISPER_N_BINS            = VOXD_WHISPER_N_FFT / 2 + 1;
static constexpr int VOXD_WHISPER_WINDOW_S          = 30;
static constexpr int VOXD_WHISPER_MAX_TS            = 1500; // timestamp tokens cover 0..30 s in steps of 20 ms
static constexpr int VOXD_WHISPER_MAX_INIT_TS       = 50;   // the first timestamp of a window is at most 1 s
static constexpr float VOXD_WHISPER_LOGPROB_THOLD   = -1.0f;
static constexpr float VOXD_WHISPER_ENTROPY_THOLD   = 2.4f; // whisper.cpp's repetition check
static constexpr float VOXD_WHISPER_NO_SPEECH_THOLD = 0.6f;

// ---- model ----

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

// Reads a whisper.cpp file (checked beforehand by voxd_whisper_check_file) into backend memory.
static std::unique_ptr<voxd_whisper_batch_model> voxd_whisper_batch_load(const std::string & path, const voxd_whisper_batch_options & options) {
    auto fail = [&](const std::string & why) { return voxd_error("model_load_failed", path + ": " + why); };
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw fail("cannot open the file");
    }
    auto read_i32 = [&]() {
        int32_t v = 0;
        if (!in.read(reinterpret_cast<char *>(&v), sizeof(v)))
            throw fail("the file is truncated");
        return v;
    };
    auto m = std::make_unique<voxd_whisper_batch_model>();
    (void) read_i32(); // magic, checked
    int32_t * hp[] = { &m->n_vocab,      &m->n_audio_ctx, &m->n_state,      &m->n_audio_head, &m->n_audio_layer, &m->n_text_ctx,
                       &m->n_text_state, &m->n_text_head, &m->n_text_layer, &m->n_mels,       &m->ftype };
    for (int32_t * v : hp) {
        *v = read_i32();
    }

    const int32_t n_mel = read_i32();
    const int32_t n_fft = read_i32();
    m->mel_filters.resize((size_t) n_mel * n_fft);
    in.read(reinterpret_cast<char *>(m->mel_filters.data()), (std::streamsize)(m->mel_filters.size() * sizeof(float)));

    const int32_t n_words = read_i32();
    m->vocab.resize((size_t) n_words);
    for (int32_t i = 0; i < n_words; i++) {
        std::string & w = m->vocab[(size_t) i];
        w.resize((size_t) read_i32());
        in.read(w.data(), (std::streamsize) w.size());
        m->ids.emplace(w, i);
        m->max_token_len = std::max(m->max_token_len, w.size());
    }

    // special tokens, as whisper.cpp numbers them
    m->multilingual = m->n_vocab >= 51865;
    m->n_langs      = m->n_vocab - 51765 - (m->multilingual ? 1 : 0);
    m->eot = 50256, m->sot = 50257, m->translate = 50357, m->transcribe = 50358, m->solm = 50359, m->prev = 50360;
    m->nosp = 50361, m->notimestamps = 50362, m->beg = 50363;
    if (m->multilingual) {
        m->eot++, m->sot++;
        const int dt = m->n_langs - 98;
        for (int32_t * t : { &m->translate, &m->transcribe, &m->solm, &m->prev, &m->nosp, &m->notimestamps, &m->beg }) {
            *t += dt;
        }
    } else {
        m->n_langs = 1;
    }
    if (auto it = m->ids.find(" "); it != m->ids.end() && it->second < m->eot) {
        m->space = it->second;
    }
    if (m->beg + VOXD_WHISPER_MAX_TS >= m->n_vocab) {
        throw fail("the vocabulary has no room for Whisper's timestamp tokens");
    }

    // tensors: metadata first, then one backend buffer, then the data
    const int n_tensors = 11 + 15 * m->n_audio_layer + 24 * m->n_text_layer;
    ggml_init_params ip = { (size_t) n_tensors * ggml_tensor_overhead(), nullptr, true };
    m->w.ctx.reset(ggml_init(ip));
    m->w.backend.reset(voxd_graph_backend_init(options.use_gpu, options.gpu_device, m->w.is_cpu));
    if (!m->w.ctx || !m->w.backend) {
        throw fail("cannot initialise ggml");
    }
    struct pending {
        ggml_tensor * t;
        std::streamoff offset;
    };
    std::map<std::string, pending> tensors;
    while (true) {
        int32_t n_dims = 0;
        if (!in.read(reinterpret_cast<char *>(&n_dims), sizeof(n_dims)))
            break;
        const int32_t name_len = read_i32();
        const ggml_type type   = (ggml_type) read_i32();
        int64_t ne[4]          = { 1, 1, 1, 1 };
        for (int i = 0; i < n_dims; i++) {
            ne[i] = read_i32();
        }
        std::string name((size_t) name_len, '\0');
        in.read(name.data(), name_len);
        ggml_tensor * t = ggml_new_tensor(m->w.ctx.get(), type, 4, ne);
        ggml_set_name(t, name.c_str());
        tensors[name] = { t, (std::streamoff) in.tellg() };
        in.seekg((std::streamoff) ggml_nbytes(t), std::ios::cur);
    }

    // each tensor by name, with the shape the graphs rely on (a mismatch would trip a ggml assertion later)
    auto get = [&](const std::string & name, std::initializer_list<int64_t> shape) {
        auto it = tensors.find(name);
        if (it == tensors.end()) {
            throw fail("tensor '" + name + "' is missing");
        }
        ggml_tensor * t = it->second.t;
        int i           = 0;
        for (int64_t d : shape) {
            if (t->ne[i++] != d) {
                throw fail("tensor '" + name + "' has an unexpected shape");
            }
        }
        for (; i < 4; i++) {
            if (t->ne[i] != 1)
                throw fail("tensor '" + name + "' has an unexpected shape");
        }
        return t;
    };
    const int64_t s = m->n_state;
    if (m->n_text_state != s) {
        throw fail("the encoder and decoder widths differ");
    }
    // Whisper's windows are 30 s (1500 encoder positions, timestamps in 20 ms steps); a text context below 16 has no
    // room for a prompt
    if (m->n_audio_ctx != 1500 || m->n_text_ctx < 16) {
        throw fail("the audio context must be 1500 and the text context at least 16");
    }
    for (auto & [name, p] : tensors) {
        const ggml_type type = p.t->type;
        const bool vector    = p.t->ne[1] == 1 || name.find("positional_embedding") != std::string::npos ||
                            name.find("conv") != std::string::npos && name.find("bias") != std::string::npos;
        if (vector ? type != GGML_TYPE_F32 : !(type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16 || ggml_is_quantized(type))) {
            throw fail("tensor '" + name + "' has an unusable type (" + ggml_type_name(type) + ")");
        }
    }
    m->conv1_w  = get("encoder.conv1.weight", { 3, m->n_mels, s });
    m->conv1_b  = get("encoder.conv1.bias", { 1, s });
    m->conv2_w  = get("encoder.conv2.weight", { 3, s, s });
    m->conv2_b  = get("encoder.conv2.bias", { 1, s });
    m->enc_pos  = get("encoder.positional_embedding", { s, m->n_audio_ctx });
    m->enc_ln_w = get("encoder.ln_post.weight", { s });
    m->enc_ln_b = get("encoder.ln_post.bias", { s });
    m->dec_pos  = get("decoder.positional_embedding", { s, m->n_text_ctx });
    m->tok_emb  = get("decoder.token_embedding.weight", { s, m->n_vocab });
    m->dec_ln_w = get("decoder.ln.weight", { s });
    m->dec_ln_b = get("decoder.ln.bias", { s });
    for (const char * conv : { "encoder.conv1.weight", "encoder.conv2.weight" }) {
        if (tensors[conv].t->type != GGML_TYPE_F16) {
            throw fail(std::string(conv) + " must be f16");
        }
    }
    auto attn = [&](voxd_whisper_layer & l, const std::string & p, bool cross) {
        const std::string a = p + (cross ? "cross_attn." : "attn.");
        ggml_tensor ** w[]  = { cross ? &l.cq_w : &l.q_w, cross ? &l.cq_b : &l.q_b, cross ? &l.ck_w : &l.k_w, cross ? &l.cv_w : &l.v_w,
                               cross ? &l.cv_b : &l.v_b, cross ? &l.co_w : &l.o_w, cross ? &l.co_b : &l.o_b };
        *w[0] = get(a + "query.weight", { s, s });
        *w[1] = get(a + "query.bias", { s });
        *w[2] = get(a + "key.weight", { s, s });
        *w[3] = get(a + "value.weight", { s, s });
        *w[4] = get(a + "value.bias", { s });
        *w[5] = get(a + "out.weight", { s, s });
        *w[6] = get(a + "out.bias", { s });
    };
    auto layer = [&](const std::string & p, bool decoder) {
        voxd_whisper_layer l{};
        l.attn_ln_w = get(p + "attn_ln.weight", { s });
        l.attn_ln_b = get(p + "attn_ln.bias", { s });
        attn(l, p, false);
        if (decoder) {
            l.cross_ln_w = get(p + "cross_attn_ln.weight", { s });
            l.cross_ln_b = get(p + "cross_attn_ln.bias", { s });
            attn(l, p, true);
        }
        l.mlp_ln_w = get(p + "mlp_ln.weight", { s });
        l.mlp_ln_b = get(p + "mlp_ln.bias", { s });
        l.mlp0_w   = get(p + "mlp.0.weight", { s, 4 * s });
        l.mlp0_b   = get(p + "mlp.0.bias", { 4 * s });
        l.mlp1_w   = get(p + "mlp.2.weight", { 4 * s, s });
        l.mlp1_b   = get(p + "mlp.2.bias", { s });
        return l;
    };
    for (int i = 0; i < m->n_audio_layer; i++) {
        m->enc.push_back(layer("encoder.blocks." + std::to_string(i) + ".", false));
    }
    for (int i = 0; i < m->n_text_layer; i++) {
        m->dec.push_back(layer("decoder.blocks." + std::to_string(i) + ".", true));
    }
    if (m->n_state % m->n_audio_head != 0 || m->n_state % m->n_text_head != 0) {
        throw fail("the heads do not divide the width");
    }

    m->w.buf.reset(ggml_backend_alloc_ctx_tensors(m->w.ctx.get(), m->w.backend.get()));
    if (!m->w.buf) {
        throw fail("cannot allocate memory for the weights");
    }
    std::vector<char> data;
    for (auto & [name, p] : tensors) {
        data.resize(ggml_nbytes(p.t));
        in.clear();
        in.seekg(p.offset);
        if (!in.read(data.data(), (std::streamsize) data.size())) {
            throw fail("the file is truncated");
        }
        ggml_backend_tensor_set(p.t, data.data(), 0, data.size());
    }

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

// ---- log-mel spectrogram ----

// A complex FFT of a real frame of `n` samples (n = 400 = 2^4 * 25): radix-2 splits down to an odd length, which
// takes a plain DFT. `out` gets n interleaved (re, im) pairs; `work` holds 6n floats for the levels below.
static void voxd_whisper_fft(const float * in, int n, float * out, float * work, const float * cos_t, const float * sin_t) {
    const int step = VOXD_WHISPER_N_FFT / n; // twiddle stride in the tables of size N_FFT
    if (n % 2 == 1) {
        for (int k = 0; k < n; k++) {
            float re = 0.0f, im = 0.0f;
            for (int j = 0; j < n; j++) {
                const int idx = (j * k % n) * step;
                re += in[j] * cos_t[idx];
                im -= in[j] * sin_t[idx];
            }
            out[2 * k]     = re;
            out[2 * k + 1] = im;
        }
        return;
    }
    const int h   = n / 2;
    float * even  = work;
    float * odd   = work + h;
    float * e_out = work + n;
    float * o_out = work + 2 * n;
    for (int i = 0; i < h; i++) {
        even[i] = in[2 * i];
        odd[i]  = in[2 * i + 1];
    }
    voxd_whisper_fft(even, h, e_out, work + 3 * n, cos_t, sin_t);
    voxd_whisper_fft(odd, h, o_out, work + 3 * n, cos_t, sin_t);
    for (int k = 0; k < h; k++) {
        const float c = cos_t[k * step], s = sin_t[k * step];
        const float re       = c * o_out[2 * k] + s * o_out[2 * k + 1];
        const float im       = c * o_out[2 * k + 1] - s * o_out[2 * k];
        out[2 * k]           = e_out[2 * k] + re;
        out[2 * k + 1]       = e_out[2 * k + 1] + im;
        out[2 * (k + h)]     = e_out[2 * k] - re;
        out[2 * (k + h) + 1] = e_out[2 * k + 1] - im;
    }
}

// Whisper's log-mel features (the reference implementation's: centred frames with reflected edges, power spectrum,
// the file's filter bank, log10 clamped 8 below the maximum, scaled): n_mels rows of `n_frames` frames, computed
// over the samples followed by 30 s of silence, so every window start within the audio has a full window.
static std::vector<float> voxd_whisper_mel(const voxd_whisper_batch_model & m, const std::vector<float> & samples, int & n_frames) {
    const int pad = VOXD_WHISPER_N_FFT / 2;
    std::vector<float> x(samples);
    x.resize(samples.size() + (size_t) VOXD_WHISPER_WINDOW_S * WHISPER_SAMPLE_RATE, 0.0f);
    const int64_t len = (int64_t) x.size();
    std::vector<float> padded((size_t) (len + 2 * pad));
    for (int64_t i = 0; i < len + 2 * pad; i++) {
        int64_t j = i - pad;
        if (j < 0)
            j = -j;
        if (j >= len)
            j = 2 * (len - 1) - j;
        padded[(size_t) i] = x[(size_t) std::clamp<int64_t>(j, 0, len - 1)];
    }
    n_frames = (int) (len / VOXD_WHISPER_HOP);

    float cos_t[VOXD_WHISPER_N_FFT], sin_t[VOXD_WHISPER_N_FFT], hann[VOXD_WHISPER_N_FFT];
    for (int i = 0; i < VOXD_WHISPER_N_FFT; i++) {
        const double a = 2.0 * M_PI * i / VOXD_WHISPER_N_FFT;
        cos_t[i]       = (float) std::cos(a);
        sin_t[i]       = (float) std::sin(a);
        hann[i]        = (float) (0.5 * (1.0 - std::cos(a))); // periodic Hann
    }
    std::vector<float> mel((size_t) m.n_mels * n_frames);
    std::vector<float> frame(VOXD_WHISPER_N_FFT), spec(2 * VOXD_WHISPER_N_FFT), power(VOXD_WHISPER_N_BINS), work(6 * VOXD_WHISPER_N_FFT);
    float max_log = -1e30f;
    for (int f = 0; f < n_frames; f++) {
        const float * src = padded.data() + (size_t) f * VOXD_WHISPER_HOP;
        for (int i = 0; i < VOXD_WHISPER_N_FFT; i++) {
            frame[(size_t) i] = src[i] * hann[i];
        }
        voxd_whisper_fft(frame.data(), VOXD_WHISPER_N_FFT, spec.data(), work.data(), cos_t, sin_t);
        for (int k = 0; k < VOXD_WHISPER_N_BINS; k++) {
            power[(size_t) k] = spec[2 * k] * spec[2 * k] + spec[2 * k + 1] * spec[2 * k + 1];
        }
        for (int b = 0; b < m.n_mels; b++) {
            const float * filt = m.mel_filters.data() + (size_t) b * VOXD_WHISPER_N_BINS;
            double sum         = 0.0;
            for (int k = 0; k < VOXD_WHISPER_N_BINS; k++) {
                sum += (double) filt[k] * power[(size_t) k];
            }
            const float v                  = (float) std::log10(std::max(sum, 1e-10));
            mel[(size_t) b * n_frames + f] = v;
            max_log                        = std::max(max_log, v);
        }
    }
    for (float & v : mel) {
        v = (std::max(v, max_log - 8.0f) + 4.0f) / 4.0f;
    }
    return mel;
}

// ---- tokenizer (for the prompt) ----

// GPT-2's pre-tokenizer split, then the longest vocabulary entry at each position, as whisper.cpp tokenizes.
static std::vector<int32_t> voxd_whisper_tokenize(const voxd_whisper_batch_model & m, const std::string & text) {
    static const std::regex re(R"('s|'t|'re|'ve|'m|'ll|'d| ?[[:alpha:]]+| ?[[:digit:]]+| ?[^\s[:alpha:][:digit:]]+|\s+(?!\S)|\s+)");
    std::vector<int32_t> tokens;
    for (std::sregex_iterator it(text.begin(), text.end(), re), end; it != end; ++it) {
        const std::string word = it->str();
        for (size_t i = 0; i < word.size();) {
            size_t j = std::min(word.size(), i + m.max_token_len);
            for (; j > i; j--) {
                auto found = m.ids.find(word.substr(i, j - i));
                if (found != m.ids.end() && found->second < m.eot) {
                    tokens.push_back(found->second);
                    break;
                }
            }
            i = j > i ? j : i + 1; // a byte with no token is skipped, as whisper.cpp does
        }
    }
    return tokens;
}

// ---- sequences ----

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

// ---- graphs ----

namespace {

struct graph_ctx {
    ggml_context * ctx = nullptr;
    ggml_cgraph * gf   = nullptr;

    explicit graph_ctx(size_t n_nodes) {
        ggml_init_params ip = { ggml_tensor_overhead() * n_nodes + ggml_graph_overhead_custom(n_nodes, false), nullptr, true };
        ctx                 = ggml_init(ip);
        if (!ctx) {
            throw voxd_error("transcription_failed", "cannot allocate a graph");
        }
        gf = ggml_new_graph_custom(ctx, n_nodes, false);
    }
    ~graph_ctx() { ggml_free(ctx); }
    graph_ctx(const graph_ctx &)             = delete;
    graph_ctx & operator=(const graph_ctx &) = delete;
};

ggml_tensor * layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b) {
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, 1e-5f), w), b);
}

ggml_tensor * linear(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b) {
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    return b ? ggml_add(ctx, y, b) : y;
}

// Columns [c0, c0 + n) of a 2-D tensor.
ggml_tensor * columns(ggml_context * ctx, ggml_tensor * x, int64_t c0, int64_t n) {
    return ggml_view_2d(ctx, x, x->ne[0], n, x->nb[1], (size_t) c0 * x->nb[1]);
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
    ggml_tensor * h = layer_norm(ctx, x, l.mlp_ln_w, l.mlp_ln_b);
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

ggml_tensor * concat_columns(ggml_context * ctx, const std::vector<ggml_tensor *> & parts) {
    ggml_tensor * out = parts[0];
    for (size_t i = 1; i < parts.size(); i++) {
        out = ggml_concat(ctx, out, parts[i], 1);
    }
    return out;
}

// Runs a graph on the model's backend; returns how long it took, in microseconds.
uint64_t compute(const voxd_whisper_batch_model & m, ggml_cgraph * gf, const char * what) {
    uint64_t us = 0;
    {
        voxd_stage_timer timer(us); // adds the time when it goes out of scope, before the return reads it
        if (ggml_backend_graph_compute(m.w.backend.get(), gf) != GGML_STATUS_SUCCESS) {
            throw voxd_error("transcription_failed", std::string("the ") + what + " failed");
        }
    }
    return us;
}

} // namespace

// Runs the encoder on one window of each sequence (stacked along the rows of every weight product) and writes each
// one's cross-attention keys and values.
void voxd_whisper_batcher::encode(const std::vector<voxd_whisper_sequence *> & seqs) {
    voxd_whisper_batch_model & m = *m_model;
    const int64_t B = (int64_t) seqs.size(), n_ctx = m.n_audio_ctx, n_frames = 2 * n_ctx, s = m.n_state;
    graph_ctx g(4096 + (size_t) (m.n_audio_layer + m.n_text_layer) * 64 * (size_t) B);
    ggml_context * ctx = g.ctx;

    ggml_tensor * mel = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n_frames, m.n_mels, B);
    ggml_set_input(mel);
    ggml_tensor * cur = conv_gelu(ctx, m.conv1_w, m.conv1_b, mel, 1);                                                // n_frames x B x s
    cur               = conv_gelu(ctx, m.conv2_w, m.conv2_b, ggml_cont(ctx, ggml_permute(ctx, cur, 0, 2, 1, 3)), 2); // n_ctx x B x s
    cur               = ggml_cont(ctx, ggml_permute(ctx, cur, 1, 2, 0, 3));                                          // s x n_ctx x B
    cur               = ggml_add(ctx, cur, m.enc_pos);
    ggml_tensor * x   = ggml_reshape_2d(ctx, cur, s, n_ctx * B);

    for (const voxd_whisper_layer & l : m.enc) {
        ggml_tensor * h = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b);
        ggml_tensor * q = linear(ctx, h, l.q_w, l.q_b);
        ggml_tensor * k = ggml_cast(ctx, linear(ctx, h, l.k_w, nullptr), GGML_TYPE_F16);
        ggml_tensor * v = ggml_cast(ctx, linear(ctx, h, l.v_w, l.v_b), GGML_TYPE_F16);
        std::vector<ggml_tensor *> parts;
        for (int64_t b = 0; b < B; b++) {
            parts.push_back(attend(ctx, columns(ctx, q, b * n_ctx, n_ctx), columns(ctx, k, b * n_ctx, n_ctx), columns(ctx, v, b * n_ctx, n_ctx), n_ctx,
                                   m.n_audio_head, nullptr));
        }
        x = ggml_add(ctx, x, linear(ctx, concat_columns(ctx, parts), l.o_w, l.o_b));
        x = mlp(ctx, x, l);
    }
    x = layer_norm(ctx, x, m.enc_ln_w, m.enc_ln_b);

    for (int l = 0; l < m.n_text_layer; l++) {
        ggml_tensor * ck = linear(ctx, x, m.dec[(size_t) l].ck_w, nullptr);
        ggml_tensor * cv = linear(ctx, x, m.dec[(size_t) l].cv_w, m.dec[(size_t) l].cv_b);
        for (int64_t b = 0; b < B; b++) {
            voxd_whisper_caches & c = *seqs[(size_t) b]->caches;
            ggml_build_forward_expand(g.gf, ggml_cpy(ctx, columns(ctx, ck, b * n_ctx, n_ctx), c.ck[(size_t) l]));
            ggml_build_forward_expand(g.gf, ggml_cpy(ctx, columns(ctx, cv, b * n_ctx, n_ctx), c.cv[(size_t) l]));
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
    const uint64_t us = compute(m, g.gf, "encoder");
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

    graph_ctx g(1024 + (size_t) m.n_text_layer * (64 + 96 * (size_t) S));
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
        ggml_tensor * h              = layer_norm(ctx, x, l.attn_ln_w, l.attn_ln_b);
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
                ggml_build_forward_expand(g.gf, ggml_cpy(ctx, columns(ctx, from, r0, n), columns(ctx, to, seq.n_past, n)));
            }
            parts.push_back(attend(ctx, columns(ctx, q, r0, n), kc, vc, seq.n_past + n, m.n_text_head, masks[i]));
            r0 += n;
        }
        if (R > n_real) {
            parts.push_back(columns(ctx, v, n_real, R - n_real)); // padding rows: any finite value of their shape
        }
        x = ggml_add(ctx, x, linear(ctx, concat_columns(ctx, parts), l.o_w, l.o_b));

        h = layer_norm(ctx, x, l.cross_ln_w, l.cross_ln_b);
        q = linear(ctx, h, l.cq_w, l.cq_b);
        parts.clear();
        r0 = 0;
        for (voxd_whisper_sequence * seq : seqs) {
            const int64_t n         = (int64_t) seq->feed.size();
            voxd_whisper_caches & c = *seq->caches;
            parts.push_back(attend(ctx, columns(ctx, q, r0, n), c.ck[(size_t) il], c.cv[(size_t) il], m.n_audio_ctx, m.n_text_head, nullptr));
            r0 += n;
        }
        if (R > n_real) {
            parts.push_back(columns(ctx, q, n_real, R - n_real));
        }
        x = ggml_add(ctx, x, linear(ctx, concat_columns(ctx, parts), l.co_w, l.co_b));
        x = mlp(ctx, x, l);
    }
    x                    = layer_norm(ctx, x, m.dec_ln_w, m.dec_ln_b);
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
    const uint64_t us = compute(m, g.gf, "decoder");
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

// ---- decoding rules ----

// Starts decoding the current window at the sequence's current temperature: the whole prompt is fed again.
static void voxd_whisper_start_attempt(const voxd_whisper_batch_model & m, voxd_whisper_sequence & seq) {
    seq.feed.clear();
    if (!seq.past.empty() && seq.temperature() < 0.5f) {   // hot attempts decode without the previous text, as whisper.cpp does
        const size_t keep = (size_t) m.n_text_ctx / 2 - 1; // the most recent text, as whisper.cpp keeps it
        seq.feed.push_back(m.prev);
        seq.feed.insert(seq.feed.end(), seq.past.end() - (ptrdiff_t) std::min(keep, seq.past.size()), seq.past.end());
    }
    seq.feed.insert(seq.feed.end(), seq.init.begin(), seq.init.end());
    seq.n_past = 0;
    seq.sampled.clear();
    seq.sum_logprob = 0.0;
    // sampling draws depend on the window and the attempt only, never on the batch
    seq.rng.seed((uint32_t) seq.seek * 31u + (uint32_t) seq.attempt);
    seq.state = voxd_whisper_sequence::phase::decode;
}

// log(sum(exp(v))) over [first, last), -inf when every value is -inf.
static float voxd_whisper_logsumexp(const float * first, const float * last) {
    const float mx = *std::max_element(first, last);
    if (std::isinf(mx)) {
        return mx;
    }
    double sum = 0.0;
    for (const float * v = first; v != last; v++) {
        sum += std::exp((double) (*v - mx));
    }
    return mx + (float) std::log(sum);
}

// Whisper's suppression and timestamp rules (the reference decoder's), on the logits of a window's next token.
static void voxd_whisper_filter(const voxd_whisper_batch_model & m, const voxd_whisper_sequence & seq, float * logits) {
    const float ninf = -INFINITY;
    auto suppress    = [&](int32_t from, int32_t to) {
        for (int32_t i = std::max(0, from); i < std::min(to, m.n_vocab); i++) {
            logits[(size_t) i] = ninf;
        }
    };
    suppress(m.eot + 1, m.beg); // <|startoftranscript|>, languages, tasks, <|nospeech|>, <|notimestamps|>, ...
    suppress(m.beg + VOXD_WHISPER_MAX_TS + 1, m.n_vocab);
    const size_t n = seq.sampled.size();
    if (n == 0) {
        logits[(size_t) m.eot] = ninf; // no empty window, no leading blank
        if (m.space >= 0) {
            logits[(size_t) m.space] = ninf;
        }
        suppress(0, m.beg); // a window starts with a timestamp, at most 1 s in
        suppress(m.beg + VOXD_WHISPER_MAX_INIT_TS + 1, m.n_vocab);
    }
    const bool last_ts = n >= 1 && seq.sampled[n - 1].id >= m.beg;
    const bool pen_ts  = n < 2 || seq.sampled[n - 2].id >= m.beg;
    if (last_ts) {
        if (pen_ts) {
            suppress(m.beg, m.n_vocab); // a pair of timestamps is followed by text
        } else {
            suppress(0, m.eot); // text is closed by a timestamp (or the end)
        }
    }
    for (size_t i = n; i-- > 0;) { // timestamps never go back
        if (seq.sampled[i].id >= m.beg) {
            suppress(m.beg, seq.sampled[i].id + (last_ts && !pen_ts ? 0 : 1));
            break;
        }
    }
    // when the timestamps together are likelier than any text token, a timestamp comes next (the normaliser of the
    // probabilities cancels out of the comparison)
    const float ts_lse   = voxd_whisper_logsumexp(logits + m.beg, logits + m.n_vocab);
    const float max_text = *std::max_element(logits, logits + m.beg);
    if (!std::isinf(ts_lse) && ts_lse > max_text) {
        suppress(0, m.beg);
    }
}

// The entropy of the window's token counts: a low value means a loop of repeated tokens (whisper.cpp's check).
static double voxd_whisper_entropy(const std::vector<voxd_whisper_token> & tokens) {
    const size_t n = std::min<size_t>(tokens.size(), 32); // the last 32, as whisper.cpp counts them
    std::map<int32_t, int> counts;
    for (size_t i = tokens.size() - n; i < tokens.size(); i++) {
        counts[tokens[i].id]++;
    }
    double entropy = 0.0;
    for (const auto & [id, c] : counts) {
        const double p = (double) c / (double) n;
        entropy -= p * std::log(p);
    }
    return entropy;
}

void voxd_whisper_batcher::apply_logits(voxd_whisper_sequence & seq, float * logits) {
    const voxd_whisper_batch_model & m = *m_model;
    float * end                        = logits + m.n_vocab;

    if (seq.state == voxd_whisper_sequence::phase::detect) {
        int best = 0;
        for (int i = 1; i < std::min(m.n_langs, whisper_lang_max_id() + 1); i++) {
            if (logits[m.lang_token(i)] > logits[m.lang_token(best)]) {
                best = i;
            }
        }
        seq.language = whisper_lang_str(best);
        seq.init     = { m.sot, m.lang_token(best), seq.task->params().translate ? m.translate : m.transcribe };
        voxd_whisper_start_attempt(m, seq);
        return;
    }

    if (seq.sampled.empty()) {
        seq.no_speech_prob = std::exp((double) (logits[m.nosp] - voxd_whisper_logsumexp(logits, end)));
    }
    voxd_whisper_filter(m, seq, logits);

    int32_t id       = 0;
    const float temp = seq.temperature();
    if (temp <= 0.0f) {
        id = (int32_t) (std::max_element(logits, end) - logits); // the first of equal maxima
    } else {
        const float mx = *std::max_element(logits, end);
        auto weight    = [&](float v) { return std::isinf(v) ? 0.0 : std::exp((double) (v - mx) / temp); };
        double sum     = 0.0;
        for (const float * v = logits; v != end; v++) {
            sum += weight(*v);
        }
        const double u = (double) (seq.rng() >> 8) / (double) (1u << 24) * sum;
        double acc     = 0.0;
        id             = m.n_vocab - 1;
        for (int32_t i = 0; i < m.n_vocab; i++) {
            const double w = weight(logits[i]);
            acc += w;
            if (w > 0.0 && acc > u) {
                id = i;
                break;
            }
        }
    }
    const float plog = logits[id] - voxd_whisper_logsumexp(logits, end);
    seq.sum_logprob += plog;

    const int max_len = m.n_text_ctx / 2 - 4;
    if (id != m.eot) {
        voxd_whisper_token t;
        t.id   = id;
        t.plog = plog;
        t.p    = std::exp(plog);
        if (id < m.eot && (size_t) id < m.vocab.size()) {
            t.text = m.vocab[(size_t) id];
        }
        seq.sampled.push_back(std::move(t));
    }
    if (id == m.eot || (int) seq.sampled.size() >= max_len || seq.n_past + 1 >= m.n_text_ctx) {
        end_attempt(seq, id == m.eot);
    } else {
        seq.feed = { id };
    }
}

// A window's decoding is over: falls back to the next temperature when it failed the checks, else hands its
// segments to the job and moves to the next window.
void voxd_whisper_batcher::end_attempt(voxd_whisper_sequence & seq, bool ended) {
    const voxd_whisper_batch_model & m = *m_model;
    const size_t n_tokens              = seq.sampled.size() + (ended ? 1 : 0);
    const double avg_logprob           = n_tokens ? seq.sum_logprob / (double) n_tokens : 0.0;
    const bool silent                  = seq.no_speech_prob > VOXD_WHISPER_NO_SPEECH_THOLD && avg_logprob < VOXD_WHISPER_LOGPROB_THOLD;
    const bool failed =
        !silent && (avg_logprob < VOXD_WHISPER_LOGPROB_THOLD || (seq.sampled.size() > 32 && voxd_whisper_entropy(seq.sampled) < VOXD_WHISPER_ENTROPY_THOLD));
    if (failed && (size_t) seq.attempt + 1 < seq.temperatures.size()) {
        seq.attempt++;
        voxd_whisper_start_attempt(m, seq);
        return;
    }

    const int window  = std::min(2 * m.n_audio_ctx, seq.n_content - seq.seek);
    int advance       = window;
    const auto ts_of  = [&](const voxd_whisper_token & t) { return (int64_t) (t.id - m.beg) * 2; }; // centiseconds
    const auto & toks = seq.sampled;
    const size_t n    = toks.size();
    if (!silent) {
        // the reference decoder's segmentation: text between timestamps; a pair of timestamps closes one segment and
        // opens the next; text the window cut off (no closing timestamp) is decoded again in the next window
        std::vector<size_t> cuts; // indices i where toks[i-1] and toks[i] are both timestamps
        for (size_t i = 1; i < n; i++) {
            if (toks[i - 1].id >= m.beg && toks[i].id >= m.beg) {
                cuts.push_back(i);
            }
        }
        const bool single_ending = n >= 2 && toks[n - 1].id >= m.beg && toks[n - 2].id < m.beg;
        if (single_ending) {
            cuts.push_back(n);
        }
        auto emit = [&](size_t from, size_t to, int64_t t0, int64_t t1) {
            voxd_whisper_raw_segment seg;
            seg.t0             = seq.seek + t0;
            seg.t1             = seq.seek + t1;
            seg.no_speech_prob = seq.no_speech_prob;
            seg.temperature    = seq.temperature();
            seg.tokens.assign(toks.begin() + (ptrdiff_t) from, toks.begin() + (ptrdiff_t) to);
            bool has_text = false;
            for (const voxd_whisper_token & t : seg.tokens) {
                has_text = has_text || t.id < m.eot;
            }
            if (has_text) {
                seq.task->on_segment(seg, seq.language);
            }
        };
        if (!cuts.empty()) {
            size_t last = 0;
            for (size_t cut : cuts) {
                const int64_t t0 = toks[last].id >= m.beg ? ts_of(toks[last]) : 0;
                const int64_t t1 = ts_of(toks[cut - 1]);
                emit(last, cut, t0, t1);
                last = cut;
            }
            if (!single_ending) {
                advance = (int) ts_of(toks[cuts.back() - 1]);
            }
        } else {
            int64_t t1 = window;
            for (size_t i = n; i-- > 0;) {
                if (toks[i].id >= m.beg && toks[i].id > m.beg) {
                    t1 = ts_of(toks[i]);
                    break;
                }
            }
            emit(0, n, n && toks[0].id >= m.beg ? ts_of(toks[0]) : 0, t1);
        }
        if (!seq.task->params().no_context && seq.temperature() < 0.5f) {
            for (const voxd_whisper_token & t : toks) {
                seq.past.push_back(t.id);
            }
        }
    }
    seq.seek += std::max(1, std::min(advance, window));
    seq.attempt = 0;
    seq.state   = voxd_whisper_sequence::phase::encode;
}

// ---- the batcher ----

voxd_whisper_batcher::voxd_whisper_batcher(const std::string & path, const voxd_whisper_batch_options & options)
    : m_model(voxd_whisper_batch_load(path, options)), m_options(options), m_executor(std::make_shared<voxd_executor>()) {
    m_options.max_batch = std::max(1, m_options.max_batch);
    // On a CPU the encoder is bound by arithmetic, so windows encoded together take as long as one after another, and
    // every window stacked into a pass holds the other jobs' decoding that much longer; a GPU gains from the batch.
    if (m_options.max_encode <= 0) {
        m_options.max_encode = m_model->w.is_cpu ? 1 : 8;
    }
}

voxd_whisper_batcher::~voxd_whisper_batcher() {
    m_executor->stop(); // the loop sees it at its next step and ends every job with "closed"
    for (auto & seq : m_queue) {
        seq->task->on_error("closed", "the whisper model was released");
    }
}

bool voxd_whisper_batcher::on_executor_thread() const {
    return m_executor->on_thread();
}

bool voxd_whisper_batcher::multilingual() const {
    return m_model->multilingual;
}

int32_t voxd_whisper_batcher::timestamp_begin() const {
    return m_model->beg;
}

int voxd_whisper_batcher::n_languages() const {
    return m_model->n_langs;
}

std::vector<int32_t> voxd_whisper_batcher::hparams() const {
    const voxd_whisper_batch_model & m = *m_model;
    return { m.n_vocab,      m.n_audio_ctx, m.n_state,      m.n_audio_head, m.n_audio_layer, m.n_text_ctx,
             m.n_text_state, m.n_text_head, m.n_text_layer, m.n_mels,       m.ftype };
}

bool voxd_whisper_batcher::on_gpu() const {
    return !m_model->w.is_cpu;
}

voxd_whisper_batch_timings voxd_whisper_batcher::timings() const {
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    return m_timings;
}

void voxd_whisper_batcher::submit(std::shared_ptr<voxd_whisper_task> task) {
    const voxd_whisper_batch_model & m = *m_model;
    const voxd_whisper_params & p      = task->params();
    auto seq                           = std::make_unique<voxd_whisper_sequence>();
    seq->task                          = task;
    // the language given (English for English-only models); empty = detect on the first window
    seq->language = !p.language.empty() ? p.language : m.multilingual ? "" : "en";
    if (task->samples().empty()) {
        task->on_done(seq->language.empty() ? "en" : seq->language);
        return;
    }
    if (!seq->language.empty()) {
        const int id = m.multilingual ? whisper_lang_id(seq->language.c_str()) : 0;
        seq->init    = m.multilingual ? std::vector<int32_t>{ m.sot, m.lang_token(std::max(0, id)), p.translate ? m.translate : m.transcribe }
                                      : std::vector<int32_t>{ m.sot };
    }
    if (p.temperature_inc > 0.0f) { // whisper.cpp's fallback schedule, with the same float arithmetic
        for (float t = p.temperature; t < 1.0f + 1e-6f && seq->temperatures.size() < 32; t += p.temperature_inc) {
            seq->temperatures.push_back(t);
        }
    }
    if (seq->temperatures.empty()) {
        seq->temperatures.push_back(p.temperature);
    }
    if (!p.initial_prompt.empty()) {
        // only the prompt's last n_text_ctx / 2 tokens condition a window: its tail is enough, and libstdc++'s regex
        // recurses per character, so a long run of one class would overflow the stack
        std::string tail = p.initial_prompt.substr(p.initial_prompt.size() - std::min<size_t>(p.initial_prompt.size(), 4096));
        if (tail.size() < p.initial_prompt.size()) {
            const size_t space = tail.find(' ');
            tail               = space == std::string::npos ? std::string() : tail.substr(space);
        }
        seq->past = voxd_whisper_tokenize(m, tail);
    }
    seq->n_content = (int) (task->samples().size() / VOXD_WHISPER_HOP);
    seq->mel       = voxd_whisper_mel(m, task->samples(), seq->n_mel_frames); // here, on the caller's thread

    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_running) {
        m_running = m_executor->post([this] { run_until_idle(); });
        if (!m_running) {
            throw voxd_error("closed", "the engine was stopped: its JavaScript environment is shutting down");
        }
    }
    m_queue.push_back(std::move(seq));
}

void voxd_whisper_batcher::run_until_idle() {
    for (;;) {
        if (m_executor->stopping()) {
            std::deque<std::unique_ptr<voxd_whisper_sequence>> queued;
            {
                std::lock_guard<std::mutex> lock(m_mutex);
                queued.swap(m_queue);
                m_running = false;
            }
            for (auto * list : { &m_active }) {
                for (auto & seq : *list) {
                    seq->task->on_error("closed", "the engine was stopped");
                }
                list->clear();
            }
            for (auto & seq : queued) {
                seq->task->on_error("closed", "the engine was stopped");
            }
            return;
        }
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_queue.empty() && m_active.empty()) {
                m_running = false;
                return;
            }
        }
        try {
            // the cores for the whole step, the work between its graphs (spectrograms, sampling) included: a thread of
            // this step running beside another model's team would slow that team down as much as a team of its own
            const voxd_cpu_gate::lease cores(m_model->w.is_cpu ? m_model->threads : 1);
            step();
        } catch (const voxd_error & e) {
            for (auto & seq : m_active) {
                seq->task->on_error(e.code, e.what());
            }
            m_active.clear();
        } catch (const std::exception & e) {
            for (auto & seq : m_active) {
                seq->task->on_error("transcription_failed", e.what());
            }
            m_active.clear();
        }
    }
}

void voxd_whisper_batcher::admit() {
    std::lock_guard<std::mutex> lock(m_mutex);
    while (!m_queue.empty() && (int) m_active.size() < m_options.max_batch) {
        m_active.push_back(std::move(m_queue.front()));
        m_queue.pop_front();
    }
}

// One step: new jobs join, ended ones leave, sequences at a new window are encoded together, then every sequence
// with tokens to decode is decoded together.
void voxd_whisper_batcher::step() {
    admit();
    std::vector<voxd_whisper_sequence *> to_encode, to_decode;
    for (size_t i = 0; i < m_active.size();) {
        voxd_whisper_sequence & seq = *m_active[i];
        const bool done             = seq.state == voxd_whisper_sequence::phase::encode && seq.seek >= seq.n_content;
        if (seq.task->aborted()) {
            seq.task->on_error("aborted", "the operation was aborted");
        } else if (seq.task->halted() || done) {
            seq.task->on_done(seq.language.empty() ? "en" : seq.language);
        } else {
            if (seq.state == voxd_whisper_sequence::phase::encode && (int) to_encode.size() < m_options.max_encode) {
                to_encode.push_back(&seq);
            }
            i++;
            continue;
        }
        m_active.erase(m_active.begin() + (ptrdiff_t) i);
    }
    for (size_t i = 0; i < to_encode.size();) { // a job whose caches do not fit fails alone
        voxd_whisper_sequence * seq = to_encode[i];
        try {
            if (!seq->caches) {
                seq->caches = std::make_unique<voxd_whisper_caches>(*m_model);
            }
            i++;
        } catch (const std::exception & e) {
            seq->task->on_error("transcription_failed", e.what());
            to_encode.erase(to_encode.begin() + (ptrdiff_t) i);
            m_active.erase(std::find_if(m_active.begin(), m_active.end(), [&](const auto & a) { return a.get() == seq; }));
        }
    }
    if (!to_encode.empty()) {
        encode(to_encode);
        for (voxd_whisper_sequence * seq : to_encode) {
            if (seq->language.empty()) {
                seq->state  = voxd_whisper_sequence::phase::detect;
                seq->feed   = { m_model->sot };
                seq->n_past = 0;
            } else {
                voxd_whisper_start_attempt(*m_model, *seq);
            }
        }
    }
    for (auto & seq : m_active) {
        if (!seq->feed.empty()) {
            to_decode.push_back(seq.get());
        }
    }
    if (!to_decode.empty()) {
        decode(to_decode);
    }
}
