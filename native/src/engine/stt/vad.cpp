#include "stt/vad.h"

#include "whisper.h"

#include <algorithm>

voxd_vad_params voxd_vad_params::defaults() {
    const whisper_vad_params w = whisper_vad_default_params();
    return { w.threshold, w.min_speech_duration_ms, w.min_silence_duration_ms, w.max_speech_duration_s, w.speech_pad_ms };
}

// ---- pool ----

void voxd_vad_pool::context_deleter::operator()(whisper_vad_context * ctx) const {
    whisper_vad_free(ctx);
}

voxd_vad_pool::~voxd_vad_pool() = default;

voxd_vad_pool::context_ptr voxd_vad_pool::acquire() {
    if (context_ptr ctx = m_idle.take()) {
        return ctx;
    }
    whisper_vad_context_params params = whisper_vad_default_context_params();
    params.n_threads                  = 1; // the model is tiny: more threads cost more in sync than they save
    params.use_gpu                    = false;
    context_ptr ctx(whisper_vad_init_from_file_with_params(m_path.c_str(), params));
    if (!ctx) {
        throw voxd_error("model_load_failed", "cannot load a Silero VAD model from " + m_path);
    }
    return ctx;
}

void voxd_vad_pool::release(context_ptr ctx) {
    whisper_vad_reset_state(ctx.get());
    m_idle.give(std::move(ctx));
}

std::vector<voxd_vad_segment> voxd_vad_pool::segments(const std::vector<float> & samples, const voxd_vad_params & params, const voxd_abort_ptr & abort) {
    voxd_check_abort(abort);
    std::vector<voxd_vad_segment> out;
    if (samples.empty()) {
        return out;
    }
    whisper_vad_params wparams      = whisper_vad_default_params();
    wparams.threshold               = params.threshold;
    wparams.min_speech_duration_ms  = params.min_speech_duration_ms;
    wparams.min_silence_duration_ms = params.min_silence_duration_ms;
    wparams.max_speech_duration_s   = params.max_speech_duration_s;
    wparams.speech_pad_ms           = params.speech_pad_ms;

    context_ptr ctx = acquire();
    std::unique_ptr<whisper_vad_segments, void (*)(whisper_vad_segments *)> segs(
        whisper_vad_segments_from_samples(ctx.get(), wparams, samples.data(), (int) samples.size()), whisper_vad_free_segments);
    release(std::move(ctx));
    if (!segs) {
        throw voxd_error("vad_failed", "voice activity detection failed");
    }
    const int n = whisper_vad_segments_n_segments(segs.get());
    for (int i = 0; i < n; i++) {
        // whisper.cpp reports whole centiseconds; dividing in double keeps 0.32 as 0.32
        out.push_back({ whisper_vad_segments_get_segment_t0(segs.get(), i) / 100.0, whisper_vad_segments_get_segment_t1(segs.get(), i) / 100.0 });
    }
    return out;
}

// ---- stream ----

voxd_vad_stream::voxd_vad_stream(std::shared_ptr<voxd_vad_pool> pool) : m_pool(std::move(pool)), m_ctx(m_pool->acquire()) {}

voxd_vad_stream::~voxd_vad_stream() {
    close();
}

std::vector<float> voxd_vad_stream::process(const std::vector<float> & samples) {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_ctx) {
        throw voxd_error("closed", "the VAD stream is closed");
    }
    m_pending.insert(m_pending.end(), samples.begin(), samples.end());
    const size_t n_full = m_pending.size() / frame_samples * frame_samples;
    std::vector<float> out;
    if (n_full == 0) {
        return out;
    }
    if (!whisper_vad_detect_speech_no_reset(m_ctx.get(), m_pending.data(), (int) n_full)) {
        throw voxd_error("vad_failed", "voice activity detection failed");
    }
    const int n     = whisper_vad_n_probs(m_ctx.get());
    const float * p = whisper_vad_probs(m_ctx.get());
    out.assign(p, p + n);
    m_pending.erase(m_pending.begin(), m_pending.begin() + (std::ptrdiff_t) n_full);
    return out;
}

void voxd_vad_stream::reset() {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_pending.clear();
    if (m_ctx) {
        whisper_vad_reset_state(m_ctx.get());
    }
}

void voxd_vad_stream::close() {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_ctx) {
        m_pool->release(std::move(m_ctx));
    }
    m_ctx.reset();
}
