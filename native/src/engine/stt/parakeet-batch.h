// Batched Parakeet: our own GGML graphs over a whisper.cpp Parakeet TDT file, so that concurrent transcriptions share
// their passes over the weights. libparakeet (parakeet.h) decodes one clip per call with graphs it builds per step
// and keeps its tensors private, so the batcher loads the file itself (once) and runs:
//  - the FastConformer encoder on several clips in one graph: every position-wise product (the projections, the
//    feed-forward and pointwise-convolution weights) over all clips' frames side by side, the subsampling
//    convolutions, the depthwise convolution and the attention per clip at its own length;
//  - one TDT step of every clip being decoded in one graph: its prediction network (when its last step emitted a
//    token) and its joint network on its current frame, each clip with its own one-column products;
// with clips joining and leaving between steps. A clip's tokens, frames, durations and probabilities are the same
// alone, in any batch, and as libparakeet's own (parakeet-cli's) on the CPU (docs/architecture.md "Parakeet").
// Its parts: the weights and vocabulary (parakeet-batch-model), the mel (there), the graphs (parakeet-graphs) and the
// scheduling (here and parakeet-batch.cpp).
#pragma once

#include "common/batch-queue.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

class voxd_executor;

// One decoded token. Times are mel frames (10 ms), after each punctuation mark was moved onto the end of the word
// before it (as libparakeet does).
struct voxd_parakeet_token {
    int32_t id = 0;
    std::string text; // as it joins the transcript: U+2581 becomes a space, control pieces ""
    int32_t frame    = 0;
    int32_t duration = 0; // TDT duration, encoder frames (80 ms each)
    float p          = 0.0f;
    float plog       = 0.0f;
    int64_t t0       = 0;
    int64_t t1       = 0;
    bool word_start  = false; // the piece begins with U+2581: a new word
};

// A clip as the batcher sees it. Every method is called on the batcher's thread, once the clip was submitted.
class voxd_parakeet_task {
public:
    virtual ~voxd_parakeet_task() = default;

    virtual bool aborted() const                                                 = 0; // the client went away: the clip ends with "aborted"
    virtual void on_done(std::vector<voxd_parakeet_token> tokens)                = 0;
    virtual void on_error(const std::string & code, const std::string & message) = 0;
};

struct voxd_parakeet_batch_options {
    bool use_gpu   = true;
    int gpu_device = 0;
    int max_batch  = 8; // clips decoded together (the rest wait)
    int max_encode = 0; // clips encoded together; 0 = the backend's choice (parakeet-batch.cpp, step)
    int threads    = 0; // CPU threads; 0 = every core up to 8
};

// Sums for benchmarks and tests: how the passes were shared.
struct voxd_parakeet_batch_timings {
    uint64_t encode_us     = 0;
    uint64_t encode_calls  = 0;
    uint64_t encode_clips  = 0;
    uint64_t decode_us     = 0;
    uint64_t decode_calls  = 0; // TDT steps
    uint64_t decode_rows   = 0; // clips stepped, over all steps
    uint64_t max_step_rows = 0; // the most clips one step decoded
};

struct voxd_parakeet_batch_model; // weights, vocabulary, mel filters, backend
struct voxd_parakeet_clip;        // one clip's decoding state

class voxd_parakeet_batcher {
public:
    // Loads the weights of a file the caller checked (stt/parakeet-model.cpp); throws voxd_error "model_load_failed".
    voxd_parakeet_batcher(const std::string & path, const voxd_parakeet_batch_options & options);
    ~voxd_parakeet_batcher(); // stops the executor: clips still queued or running end with "closed"

    voxd_parakeet_batcher(const voxd_parakeet_batcher &)             = delete;
    voxd_parakeet_batcher & operator=(const voxd_parakeet_batcher &) = delete;

    // Shortest clip transcribed: the mel bands are normalised over the clip's frames, which takes two of them.
    static constexpr size_t min_samples = 2 * 160;
    // Longest clip: libparakeet attends over every frame up to 8192 encoder frames (655 s) and switches to a local
    // window beyond, which the batcher does not do.
    static constexpr int max_encoder_frames = 8192;

    // Computes the clip's mel on the calling thread (a libuv worker), queues it and returns; it joins the running
    // batch at the next step. `max_tokens` > 0 ends the clip once it has that many tokens. A clip shorter than
    // min_samples has no tokens. Any thread but the executor's. Throws voxd_error ("invalid_argument", "closed").
    void submit(std::shared_ptr<voxd_parakeet_task> task, const std::vector<float> & samples, int max_tokens);

    // The thread the steps run on, for the environment's cleanup hook (stopping it ends every clip with "closed").
    std::shared_ptr<voxd_executor> executor() const { return m_executor; }

    bool on_executor_thread() const; // the model's last holder may be a clip ending there (stt/parakeet-model.cpp)
    bool on_gpu() const;
    voxd_parakeet_batch_timings timings() const;

private:
    void step();
    void encode(const std::vector<voxd_parakeet_clip *> & clips);
    void decode(const std::vector<voxd_parakeet_clip *> & clips);
    void advance(voxd_parakeet_clip & clip, const float * log_probs); // the greedy TDT rule, on one step's output
    void finish(voxd_parakeet_clip & clip);

    std::unique_ptr<voxd_parakeet_batch_model> m_model;
    voxd_parakeet_batch_options m_options;

    voxd_batch_queue<voxd_parakeet_clip> m_jobs; // mel computed, waiting for a slot; then the batch

    mutable std::mutex m_timings_mutex;
    voxd_parakeet_batch_timings m_timings;

    std::shared_ptr<voxd_executor> m_executor; // last: its thread starts once the members above exist
};
