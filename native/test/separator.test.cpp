// The built-in separator (audio/separator.h): each method and its complement sum to the mixture, on real music.
#include "harness.h"
#include "test-audio.h"

#include "audio/separator.h"

#include <cmath>

VOXD_TEST("separator: every stem and its complement sum to the mixture, stereo and mono") {
    const voxd_decoded_audio music = voxd_test_decode("music/loop_amen.flac", 0, 2, 4.0);
    std::vector<std::vector<float>> stereo(2);
    for (size_t i = 0; i + 1 < music.samples.size(); i += 2) {
        stereo[0].push_back(music.samples[i]);
        stereo[1].push_back(music.samples[i + 1]);
    }
    const std::pair<voxd_separation_method, voxd_separation_method> pairs[] = {
        { voxd_separation_method::percussive, voxd_separation_method::harmonic },
        { voxd_separation_method::voice, voxd_separation_method::accompaniment },
    };
    for (const std::vector<std::vector<float>> & mix : { stereo, std::vector<std::vector<float>>{ stereo[0] } }) {
        for (const auto & [primary, complement] : pairs) {
            const auto a = voxd_separate(mix, music.sample_rate, primary, voxd_never_aborted());
            const auto b = voxd_separate(mix, music.sample_rate, complement, voxd_never_aborted());
            CHECK_EQ(a.size(), mix.size());
            double energy = 0.0;
            for (size_t c = 0; c < mix.size(); c++) {
                CHECK_EQ(a[c].size(), mix[c].size());
                for (size_t i = 0; i < mix[c].size(); i++) {
                    CHECK_NEAR(a[c][i] + b[c][i], mix[c][i], 1e-6);
                    energy += (double) a[c][i] * a[c][i];
                }
            }
            CHECK(energy > 0.0); // a stem, not silence
        }
    }
}

VOXD_TEST("separator: bad arguments are refused") {
    const std::vector<std::vector<float>> mono{ std::vector<float>(1000, 0.0f) };
    CHECK_THROWS_CODE(voxd_separate(mono, 1000, voxd_separation_method::bass, voxd_never_aborted()), "invalid_argument");
    CHECK_THROWS_CODE(voxd_separate({}, 16000, voxd_separation_method::bass, voxd_never_aborted()), "invalid_argument");
}
