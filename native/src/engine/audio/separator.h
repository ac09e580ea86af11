// The built-in signal-processing separator: soft time-frequency masks on an STFT of our own (radix-2 real FFT),
// computed in bounded blocks of frames so memory grows linearly with the input.
#pragma once

#include "common/error.h"

#include <string>
#include <vector>

enum class voxd_separation_method {
    percussive,    // harmonic/percussive separation, the percussive mask
    harmonic,      // its complement
    voice,         // repeating/stationary background removal with speech-band and stereo-centre cues
    accompaniment, // its complement
    bass,          // harmonic mask below ~250 Hz
};

// The method of a name ("percussive", ...); false for an unknown name.
bool voxd_parse_separation_method(const std::string & name, voxd_separation_method & method);

constexpr int voxd_separate_min_rate = 8000;
constexpr int voxd_separate_max_rate = 192000;

// The target stem of `channels` (1 or 2 of equal length, at `sample_rate`): as many channels of the same length.
// Complement methods are the input minus the primary method's target, so each pair sums to the input exactly.
// Throws voxd_error "invalid_argument" for bad arguments, "aborted" once `abort` is set (checked between blocks).
std::vector<std::vector<float>> voxd_separate(const std::vector<std::vector<float>> & channels, int sample_rate, voxd_separation_method method,
                                              const voxd_abort_ptr & abort);
