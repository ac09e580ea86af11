// Frame generation for GGML TTS models below libmtmd's audio helper. Every request is a sequence (its own seq_id
// and KV stream) on one llama_context, and one step makes a frame for each active sequence with a single
// llama_decode of all their backbone inputs: continuous batching. The helper drives one sequence per decode and
// keeps one random stream per mtmd context, so we call libmtmd's stateless generator (mtmd_gen_audio_process)
// ourselves and redo what the helper does around it (prompt layout, sampling, end of speech, decoder windows)
// from the reference implementations' documented behaviour, once per model family:
//   - Pocket TTS (tts/ggml/pocket.cpp): a continuous backbone; the generator turns its hidden state into a
//     latent, and an end-of-speech head ends each sentence chunk;
//   - Qwen3-TTS (tts/ggml/qwen3.cpp): the backbone's logits give codebook 0, the generator's code predictor
//     the other 15; a codec end token ends the speech.
//
// Determinism: every random draw of a sequence's k-th frame is seeded from (request seed, k), the KV cache keeps
// one stream per sequence, and every backbone row is computed by the same CPU kernels whatever else is in its
// decode (step(), common/llama-common.h; docs/architecture.md), so a request's audio does not depend on what runs
// beside it.
#pragma once

#include "llama.h"
#include "mtmd.h"
#include "common/executor.h"
#include "common/llama-common.h"
#include "tts/ggml/pocket-graphs.h"

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <vector>

struct voxd_tts_gen_request {
    std::string text;
    std::vector<float> reference; // a voice to clone, mono at the model's rate; empty = none
    std::string voice_key;        // names `reference` while it stays the same clip: its encoding is kept and reused
    std::string language;         // the model's language name ("english"); "" = its default
    uint32_t seed     = 0;        // 0..UINT32_MAX-1
    float temperature = -1.0f;    // < 0: the model's own; 0: the least randomness the model allows
    int max_frames    = 0;        // 0: only the model's own limits
};

// One request in generation. Owned by its runner (a serial job or a batch session); every field but `cancelled`
// is touched only on the model's executor thread once stepping began (plan() runs before that).
struct voxd_tts_sequence {
    explicit voxd_tts_sequence(voxd_tts_gen_request req) : request(std::move(req)) {}

    voxd_tts_gen_request request;
    llama_seq_id seq_id = -1; // set by the runner from the model's pool

    std::vector<std::vector<llama_token>> chunks; // the text as the model reads it, in chunks (plan())
    size_t chunk_idx = 0;

    bool prepared = false;      // the prompt is in the KV cache
    int pos       = 0;          // next backbone position
    std::vector<float> h_state; // the backbone's last hidden state: the generator's next input
    uint32_t draws = 0;         // frames drawn so far (seeds the next one's randomness)
    int frames     = 0;         // frames made in all
    int budget     = 0;         // frames the current chunk may take at most

    // Pocket TTS: the voice's positions (every chunk restarts after them) and the current chunk's end of speech
    int n_voice_pos  = 0;
    int chunk_frames = 0;  // frames made for the current chunk
    int eos_frame    = -1; // chunk frame at which the end-of-speech head fired, -1 before
    int tail         = 0;  // frames kept after the head fires

    // Qwen3-TTS: the codebook-0 token sampled from the backbone's last logits
    llama_token next_token = LLAMA_TOKEN_NULL;

    std::vector<float> latents;         // Pocket: frames waiting for the decoder (less than one window)
    std::vector<int32_t> codes;         // Qwen3: the same as codes, 16 per frame
    std::vector<uint8_t> decoder_state; // libmtmd's decoder state between windows
    voxd_pocket_decoder_state mimi;     // Pocket's own decoder state between windows (tts/ggml/pocket-graphs.h)
    std::vector<float> audio;           // decoded and not yet taken by the runner

    bool finished = false;
    std::string error_code; // why it failed ("" when it did not): a voxd_error code and its message
    std::string error;
    std::atomic<bool> cancelled{ false };
};

// Input rows for one llama_decode, each with its position and sequence; owns copies of the rows. M-RoPE backbones
// take four positions per row (all equal for a text or codec stream).
class voxd_embd_batch {
public:
    voxd_embd_batch(int n_embd, int n_pos_per_row) : m_n_embd(n_embd), m_n_pos_per_row(n_pos_per_row) {}

    void add(const float * row, llama_pos pos, llama_seq_id seq_id, bool output);
    int size() const { return (int) m_pos.size(); }
    // A batch of these rows, in this order.
    voxd_embd_batch select(const std::vector<int> & rows) const;
    // Adds a copy of row `i` one position further in its sequence, as an output (a companion row: see step()).
    void add_companion(int i);
    // The batch over this object's vectors: valid while it lives and gets no more rows.
    llama_batch view();

private:
    int m_n_embd;
    int m_n_pos_per_row;
    std::vector<float> m_embd;
    std::vector<llama_pos> m_pos;
    std::vector<llama_seq_id> m_seq;
    std::vector<llama_pos> m_pos_view; // m_pos repeated per position dimension
    std::vector<int32_t> m_n_seq_id;
    std::vector<llama_seq_id *> m_seq_ptrs; // point into m_seq
    std::vector<int8_t> m_logits;
};

// Where a model's generation time went, summed over its life (microseconds). Written on the executor thread, read
// from JS at any time.
struct voxd_tts_timings {
    std::atomic<uint64_t> frames{ 0 };          // frames made
    std::atomic<uint64_t> backbone_us{ 0 };     // the per-step llama_decode of every sequence's frame
    std::atomic<uint64_t> backbone_rows{ 0 };   // rows it decoded
    std::atomic<uint64_t> backbone_calls{ 0 };  // and in how many calls
    std::atomic<uint64_t> prompt_us{ 0 };       // prompt decodes
    std::atomic<uint64_t> encoder_us{ 0 };      // reference clips through the voice encoder
    std::atomic<uint64_t> generator_us{ 0 };    // the generator's per-frame work (flow net, code predictor)
    std::atomic<uint64_t> generator_rows{ 0 };  // frames it made
    std::atomic<uint64_t> generator_calls{ 0 }; // and in how many calls (graphs)
    std::atomic<uint64_t> decoder_us{ 0 };      // the audio decoder (mimi, code2wav)
    std::atomic<uint64_t> decoder_windows{ 0 }; // windows it decoded
    std::atomic<uint64_t> decoder_calls{ 0 };   // and in how many calls (graphs)
};

// How a model's generator runs what follows the backbone.
struct voxd_tts_generator_options {
    std::string mmproj; // the mmproj's path: Pocket TTS reads its generator and decoder from it once more
    int threads = 0;    // 0: every core up to 8
    // Pocket TTS: libmtmd's one-request generator and decoder calls instead of voxd's batched graphs (to compare
    // the two; Qwen3-TTS always takes libmtmd's)
    bool libmtmd = false;
};

// Drives one model's sequences. Borrows the contexts it is built with; every call but plan() runs on the model's
// executor thread (common/executor.h).
class voxd_tts_generator {
public:
    // The generator for the mmproj's audio generator type. Throws voxd_error("model_load_failed") when the
    // backbone lacks what generation needs.
    static std::unique_ptr<voxd_tts_generator> create(llama_context * lctx, mtmd_context * mctx, const voxd_tts_generator_options & options);
    virtual ~voxd_tts_generator() = default;

    // Any thread (reads the vocabulary only): normalises and tokenises the text into chunks and checks the
    // request's fields. Throws voxd_error("invalid_argument") when there is nothing to speak or a field is wrong.
    virtual void plan(voxd_tts_sequence & seq) const = 0;

    // Makes one frame for each sequence in `seqs` that is not finished: prepares new ones (their prompt into the
    // KV cache), then the model's per-frame work for all (begin_frames(), next_frame() for each, end_frames()) and
    // their backbone inputs decoded together: on x86 one llama_decode per run of consecutive sequence ids, a run of
    // one with a companion row; elsewhere one per row.
    // A sequence's own failure (a reference clip the encoder refuses) finishes it with `error`; a failure of a
    // shared decode throws voxd_error.
    void step(const std::vector<voxd_tts_sequence *> & seqs);

    const voxd_tts_timings & timings() const { return m_timings; }
    // Weights the generator holds besides libllama's and libmtmd's (Pocket's own graphs read the mmproj's again).
    virtual size_t own_weight_bytes() const { return 0; }

protected:
    voxd_tts_generator(llama_context * lctx, mtmd_context * mctx, int n_pos_per_row);

    // Puts the sequence's prompt in the KV cache and reads the backbone's output for it.
    virtual void prepare(voxd_tts_sequence & seq) = 0;
    // Work of the step's frames done for all sequences at once, before and after their next_frame() calls.
    virtual void begin_frames(const std::vector<voxd_tts_sequence *> & seqs) { (void) seqs; }
    virtual void end_frames() {}
    // The sequence's next frame: its backbone input row goes into `batch`, or none when the frame ended the
    // sequence or restarted it on a new chunk.
    virtual void next_frame(voxd_tts_sequence & seq, voxd_embd_batch & batch) = 0;
    // Reads the backbone's output at batch row `row` (-1: the last) for the sequence's next frame.
    virtual void read_output(voxd_tts_sequence & seq, int row) = 0;

    // Decodes `rows` (n x n_embd) at the sequence's next positions, in n_batch pieces, then reads the last output.
    void decode_prompt(voxd_tts_sequence & seq, const std::vector<float> & rows);
    // The request's reference clip as rows from the mmproj's voice encoder; a clip with a voice_key is encoded once
    // and its rows kept (the most recent max_kept_voices), so a named voice costs no encoder pass after its first.
    // Executor thread only.
    std::vector<float> voice_rows(const voxd_tts_gen_request & request);
    void append_token_row(std::vector<float> & rows, llama_token t) const;
    const float * token_row(llama_token t) const;
    // One generator call for the sequence's next frame (`inp` of type GEN_CODE), its randomness seeded from the
    // sequence's seed and frame count. The output lives in mctx until its next call.
    mtmd_gen_out generate(voxd_tts_sequence & seq, mtmd_gen_inp & inp);
    // Counts a frame whose latents or codes were buffered: runs the decoder when `window_full`, and ends the
    // sequence at its max_frames. False when the sequence ended.
    bool count_frame(voxd_tts_sequence & seq, bool window_full);
    // Sets the generator's seed for the next draw (clip reseeds only on a change, so an equal one is forced).
    void reseed(uint32_t seed);
    // Runs the decoder over the sequence's buffered latents or codes through libmtmd, carrying its state; appends
    // to `audio` (a family may instead queue the window for end_frames()).
    virtual void flush_decoder(voxd_tts_sequence & seq);
    // The next draw's seed for the sequence, from its request seed and draw count.
    static uint32_t next_seed(voxd_tts_sequence & seq);
    void clear(llama_seq_id seq_id, llama_pos from = -1);

    llama_context * m_lctx;      // borrowed
    mtmd_context * m_mctx;       // borrowed
    const llama_model * m_model; // borrowed
    const llama_vocab * m_vocab; // borrowed from the model
    int m_n_embd;
    int m_n_batch;
    int m_n_pos_per_row;
    std::vector<float> m_tok_embd;     // the whole token embedding table, n_vocab x n_embd
    uint32_t m_last_seed = UINT32_MAX; // the generator's current seed
    voxd_tts_timings m_timings;

private:
    std::vector<float> encode_voice(const std::vector<float> & reference);

    static constexpr size_t max_kept_voices = 64;
    std::list<std::pair<std::string, std::vector<float>>> m_kept_voices; // by voice_key, most recent first
};

// The families, in their own files.
std::unique_ptr<voxd_tts_generator> voxd_tts_pocket_generator(llama_context * lctx, mtmd_context * mctx, const voxd_tts_generator_options & options);
std::unique_ptr<voxd_tts_generator> voxd_tts_qwen3_generator(llama_context * lctx, mtmd_context * mctx);
