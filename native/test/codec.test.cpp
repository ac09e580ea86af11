// The decoder and the encoder (audio/decoder.h, audio/encoder.h) on the shared clips: lossless formats give back
// the 16-bit samples exactly, lossy ones the same length and the same waveform; bad input is refused.
#include "harness.h"
#include "test-audio.h"

#include "audio/encoder.h"

#include <cmath>

namespace {

std::vector<uint8_t> encode(const std::vector<float> & samples, int rate, voxd_audio_format format, bool streaming) {
    voxd_encoder_params params;
    params.format      = format;
    params.sample_rate = rate;
    params.streaming   = streaming;
    voxd_encoder encoder(params);
    std::vector<uint8_t> out;
    const size_t half = samples.size() / 2; // two calls: the encoder carries its state across them
    encoder.encode(samples.data(), half, out);
    encoder.finish(samples.data() + half, samples.size() - half, out);
    return out;
}

voxd_decoded_audio decode(const std::vector<uint8_t> & bytes, int rate) {
    voxd_decode_params params;
    params.sample_rate = rate;
    return voxd_decode_audio(bytes.data(), bytes.size(), params, voxd_never_aborted());
}

double correlation(const std::vector<float> & a, const std::vector<float> & b) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t i = 0; i < std::min(a.size(), b.size()); i++) {
        ab += (double) a[i] * b[i];
        aa += (double) a[i] * a[i];
        bb += (double) b[i] * b[i];
    }
    return ab / std::sqrt(aa * bb);
}

} // namespace

VOXD_TEST("codec: jfk.wav decodes to its 16-bit samples, and says what it is") {
    const voxd_decoded_audio jfk = voxd_test_decode("speech/jfk.wav", 16000, 1, 60.0);
    CHECK_EQ(jfk.codec, std::string("pcm_s16le"));
    CHECK_EQ(jfk.container, std::string("wav"));
    CHECK_EQ(jfk.source_sample_rate, 16000);
    CHECK_NEAR((double) jfk.samples.size() / 16000.0, 11.0, 0.1);
    for (float x : jfk.samples) {
        CHECK_EQ(std::nearbyint(x * 32768.0f), x * 32768.0f); // exactly a 16-bit value
    }
}

VOXD_TEST("codec: WAV and FLAC round trips are exact, streamed or not") {
    const voxd_decoded_audio jfk = voxd_test_decode("speech/jfk.wav", 16000, 1, 3.0);
    for (voxd_audio_format format : { voxd_audio_format::wav, voxd_audio_format::flac }) {
        for (bool streaming : { false, true }) {
            const voxd_decoded_audio back = decode(encode(jfk.samples, 16000, format, streaming), 16000);
            CHECK_EQ(back.samples.size(), jfk.samples.size());
            for (size_t i = 0; i < jfk.samples.size(); i++) {
                CHECK_EQ(back.samples[i], jfk.samples[i]);
            }
        }
    }
}

VOXD_TEST("codec: MP3 and Opus round trips keep the length and the waveform") {
    const voxd_decoded_audio jfk = voxd_test_decode("speech/jfk.wav", 24000, 1, 3.0);
    for (voxd_audio_format format : { voxd_audio_format::mp3, voxd_audio_format::opus }) {
        const voxd_decoded_audio back = decode(encode(jfk.samples, 24000, format, false), 24000);
        CHECK_NEAR((double) back.samples.size(), (double) jfk.samples.size(), 0.02 * 24000); // gapless within 20 ms
        CHECK(correlation(back.samples, jfk.samples) > 0.9);
    }
}

VOXD_TEST("codec: the shared MP3 decodes like the WAV it was made from") {
    const voxd_decoded_audio wav = voxd_test_decode("speech/jfk.wav", 16000, 1, 60.0);
    const voxd_decoded_audio mp3 = voxd_test_decode("speech/jfk.mp3", 16000, 1, 60.0);
    CHECK_EQ(mp3.codec, std::string("mp3"));
    CHECK_NEAR((double) mp3.samples.size(), (double) wav.samples.size(), 0.05 * 16000);
}

VOXD_TEST("codec: bad input is refused with invalid_audio, bad settings with invalid_argument") {
    const std::vector<uint8_t> junk(4096, 0x5a);
    CHECK_THROWS_CODE(decode(junk, 16000), "invalid_audio");
    CHECK_THROWS_CODE(decode({}, 16000), "invalid_audio");
    voxd_encoder_params params;
    params.sample_rate = 4000;
    CHECK_THROWS_CODE(voxd_encoder{ params }, "invalid_argument");
}
