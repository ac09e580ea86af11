// Whisper's log-mel spectrogram (stt/whisper-mel.h) against values worked out by hand: through identity filters a
// Hann-windowed sine of amplitude A over N = 400 samples has |X| = A N / 4 at its bin and A N / 8 beside it.
#include "harness.h"

#include "stt/whisper-mel.h"

#include <cmath>

namespace {

constexpr int k_bins = 201; // N_FFT / 2 + 1

std::vector<float> identity_filters() {
    std::vector<float> filters((size_t) k_bins * k_bins, 0.0f);
    for (int b = 0; b < k_bins; b++) {
        filters[(size_t) b * k_bins + b] = 1.0f;
    }
    return filters;
}

// The scaled value of a power: (max(log10 p, max - 8) + 4) / 4.
double scaled(double power, double max_log) {
    return (std::max(std::log10(power), max_log - 8.0) + 4.0) / 4.0;
}

} // namespace

VOXD_TEST("whisper-mel: a clip and 30 s of padding make one frame per 10 ms") {
    int n_frames                 = 0;
    const std::vector<float> mel = voxd_whisper_mel(identity_filters(), k_bins, std::vector<float>(16000, 0.0f), n_frames);
    CHECK_EQ(n_frames, (16000 + 480000) / 160);
    CHECK_EQ(mel.size(), (size_t) k_bins * n_frames);
}

VOXD_TEST("whisper-mel: silence is flat at the floor") {
    int n_frames                 = 0;
    const std::vector<float> mel = voxd_whisper_mel(identity_filters(), k_bins, std::vector<float>(8000, 0.0f), n_frames);
    for (float v : mel) {
        CHECK_NEAR(v, (-10.0 + 4.0) / 4.0, 1e-6); // log10 of the 1e-10 floor
    }
}

VOXD_TEST("whisper-mel: a 1 kHz sine lands in bin 25 at the power the window gives it") {
    const double amplitude = 0.5;
    std::vector<float> samples(16000);
    for (size_t i = 0; i < samples.size(); i++) {
        samples[i] = (float) (amplitude * std::sin(2.0 * M_PI * 1000.0 * (double) i / 16000.0));
    }
    int n_frames                 = 0;
    const std::vector<float> mel = voxd_whisper_mel(identity_filters(), k_bins, samples, n_frames);
    const int frame              = 50; // half a second in: the window is all sine
    const double peak            = std::pow(amplitude * 400 / 4, 2);
    const double max_log         = std::log10(peak);
    CHECK_NEAR(mel[(size_t) 25 * n_frames + frame], scaled(peak, max_log), 1e-3);
    CHECK_NEAR(mel[(size_t) 24 * n_frames + frame], scaled(std::pow(amplitude * 400 / 8, 2), max_log), 1e-3);
    CHECK_NEAR(mel[(size_t) 26 * n_frames + frame], scaled(std::pow(amplitude * 400 / 8, 2), max_log), 1e-3);
    CHECK_NEAR(mel[(size_t) 100 * n_frames + frame], (max_log - 8.0 + 4.0) / 4.0, 1e-3); // far from it: the floor
}
