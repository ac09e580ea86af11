// The batched Parakeet's scheduling: clips join between steps, are encoded together, then decoded one TDT step of
// each per graph until their last frame; the greedy rule is libparakeet's (parakeet_decode), applied per clip.
#include "stt/parakeet-batch.h"
#include "stt/parakeet-batch-model.h"

#include "common/batch-queue.h"
#include "common/cpu-gate.h"
#include "common/error.h"
#include "common/executor.h"

#include <algorithm>
#include <cmath>

voxd_parakeet_batcher::voxd_parakeet_batcher(const std::string & path, const voxd_parakeet_batch_options & options)
    : m_model(voxd_parakeet_batch_load(path, options)), m_options(options), m_executor(std::make_shared<voxd_executor>()) {
    m_options.max_batch = std::max(1, m_options.max_batch);
    if (m_options.max_encode <= 0) {
        m_options.max_encode = m_model->w.is_cpu ? 1 : m_options.max_batch;
    }
}

voxd_parakeet_batcher::~voxd_parakeet_batcher() {
    m_executor->stop(); // the loop sees it at its next step and ends every clip with "closed"
    m_jobs.close_queued("the Parakeet model was released");
}

bool voxd_parakeet_batcher::on_executor_thread() const {
    return m_executor->on_thread();
}

bool voxd_parakeet_batcher::on_gpu() const {
    return !m_model->w.is_cpu;
}

voxd_parakeet_batch_timings voxd_parakeet_batcher::timings() const {
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    return m_timings;
}

void voxd_parakeet_batcher::submit(std::shared_ptr<voxd_parakeet_task> task, const std::vector<float> & samples, int max_tokens) {
    if (samples.size() < min_samples) {
        task->on_done({});
        return;
    }
    // three stride-2 convolutions: ceil(mel frames / 8) encoder frames, mel frames = samples / hop + 1
    const size_t n_frames = (samples.size() / VOXD_PARAKEET_HOP + 1 + VOXD_PARAKEET_SUBSAMPLING - 1) / VOXD_PARAKEET_SUBSAMPLING;
    if (n_frames > (size_t) max_encoder_frames) {
        throw voxd_error("invalid_argument", "the clip is longer than the Parakeet engine takes in one piece (" +
                                                 std::to_string(max_encoder_frames * VOXD_PARAKEET_SUBSAMPLING / 100) + " s): cut it at pauses");
    }
    auto clip        = std::make_unique<voxd_parakeet_clip>();
    clip->task       = std::move(task);
    clip->max_tokens = max_tokens;
    clip->mel        = voxd_parakeet_mel(*m_model, samples, clip->n_mel_frames); // here, on the caller's thread
    clip->n_frames   = (int) n_frames;
    clip->pending    = m_model->blank(); // the prediction network starts from the blank

    m_jobs.push(std::move(clip), *m_executor, [this] { m_jobs.run_until_idle(*m_executor, m_model->w.is_cpu ? m_model->threads : 1, [this] { step(); }); });
}

void voxd_parakeet_batcher::step() {
    m_jobs.admit(m_options.max_batch);
    std::vector<voxd_parakeet_clip *> stacked, to_decode;
    for (size_t i = 0; i < m_jobs.active.size();) {
        voxd_parakeet_clip & clip = *m_jobs.active[i];
        const bool done           = clip.encoded && (clip.frame >= clip.n_frames || (clip.max_tokens > 0 && (int) clip.tokens.size() >= clip.max_tokens));
        if (clip.task->aborted()) {
            clip.task->on_error("aborted", "the operation was aborted");
        } else if (done) {
            finish(clip);
        } else {
            i++;
            continue;
        }
        m_jobs.active.erase(m_jobs.active.begin() + (ptrdiff_t) i);
    }
    for (size_t i = 0; i < m_jobs.active.size();) { // a clip whose buffers do not fit fails alone
        voxd_parakeet_clip & clip = *m_jobs.active[i];
        if (!clip.encoded && !clip.buf) {
            try {
                clip.allocate(*m_model);
            } catch (const std::exception & e) {
                clip.task->on_error("transcription_failed", e.what());
                m_jobs.active.erase(m_jobs.active.begin() + (ptrdiff_t) i);
                continue;
            }
        }
        i++;
    }
    // Which clips to encode now. On a CPU the encoder is bound by arithmetic: a pass of several clips takes as long as
    // encoding them one after another, and holds every one of them (and the decoding of the others) until the last is
    // encoded. So there (max_encode 1) a clip is encoded once the clips being decoded, a small share of the time, are
    // done: clips finish in the order they came, each about as soon as it would alone. On a GPU a pass of many clips
    // costs little more than one: every waiting clip is encoded at once, between decoding steps. A clip too short
    // for its products to take the kernel they take alone in a stack (under 0.2 s on x86) is encoded by itself.
    const bool decoding = std::any_of(m_jobs.active.begin(), m_jobs.active.end(), [](const auto & clip) { return clip->encoded; });
    int budget          = m_options.max_encode > 1 || !decoding ? m_options.max_encode : 0;
    for (auto & clip : m_jobs.active) {
        if (!clip->encoded && budget-- > 0) {
            if (clip->n_frames >= VOXD_MIN_PRODUCT_ROWS) {
                stacked.push_back(clip.get());
            } else {
                encode({ clip.get() });
                clip->encoded = true;
                clip->mel     = std::vector<float>();
            }
        }
    }
    if (!stacked.empty()) {
        encode(stacked);
    }
    for (voxd_parakeet_clip * clip : stacked) {
        clip->encoded = true;
        clip->mel     = std::vector<float>();
    }
    for (auto & clip : m_jobs.active) {
        if (clip->encoded) {
            to_decode.push_back(clip.get());
        }
    }
    if (!to_decode.empty()) {
        decode(to_decode);
    }
}

// libparakeet's greedy TDT rule on one step's log-probabilities (tokens, blank, then durations): the best token and
// the best duration; a blank advances by its duration (at least 1), a token is emitted at the current frame and
// advances by its duration, and after n_max_symbols tokens at one frame the frame advances by one.
void voxd_parakeet_batcher::advance(voxd_parakeet_clip & clip, const float * log_probs) {
    const voxd_parakeet_batch_model & m = *m_model;
    const int n_token_logits            = m.blank() + 1;
    int best_token = 0, best_duration = 0;
    float best_logit = -1e10f, best_duration_logit = -1e10f;
    for (int i = 0; i < n_token_logits; i++) {
        if (log_probs[i] > best_logit) {
            best_logit = log_probs[i];
            best_token = i;
        }
    }
    for (int i = 0; i < m.n_durations; i++) {
        if (log_probs[n_token_logits + i] > best_duration_logit) {
            best_duration_logit = log_probs[n_token_logits + i];
            best_duration       = i;
        }
    }
    int duration = m.durations[(size_t) best_duration];
    if (best_token == m.blank()) {
        clip.frame += std::max(duration, 1);
        clip.symbols = 0;
        return;
    }
    float sum = 0.0f; // the token's probability among the tokens and the blank
    for (int i = 0; i < n_token_logits; i++) {
        sum += expf(log_probs[i]);
    }
    voxd_parakeet_token t;
    t.id         = best_token;
    t.text       = m.texts[(size_t) best_token];
    t.frame      = clip.frame;
    t.duration   = duration;
    t.p          = expf(best_logit) / sum;
    t.plog       = best_logit;
    t.t0         = (int64_t) clip.frame * VOXD_PARAKEET_SUBSAMPLING;
    t.t1         = (int64_t) (clip.frame + duration) * VOXD_PARAKEET_SUBSAMPLING;
    t.word_start = m.word_starts[(size_t) best_token];
    clip.tokens.push_back(std::move(t));
    clip.pending = best_token;
    if (duration > 0) {
        clip.frame += duration;
        clip.symbols = 0;
    } else if (++clip.symbols >= m.n_max_symbols) {
        clip.frame += 1;
        clip.symbols = 0;
    }
}

// A clip is done: punctuation is timed at the end of the word before it (libparakeet's refine_timestamps_tdt), and
// the tokens go to its task.
void voxd_parakeet_batcher::finish(voxd_parakeet_clip & clip) {
    std::vector<voxd_parakeet_token> tokens = std::move(clip.tokens);
    if (clip.max_tokens > 0 && (int) tokens.size() > clip.max_tokens) {
        tokens.resize((size_t) clip.max_tokens);
    }
    int64_t word_end = -1;
    for (voxd_parakeet_token & t : tokens) {
        if (!m_model->punctuation[(size_t) t.id]) {
            word_end = t.t1;
        } else if (word_end >= 0) {
            t.t0 = t.t1 = word_end;
        }
    }
    clip.task->on_done(std::move(tokens));
}
