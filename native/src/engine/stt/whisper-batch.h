// Batched Whisper: our own GGML graphs over a whisper.cpp model file, so that concurrent transcriptions share
// every pass over the weights. whisper.cpp's API decodes one request per call and keeps its tensors private, so
// the batcher loads the file itself (once) and runs:
//  - the encoder on the 30 s windows of several jobs in one graph (the windows stacked along the rows of every
//    weight product, attention per window), writing each job's cross-attention keys and values;
//  - the decoder on the new tokens of every active sequence in one graph (each sequence its own self-attention
//    cache and positions), greedy or sampled per sequence, with Whisper's timestamp rules, temperature fallback,
//    language detection, a prompt and the previous window's text;
// with jobs joining and leaving between steps. A row meets the same kernels alone as in any batch (docs/
// architecture.md "Batched Whisper"), so a job's output does not depend on what ran beside it.
// Its parts: the weights and vocabulary (whisper-batch-model), the mel (whisper-mel), the graphs (whisper-graphs), the
// decoding rules (whisper-rules) and the scheduling of jobs (here and whisper-batch.cpp).
#pragma once

#include "common/batch-queue.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

class voxd_executor;

struct voxd_whisper_params {
    std::string language; // short code; empty = detect
    bool translate = false;
    std::string initial_prompt;
    float temperature     = 0.0f;
    float temperature_inc = 0.2f;
    int max_tokens        = 0; // 0 = no limit
    bool word_timestamps  = false;
    int threads           = 0; // whisper.cpp's path only: 0 = min(4, hardware threads)
    bool no_context       = false;
};

// One decoded token as both decoders report it; times in centiseconds (whisper.cpp's token timestamps only).
struct voxd_whisper_token {
    int32_t id = 0;
    float p    = 0.0f;
    float plog = 0.0f;
    int64_t t0 = 0;
    int64_t t1 = 0;
    std::string text; // the token's bytes; empty for special tokens
};

// A segment as a decoder produced it, before the job applies its token budget and clamps (stt/whisper-transcription.cpp).
struct voxd_whisper_raw_segment {
    int64_t t0            = 0; // centiseconds
    int64_t t1            = 0;
    double no_speech_prob = 0.0;
    float temperature     = 0.0f;
    std::vector<voxd_whisper_token> tokens;
};

// A job as the batcher sees it. Every method is called on the batcher's thread.
class voxd_whisper_task {
public:
    virtual ~voxd_whisper_task() = default;

    virtual const voxd_whisper_params & params() const = 0;
    virtual const std::vector<float> & samples() const = 0;
    virtual bool aborted() const                       = 0; // the client went away: the job ends with an "aborted" error
    virtual bool halted() const                        = 0; // the job has what it wants (its token budget): it ends with what it has
    virtual void on_segment(const voxd_whisper_raw_segment & segment, const std::string & language) = 0;
    virtual void on_done(const std::string & language)                                              = 0;
    virtual void on_error(const std::string & code, const std::string & message)                    = 0;
};

struct voxd_whisper_batch_options {
    bool use_gpu   = true;
    int gpu_device = 0;
    int max_batch  = 8; // sequences decoded together
    int max_encode = 0; // windows encoded together; 0 = the backend's choice (below)
    int threads    = 0; // CPU threads; 0 = every core up to 8
};

// Timings the batcher sums, for benchmarks and the stage table.
struct voxd_whisper_batch_timings {
    uint64_t encode_us      = 0;
    uint64_t encode_calls   = 0;
    uint64_t encode_windows = 0;
    uint64_t decode_us      = 0; // the decoder graphs
    uint64_t decode_calls   = 0;
    uint64_t decode_rows    = 0;
    uint64_t sample_us      = 0; // the rules and the choice of each sequence's next token
};

struct voxd_whisper_batch_model; // weights, vocabulary, mel filters, backend
struct voxd_whisper_sequence;    // one job's decoding state

class voxd_whisper_batcher {
public:
    // Loads the weights (throws voxd_error "model_load_failed").
    voxd_whisper_batcher(const std::string & path, const voxd_whisper_batch_options & options);
    ~voxd_whisper_batcher(); // stops the executor: jobs still queued or running end with a "closed" error

    voxd_whisper_batcher(const voxd_whisper_batcher &)             = delete;
    voxd_whisper_batcher & operator=(const voxd_whisper_batcher &) = delete;

    // Computes the job's features on the calling thread (a libuv worker), queues it and returns. The job joins the
    // running batch at its next step. Any thread but the executor's.
    void submit(std::shared_ptr<voxd_whisper_task> task);

    // The thread the steps run on, for the environment's cleanup hook (stopping it ends every job with "closed").
    std::shared_ptr<voxd_executor> executor() const { return m_executor; }

    bool on_executor_thread() const; // the model's last holder may be a job ending there: see stt/whisper-model.cpp
    bool on_gpu() const;
    bool multilingual() const;
    int32_t timestamp_begin() const; // the first timestamp token
    int n_languages() const;
    // The model's hparams in whisper.cpp's file order: n_vocab, n_audio_ctx, n_audio_state, n_audio_head,
    // n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype.
    std::vector<int32_t> hparams() const;
    size_t weight_bytes() const;
    voxd_whisper_batch_timings timings() const;

private:
    void step();
    void encode(const std::vector<voxd_whisper_sequence *> & seqs);
    void decode(const std::vector<voxd_whisper_sequence *> & seqs);
    void apply_logits(voxd_whisper_sequence & seq, float * logits); // filters the logits in place
    void end_attempt(voxd_whisper_sequence & seq, bool ended);

    std::unique_ptr<voxd_whisper_batch_model> m_model;
    voxd_whisper_batch_options m_options;

    voxd_batch_queue<voxd_whisper_sequence> m_jobs; // mel computed, waiting for a slot; then the batch

    mutable std::mutex m_timings_mutex;
    voxd_whisper_batch_timings m_timings;

    std::shared_ptr<voxd_executor> m_executor; // last: its thread starts once the members above exist
};
