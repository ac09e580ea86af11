// Pocket TTS (kyutai) generation: the text, cut into chunks of at most 50 tokens at sentence ends, is read after
// the voice's rows; each frame the generator turns the backbone's hidden state into a latent (flow matching from
// noise) and the backbone input of the next frame, and its end-of-speech head ends the chunk a few frames later.
// Every chunk restarts from the voice. Latents go to the mimi decoder 8 frames at a time. The flow net and the
// decoder run as voxd's own graphs, one for all sequences of a step (tts/ggml/pocket-graphs.h), or through libmtmd
// one request at a time when the model was loaded to compare the two.
#include "tts/ggml/generator.h"
#include "common/error.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <limits>
#include <unordered_map>

namespace {

constexpr int k_decoder_window   = 8;    // frames per mimi decoder call, as the reference decodes
constexpr int k_max_chunk_tokens = 50;   // MAX_TOKEN_PER_CHUNK in the reference
constexpr double k_frame_rate    = 12.5; // frames per second of audio

// Settings the reference keeps per weight pack (not in the checkpoint): noise scale, frames after end-of-speech
// (0: by chunk length), and whether texts of fewer than five words are padded.
struct pack_settings {
    float temperature;
    int tail_frames;
    bool pad_short_text;
};

pack_settings settings_of(const char * variant) {
    static const std::unordered_map<std::string, pack_settings> packs = {
        { "english", { 0.3f, 0, false } },
        { "english_2026-01", { 0.7f, 0, true } },
        { "english_2026-04", { 0.3f, 0, false } },
        { "french_24l", { 0.7f, 8, false } },
    };
    const auto it = packs.find(variant ? variant : "");
    return it != packs.end() ? it->second : pack_settings{ 0.7f, 0, false }; // 0.7: the model's default noise
}

// The reference's text normalisation: one line, ';' as ',', trimmed, a capital first letter, a full stop after a
// final letter or digit, and optionally eight leading spaces for a text of fewer than five words.
std::string normalise_text(const std::string & in, bool pad_short) {
    std::string s;
    s.reserve(in.size() + 9);
    for (char c : in) {
        s += (c == '\n' || c == '\r') ? ' ' : (c == ';' ? ',' : c);
    }
    const size_t first = s.find_first_not_of(' ');
    if (first == std::string::npos) {
        return "";
    }
    s    = s.substr(first, s.find_last_not_of(' ') - first + 1);
    s[0] = (char) std::toupper((unsigned char) s[0]);
    if (std::isalnum((unsigned char) s.back())) {
        s += '.';
    }
    if (pad_short) {
        int words = 0;
        for (size_t i = 0; i < s.size(); i++) {
            words += s[i] != ' ' && (i == 0 || s[i - 1] == ' ');
        }
        if (words < 5) {
            s.insert(0, 8, ' ');
        }
    }
    return s;
}

llama_token find_token(const llama_vocab * vocab, const char * text) {
    for (llama_token t = 0; t < llama_vocab_n_tokens(vocab); t++) {
        if (std::strcmp(llama_vocab_get_text(vocab, t), text) == 0) {
            return t;
        }
    }
    return LLAMA_TOKEN_NULL;
}

// Token ids of punctuation, without the tokenizer's leading word-start token.
std::vector<llama_token> punctuation_ids(const llama_vocab * vocab, const char * marks) {
    std::vector<llama_token> ids = voxd_tokenize(vocab, marks, false);
    return ids.size() > 1 ? std::vector<llama_token>(ids.begin() + 1, ids.end()) : std::vector<llama_token>();
}

// Cuts `ids` after every run of `ends` tokens, so each piece keeps the punctuation that closes it.
std::vector<std::vector<llama_token>> cut_after(const std::vector<llama_token> & ids, const std::vector<llama_token> & ends) {
    std::vector<std::vector<llama_token>> pieces(1);
    bool after_end = false;
    for (llama_token t : ids) {
        const bool is_end = std::find(ends.begin(), ends.end(), t) != ends.end();
        if (after_end && !is_end) {
            pieces.emplace_back();
        }
        pieces.back().push_back(t);
        after_end = is_end;
    }
    return pieces;
}

// The reference's chunking: sentences (an over-long one cut again at clause marks), packed greedily into chunks of
// at most k_max_chunk_tokens.
std::vector<std::vector<llama_token>> chunk_tokens(const std::vector<llama_token> & ids, const std::vector<llama_token> & sentence_ends,
                                                   const std::vector<llama_token> & clause_ends) {
    if ((int) ids.size() <= k_max_chunk_tokens) {
        return { ids };
    }
    std::vector<std::vector<llama_token>> pieces;
    for (auto & sentence : cut_after(ids, sentence_ends)) {
        auto clauses = (int) sentence.size() > k_max_chunk_tokens ? cut_after(sentence, clause_ends) : std::vector<std::vector<llama_token>>{ sentence };
        for (auto & c : clauses) {
            pieces.push_back(std::move(c));
        }
    }
    std::vector<std::vector<llama_token>> chunks;
    for (auto & piece : pieces) {
        if (!chunks.empty() && (int) (chunks.back().size() + piece.size()) <= k_max_chunk_tokens) {
            chunks.back().insert(chunks.back().end(), piece.begin(), piece.end());
        } else if (!piece.empty()) {
            chunks.push_back(std::move(piece));
        }
    }
    return chunks;
}

class pocket_generator : public voxd_tts_generator {
public:
    pocket_generator(llama_context * lctx, mtmd_context * mctx, const voxd_tts_generator_options & options) : voxd_tts_generator(lctx, mctx, 1) {
        if (!options.libmtmd) {
            m_graphs = std::make_unique<voxd_pocket_graphs>(options.mmproj, m_n_embd, options.threads, true);
        }
        m_audio_bos        = find_token(m_vocab, "<|audio_bos|>");
        m_bos_before_voice = find_token(m_vocab, "<|bos_before_voice|>"); // optional
        if (m_audio_bos == LLAMA_TOKEN_NULL) {
            throw voxd_error("model_load_failed", "the backbone's vocabulary has no <|audio_bos|> token");
        }
        m_sentence_ends = punctuation_ids(m_vocab, ".!...?");
        m_clause_ends   = punctuation_ids(m_vocab, ",;:");
        m_pack          = settings_of(mtmd_gen_audio_get_info(mctx).model_variant);
    }

    size_t own_weight_bytes() const override { return m_graphs ? m_graphs->weight_bytes() : 0; }

    void plan(voxd_tts_sequence & seq) const override {
        const std::string text             = normalise_text(seq.request.text, m_pack.pad_short_text);
        const std::vector<llama_token> ids = text.empty() ? std::vector<llama_token>() : voxd_tokenize(m_vocab, text, false);
        if (ids.empty()) {
            throw voxd_error("invalid_argument", "the text has nothing to speak");
        }
        seq.chunks = chunk_tokens(ids, m_sentence_ends, m_clause_ends);
    }

protected:
    void prepare(voxd_tts_sequence & seq) override {
        std::vector<float> rows;
        if (!seq.request.reference.empty()) {
            if (m_bos_before_voice != LLAMA_TOKEN_NULL) {
                append_token_row(rows, m_bos_before_voice);
            }
            const std::vector<float> voice = voice_rows(seq.request);
            rows.insert(rows.end(), voice.begin(), voice.end());
        }
        seq.n_voice_pos = (int) (rows.size() / (size_t) m_n_embd);
        seq.chunk_idx   = 0;
        start_chunk(seq, std::move(rows));
    }

    void begin_frames(const std::vector<voxd_tts_sequence *> & seqs) override {
        m_windows.clear(); // left by a step that threw: its sequences may be gone
        m_frame_of.clear();
        if (!m_graphs || seqs.empty()) {
            return;
        }
        m_frames.assign(seqs.size(), {});
        std::vector<voxd_pocket_frame *> frames;
        for (size_t i = 0; i < seqs.size(); i++) {
            m_frames[i].h_state     = seqs[i]->h_state.data();
            m_frames[i].seed        = next_seed(*seqs[i]);
            m_frames[i].temperature = noise_scale(*seqs[i]);
            frames.push_back(&m_frames[i]);
            m_frame_of[seqs[i]] = &m_frames[i];
        }
        voxd_stage_timer timer(m_timings.generator_us);
        m_graphs->generate(frames);
        m_timings.generator_rows += frames.size();
        m_timings.generator_calls++;
    }

    void next_frame(voxd_tts_sequence & seq, voxd_embd_batch & batch) override {
        bool eos;
        const float *latent, *embd;
        size_t n_latent;
        if (m_graphs) {
            const voxd_pocket_frame & f = *m_frame_of.at(&seq);
            eos                         = f.eos;
            latent                      = f.latent.data();
            n_latent                    = f.latent.size();
            embd                        = f.embd.data();
        } else {
            mtmd_gen_inp inp       = mtmd_gen_inp_default(m_mctx);
            inp.type               = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
            inp.embd               = seq.h_state.data();
            inp.temp               = noise_scale(seq);
            const mtmd_gen_out out = generate(seq, inp);
            eos                    = out.is_eos;
            latent                 = out.feats;
            n_latent               = out.n_feats;
            embd                   = out.embd;
        }
        if (eos && seq.eos_frame < 0) {
            seq.eos_frame = seq.chunk_frames;
        }
        // the stopping step's frame is dropped, as in the reference
        if ((seq.eos_frame >= 0 && seq.chunk_frames >= seq.eos_frame + seq.tail) || seq.chunk_frames >= seq.budget) {
            finish_chunk(seq);
            return;
        }
        seq.latents.insert(seq.latents.end(), latent, latent + n_latent);
        seq.chunk_frames++;
        if (count_frame(seq, seq.latents.size() >= (size_t) k_decoder_window * n_latent)) {
            batch.add(embd, seq.pos++, seq.seq_id, true);
        }
    }

    // Queues the window for end_frames() (own graphs) or decodes it now (libmtmd).
    void flush_decoder(voxd_tts_sequence & seq) override {
        if (!m_graphs) {
            voxd_tts_generator::flush_decoder(seq);
        } else if (!seq.latents.empty()) {
            m_windows.push_back({ &seq, std::move(seq.latents), false });
            seq.latents.clear();
        }
    }

    void end_frames() override {
        m_frame_of.clear();
        const std::vector<pending_window> pending = std::move(m_windows);
        m_windows.clear();
        if (pending.empty()) {
            return;
        }
        std::vector<voxd_pocket_window> windows;
        for (const pending_window & p : pending) {
            windows.push_back({ &p.latents, &p.seq->mimi, &p.seq->audio, {} });
        }
        {
            voxd_stage_timer timer(m_timings.decoder_us);
            m_timings.decoder_calls += (uint64_t) m_graphs->decode(windows);
            m_timings.decoder_windows += windows.size();
        }
        for (size_t i = 0; i < pending.size(); i++) {
            voxd_tts_sequence & seq = *pending[i].seq;
            if (!windows[i].error.empty()) {
                // its audio would have a hole: the request fails, even one that ended in this step
                seq.error_code = "synthesis_failed";
                seq.error      = "the audio decoder failed: " + windows[i].error;
                seq.finished   = true;
            } else if (pending[i].restart) {
                seq.mimi = {};
            }
        }
    }

    void read_output(voxd_tts_sequence & seq, int row) override {
        const float * h = llama_get_embeddings_ith(m_lctx, row); // owned by lctx, valid until its next decode
        if (!h) {
            throw voxd_error("synthesis_failed", "the backbone gave no hidden state (is it a TTS backbone?)");
        }
        seq.h_state.assign(h, h + m_n_embd);
    }

private:
    // Decodes `rows` (the voice, when starting) followed by the current chunk's text and the audio BOS, and arms the
    // chunk's frame budget: the reference's fallback for a chunk whose end-of-speech head never fires.
    void start_chunk(voxd_tts_sequence & seq, std::vector<float> rows) {
        const std::vector<llama_token> & chunk = seq.chunks[seq.chunk_idx];
        for (llama_token t : chunk) {
            append_token_row(rows, t);
        }
        append_token_row(rows, m_audio_bos);
        decode_prompt(seq, rows);
        const int n_tokens = (int) chunk.size();
        seq.budget         = (int) std::ceil((n_tokens / 3.0 + 2.0) * k_frame_rate);
        seq.tail           = m_pack.tail_frames > 0 ? m_pack.tail_frames : (n_tokens <= 6 ? 5 : 3);
        seq.chunk_frames   = 0;
        seq.eos_frame      = -1;
    }

    // The flow's noise scale: clip reads a temperature <= 0 as its default, so 0 becomes the smallest positive one.
    float noise_scale(const voxd_tts_sequence & seq) const {
        const float t = seq.request.temperature;
        return t < 0.0f ? m_pack.temperature : std::max(t, std::numeric_limits<float>::min());
    }

    // Ends the current chunk: decodes what is left of it, then starts the next one from the voice, or finishes.
    void finish_chunk(voxd_tts_sequence & seq) {
        flush_decoder(seq);
        // each chunk's audio starts the decoder afresh, as in the reference (after its queued window)
        seq.decoder_state.clear();
        if (!m_windows.empty() && m_windows.back().seq == &seq) {
            m_windows.back().restart = true;
        } else {
            seq.mimi = {};
        }
        if (seq.chunk_idx + 1 >= seq.chunks.size()) {
            seq.finished = true;
            return;
        }
        seq.chunk_idx++;
        clear(seq.seq_id, seq.n_voice_pos); // keep the voice
        seq.pos = seq.n_voice_pos;
        start_chunk(seq, {});
    }

    llama_token m_audio_bos        = LLAMA_TOKEN_NULL;
    llama_token m_bos_before_voice = LLAMA_TOKEN_NULL;
    std::vector<llama_token> m_sentence_ends; // tokens after which a chunk may end
    std::vector<llama_token> m_clause_ends;   // the same inside an over-long sentence
    pack_settings m_pack;

    // A decoder window queued by this step; `restart`: the sequence's next window starts a new chunk.
    struct pending_window {
        voxd_tts_sequence * seq; // borrowed: stepped by this step's caller
        std::vector<float> latents;
        bool restart;
    };
    std::unique_ptr<voxd_pocket_graphs> m_graphs;                                  // null: libmtmd's calls
    std::vector<voxd_pocket_frame> m_frames;                                       // this step's frames, by begin_frames()
    std::unordered_map<const voxd_tts_sequence *, voxd_pocket_frame *> m_frame_of; // into m_frames, this step's
    std::vector<pending_window> m_windows;
};

} // namespace

std::unique_ptr<voxd_tts_generator> voxd_tts_pocket_generator(llama_context * lctx, mtmd_context * mctx, const voxd_tts_generator_options & options) {
    return std::make_unique<pocket_generator>(lctx, mctx, options);
}
