// Whisper's decoding rules (stt/whisper-rules.h) on hand-made logits: what may follow what, as the reference
// decoder allows it.
#include "harness.h"

#include "stt/whisper-rules.h"

#include <cmath>
#include <limits>

namespace {

// An English-only model's token layout (whisper.cpp's numbering), without weights.
voxd_whisper_batch_model english_tokens() {
    voxd_whisper_batch_model m{};
    m.n_vocab      = 51864;
    m.n_text_ctx   = 448;
    m.multilingual = false;
    m.eot          = 50256;
    m.sot          = 50257;
    m.translate    = 50357;
    m.transcribe   = 50358;
    m.solm         = 50359;
    m.prev         = 50360;
    m.nosp         = 50361;
    m.notimestamps = 50362;
    m.beg          = 50363;
    m.space        = 220;
    return m;
}

voxd_whisper_sequence after(std::initializer_list<int32_t> ids) {
    voxd_whisper_sequence seq;
    for (int32_t id : ids) {
        voxd_whisper_token t;
        t.id = id;
        seq.sampled.push_back(t);
    }
    return seq;
}

std::vector<float> filtered(const voxd_whisper_batch_model & m, const voxd_whisper_sequence & seq, float text = 0.0f, float timestamp = -10.0f) {
    std::vector<float> logits((size_t) m.n_vocab, text);
    for (int32_t i = m.beg; i < m.n_vocab; i++) {
        logits[(size_t) i] = timestamp;
    }
    voxd_whisper_filter(m, seq, logits.data());
    return logits;
}

bool allowed(const std::vector<float> & logits, int32_t id) {
    return !std::isinf(logits[(size_t) id]);
}

} // namespace

VOXD_TEST("whisper-rules: a window starts with a timestamp of at most 1 s") {
    const voxd_whisper_batch_model m = english_tokens();
    const std::vector<float> l       = filtered(m, after({}));
    CHECK(!allowed(l, 100));   // text
    CHECK(!allowed(l, m.eot)); // no empty window
    CHECK(!allowed(l, m.sot)); // never a special token
    CHECK(!allowed(l, m.notimestamps));
    CHECK(allowed(l, m.beg));      // 0.00
    CHECK(allowed(l, m.beg + 50)); // 1.00
    CHECK(!allowed(l, m.beg + 51));
}

VOXD_TEST("whisper-rules: a timestamp after a timestamp pair is not allowed; text is") {
    const voxd_whisper_batch_model m = english_tokens();
    const std::vector<float> l       = filtered(m, after({ m.beg + 10 }));
    CHECK(allowed(l, 100));
    for (int32_t ts = m.beg; ts < m.beg + 1501; ts++) {
        CHECK(!allowed(l, ts));
    }
}

VOXD_TEST("whisper-rules: after text, a timestamp may close it, never one before the last") {
    const voxd_whisper_batch_model m = english_tokens();
    const std::vector<float> l       = filtered(m, after({ m.beg + 10, 100 }));
    CHECK(allowed(l, 101));
    CHECK(allowed(l, m.eot));
    CHECK(!allowed(l, m.beg + 10)); // timestamps never go back, nor repeat the opening one
    CHECK(allowed(l, m.beg + 11));
    CHECK(allowed(l, m.beg + 1500));
}

VOXD_TEST("whisper-rules: a closing timestamp is followed by a timestamp or the end, not text") {
    const voxd_whisper_batch_model m = english_tokens();
    const std::vector<float> l       = filtered(m, after({ m.beg + 10, 100, m.beg + 20 }));
    CHECK(!allowed(l, 100));
    CHECK(allowed(l, m.eot));
    CHECK(allowed(l, m.beg + 20)); // the next segment may open where this one closed
    CHECK(!allowed(l, m.beg + 19));
}

VOXD_TEST("whisper-rules: timestamps likelier together than any text token force a timestamp") {
    const voxd_whisper_batch_model m = english_tokens();
    // 1490 timestamps at 0 sum to log(1490) = 7.3 over text at 0: text is suppressed
    std::vector<float> l = filtered(m, after({ m.beg + 10, 100 }), 0.0f, 0.0f);
    CHECK(!allowed(l, 101));
    CHECK(allowed(l, m.beg + 11));
    // one text token at 10 beats them: text stays
    std::vector<float> logits((size_t) m.n_vocab, 0.0f);
    logits[101]               = 10.0f;
    voxd_whisper_sequence seq = after({ m.beg + 10, 100 });
    voxd_whisper_filter(m, seq, logits.data());
    CHECK(allowed(logits, 101));
}

VOXD_TEST("whisper-rules: logsumexp is exact, overflow-free and -inf for nothing") {
    const float two[] = { 0.0f, 0.0f };
    CHECK_NEAR(voxd_whisper_logsumexp(two, two + 2), std::log(2.0), 1e-6);
    const float big[] = { 1000.0f, 1000.0f };
    CHECK_NEAR(voxd_whisper_logsumexp(big, big + 2), 1000.0 + std::log(2.0), 1e-3);
    const float none[] = { -INFINITY, -INFINITY };
    CHECK(std::isinf(voxd_whisper_logsumexp(none, none + 2)));
}

VOXD_TEST("whisper-rules: the entropy of the last 32 tokens finds loops") {
    std::vector<voxd_whisper_token> tokens(40);
    for (size_t i = 0; i < tokens.size(); i++) {
        tokens[i].id = i < 8 ? (int32_t) i : 7; // 8 different, then the same 32 times
    }
    CHECK_NEAR(voxd_whisper_entropy(tokens), 0.0, 1e-12);
    for (size_t i = 0; i < tokens.size(); i++) {
        tokens[i].id = (int32_t) i;
    }
    CHECK_NEAR(voxd_whisper_entropy(tokens), std::log(32.0), 1e-9);
}

VOXD_TEST("whisper-rules: a cold attempt feeds the previous text behind <|startofprev|>, a hot one does not") {
    const voxd_whisper_batch_model m = english_tokens();
    voxd_whisper_sequence seq;
    seq.init         = { m.sot, m.transcribe };
    seq.past         = { 1, 2, 3 };
    seq.temperatures = { 0.0f, 0.6f };
    voxd_whisper_start_attempt(m, seq);
    CHECK_EQ(seq.feed.size(), (size_t) 6);
    CHECK_EQ(seq.feed[0], m.prev);
    CHECK_EQ(seq.feed[4], m.sot);
    seq.attempt = 1;
    voxd_whisper_start_attempt(m, seq);
    CHECK_EQ(seq.feed.size(), (size_t) 2);
    CHECK_EQ(seq.feed[0], m.sot);
}
