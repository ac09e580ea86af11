#include "stt/whisper-transcription.h"

#include "common/ggml-graph.h"

#include "whisper.h"

#include <algorithm>
#include <cmath>

voxd_whisper_transcription::voxd_whisper_transcription(std::shared_ptr<voxd_whisper_model> model, voxd_whisper_params params, std::vector<float> samples,
                                                       voxd_abort_ptr abort)
    : m_model(std::move(model)), m_params(std::move(params)), m_samples(std::move(samples)), m_abort(std::move(abort)) {
    // whisper.cpp's fallback schedule, rebuilt with the same float arithmetic to name each segment's temperature
    if (m_params.temperature_inc > 0.0f) {
        for (float t = m_params.temperature; t < 1.0f + 1e-6f && m_temperatures.size() < 32; t += m_params.temperature_inc) {
            m_temperatures.push_back(t);
        }
    } else {
        m_temperatures.push_back(m_params.temperature);
    }
    m_budget    = m_params.max_tokens > 0 ? m_params.max_tokens : -1;
    m_n_samples = (int64_t) m_samples.size();
    m_beg       = m_model->batcher().timestamp_begin();
}

// ---- the batcher's side (voxd_whisper_task), on its thread ----

void voxd_whisper_transcription::on_segment(const voxd_whisper_raw_segment & segment, const std::string & language) {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_language = language;
    }
    add(segment);
}

// ---- whisper.cpp's path ----

std::string voxd_whisper_transcription::run_whisper_cpp() {
    voxd_check_abort(m_abort);
    whisper_context * ctx   = m_model->context();
    const bool multilingual = whisper_is_multilingual(ctx);
    // English-only models have no language token: nothing to detect
    const std::string fixed_language = !m_params.language.empty() ? m_params.language : multilingual ? "" : "en";
    if (m_samples.empty()) {
        return fixed_language.empty() ? "en" : fixed_language; // whisper.cpp would detect on a stale spectrogram
    }
    m_fixed_language = fixed_language;

    voxd_whisper_model::state_ptr st = m_model->acquire();

    whisper_full_params wp = whisper_full_default_params(WHISPER_SAMPLING_GREEDY);
    wp.n_threads           = m_params.threads > 0 ? m_params.threads : std::min(4, voxd_cpu_gate::available_cores());
    wp.translate           = m_params.translate;
    wp.no_context          = true; // clears any text a pooled state kept from its previous request
    wp.print_progress      = false;
    wp.print_realtime      = false;
    wp.print_timestamps    = false;
    wp.print_special       = false;
    wp.token_timestamps    = m_params.word_timestamps;
    wp.max_tokens          = std::max(0, m_params.max_tokens);
    wp.language            = fixed_language.empty() ? nullptr : fixed_language.c_str();
    wp.initial_prompt      = m_params.initial_prompt.empty() ? nullptr : m_params.initial_prompt.c_str();
    wp.temperature         = m_params.temperature;
    wp.temperature_inc     = m_params.temperature_inc;
    if (m_params.no_context) {
        // no_context in whisper.cpp only clears history at the start; windows still see the text before
        // them unless the text context is sized to the initial prompt alone (or to nothing). A token covers
        // at least one byte, so the buffer always suffices (a short one makes whisper.cpp log an error).
        std::vector<whisper_token> prompt(m_params.initial_prompt.size() + 1);
        const int n_prompt = m_params.initial_prompt.empty() ? 0 : whisper_tokenize(ctx, m_params.initial_prompt.c_str(), prompt.data(), (int) prompt.size());
        wp.n_max_text_ctx  = n_prompt > 0 ? n_prompt + 1 : 0; // + <|startofprev|>
        wp.carry_initial_prompt = n_prompt > 0;
    }

    wp.new_segment_callback             = on_new_segment;
    wp.new_segment_callback_user_data   = this;
    wp.encoder_begin_callback           = on_encoder_begin;
    wp.encoder_begin_callback_user_data = this;
    wp.logits_filter_callback           = on_logits;
    wp.logits_filter_callback_user_data = this;
    wp.abort_callback                   = on_abort;
    wp.abort_callback_user_data         = this;

    // whisper.cpp runs every graph of the transcription inside this one call: the job holds the cores from the
    // start, and gives them back and waits its turn again at each new window (on_encoder_begin), so that other
    // models step between windows; on a GPU it keeps no team of CPU threads busy
    m_lease_threads = m_model->use_gpu() && voxd_gpu_available() ? 1 : wp.n_threads;
    m_cores.emplace(m_lease_threads);
    const int ret = whisper_full_with_state(ctx, st.get(), wp, m_samples.data(), (int) m_samples.size());
    m_cores.reset();
    m_samples = std::vector<float>(); // a long clip's copy need not outlive the decoding
    if (ret == -7) {
        (void) st.release(); // on this path (KV cache allocation failed) whisper_full_with_state frees the state itself
        voxd_check_abort(m_abort);
        throw voxd_error("transcription_failed", "whisper.cpp could not allocate its KV cache (out of memory?)");
    }

    if (!m_callback_error.empty()) {
        throw voxd_error("transcription_failed", m_callback_error);
    }
    voxd_check_abort(m_abort); // also after a 0: an encoder_begin_callback refusal ends whisper_full "successfully"
    if (ret != 0) {
        if (!m_halt.load()) {
            throw voxd_error("transcription_failed", "whisper.cpp failed to transcribe (whisper_full error " + std::to_string(ret) + ")");
        }
        // else: the token budget was spent and decoding was stopped on purpose; the segments so far stand
    } else {
        collect(ctx, st.get()); // segments whisper.cpp finished without a callback (none expected)
    }

    const std::string language = language_of(st.get());
    // decoder 0's sampling RNG is seeded only when a state is created: a state that sampled at t > 0 would
    // make the next request on it decode differently, so only states that stayed greedy go back to the pool
    if (ret == 0 && !m_sampled) {
        m_model->release(std::move(st));
    }
    return language;
}

// The language decoded with: given, English for English-only models, else what whisper.cpp detected.
std::string voxd_whisper_transcription::language_of(whisper_state * st) const {
    if (!m_fixed_language.empty()) {
        return m_fixed_language;
    }
    const int id = whisper_full_lang_id_from_state(st);
    return id >= 0 && id <= whisper_lang_max_id() ? whisper_lang_str(id) : "en";
}

// ---- whisper.cpp callbacks: they run on the worker thread (or threads it joins) and never throw ----

bool voxd_whisper_transcription::on_abort(void * data) {
    auto * job = static_cast<voxd_whisper_transcription *>(data);
    return job->aborted() || job->halted();
}

// Before each 30 s window: the temperature attempts start over. The abort callback is only polled after
// a whole encoder pass, so an abort that came during language detection (or the previous window) stops
// here instead of paying for one more pass; whisper.cpp then returns 0 and run() sees the flag.
bool voxd_whisper_transcription::on_encoder_begin(whisper_context *, whisper_state *, void * data) {
    auto * job     = static_cast<voxd_whisper_transcription *>(data);
    job->m_attempt = -1;
    job->m_cores.reset();
    job->m_cores.emplace(job->m_lease_threads);
    return !on_abort(data);
}

// Called before each sampling step. With no tokens yet it is the first step of a temperature attempt, and
// whisper.cpp makes that call from one thread; later calls may come from several threads and only return.
void voxd_whisper_transcription::on_logits(whisper_context *, whisper_state *, const whisper_token_data *, int n_tokens, float *, void * data) {
    if (n_tokens != 0) {
        return;
    }
    auto * job = static_cast<voxd_whisper_transcription *>(data);
    job->m_attempt++;
    job->m_window_temperature = job->m_temperatures[(size_t) std::min<int>(job->m_attempt, (int) job->m_temperatures.size() - 1)];
    if (job->m_window_temperature > 0.0f) {
        job->m_sampled = true;
    }
}

void voxd_whisper_transcription::on_new_segment(whisper_context * ctx, whisper_state * st, int /*n_new*/, void * data) {
    auto * job = static_cast<voxd_whisper_transcription *>(data);
    try {
        job->collect(ctx, st);
    } catch (const std::exception & e) {
        job->m_callback_error = e.what();
        job->m_halt.store(true);
    } catch (...) {
        job->m_callback_error = "unknown error while collecting segments";
        job->m_halt.store(true);
    }
}

// Takes the segments whisper.cpp added since the last call.
void voxd_whisper_transcription::collect(whisper_context * ctx, whisper_state * st) {
    const int n = whisper_full_n_segments_from_state(st);
    for (; m_n_seen < n; m_n_seen++) {
        voxd_whisper_raw_segment raw;
        raw.t0                  = whisper_full_get_segment_t0_from_state(st, m_n_seen);
        raw.t1                  = whisper_full_get_segment_t1_from_state(st, m_n_seen);
        raw.no_speech_prob      = whisper_full_get_segment_no_speech_prob_from_state(st, m_n_seen);
        raw.temperature         = m_window_temperature;
        const whisper_token eot = whisper_token_eot(ctx);
        const int n_tokens      = whisper_full_n_tokens_from_state(st, m_n_seen);
        for (int j = 0; j < n_tokens; j++) {
            const whisper_token_data td = whisper_full_get_token_data_from_state(st, m_n_seen, j);
            voxd_whisper_token t;
            t.id   = td.id;
            t.p    = td.p;
            t.plog = td.plog;
            t.t0   = td.t0;
            t.t1   = td.t1;
            if (td.id < eot) {
                t.text = whisper_full_get_token_text_from_state(ctx, st, m_n_seen, j);
            }
            raw.tokens.push_back(std::move(t));
        }
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (m_language.empty()) {
                m_language = language_of(st); // detection is over once segments come
            }
        }
        add(raw);
    }
}

// A decoder's segment: applies the token budget, clamps its times to the clip and keeps them in order, and
// queues it for JS. Text tokens have text; <|endoftext|>, task and language tokens are not part of the output.
void voxd_whisper_transcription::add(const voxd_whisper_raw_segment & raw) {
    if (m_halt.load()) {
        return; // budget spent: the rest is dropped
    }
    const int64_t duration = m_n_samples * 100 / WHISPER_SAMPLE_RATE;
    voxd_whisper_segment seg;
    // with few tokens (or untrained weights) a window's last segment can end past the end of the audio
    seg.t0             = std::clamp<int64_t>(raw.t0, m_last_t1, duration);
    seg.t1             = std::clamp<int64_t>(raw.t1, seg.t0, duration);
    seg.no_speech_prob = raw.no_speech_prob;
    seg.temperature    = raw.temperature;

    double sum_logprob = 0.0;
    bool budget_hit    = false;
    for (const voxd_whisper_token & t : raw.tokens) {
        const bool is_text = !t.text.empty();
        if (!is_text && t.id < m_beg) {
            continue;
        }
        if (is_text && m_budget >= 0) {
            if (m_budget == 0) {
                budget_hit = true;
                break;
            }
            m_budget--;
        }
        seg.tokens.push_back(t.id);
        sum_logprob += std::isfinite(t.plog) ? t.plog : 0.0;
        if (!is_text) {
            continue;
        }
        seg.text += t.text;
        if (m_params.word_timestamps) {
            add_to_words(seg.words, t);
        }
    }
    seg.avg_logprob = seg.tokens.empty() ? 0.0 : sum_logprob / (double) seg.tokens.size();
    if (budget_hit || m_budget == 0) {
        m_halt.store(true); // stops decoding at the next step (graph boundary)
    }

    int64_t last = seg.t0;
    for (voxd_whisper_word & w : seg.words) {
        w.t0 = std::clamp<int64_t>(w.t0, last, seg.t1);
        w.t1 = std::clamp<int64_t>(w.t1, w.t0, seg.t1);
        last = w.t1;
    }
    m_last_t1 = seg.t1;
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_segments.push_back(std::move(seg));
    }
    segment_added();
}

// A token that starts with a space starts a word; other tokens (word pieces, punctuation) extend the last one.
void voxd_whisper_transcription::add_to_words(std::vector<voxd_whisper_word> & words, const voxd_whisper_token & td) {
    std::string text(td.text);
    const bool starts_word = words.empty() || (!text.empty() && text[0] == ' ');
    const size_t first     = text.find_first_not_of(' ');
    text                   = first == std::string::npos ? "" : text.substr(first);
    if (starts_word) {
        if (!text.empty()) {
            words.push_back({ text, td.t0, td.t1, td.p });
        }
        return;
    }
    voxd_whisper_word & w = words.back();
    w.word += text;
    w.t1          = std::max(w.t1, td.t1);
    w.probability = std::min(w.probability, (double) td.p); // a word is as certain as its least certain piece
}

// ---- what the caller reads ----

std::vector<voxd_whisper_segment> voxd_whisper_transcription::segments_since(size_t & cursor, std::string & language) {
    std::lock_guard<std::mutex> lock(m_mutex);
    language = m_language;
    std::vector<voxd_whisper_segment> out(m_segments.begin() + (std::ptrdiff_t) std::min(cursor, m_segments.size()), m_segments.end());
    cursor = m_segments.size();
    return out;
}

void voxd_whisper_transcription::drop_samples() {
    m_samples = std::vector<float>();
}
