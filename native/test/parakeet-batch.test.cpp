// The Parakeet batcher (stt/parakeet-batch.h) against whisper.cpp's libparakeet (parakeet.h, parakeet-cli's code
// path) on a random-weight model: every token's id, frame, duration, times and probabilities equal to the bit, for
// each clip alone and for clips of mixed lengths in one batch (one encoder pass, every decoding step shared), on one
// thread and on two, with a clip cancelled mid-batch.
#include "harness.h"
#include "test-audio.h"

#include "common/executor.h"
#include "stt/parakeet-model.h"

#include "parakeet.h"

#include <atomic>
#include <cstring>
#include <future>
#include <memory>

namespace {

// A clip's tokens as the batcher reports them; aborted once the batcher asked `abort_after` times (-1: never).
class recorded_clip : public voxd_parakeet_task {
public:
    explicit recorded_clip(int abort_after = -1) : m_abort_after(abort_after) {}

    bool aborted() const override { return m_abort_after >= 0 && m_asked++ >= m_abort_after; }
    void on_done(std::vector<voxd_parakeet_token> tokens) override { m_result.set_value(std::move(tokens)); }
    void on_error(const std::string & code, const std::string &) override { m_result.set_exception(std::make_exception_ptr(voxd_error(code, code))); }

    std::vector<voxd_parakeet_token> tokens() { return m_future.get(); }

private:
    int m_abort_after;
    mutable std::atomic<int> m_asked{ 0 };
    std::promise<std::vector<voxd_parakeet_token>> m_result;
    std::future<std::vector<voxd_parakeet_token>> m_future = m_result.get_future();
};

std::vector<std::vector<float>> test_clips() {
    std::vector<std::vector<float>> clips;
    for (const char * file : { "speech/jfk.wav", "speech/librivox-0870.wav", "speech/librivox-0890.wav" }) {
        clips.push_back(voxd_test_decode(file, 16000, 1, 60.0).samples);
    }
    clips.push_back(std::vector<float>(clips[0].begin(), clips[0].begin() + 16000 * 3 / 2)); // 1.5 s
    return clips;
}

// libparakeet's tokens for a whole clip, as parakeet-cli decodes it.
std::vector<parakeet_token_data> reference(const std::string & path, const std::vector<float> & samples) {
    parakeet_context_params cparams = parakeet_context_default_params();
    cparams.use_gpu                 = false;
    std::unique_ptr<parakeet_context, decltype(&parakeet_free)> ctx(parakeet_init_from_file_with_params(path.c_str(), cparams), parakeet_free);
    CHECK(ctx != nullptr);
    parakeet_full_params params = parakeet_full_default_params(PARAKEET_SAMPLING_GREEDY);
    params.n_threads            = 1;
    params.no_context           = true;
    CHECK_EQ(parakeet_full(ctx.get(), params, samples.data(), (int) samples.size()), 0);
    std::vector<parakeet_token_data> tokens;
    for (int s = 0; s < parakeet_full_n_segments(ctx.get()); s++) {
        for (int i = 0; i < parakeet_full_n_tokens(ctx.get(), s); i++) {
            tokens.push_back(parakeet_full_get_token_data(ctx.get(), s, i));
        }
    }
    return tokens;
}

bool same_bits(float a, float b) {
    return std::memcmp(&a, &b, sizeof(float)) == 0;
}

void check_same(const std::vector<voxd_parakeet_token> & got, const std::vector<parakeet_token_data> & want) {
    CHECK_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
        CHECK_EQ(got[i].id, want[i].id);
        CHECK_EQ(got[i].frame, want[i].frame_index);
        CHECK_EQ(got[i].duration, want[i].duration_value);
        CHECK_EQ(got[i].t0, want[i].t0);
        CHECK_EQ(got[i].t1, want[i].t1);
        CHECK_EQ(got[i].word_start, want[i].is_word_start);
        CHECK(same_bits(got[i].p, want[i].p));
        CHECK(same_bits(got[i].plog, want[i].plog));
    }
}

void check_same(const std::vector<voxd_parakeet_token> & got, const std::vector<voxd_parakeet_token> & want) {
    CHECK_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); i++) {
        CHECK_EQ(got[i].id, want[i].id);
        CHECK_EQ(got[i].frame, want[i].frame);
        CHECK_EQ(got[i].duration, want[i].duration);
        CHECK_EQ(got[i].t0, want[i].t0);
        CHECK_EQ(got[i].t1, want[i].t1);
        CHECK(same_bits(got[i].p, want[i].p));
        CHECK(same_bits(got[i].plog, want[i].plog));
    }
}

// On a CPU the batcher encodes one clip at a time unless told (`max_encode`).
std::shared_ptr<voxd_parakeet_model> load(int threads, int max_encode = 0) {
    voxd_parakeet_batch_options options;
    options.use_gpu    = false;
    options.threads    = threads;
    options.max_encode = max_encode;
    return voxd_parakeet_model::load(voxd_test_input("VOXD_TEST_PARAKEET_MODEL"), options);
}

// Transcribes `clips` in one batch: the executor is held until every clip is queued, so they join at the same step.
std::vector<std::shared_ptr<recorded_clip>> batch(voxd_parakeet_batcher & batcher, const std::vector<std::vector<float>> & clips, int cancel = -1) {
    std::promise<void> gate;
    batcher.executor()->post([opened = gate.get_future().share()] { opened.wait(); });
    std::vector<std::shared_ptr<recorded_clip>> out;
    for (size_t i = 0; i < clips.size(); i++) {
        out.push_back(std::make_shared<recorded_clip>((int) i == cancel ? 40 : -1));
        batcher.submit(out.back(), clips[i], 0);
    }
    gate.set_value();
    return out;
}

} // namespace

VOXD_TEST("parakeet-batch: each clip alone gives libparakeet's tokens, times and probabilities to the bit") {
    const std::string path                       = voxd_test_input("VOXD_TEST_PARAKEET_MODEL");
    const std::vector<std::vector<float>> clips  = test_clips();
    const std::shared_ptr<voxd_parakeet_model> m = load(1);
    for (const std::vector<float> & clip : clips) {
        auto recorded = std::make_shared<recorded_clip>();
        m->batcher().submit(recorded, clip, 0);
        const std::vector<parakeet_token_data> want = reference(path, clip);
        CHECK(want.size() > 5); // the random model decodes something
        check_same(recorded->tokens(), want);
    }
}

VOXD_TEST("parakeet-batch: clips of mixed lengths in one batch, on 1 or 2 threads, give their tokens alone") {
    const std::vector<std::vector<float>> clips    = test_clips();
    const std::shared_ptr<voxd_parakeet_model> one = load(1);
    std::vector<std::vector<voxd_parakeet_token>> alone;
    for (const std::vector<float> & clip : clips) {
        auto recorded = std::make_shared<recorded_clip>();
        one->batcher().submit(recorded, clip, 0);
        alone.push_back(recorded->tokens());
    }
    for (int threads : { 1, 2 }) {
        const std::shared_ptr<voxd_parakeet_model> m               = load(threads, (int) clips.size()); // all in one pass
        const std::vector<std::shared_ptr<recorded_clip>> together = batch(m->batcher(), clips);
        for (size_t i = 0; i < clips.size(); i++) {
            check_same(together[i]->tokens(), alone[i]);
        }
        const voxd_parakeet_batch_timings t = m->batcher().timings();
        CHECK_EQ(t.encode_calls, (uint64_t) 1); // every clip in one encoder pass
        CHECK_EQ(t.encode_clips, (uint64_t) clips.size());
        CHECK_EQ(t.max_step_rows, (uint64_t) clips.size());
    }
}

VOXD_TEST("parakeet-batch: a clip cancelled mid-batch ends with aborted and leaves the others' tokens unchanged") {
    const std::vector<std::vector<float>> clips  = test_clips();
    const std::shared_ptr<voxd_parakeet_model> m = load(2, 4); // all four encoded together, then decoded together
    std::vector<std::vector<voxd_parakeet_token>> alone;
    for (const std::vector<float> & clip : clips) {
        auto recorded = std::make_shared<recorded_clip>();
        m->batcher().submit(recorded, clip, 0);
        alone.push_back(recorded->tokens());
    }
    const std::vector<std::shared_ptr<recorded_clip>> together = batch(m->batcher(), clips, 0);
    CHECK_THROWS_CODE(together[0]->tokens(), "aborted");
    for (size_t i = 1; i < clips.size(); i++) {
        check_same(together[i]->tokens(), alone[i]);
    }
}
