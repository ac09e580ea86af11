// Whisper's decoding rules, as the reference decoder applies them: suppression and timestamp rules on the logits,
// the choice of each sequence's next token, and the end of a window with its temperature fallback.
#include "stt/whisper-batch.h"
#include "stt/whisper-batch-model.h"
#include "stt/whisper-rules.h"
#include "stt/whisper-sequence.h"

#include "common/error.h"
#include "common/executor.h"

#include "whisper.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

void voxd_whisper_start_attempt(const voxd_whisper_batch_model & m, voxd_whisper_sequence & seq) {
    seq.feed.clear();
    if (!seq.past.empty() && seq.temperature() < 0.5f) {   // hot attempts decode without the previous text, as whisper.cpp does
        const size_t keep = (size_t) m.n_text_ctx / 2 - 1; // the most recent text, as whisper.cpp keeps it
        seq.feed.push_back(m.prev);
        seq.feed.insert(seq.feed.end(), seq.past.end() - (ptrdiff_t) std::min(keep, seq.past.size()), seq.past.end());
    }
    seq.feed.insert(seq.feed.end(), seq.init.begin(), seq.init.end());
    seq.n_past = 0;
    seq.sampled.clear();
    seq.sum_logprob = 0.0;
    // sampling draws depend on the window and the attempt only, never on the batch
    seq.rng.seed((uint32_t) seq.seek * 31u + (uint32_t) seq.attempt);
    seq.state = voxd_whisper_sequence::phase::decode;
}

float voxd_whisper_logsumexp(const float * first, const float * last) {
    const float mx = *std::max_element(first, last);
    if (std::isinf(mx)) {
        return mx;
    }
    double sum = 0.0;
    for (const float * v = first; v != last; v++) {
        sum += std::exp((double) (*v - mx));
    }
    return mx + (float) std::log(sum);
}

void voxd_whisper_filter(const voxd_whisper_batch_model & m, const voxd_whisper_sequence & seq, float * logits) {
    const float ninf = -INFINITY;
    auto suppress    = [&](int32_t from, int32_t to) {
        for (int32_t i = std::max(0, from); i < std::min(to, m.n_vocab); i++) {
            logits[(size_t) i] = ninf;
        }
    };
    suppress(m.eot + 1, m.beg); // <|startoftranscript|>, languages, tasks, <|nospeech|>, <|notimestamps|>, ...
    suppress(m.beg + VOXD_WHISPER_MAX_TS + 1, m.n_vocab);
    const size_t n = seq.sampled.size();
    if (n == 0) {
        logits[(size_t) m.eot] = ninf; // no empty window, no leading blank
        if (m.space >= 0) {
            logits[(size_t) m.space] = ninf;
        }
        suppress(0, m.beg); // a window starts with a timestamp, at most 1 s in
        suppress(m.beg + VOXD_WHISPER_MAX_INIT_TS + 1, m.n_vocab);
    }
    const bool last_ts = n >= 1 && seq.sampled[n - 1].id >= m.beg;
    const bool pen_ts  = n < 2 || seq.sampled[n - 2].id >= m.beg;
    if (last_ts) {
        if (pen_ts) {
            suppress(m.beg, m.n_vocab); // a pair of timestamps is followed by text
        } else {
            suppress(0, m.eot); // text is closed by a timestamp (or the end)
        }
    }
    for (size_t i = n; i-- > 0;) { // timestamps never go back
        if (seq.sampled[i].id >= m.beg) {
            suppress(m.beg, seq.sampled[i].id + (last_ts && !pen_ts ? 0 : 1));
            break;
        }
    }
    // when the timestamps together are likelier than any text token, a timestamp comes next (the normaliser of the
    // probabilities cancels out of the comparison)
    const float ts_lse   = voxd_whisper_logsumexp(logits + m.beg, logits + m.n_vocab);
    const float max_text = *std::max_element(logits, logits + m.beg);
    if (!std::isinf(ts_lse) && ts_lse > max_text) {
        suppress(0, m.beg);
    }
}

double voxd_whisper_entropy(const std::vector<voxd_whisper_token> & tokens) {
    const size_t n = std::min<size_t>(tokens.size(), 32); // the last 32, as whisper.cpp counts them
    std::map<int32_t, int> counts;
    for (size_t i = tokens.size() - n; i < tokens.size(); i++) {
        counts[tokens[i].id]++;
    }
    double entropy = 0.0;
    for (const auto & [id, c] : counts) {
        const double p = (double) c / (double) n;
        entropy -= p * std::log(p);
    }
    return entropy;
}

void voxd_whisper_batcher::apply_logits(voxd_whisper_sequence & seq, float * logits) {
    const voxd_whisper_batch_model & m = *m_model;
    float * end                        = logits + m.n_vocab;

    if (seq.state == voxd_whisper_sequence::phase::detect) {
        int best = 0;
        for (int i = 1; i < std::min(m.n_langs, whisper_lang_max_id() + 1); i++) {
            if (logits[m.lang_token(i)] > logits[m.lang_token(best)]) {
                best = i;
            }
        }
        seq.language = whisper_lang_str(best);
        seq.init     = { m.sot, m.lang_token(best), seq.task->params().translate ? m.translate : m.transcribe };
        voxd_whisper_start_attempt(m, seq);
        return;
    }

    if (seq.sampled.empty()) {
        seq.no_speech_prob = std::exp((double) (logits[m.nosp] - voxd_whisper_logsumexp(logits, end)));
    }
    voxd_whisper_filter(m, seq, logits);

    int32_t id       = 0;
    const float temp = seq.temperature();
    if (temp <= 0.0f) {
        id = (int32_t) (std::max_element(logits, end) - logits); // the first of equal maxima
    } else {
        const float mx = *std::max_element(logits, end);
        auto weight    = [&](float v) { return std::isinf(v) ? 0.0 : std::exp((double) (v - mx) / temp); };
        double sum     = 0.0;
        for (const float * v = logits; v != end; v++) {
            sum += weight(*v);
        }
        const double u = (double) (seq.rng() >> 8) / (double) (1u << 24) * sum;
        double acc     = 0.0;
        id             = m.n_vocab - 1;
        for (int32_t i = 0; i < m.n_vocab; i++) {
            const double w = weight(logits[i]);
            acc += w;
            if (w > 0.0 && acc > u) {
                id = i;
                break;
            }
        }
    }
    const float plog = logits[id] - voxd_whisper_logsumexp(logits, end);
    seq.sum_logprob += plog;

    const int max_len = m.n_text_ctx / 2 - 4;
    if (id != m.eot) {
        voxd_whisper_token t;
        t.id   = id;
        t.plog = plog;
        t.p    = std::exp(plog);
        if (id < m.eot && (size_t) id < m.vocab.size()) {
            t.text = m.vocab[(size_t) id];
        }
        seq.sampled.push_back(std::move(t));
    }
    if (id == m.eot || (int) seq.sampled.size() >= max_len || seq.n_past + 1 >= m.n_text_ctx) {
        end_attempt(seq, id == m.eot);
    } else {
        seq.feed = { id };
    }
}

// A window's decoding is over: falls back to the next temperature when it failed the checks, else hands its
// segments to the job and moves to the next window.
void voxd_whisper_batcher::end_attempt(voxd_whisper_sequence & seq, bool ended) {
    const voxd_whisper_batch_model & m = *m_model;
    const size_t n_tokens              = seq.sampled.size() + (ended ? 1 : 0);
    const double avg_logprob           = n_tokens ? seq.sum_logprob / (double) n_tokens : 0.0;
    const bool silent                  = seq.no_speech_prob > VOXD_WHISPER_NO_SPEECH_THOLD && avg_logprob < VOXD_WHISPER_LOGPROB_THOLD;
    const bool failed =
        !silent && (avg_logprob < VOXD_WHISPER_LOGPROB_THOLD || (seq.sampled.size() > 32 && voxd_whisper_entropy(seq.sampled) < VOXD_WHISPER_ENTROPY_THOLD));
    if (failed && (size_t) seq.attempt + 1 < seq.temperatures.size()) {
        seq.attempt++;
        voxd_whisper_start_attempt(m, seq);
        return;
    }

    const int window  = std::min(2 * m.n_audio_ctx, seq.n_content - seq.seek);
    int advance       = window;
    const auto ts_of  = [&](const voxd_whisper_token & t) { return (int64_t) (t.id - m.beg) * 2; }; // centiseconds
    const auto & toks = seq.sampled;
    const size_t n    = toks.size();
    if (!silent) {
        // the reference decoder's segmentation: text between timestamps; a pair of timestamps closes one segment and
        // opens the next; text the window cut off (no closing timestamp) is decoded again in the next window
        std::vector<size_t> cuts; // indices i where toks[i-1] and toks[i] are both timestamps
        for (size_t i = 1; i < n; i++) {
            if (toks[i - 1].id >= m.beg && toks[i].id >= m.beg) {
                cuts.push_back(i);
            }
        }
        const bool single_ending = n >= 2 && toks[n - 1].id >= m.beg && toks[n - 2].id < m.beg;
        if (single_ending) {
            cuts.push_back(n);
        }
        auto emit = [&](size_t from, size_t to, int64_t t0, int64_t t1) {
            voxd_whisper_raw_segment seg;
            seg.t0             = seq.seek + t0;
            seg.t1             = seq.seek + t1;
            seg.no_speech_prob = seq.no_speech_prob;
            seg.temperature    = seq.temperature();
            seg.tokens.assign(toks.begin() + (ptrdiff_t) from, toks.begin() + (ptrdiff_t) to);
            bool has_text = false;
            for (const voxd_whisper_token & t : seg.tokens) {
                has_text = has_text || t.id < m.eot;
            }
            if (has_text) {
                seq.task->on_segment(seg, seq.language);
            }
        };
        if (!cuts.empty()) {
            size_t last = 0;
            for (size_t cut : cuts) {
                const int64_t t0 = toks[last].id >= m.beg ? ts_of(toks[last]) : 0;
                const int64_t t1 = ts_of(toks[cut - 1]);
                emit(last, cut, t0, t1);
                last = cut;
            }
            if (!single_ending) {
                advance = (int) ts_of(toks[cuts.back() - 1]);
            }
        } else {
            int64_t t1 = window;
            for (size_t i = n; i-- > 0;) {
                if (toks[i].id >= m.beg && toks[i].id > m.beg) {
                    t1 = ts_of(toks[i]);
                    break;
                }
            }
            emit(0, n, n && toks[0].id >= m.beg ? ts_of(toks[0]) : 0, t1);
        }
        if (!seq.task->params().no_context && seq.temperature() < 0.5f) {
            for (const voxd_whisper_token & t : toks) {
                seq.past.push_back(t.id);
            }
        }
    }
    seq.seek += std::max(1, std::min(advance, window));
    seq.attempt = 0;
    seq.state   = voxd_whisper_sequence::phase::encode;
}
