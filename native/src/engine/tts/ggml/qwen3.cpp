// Qwen3-TTS generation: the talker backbone reads a chat-wrapped prompt whose rows are sums of a text-stream and a
// codec-stream embedding (the think and language codec tokens, the speaker's x-vector when cloning, then the text
// over codec padding). Each frame its logits give the codebook-0 code (sampled here, within the 2048 codes and the
// end token), the generator's code predictor adds codebooks 1..15 and the next backbone input (their summed
// embeddings, plus the text stream's padding row). Codes go to code2wav 72 frames at a time (its attention window).
#include "tts/ggml/generator.h"
#include "common/error.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <unordered_map>

namespace {

constexpr int k_codebook_size  = 2048; // codebook-0 codes the backbone chooses from
constexpr int k_decoder_window = 72;   // frames per code2wav call: its window, fixed in clip.cpp
constexpr double k_frame_rate  = 12.5; // frames per second of audio
// The backbone stops itself with its end token; this bounds a request that never sees it: 3 s plus 0.2 s per
// character of text (speech runs near 0.07 s per character).
constexpr double k_budget_seconds          = 3.0;
constexpr double k_budget_seconds_per_char = 0.2;

class qwen3_generator : public voxd_tts_generator {
public:
    qwen3_generator(llama_context * lctx, mtmd_context * mctx) : voxd_tts_generator(lctx, mctx, mrope_positions(llama_get_model(lctx))) {
        const struct {
            llama_token * id;
            const char * text;
        } specials[] = {
            { &m_codec_0, "<|codec_0|>" },           { &m_codec_bos, "<|codec_bos|>" }, { &m_codec_eos, "<|codec_eos_token|>" },
            { &m_codec_pad, "<|codec_pad|>" },       { &m_think, "<|codec_think|>" },   { &m_think_bos, "<|codec_think_bos|>" },
            { &m_think_eos, "<|codec_think_eos|>" }, { &m_tts_pad, "<tts_pad>" },       { &m_tts_bos, "<tts_text_bos>" },
            { &m_tts_eos, "<tts_text_eod>" },
        };
        // one pass over the vocabulary (155k entries in the released model) for the specials and the languages
        const std::string language_prefix = "<|codec_language_";
        for (llama_token t = 0; t < llama_vocab_n_tokens(m_vocab); t++) {
            const std::string text = llama_vocab_get_text(m_vocab, t);
            if (text.empty() || text[0] != '<') {
                continue;
            }
            for (const auto & s : specials) {
                if (text == s.text) {
                    *s.id = t;
                }
            }
            if (text.rfind(language_prefix, 0) == 0 && text.size() > language_prefix.size() + 2) {
                m_languages[text.substr(language_prefix.size(), text.size() - language_prefix.size() - 2)] = t;
            }
        }
        for (const auto & s : specials) {
            if (*s.id == LLAMA_TOKEN_NULL) {
                throw voxd_error("model_load_failed", std::string("the backbone's vocabulary has no ") + s.text + " token");
            }
        }
        if (m_codec_0 + k_codebook_size > llama_vocab_n_tokens(m_vocab)) {
            throw voxd_error("model_load_failed", "the backbone's vocabulary ends inside the codebook-0 codes");
        }
        m_defaults = mtmd_gen_inp_default(mctx);
        // the chat wrap the talker was trained on: a role line of 3 tokens, the text, then 5 that open the reply
        m_role_line = voxd_tokenize(m_vocab, "<|im_start|>assistant\n", true);
        m_turn_end  = voxd_tokenize(m_vocab, "<|im_end|>\n<|im_start|>assistant\n", true);
        if (m_role_line.size() != 3 || m_turn_end.size() != 5) {
            throw voxd_error("model_load_failed", "the backbone's vocabulary does not tokenize the talker's chat wrap as Qwen's does");
        }
    }

    void plan(voxd_tts_sequence & seq) const override {
        if (seq.request.text.find_first_not_of(" \t\r\n") == std::string::npos) {
            throw voxd_error("invalid_argument", "the text has nothing to speak");
        }
        language_token(seq.request.language); // throws for a language the model lacks
        // the text is tokenized without special tokens, so it cannot smuggle control tokens into the prompt
        const std::vector<llama_token> body = voxd_tokenize(m_vocab, seq.request.text, false);
        if (body.empty()) {
            throw voxd_error("invalid_argument", "the text has nothing to speak");
        }
        std::vector<llama_token> ids = m_role_line;
        ids.insert(ids.end(), body.begin(), body.end());
        ids.insert(ids.end(), m_turn_end.begin(), m_turn_end.end());
        seq.chunks = { std::move(ids) };
        seq.budget = (int) std::ceil((k_budget_seconds + k_budget_seconds_per_char * (double) seq.request.text.size()) * k_frame_rate);
    }

protected:
    void prepare(voxd_tts_sequence & seq) override {
        const std::vector<llama_token> & ids = seq.chunks[0];
        const llama_token lang               = language_token(seq.request.language);
        std::vector<float> rows;
        auto add_sum = [&](llama_token text, const float * codec) {
            const float * a = token_row(text);
            for (int i = 0; i < m_n_embd; i++) {
                rows.push_back(a[i] + codec[i]);
            }
        };
        for (size_t i = 0; i < m_role_line.size(); i++) {
            append_token_row(rows, ids[i]);
        }
        for (llama_token codec : { m_think, m_think_bos, lang, m_think_eos }) {
            add_sum(m_tts_pad, token_row(codec));
        }
        if (!seq.request.reference.empty()) {
            const std::vector<float> voice = voice_rows(seq.request); // one x-vector row
            add_sum(m_tts_pad, voice.data());
        }
        add_sum(m_tts_bos, token_row(m_codec_pad));
        for (size_t i = m_role_line.size(); i + m_turn_end.size() < ids.size(); i++) {
            add_sum(ids[i], token_row(m_codec_pad));
        }
        add_sum(m_tts_eos, token_row(m_codec_pad));
        add_sum(m_tts_pad, token_row(m_codec_bos));
        decode_prompt(seq, rows);
        // the sequence's KV cells, less one for the companion of a lone row (voxd_tts_generator::step)
        seq.budget = std::min(seq.budget, (int) llama_n_ctx_seq(m_lctx) - seq.pos - 1);
    }

    void next_frame(voxd_tts_sequence & seq, voxd_embd_batch & batch) override {
        if (seq.next_token == m_codec_eos || seq.frames >= seq.budget) {
            flush_decoder(seq);
            seq.finished = true;
            return;
        }
        mtmd_gen_inp inp       = m_defaults;
        inp.type               = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
        inp.code0              = seq.next_token - m_codec_0;
        inp.embd               = seq.h_state.data();
        inp.top_k              = seq.request.temperature == 0.0f ? 1 : m_defaults.top_k; // the predictor samples on its graph
        const mtmd_gen_out out = generate(seq, inp);
        seq.codes.insert(seq.codes.end(), out.codes, out.codes + out.n_codes);
        if (!count_frame(seq, seq.codes.size() >= (size_t) k_decoder_window * out.n_codes)) {
            return;
        }
        // the text stream is spent, so every frame's input adds its padding row
        std::vector<float> row(out.embd, out.embd + m_n_embd);
        const float * pad = token_row(m_tts_pad);
        for (int i = 0; i < m_n_embd; i++) {
            row[(size_t) i] += pad[i];
        }
        batch.add(row.data(), seq.pos++, seq.seq_id, true);
    }

    void read_output(voxd_tts_sequence & seq, int row) override {
        const float * h      = llama_get_embeddings_ith(m_lctx, row); // owned by lctx, valid until its next decode
        const float * logits = llama_get_logits_ith(m_lctx, row);
        if (!h || !logits) {
            throw voxd_error("synthesis_failed", "the backbone gave no hidden state or logits (is it a TTS backbone?)");
        }
        seq.h_state.assign(h, h + m_n_embd);
        seq.next_token = sample(seq, logits);
    }

private:
    // The codec token of a language by the model's name for it ("" = English); invalid_argument when it has none.
    llama_token language_token(const std::string & requested) const {
        const std::string language = requested.empty() ? "english" : requested;
        const auto it              = m_languages.find(language);
        if (it == m_languages.end()) {
            throw voxd_error("invalid_argument", "the model does not speak " + language);
        }
        return it->second;
    }

    static int mrope_positions(const llama_model * model) {
        const llama_rope_type rope = llama_model_rope_type(model);
        return rope == LLAMA_ROPE_TYPE_MROPE || rope == LLAMA_ROPE_TYPE_IMROPE ? 4 : 1;
    }

    // Codebook 0's next code, or the end token: the most likely at temperature 0, else drawn from the top k
    // (nucleus top p) after temperature scaling, with the sequence's own seeded generator.
    llama_token sample(voxd_tts_sequence & seq, const float * logits) {
        std::vector<llama_token> candidates(k_codebook_size + 1);
        std::iota(candidates.begin(), candidates.end() - 1, m_codec_0);
        candidates.back()       = m_codec_eos;
        const auto by_logit     = [logits](llama_token a, llama_token b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
        const float temperature = seq.request.temperature < 0.0f ? m_defaults.temp : seq.request.temperature;
        if (temperature <= 0.0f) {
            return *std::min_element(candidates.begin(), candidates.end(), by_logit);
        }
        const size_t k = m_defaults.top_k > 0 ? std::min(candidates.size(), (size_t) m_defaults.top_k) : candidates.size();
        std::partial_sort(candidates.begin(), candidates.begin() + (std::ptrdiff_t) k, candidates.end(), by_logit);
        candidates.resize(k);
        std::vector<double> p(k);
        double sum = 0.0;
        for (size_t i = 0; i < k; i++) {
            p[i] = std::exp(((double) logits[candidates[i]] - logits[candidates[0]]) / temperature);
            sum += p[i];
        }
        size_t kept = k;
        if (m_defaults.top_p > 0.0f && m_defaults.top_p < 1.0f) {
            double cumulative = 0.0;
            for (kept = 0; kept < k && cumulative < m_defaults.top_p * sum; kept++) {
                cumulative += p[kept];
            }
        }
        std::mt19937 rng(next_seed(seq));
        std::discrete_distribution<size_t> pick(p.begin(), p.begin() + (std::ptrdiff_t) kept);
        return candidates[pick(rng)];
    }

    llama_token m_codec_0 = LLAMA_TOKEN_NULL, m_codec_bos = LLAMA_TOKEN_NULL, m_codec_eos = LLAMA_TOKEN_NULL;
    llama_token m_codec_pad = LLAMA_TOKEN_NULL, m_think = LLAMA_TOKEN_NULL, m_think_bos = LLAMA_TOKEN_NULL;
    llama_token m_think_eos = LLAMA_TOKEN_NULL, m_tts_pad = LLAMA_TOKEN_NULL, m_tts_bos = LLAMA_TOKEN_NULL;
    llama_token m_tts_eos = LLAMA_TOKEN_NULL;
    mtmd_gen_inp m_defaults;                                  // the generator's sampling defaults (top k 50, top p 1, temperature 0.9)
    std::vector<llama_token> m_role_line;                     // the prompt's tokens before the text
    std::vector<llama_token> m_turn_end;                      // and after it
    std::unordered_map<std::string, llama_token> m_languages; // <|codec_language_NAME|> by NAME
};

} // namespace

std::unique_ptr<voxd_tts_generator> voxd_tts_qwen3_generator(llama_context * lctx, mtmd_context * mctx) {
    return std::make_unique<qwen3_generator>(lctx, mctx);
}
