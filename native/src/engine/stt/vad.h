// Silero voice activity detection through whisper.cpp's VAD API: whole clips cut into speech segments, and live
// streams scored frame by frame.
#pragma once

#include "common/error.h"
#include "common/idle-pool.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct whisper_vad_context;

// How speech is told from silence in a whole clip; whisper.cpp's defaults unless set.
struct voxd_vad_params {
    float threshold;
    int min_speech_duration_ms;
    int min_silence_duration_ms;
    float max_speech_duration_s;
    int speech_pad_ms;

    static voxd_vad_params defaults();
};

struct voxd_vad_segment {
    double start; // seconds
    double end;
};

// whisper_vad_context holds both weights and LSTM state, so each concurrent user needs its own context.
// The pool keeps idle contexts of one model file for reuse; it is shared (shared_ptr) by its owner (the JS model),
// its streams and any call in flight, so releasing the model never frees a context in use.
class voxd_vad_pool {
public:
    explicit voxd_vad_pool(std::string path) : m_path(std::move(path)) {}
    ~voxd_vad_pool();

    struct context_deleter {
        void operator()(whisper_vad_context * ctx) const;
    };
    using context_ptr = std::unique_ptr<whisper_vad_context, context_deleter>;

    context_ptr acquire();         // an idle context (state reset) or a newly loaded one; throws model_load_failed
    void release(context_ptr ctx); // back to the pool, or freed beyond max_idle

    // The speech in a whole 16 kHz clip. Throws voxd_error "aborted" (checked before it starts) or "vad_failed".
    std::vector<voxd_vad_segment> segments(const std::vector<float> & samples, const voxd_vad_params & params, const voxd_abort_ptr & abort);

    static constexpr size_t max_idle = 4;

private:
    std::string m_path;
    voxd_idle_pool<context_ptr> m_idle{ max_idle };
};

// A streaming detector that carries LSTM state between calls, on one context of a pool held from construction
// to close() or destruction. Calls may come from any thread; they run one at a time, in the order they take the lock.
class voxd_vad_stream {
public:
    static constexpr int frame_samples = 512; // 32 ms at 16 kHz: Silero's window

    explicit voxd_vad_stream(std::shared_ptr<voxd_vad_pool> pool); // takes a context: loads one if none is idle
    ~voxd_vad_stream();                                            // gives the context back
    voxd_vad_stream(const voxd_vad_stream &)             = delete;
    voxd_vad_stream & operator=(const voxd_vad_stream &) = delete;

    // One speech probability per complete frame; a partial frame is kept for the next call. Throws voxd_error
    // "closed" after close(), "vad_failed" when the model fails.
    std::vector<float> process(const std::vector<float> & samples);
    void reset();
    void close(); // gives the context back now; later calls to process() throw "closed"

private:
    std::mutex m_mutex; // one call at a time
    std::shared_ptr<voxd_vad_pool> m_pool;
    voxd_vad_pool::context_ptr m_ctx; // null once closed
    std::vector<float> m_pending;     // samples of an incomplete frame
};
