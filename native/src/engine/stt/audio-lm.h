// Audio language models as recognizers (Qwen3-ASR, Voxtral and kin): a GGUF language model plus its audio mmproj,
// run through libllama and libmtmd, with continuous batching like a language-model server. Every transcription is a
// sequence (its own seq_id and KV stream) on the model's one llama_context; jobs join between decode steps (their
// audio encoded by libmtmd and their prompt decoded, one job at a time), and one step samples the next token of
// every job with one llama_decode per run of consecutive sequence ids. A job's tokens are the same alone or in any
// batch on the CPU: its prompt is decoded alone, and every step row meets the same kernels in any batch
// (common/llama-common.h; docs/architecture.md "Audio language models").
#pragma once

#include "common/batch-queue.h"
#include "common/llama-common.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

class voxd_executor;

struct voxd_audio_lm_options {
    std::string model;  // the language model's GGUF
    std::string mmproj; // its audio projector's GGUF
    bool use_gpu   = true;
    int gpu_device = 0;
    int max_batch  = 8; // jobs decoded together (the rest wait); each holds its KV cells from the load on
    int threads    = 0; // CPU threads; 0 = every core up to 8
    int n_ctx_seq  = 0; // KV cells per job (prompt, audio and answer); 0 = 1024
};

// One transcription. The prompt is the model's chat template over an optional system message and a user message
// of `user` followed by the audio, then `assistant`: the start of the answer, which the model goes on from. Audio
// shorter than min_samples is padded with silence to that length (libmtmd's encoders assert on a few samples).
struct voxd_audio_lm_request {
    std::vector<float> samples; // mono, 16 kHz
    bool has_system = false;    // a system message, even an empty one (Qwen3-ASR's layout always has one)
    std::string system;         // its text: the client's context, read as plain text (never as special tokens)
    std::string user;           // the instruction before the audio
    std::string assistant;      // the answer's start (Qwen3-ASR's language line), "" = none
    int max_tokens    = 0;      // > 0: the answer ends after this many tokens
    float temperature = 0.0f;   // 0: greedy
    uint32_t seed     = 0;      // the sampler's, when temperature > 0
};

struct voxd_audio_lm_result {
    std::vector<int32_t> tokens;   // the answer's tokens, the end-of-generation token excluded
    std::vector<float> logprobs;   // each token's log-probability under the model (the log-softmax of its logits)
    std::string text;              // their pieces, control tokens' texts included
    int32_t prompt_tokens = 0;     // positions the prompt took (audio included)
    bool truncated        = false; // ended by max_tokens or the job's KV cells, not by the model
};

// A job as the batcher sees it. Every method is called on the batcher's thread once the job was submitted.
class voxd_audio_lm_task {
public:
    virtual ~voxd_audio_lm_task() = default;

    virtual bool aborted() const = 0; // the client went away: the job ends with "aborted"
    // The answer's next piece of text, whole UTF-8 characters only (a character split over tokens comes with its
    // last token); "" for a token that completed none.
    virtual void on_text(const std::string & text)                               = 0;
    virtual void on_done(voxd_audio_lm_result result)                            = 0;
    virtual void on_error(const std::string & code, const std::string & message) = 0;
};

struct voxd_audio_lm_info {
    std::string arch;      // general.architecture of the language model
    std::string projector; // the mmproj's audio projector type (qwen3a, voxtral, ...)
    int32_t n_ctx_seq = 0;
    int32_t n_vocab   = 0;
    bool gpu          = false;
};

// Sums for benchmarks and tests: how the steps were shared.
struct voxd_audio_lm_timings {
    uint64_t prefill_us    = 0; // audio encoding and prompt decoding
    uint64_t prefill_jobs  = 0;
    uint64_t decode_us     = 0;
    uint64_t decode_steps  = 0;
    uint64_t decode_calls  = 0; // llama_decode calls of the steps
    uint64_t decode_rows   = 0; // tokens decoded, over all steps
    uint64_t max_step_rows = 0; // the most jobs one step decoded
};

struct voxd_audio_lm_job; // one transcription's decoding state

// The loaded files and the batch they run: one executor thread steps every job.
class voxd_audio_lm_batcher {
public:
    static constexpr size_t min_samples = 16000; // 1 s
    // Loads both files; the mmproj must hold an audio encoder. Throws voxd_error "model_load_failed".
    explicit voxd_audio_lm_batcher(const voxd_audio_lm_options & options);
    ~voxd_audio_lm_batcher(); // stops the executor: jobs still queued or running end with "closed"

    voxd_audio_lm_batcher(const voxd_audio_lm_batcher &)             = delete;
    voxd_audio_lm_batcher & operator=(const voxd_audio_lm_batcher &) = delete;

    // Queues a job; it joins the running batch at the next step. Any thread but the executor's. Throws voxd_error
    // "closed" once the executor stopped.
    void submit(std::shared_ptr<voxd_audio_lm_task> task, voxd_audio_lm_request request);

    const voxd_audio_lm_info & info() const { return m_info; }
    int64_t weight_bytes() const { return m_weight_bytes; }
    voxd_audio_lm_timings timings() const;
    // The thread the steps run on, for the environment's cleanup hook (stopping it ends every job with "closed").
    std::shared_ptr<voxd_executor> executor() const { return m_executor; }
    bool on_executor_thread() const;

private:
    void step();
    void prefill(voxd_audio_lm_job & job);
    void decode(const std::vector<voxd_audio_lm_job *> & jobs);
    void accept(voxd_audio_lm_job & job, int32_t logits_row); // samples the job's next token and ends it when due
    void finish(voxd_audio_lm_job & job);                     // reports the job's result
    void fail(voxd_audio_lm_job & job, const std::string & code, const std::string & message);
    void release_ended(); // ended jobs report (if they have not) and leave, handing their sequence back
    // The prompt's parts around the client's text and the audio: the chat template applied with stand-ins for both.
    struct prompt_parts {
        std::string before_system, after_system, after_audio;
    };
    prompt_parts prompt(const voxd_audio_lm_request & request) const;

    voxd_llama_model_ptr m_model;          // the language model's weights
    voxd_llama_context_ptr m_lctx;         // the KV cache, one stream per sequence; borrows m_model
    voxd_mtmd_context_ptr m_mctx;          // the audio encoder's weights; borrows m_model
    const llama_vocab * m_vocab = nullptr; // owned by m_model
    std::string m_template;                // the model's chat template
    voxd_audio_lm_info m_info;
    voxd_audio_lm_options m_options;
    int64_t m_weight_bytes = 0;
    int m_cpu_threads      = 1;

    std::vector<llama_seq_id> m_free_seq_ids; // executor thread only
    voxd_batch_queue<voxd_audio_lm_job> m_jobs;

    mutable std::mutex m_timings_mutex;
    voxd_audio_lm_timings m_timings;

    std::shared_ptr<voxd_executor> m_executor; // last: its thread starts once the members above exist
};

// Shared (shared_ptr) by its owner (the JS AudioLmModel) and every transcription in flight: the weights are freed
// when the last of them lets go, never under a running step.
class voxd_audio_lm_model {
public:
    static std::shared_ptr<voxd_audio_lm_model> load(const voxd_audio_lm_options & options);
    ~voxd_audio_lm_model();
    voxd_audio_lm_model(const voxd_audio_lm_model &)             = delete;
    voxd_audio_lm_model & operator=(const voxd_audio_lm_model &) = delete;

    voxd_audio_lm_batcher & batcher() const { return *m_batcher; }

private:
    voxd_audio_lm_model() = default;
    std::unique_ptr<voxd_audio_lm_batcher> m_batcher;
};
