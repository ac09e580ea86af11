// The stream resampler (audio/resampler.h): its passband and stopband at 24 -> 16 kHz, and output that does not
// depend on how the input was cut into chunks.
#include "harness.h"

#include "audio/resampler.h"

#include <cmath>

namespace {

std::vector<float> sine(double hz, int rate, double seconds, double amplitude) {
    std::vector<float> out((size_t) (rate * seconds));
    for (size_t i = 0; i < out.size(); i++) {
        out[i] = (float) (amplitude * std::sin(2.0 * M_PI * hz * (double) i / rate));
    }
    return out;
}

std::vector<float> resample(const std::vector<float> & in, int from, int to, size_t chunk) {
    voxd_stream_resampler resampler(from, to);
    std::vector<float> out;
    for (size_t at = 0; at < in.size(); at += chunk) {
        resampler.process(in.data() + at, std::min(chunk, in.size() - at), out);
    }
    resampler.flush(out);
    return out;
}

// RMS of the middle half: no filter edges.
double middle_rms(const std::vector<float> & x) {
    double sum = 0.0;
    for (size_t i = x.size() / 4; i < x.size() * 3 / 4; i++) {
        sum += (double) x[i] * x[i];
    }
    return std::sqrt(sum / (double) (x.size() / 2));
}

double db(double ratio) {
    return 20.0 * std::log10(ratio);
}

} // namespace

VOXD_TEST("resampler: speech frequencies pass at 24 -> 16 kHz within 0.1 dB, with the right length") {
    for (double hz : { 200.0, 1000.0, 4000.0, 6000.0 }) {
        const std::vector<float> out = resample(sine(hz, 24000, 1.0, 0.5), 24000, 16000, 4096);
        CHECK_NEAR((double) out.size(), 16000.0, 2.0);
        CHECK_NEAR(db(middle_rms(out) / (0.5 / std::sqrt(2.0))), 0.0, 0.1);
    }
}

VOXD_TEST("resampler: what would fold back into speech is at least 80 dB down") {
    for (double hz : { 8500.0, 10000.0, 11500.0 }) {
        const std::vector<float> out = resample(sine(hz, 24000, 1.0, 0.5), 24000, 16000, 4096);
        CHECK(db(middle_rms(out) / (0.5 / std::sqrt(2.0))) < -80.0);
    }
}

VOXD_TEST("resampler: the output does not depend on the chunking") {
    const std::vector<float> in     = sine(440.0, 44100, 0.5, 0.3);
    const std::vector<float> whole  = resample(in, 44100, 16000, in.size());
    const std::vector<float> pieces = resample(in, 44100, 16000, 37);
    CHECK_EQ(whole.size(), pieces.size());
    for (size_t i = 0; i < whole.size(); i++) {
        CHECK_EQ(whole[i], pieces[i]);
    }
}

VOXD_TEST("resampler: rates out of range are refused") {
    CHECK_THROWS_CODE(voxd_stream_resampler(999, 16000), "invalid_argument");
    CHECK_THROWS_CODE(voxd_stream_resampler(16000, 384001), "invalid_argument");
}
