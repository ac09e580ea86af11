#include "tts/ggml/generator.h"
#include "common/error.h"

#include "llama-ext.h" // llama_model_get_tok_embd: prompt rows are token embeddings (and sums of them)

#include <algorithm>
#include <cmath>
#include <cstring>

namespace {

struct chunks_deleter {
    void operator()(mtmd_input_chunks * c) const { mtmd_input_chunks_free(c); }
};
struct bitmap_deleter {
    void operator()(mtmd_bitmap * b) const { mtmd_bitmap_free(b); }
};

// A 32-bit mix of a seed and a draw index, never UINT32_MAX (clip's "random").
uint32_t mix_seed(uint32_t seed, uint32_t draw) {
    uint32_t x = seed * 0x9E3779B1u ^ (draw + 0x7F4A7C15u) * 0x85EBCA77u;
    x ^= x >> 16;
    x *= 0x7FEB352Du;
    x ^= x >> 15;
    x *= 0x846CA68Bu;
    x ^= x >> 16;
    return x == UINT32_MAX ? 0 : x;
}

} // namespace

// ---- voxd_embd_batch ----

void voxd_embd_batch::add(const float * row, llama_pos pos, llama_seq_id seq_id, bool output) {
    m_embd.insert(m_embd.end(), row, row + m_n_embd);
    m_pos.push_back(pos);
    m_seq.push_back(seq_id);
    m_logits.push_back(output ? 1 : 0);
}

voxd_embd_batch voxd_embd_batch::select(const std::vector<int> & rows) const {
    voxd_embd_batch out(m_n_embd, m_n_pos_per_row);
    for (int i : rows) {
        out.add(m_embd.data() + (size_t) i * m_n_embd, m_pos[(size_t) i], m_seq[(size_t) i], m_logits[(size_t) i] != 0);
    }
    return out;
}

void voxd_embd_batch::add_companion(int i) {
    const std::vector<float> copy(m_embd.begin() + (ptrdiff_t) i * m_n_embd, m_embd.begin() + (ptrdiff_t) (i + 1) * m_n_embd);
    add(copy.data(), m_pos[(size_t) i] + 1, m_seq[(size_t) i], true);
}

llama_batch voxd_embd_batch::view() {
    const size_t n = m_pos.size();
    m_pos_view.clear();
    for (int d = 0; d < m_n_pos_per_row; d++) {
        m_pos_view.insert(m_pos_view.end(), m_pos.begin(), m_pos.end()); // one block of n per dimension
    }
    m_n_seq_id.assign(n, 1);
    m_seq_ptrs.resize(n);
    for (size_t i = 0; i < n; i++) {
        m_seq_ptrs[i] = &m_seq[i];
    }
    llama_batch b{};
    b.n_tokens = (int32_t) n;
    b.embd     = m_embd.data();
    b.pos      = m_pos_view.data();
    b.n_seq_id = m_n_seq_id.data();
    b.seq_id   = m_seq_ptrs.data();
    b.logits   = m_logits.data();
    return b;
}

// ---- voxd_tts_generator ----

std::unique_ptr<voxd_tts_generator> voxd_tts_generator::create(llama_context * lctx, mtmd_context * mctx, const voxd_tts_generator_options & options) {
    switch (mtmd_gen_audio_get_info(mctx).type) {
        case MTMD_GEN_AUDIO_TYPE_POCKETTTS: return voxd_tts_pocket_generator(lctx, mctx, options);
        case MTMD_GEN_AUDIO_TYPE_QWEN3TTS: return voxd_tts_qwen3_generator(lctx, mctx);
        default: throw voxd_error("model_load_failed", "the mmproj's audio generator is of no type this engine drives");
    }
}

voxd_tts_generator::voxd_tts_generator(llama_context * lctx, mtmd_context * mctx, int n_pos_per_row)
    : m_lctx(lctx), m_mctx(mctx), m_model(llama_get_model(lctx)), m_n_pos_per_row(n_pos_per_row) {
    m_vocab   = llama_model_get_vocab(m_model);
    m_n_embd  = llama_model_n_embd(m_model);
    m_n_batch = (int) llama_n_batch(lctx);
    if (llama_model_n_embd_inp(m_model) != m_n_embd) {
        throw voxd_error("model_load_failed", "the backbone's input and output widths differ; it is not a TTS backbone this engine drives");
    }
    m_tok_embd.resize(llama_model_get_tok_embd(m_model, nullptr));
    if (m_tok_embd.empty() || llama_model_get_tok_embd(m_model, m_tok_embd.data()) != m_tok_embd.size()) {
        throw voxd_error("model_load_failed", "the backbone's token embeddings could not be read");
    }
}

void voxd_tts_generator::clear(llama_seq_id seq_id, llama_pos from) {
    llama_memory_seq_rm(llama_get_memory(m_lctx), seq_id, from, -1);
}

const float * voxd_tts_generator::token_row(llama_token t) const {
    const size_t n = (size_t) m_n_embd;
    if (t < 0 || (size_t) (t + 1) * n > m_tok_embd.size()) {
        throw voxd_error("synthesis_failed", "token " + std::to_string(t) + " has no embedding row");
    }
    return m_tok_embd.data() + (size_t) t * n;
}

void voxd_tts_generator::append_token_row(std::vector<float> & rows, llama_token t) const {
    const float * row = token_row(t);
    rows.insert(rows.end(), row, row + m_n_embd);
}

std::vector<float> voxd_tts_generator::voice_rows(const voxd_tts_gen_request & request) {
    if (request.voice_key.empty()) {
        return encode_voice(request.reference);
    }
    auto kept = std::find_if(m_kept_voices.begin(), m_kept_voices.end(), [&](const auto & v) { return v.first == request.voice_key; });
    if (kept == m_kept_voices.end()) {
        m_kept_voices.emplace_front(request.voice_key, encode_voice(request.reference));
        if (m_kept_voices.size() > max_kept_voices) {
            m_kept_voices.pop_back();
        }
    } else {
        m_kept_voices.splice(m_kept_voices.begin(), m_kept_voices, kept);
    }
    return m_kept_voices.front().second;
}

std::vector<float> voxd_tts_generator::encode_voice(const std::vector<float> & reference) {
    if (!mtmd_support_audio(m_mctx)) {
        throw voxd_error("invalid_argument", "this model's mmproj has no voice encoder, so it cannot clone a reference clip");
    }
    voxd_stage_timer timer(m_timings.encoder_us);
    std::unique_ptr<mtmd_bitmap, bitmap_deleter> bitmap(mtmd_bitmap_init_from_audio(reference.size(), reference.data())); // owns the clip
    std::unique_ptr<mtmd_input_chunks, chunks_deleter> chunks(mtmd_input_chunks_init());                                  // owns the tokenized prompt
    const char * marker = mtmd_default_marker();
    const mtmd_input_text text{ marker, std::strlen(marker), false, true };
    const mtmd_bitmap * bitmaps[] = { bitmap.get() };
    if (!bitmap || mtmd_tokenize(m_mctx, chunks.get(), &text, bitmaps, 1) != 0) {
        throw voxd_error("invalid_argument", "libmtmd could not take the reference clip");
    }
    for (size_t i = 0; i < mtmd_input_chunks_size(chunks.get()); i++) {
        const mtmd_input_chunk * chunk = mtmd_input_chunks_get(chunks.get(), i); // owned by `chunks`
        if (mtmd_input_chunk_get_type(chunk) != MTMD_INPUT_CHUNK_TYPE_AUDIO) {
            continue;
        }
        if (mtmd_encode_chunk(m_mctx, chunk) != 0) {
            throw voxd_error("synthesis_failed", "the voice encoder failed on the reference clip");
        }
        const float * embd = mtmd_get_output_embd(m_mctx); // owned by mctx, valid until its next encode
        return std::vector<float>(embd, embd + (size_t) m_n_embd * mtmd_input_chunk_get_n_tokens(chunk));
    }
    throw voxd_error("invalid_argument", "the reference clip gave the voice encoder nothing to encode");
}

void voxd_tts_generator::decode_prompt(voxd_tts_sequence & seq, const std::vector<float> & rows) {
    voxd_stage_timer timer(m_timings.prompt_us);
    const int n_rows = (int) (rows.size() / (size_t) m_n_embd);
    for (int first = 0; first < n_rows; first += m_n_batch) {
        const int n = std::min(m_n_batch, n_rows - first);
        voxd_embd_batch batch(m_n_embd, m_n_pos_per_row);
        for (int i = 0; i < n; i++) {
            // every row is an output: the context computes embeddings for all of them anyway
            batch.add(rows.data() + (size_t) (first + i) * m_n_embd, seq.pos++, seq.seq_id, true);
        }
        if (llama_decode(m_lctx, batch.view()) != 0) {
            throw voxd_error("synthesis_failed", "the backbone failed on the prompt");
        }
    }
    read_output(seq, -1);
}

void voxd_tts_generator::flush_decoder(voxd_tts_sequence & seq) {
    if (seq.latents.empty() && seq.codes.empty()) {
        return;
    }
    voxd_stage_timer timer(m_timings.decoder_us);
    m_timings.decoder_windows++;
    m_timings.decoder_calls++;
    mtmd_gen_inp inp = mtmd_gen_inp_default(m_mctx);
    inp.type         = MTMD_GEN_PROCESS_TYPE_GEN_WAV;
    if (seq.codes.empty()) {
        inp.feats   = seq.latents.data();
        inp.n_feats = seq.latents.size();
    } else {
        inp.codes   = seq.codes.data();
        inp.n_codes = seq.codes.size();
    }
    inp.seed       = m_last_seed; // the decoder draws nothing; an unchanged seed keeps clip from reseeding
    inp.state_data = seq.decoder_state.empty() ? nullptr : (const char *) seq.decoder_state.data();
    inp.state_size = seq.decoder_state.size();
    mtmd_gen_out out{};
    if (mtmd_gen_audio_process(m_mctx, &inp, &out) != 0) {
        throw voxd_error("synthesis_failed", "the audio decoder failed");
    }
    for (size_t i = 0; i < out.n_samples; i++) {
        seq.audio.push_back(std::isfinite(out.audio[i]) ? out.audio[i] : 0.0f);
    }
    seq.decoder_state.assign(out.state_data, out.state_data + out.state_size);
    seq.latents.clear();
    seq.codes.clear();
}

// An equal seed (two draws mixing to the same value: one in 2^32) is forced through with a discarded generator
// call under another seed, since clip would otherwise go on with its current stream.
void voxd_tts_generator::reseed(uint32_t seed) {
    if (seed == m_last_seed) {
        std::vector<float> zeros((size_t) m_n_embd, 0.0f);
        mtmd_gen_inp inp = mtmd_gen_inp_default(m_mctx);
        inp.type         = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
        inp.embd         = zeros.data();
        inp.seed         = seed ^ 1u;
        mtmd_gen_out out{};
        if (mtmd_gen_audio_process(m_mctx, &inp, &out) != 0) {
            throw voxd_error("synthesis_failed", "the generator failed");
        }
    }
    m_last_seed = seed;
}

mtmd_gen_out voxd_tts_generator::generate(voxd_tts_sequence & seq, mtmd_gen_inp & inp) {
    voxd_stage_timer timer(m_timings.generator_us);
    m_timings.generator_rows++;
    m_timings.generator_calls++;
    inp.seed = next_seed(seq);
    reseed(inp.seed);
    mtmd_gen_out out{};
    if (mtmd_gen_audio_process(m_mctx, &inp, &out) != 0) {
        throw voxd_error("synthesis_failed", "the generator failed at frame " + std::to_string(seq.frames));
    }
    return out;
}

bool voxd_tts_generator::count_frame(voxd_tts_sequence & seq, bool window_full) {
    seq.frames++;
    m_timings.frames++;
    const bool at_limit = seq.request.max_frames > 0 && seq.frames >= seq.request.max_frames;
    if (window_full || at_limit) {
        flush_decoder(seq);
    }
    seq.finished = at_limit;
    return !at_limit;
}

uint32_t voxd_tts_generator::next_seed(voxd_tts_sequence & seq) {
    return mix_seed(seq.request.seed, seq.draws++);
}

void voxd_tts_generator::step(const std::vector<voxd_tts_sequence *> & seqs) {
    const auto fail = [](voxd_tts_sequence & seq, const std::exception & e) {
        const voxd_error * coded = dynamic_cast<const voxd_error *>(&e);
        seq.error_code           = coded ? coded->code : "synthesis_failed";
        seq.error                = e.what();
        seq.finished             = true;
    };
    std::vector<voxd_tts_sequence *> active;
    for (voxd_tts_sequence * seq : seqs) {
        if (seq->finished || seq->cancelled.load()) {
            continue;
        }
        try {
            if (!seq->prepared) {
                clear(seq->seq_id);
                seq->pos      = 0;
                seq->prepared = true;
                prepare(*seq);
            }
            active.push_back(seq);
        } catch (const std::exception & e) {
            fail(*seq, e);
        }
    }
    begin_frames(active);
    voxd_embd_batch batch(m_n_embd, m_n_pos_per_row);
    std::vector<voxd_tts_sequence *> in_batch; // the sequence of each batch row
    for (voxd_tts_sequence * seq : active) {
        try {
            const int rows = batch.size();
            next_frame(*seq, batch);
            if (batch.size() > rows) {
                in_batch.push_back(seq);
            }
        } catch (const std::exception & e) {
            fail(*seq, e);
        }
    }
    end_frames();
    if (batch.size() == 0) {
        return;
    }
    // decodes batch rows `rows` in one llama_decode (with a companion of the first when `companion`) and reads each
    // row's output into its sequence
    const auto decode = [&](const std::vector<int> & rows, bool companion) {
        voxd_embd_batch part      = batch.select(rows);
        voxd_tts_sequence & first = *in_batch[(size_t) rows[0]];
        if (companion) {
            part.add_companion(0);
        }
        const llama_pos companion_pos = first.pos; // next_frame advanced it past the row
        int rc;
        {
            voxd_stage_timer timer(m_timings.backbone_us);
            rc = llama_decode(m_lctx, part.view());
        }
        if (companion) {
            clear(first.seq_id, companion_pos);
        }
        if (rc != 0) {
            throw voxd_error("synthesis_failed", "the backbone failed on a frame");
        }
        m_timings.backbone_rows += (uint64_t) rows.size();
        m_timings.backbone_calls++;
        for (size_t i = 0; i < rows.size(); i++) {
            voxd_tts_sequence & seq = *in_batch[(size_t) rows[i]];
            try {
                read_output(seq, (int) i);
            } catch (const std::exception & e) {
                fail(seq, e);
            }
        }
    };
    // Batch invariance (docs/architecture.md): a row must meet the same kernels alone as in any batch
    std::vector<llama_seq_id> seq_ids;
    for (const voxd_tts_sequence * seq : in_batch) {
        seq_ids.push_back(seq->seq_id);
    }
    voxd_llama_decode_runs(seq_ids, decode);
}
