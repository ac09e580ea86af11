#include "stt/whisper-batch.h"
#include "stt/whisper-batch-model.h"
#include "stt/whisper-mel.h"
#include "stt/whisper-rules.h"
#include "stt/whisper-sequence.h"

#include "common/batch-queue.h"
#include "common/cpu-gate.h"
#include "common/error.h"
#include "common/executor.h"

#include "ggml-backend.h"
#include "whisper.h"

#include <algorithm>

// ---- the batcher: jobs join and leave between steps ----

voxd_whisper_batcher::voxd_whisper_batcher(const std::string & path, const voxd_whisper_batch_options & options)
    : m_model(voxd_whisper_batch_load(path, options)), m_options(options), m_executor(std::make_shared<voxd_executor>()) {
    m_options.max_batch = std::max(1, m_options.max_batch);
    // On a CPU the encoder is bound by arithmetic, so windows encoded together take as long as one after another, and
    // every window stacked into a pass holds the other jobs' decoding that much longer; a GPU gains from the batch.
    if (m_options.max_encode <= 0) {
        m_options.max_encode = m_model->w.is_cpu ? 1 : 8;
    }
}

voxd_whisper_batcher::~voxd_whisper_batcher() {
    m_executor->stop(); // the loop sees it at its next step and ends every job with "closed"
    m_jobs.close_queued("the whisper model was released");
}

bool voxd_whisper_batcher::on_executor_thread() const {
    return m_executor->on_thread();
}

bool voxd_whisper_batcher::multilingual() const {
    return m_model->multilingual;
}

int32_t voxd_whisper_batcher::timestamp_begin() const {
    return m_model->beg;
}

int voxd_whisper_batcher::n_languages() const {
    return m_model->n_langs;
}

std::vector<int32_t> voxd_whisper_batcher::hparams() const {
    const voxd_whisper_batch_model & m = *m_model;
    return { m.n_vocab,      m.n_audio_ctx, m.n_state,      m.n_audio_head, m.n_audio_layer, m.n_text_ctx,
             m.n_text_state, m.n_text_head, m.n_text_layer, m.n_mels,       m.ftype };
}

bool voxd_whisper_batcher::on_gpu() const {
    return !m_model->w.is_cpu;
}

voxd_whisper_batch_timings voxd_whisper_batcher::timings() const {
    std::lock_guard<std::mutex> lock(m_timings_mutex);
    return m_timings;
}

void voxd_whisper_batcher::submit(std::shared_ptr<voxd_whisper_task> task) {
    const voxd_whisper_batch_model & m = *m_model;
    const voxd_whisper_params & p      = task->params();
    auto seq                           = std::make_unique<voxd_whisper_sequence>();
    seq->task                          = task;
    // the language given (English for English-only models); empty = detect on the first window
    seq->language = !p.language.empty() ? p.language : m.multilingual ? "" : "en";
    if (task->samples().empty()) {
        task->on_done(seq->language.empty() ? "en" : seq->language);
        return;
    }
    if (!seq->language.empty()) {
        const int id = m.multilingual ? whisper_lang_id(seq->language.c_str()) : 0;
        seq->init    = m.multilingual ? std::vector<int32_t>{ m.sot, m.lang_token(std::max(0, id)), p.translate ? m.translate : m.transcribe }
                                      : std::vector<int32_t>{ m.sot };
    }
    if (p.temperature_inc > 0.0f) { // whisper.cpp's fallback schedule, with the same float arithmetic
        for (float t = p.temperature; t < 1.0f + 1e-6f && seq->temperatures.size() < 32; t += p.temperature_inc) {
            seq->temperatures.push_back(t);
        }
    }
    if (seq->temperatures.empty()) {
        seq->temperatures.push_back(p.temperature);
    }
    if (!p.initial_prompt.empty()) {
        // only the prompt's last n_text_ctx / 2 tokens condition a window: its tail is enough, and libstdc++'s regex
        // recurses per character, so a long run of one class would overflow the stack
        std::string tail = p.initial_prompt.substr(p.initial_prompt.size() - std::min<size_t>(p.initial_prompt.size(), 4096));
        if (tail.size() < p.initial_prompt.size()) {
            const size_t space = tail.find(' ');
            tail               = space == std::string::npos ? std::string() : tail.substr(space);
        }
        seq->past = voxd_whisper_tokenize(m, tail);
    }
    seq->n_content = (int) (task->samples().size() / VOXD_WHISPER_HOP);
    seq->mel       = voxd_whisper_mel(m.mel_filters, m.n_mels, task->samples(), seq->n_mel_frames); // here, on the caller's thread

    m_jobs.push(std::move(seq), *m_executor, [this] { m_jobs.run_until_idle(*m_executor, m_model->w.is_cpu ? m_model->threads : 1, [this] { step(); }); });
}

// One step: new jobs join, ended ones leave, sequences at a new window are encoded together, then every sequence
// with tokens to decode is decoded together.
void voxd_whisper_batcher::step() {
    m_jobs.admit(m_options.max_batch);
    std::vector<voxd_whisper_sequence *> to_encode, to_decode;
    for (size_t i = 0; i < m_jobs.active.size();) {
        voxd_whisper_sequence & seq = *m_jobs.active[i];
        const bool done             = seq.state == voxd_whisper_sequence::phase::encode && seq.seek >= seq.n_content;
        if (seq.task->aborted()) {
            seq.task->on_error("aborted", "the operation was aborted");
        } else if (seq.task->halted() || done) {
            seq.task->on_done(seq.language.empty() ? "en" : seq.language);
        } else {
            if (seq.state == voxd_whisper_sequence::phase::encode && (int) to_encode.size() < m_options.max_encode) {
                to_encode.push_back(&seq);
            }
            i++;
            continue;
        }
        m_jobs.active.erase(m_jobs.active.begin() + (ptrdiff_t) i);
    }
    for (size_t i = 0; i < to_encode.size();) { // a job whose caches do not fit fails alone
        voxd_whisper_sequence * seq = to_encode[i];
        try {
            if (!seq->caches) {
                seq->caches = std::make_unique<voxd_whisper_caches>(*m_model);
            }
            i++;
        } catch (const std::exception & e) {
            seq->task->on_error("transcription_failed", e.what());
            to_encode.erase(to_encode.begin() + (ptrdiff_t) i);
            m_jobs.active.erase(std::find_if(m_jobs.active.begin(), m_jobs.active.end(), [&](const auto & a) { return a.get() == seq; }));
        }
    }
    if (!to_encode.empty()) {
        encode(to_encode);
        for (voxd_whisper_sequence * seq : to_encode) {
            if (seq->language.empty()) {
                seq->state  = voxd_whisper_sequence::phase::detect;
                seq->feed   = { m_model->sot };
                seq->n_past = 0;
            } else {
                voxd_whisper_start_attempt(*m_model, *seq);
            }
        }
    }
    for (auto & seq : m_jobs.active) {
        if (!seq->feed.empty()) {
            to_decode.push_back(seq.get());
        }
    }
    if (!to_decode.empty()) {
        decode(to_decode);
    }
}
