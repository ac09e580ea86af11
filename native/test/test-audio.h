// The shared clips (../shared/audio, named by VOXD_TEST_AUDIO_DIR), decoded for the tests.
#pragma once

#include "harness.h"

#include "audio/decoder.h"

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

inline std::vector<uint8_t> voxd_test_file(const std::string & relative) {
    const std::string path = voxd_test_input("VOXD_TEST_AUDIO_DIR") + "/" + relative;
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw voxd_test_failure("cannot read " + path);
    }
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// `relative` decoded at `rate` (0: the source's) with `channels` (1: mono, 0 or 2: up to stereo), at most `seconds`.
inline voxd_decoded_audio voxd_test_decode(const std::string & relative, int rate, int channels, double seconds) {
    const std::vector<uint8_t> bytes = voxd_test_file(relative);
    voxd_decode_params params;
    params.sample_rate       = rate;
    params.channels          = channels;
    voxd_decoded_audio audio = voxd_decode_audio(bytes.data(), bytes.size(), params, voxd_never_aborted());
    const size_t keep        = (size_t) (seconds * audio.sample_rate) * (size_t) audio.channels;
    if (audio.samples.size() > keep) {
        audio.samples.resize(keep);
    }
    return audio;
}
