#include "stt/whisper-batch-model.h"

#include "common/error.h"
#include "common/ggml-file-tensors.h"

#include "ggml-backend.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <regex>

std::unique_ptr<voxd_whisper_batch_model> voxd_whisper_batch_load(const std::string & path, const voxd_whisper_batch_options & options) {
    voxd_ggml_file_reader file(path);
    auto fail     = [&](const std::string & why) { return file.fail(why); };
    auto read_i32 = [&]() { return file.read_i32(); };
    auto m        = std::make_unique<voxd_whisper_batch_model>();
    (void) read_i32(); // magic, checked
    int32_t * hp[] = { &m->n_vocab,      &m->n_audio_ctx, &m->n_state,      &m->n_audio_head, &m->n_audio_layer, &m->n_text_ctx,
                       &m->n_text_state, &m->n_text_head, &m->n_text_layer, &m->n_mels,       &m->ftype };
    for (int32_t * v : hp) {
        *v = read_i32();
    }

    const int32_t n_mel = read_i32();
    const int32_t n_fft = read_i32();
    m->mel_filters      = file.read_floats((size_t) n_mel * n_fft);

    const int32_t n_words = read_i32();
    m->vocab.resize((size_t) n_words);
    for (int32_t i = 0; i < n_words; i++) {
        std::string & w = m->vocab[(size_t) i];
        w               = file.read_string((size_t) read_i32());
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
    voxd_ggml_file_tensors tensors(file, m->w.ctx.get());
    auto get        = [&](const std::string & name, std::initializer_list<int64_t> shape) { return tensors.get(name, shape); };
    const int64_t s = m->n_state;
    if (m->n_text_state != s) {
        throw fail("the encoder and decoder widths differ");
    }
    // Whisper's windows are 30 s (1500 encoder positions, timestamps in 20 ms steps); a text context below 16 has no
    // room for a prompt
    if (m->n_audio_ctx != 1500 || m->n_text_ctx < 16) {
        throw fail("the audio context must be 1500 and the text context at least 16");
    }
    for (auto & [name, t] : tensors.all()) {
        const ggml_type type = t->type;
        const bool vector    = t->ne[1] == 1 || name.find("positional_embedding") != std::string::npos ||
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
    for (const ggml_tensor * conv : { m->conv1_w, m->conv2_w }) {
        if (conv->type != GGML_TYPE_F16) {
            throw fail(std::string(ggml_get_name(conv)) + " must be f16");
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

// ---- tokenizer (for the prompt) ----

std::vector<int32_t> voxd_whisper_tokenize(const voxd_whisper_batch_model & m, const std::string & text) {
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
