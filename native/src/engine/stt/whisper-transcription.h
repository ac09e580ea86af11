// One transcription on a Whisper model: on its batcher (the voxd_whisper_task it decodes), or, for word timestamps,
// on whisper.cpp's own path (run_whisper_cpp). Either way the segments are kept in order, the token budget applied
// and times clamped to the clip; a subclass hears of each new segment and of the end (the addon's streams them to JS:
// addon/whisper-binding.cpp).
#pragma once

#include "common/cpu-gate.h"
#include "common/error.h"
#include "stt/whisper-batch.h"
#include "stt/whisper-model.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

struct voxd_whisper_word {
    std::string word;
    int64_t t0;
    int64_t t1;
    double probability;
};

// Times in centiseconds (whisper.cpp's unit), converted to seconds only when crossing into JS.
struct voxd_whisper_segment {
    int64_t t0 = 0;
    int64_t t1 = 0;
    std::string text;
    std::vector<int32_t> tokens;
    double avg_logprob    = 0.0;
    double no_speech_prob = 0.0;
    float temperature     = 0.0f;
    std::vector<voxd_whisper_word> words;
};

class voxd_whisper_transcription : public voxd_whisper_task {
public:
    voxd_whisper_transcription(std::shared_ptr<voxd_whisper_model> model, voxd_whisper_params params, std::vector<float> samples, voxd_abort_ptr abort);

    // ---- the batcher's side (voxd_whisper_task), on its thread; on_done and on_error are the subclass's ----
    const voxd_whisper_params & params() const override { return m_params; }
    const std::vector<float> & samples() const override { return m_samples; }
    bool aborted() const override { return m_abort->load(std::memory_order_relaxed); }
    bool halted() const override { return m_halt.load(std::memory_order_relaxed); }
    void on_segment(const voxd_whisper_raw_segment & segment, const std::string & language) override;

    // whisper.cpp's path, on the calling thread: runs the whole transcription and returns its language. Throws
    // voxd_error "aborted" or "transcription_failed".
    std::string run_whisper_cpp();

    // The segments from `cursor` on, and the language so far; moves `cursor` past them. Any thread.
    std::vector<voxd_whisper_segment> segments_since(size_t & cursor, std::string & language);

    // Frees the copy of the clip once the decoding no longer needs it.
    void drop_samples();

protected:
    // A segment was added (on the runner's thread): segments_since() now returns it.
    virtual void segment_added() {}

private:
    std::string language_of(whisper_state * st) const;
    void collect(whisper_context * ctx, whisper_state * st);
    void add(const voxd_whisper_raw_segment & raw);
    static void add_to_words(std::vector<voxd_whisper_word> & words, const voxd_whisper_token & td);

    // whisper.cpp's callbacks: they run on the runner's thread (or threads it joins) and never throw
    static bool on_abort(void * data);
    static bool on_encoder_begin(whisper_context *, whisper_state *, void * data);
    static void on_logits(whisper_context *, whisper_state *, const whisper_token_data *, int n_tokens, float *, void * data);
    static void on_new_segment(whisper_context * ctx, whisper_state * st, int n_new, void * data);

    std::shared_ptr<voxd_whisper_model> m_model;
    voxd_whisper_params m_params;
    std::vector<float> m_samples;
    voxd_abort_ptr m_abort;
    std::vector<float> m_temperatures;
    int64_t m_n_samples = 0;
    int32_t m_beg       = 0; // the first timestamp token: ids between <|endoftext|> and it are not output

    // the runner's thread only (a worker, or the batcher's)
    int m_n_seen               = 0;
    int m_attempt              = -1;
    float m_window_temperature = 0.0f;
    bool m_sampled             = false;
    int m_budget               = -1; // text tokens left; -1 = no limit
    int64_t m_last_t1          = 0;
    std::string m_callback_error;
    std::string m_fixed_language; // the language given (or implied); empty = detect
    // whisper.cpp's path: the cores its graphs run on, held a window at a time (common/cpu-gate.h)
    std::optional<voxd_cpu_gate::lease> m_cores;
    int m_lease_threads = 1;

    std::atomic<bool> m_halt{ false }; // budget spent or collecting failed: whisper.cpp stops at its next check

    std::mutex m_mutex; // guards m_segments and m_language (the runner appends, the caller reads)
    std::vector<voxd_whisper_segment> m_segments;
    std::string m_language; // set with the first segment
};
