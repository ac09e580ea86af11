// Every engine loop stops at an abort flag: set before the call, or set from inside the work (the first audio or
// segment), each call ends with voxd_error "aborted" and nothing else.
#include "harness.h"
#include "test-audio.h"

#include "audio/separator.h"
#include "stt/sphinx.h"
#include "stt/vad.h"
#include "stt/whisper-model.h"
#include "stt/whisper-transcription.h"
#include "tts/flite.h"
#include "tts/ggml/tts-model.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace {

voxd_abort_ptr aborted_flag() {
    voxd_abort_ptr flag = voxd_never_aborted();
    flag->store(true);
    return flag;
}

// A sink that sets `flag` once audio arrives: the synthesis must stop at its next check.
class aborting_sink : public voxd_pcm_sink {
public:
    explicit aborting_sink(voxd_abort_ptr flag) : m_flag(std::move(flag)) {}
    void append(const float *, size_t n) override {
        samples += n;
        m_flag->store(true);
    }
    void ready(size_t) override {}
    size_t samples = 0;

private:
    voxd_abort_ptr m_flag;
};

// A transcription that records how it ended, for the batcher's path.
class recorded_transcription : public voxd_whisper_transcription {
public:
    using voxd_whisper_transcription::voxd_whisper_transcription;

    void on_done(const std::string &) override { end("done"); }
    void on_error(const std::string & code, const std::string &) override { end(code); }

    std::string wait() {
        std::unique_lock<std::mutex> lock(m_mutex);
        if (!m_ended.wait_for(lock, std::chrono::seconds(60), [this] { return !m_outcome.empty(); })) {
            throw voxd_test_failure("the batched transcription never ended");
        }
        return m_outcome;
    }

private:
    void end(const std::string & outcome) {
        std::lock_guard<std::mutex> lock(m_mutex);
        m_outcome = outcome;
        m_ended.notify_all();
    }

    std::mutex m_mutex;
    std::condition_variable m_ended;
    std::string m_outcome;
};

std::string long_text() {
    std::string text;
    for (int i = 0; i < 20; i++) {
        text += "This sentence is here so that the synthesis has far more to say than one chunk of audio. ";
    }
    return text;
}

} // namespace

VOXD_TEST("abort: the decoder stops") {
    const std::vector<uint8_t> bytes = voxd_test_file("speech/jfk.wav");
    CHECK_THROWS_CODE(voxd_decode_audio(bytes.data(), bytes.size(), voxd_decode_params{}, aborted_flag()), "aborted");
}

VOXD_TEST("abort: the separator stops") {
    const std::vector<std::vector<float>> mono{ std::vector<float>(16000 * 4, 0.1f) };
    CHECK_THROWS_CODE(voxd_separate(mono, 16000, voxd_separation_method::percussive, aborted_flag()), "aborted");
}

VOXD_TEST("abort: pocketsphinx stops before it takes a decoder") {
    voxd_sphinx_pool pool(voxd_sphinx_paths{}, 1);
    CHECK_THROWS_CODE(pool.transcribe(std::vector<float>(16000, 0.0f), aborted_flag()), "aborted");
    CHECK_EQ(pool.stats().decoders, (size_t) 0);
}

VOXD_TEST("abort: Silero VAD stops") {
    voxd_vad_pool pool(voxd_test_input("VOXD_TEST_VAD_MODEL"));
    CHECK_THROWS_CODE(pool.segments(std::vector<float>(16000, 0.0f), voxd_vad_params::defaults(), aborted_flag()), "aborted");
}

VOXD_TEST("abort: flite stops in the middle of a synthesis") {
    const std::shared_ptr<const voxd_flite_model> flite = voxd_flite_model::load();
    voxd_abort_ptr flag                                 = voxd_never_aborted();
    aborting_sink sink(flag);
    CHECK_THROWS_CODE(flite->synthesize(long_text(), 0, 1.0f, sink, flag), "aborted");
    CHECK(sink.samples > 0);
    CHECK(sink.samples < (size_t) (voxd_flite_model::sample_rate * 10)); // far less than the whole text
}

VOXD_TEST("abort: GGML TTS stops in the middle of a synthesis") {
    voxd_tts_ggml_load_options options;
    options.model                                  = voxd_test_input("VOXD_TEST_TTS_MODEL");
    options.mmproj                                 = voxd_test_input("VOXD_TEST_TTS_MMPROJ");
    options.threads                                = 1;
    const std::shared_ptr<voxd_tts_ggml_model> tts = voxd_tts_ggml_model::load(options);
    voxd_tts_gen_request request;
    request.text                                = long_text();
    request.seed                                = 1;
    request.max_frames                          = 400;
    std::shared_ptr<voxd_tts_ggml_request> held = tts->start_request(std::move(request), false);
    voxd_abort_ptr flag                         = voxd_never_aborted();
    aborting_sink sink(flag);
    CHECK_THROWS_CODE(tts->synthesize(*held, sink, flag), "aborted");
    CHECK(sink.samples > 0);
}

VOXD_TEST("abort: Whisper stops on both paths") {
    voxd_whisper_load_options options;
    options.use_gpu                                   = false;
    options.batch.threads                             = 1;
    const std::shared_ptr<voxd_whisper_model> whisper = voxd_whisper_model::load(voxd_test_input("VOXD_TEST_WHISPER_MODEL"), options);
    const voxd_decoded_audio jfk                      = voxd_test_decode("speech/jfk.wav", 16000, 1, 60.0);

    voxd_whisper_params params;
    params.word_timestamps = true; // whisper.cpp's own path
    params.threads         = 1;
    recorded_transcription alone(whisper, params, jfk.samples, aborted_flag());
    CHECK_THROWS_CODE(alone.run_whisper_cpp(), "aborted");

    auto batched = std::make_shared<recorded_transcription>(whisper, voxd_whisper_params{}, jfk.samples, aborted_flag());
    whisper->batcher().submit(batched);
    CHECK_EQ(batched->wait(), std::string("aborted"));
}
