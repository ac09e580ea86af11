// The built-in speaker diarizer (model `mfcc-bic`; docs/models.md, "Speaker diarization"): who spoke when within
// the speech a VAD found, with no trained weights. Each 1.5 s window of speech is described by the mean and spread
// of its MFCCs; the windows are clustered (average linkage) into more groups than there are likely speakers; groups
// are then merged while one full-covariance Gaussian explains two of them better than two Gaussians do, by the
// Bayesian information criterion, which is what chooses the number of speakers; then every 10 ms frame is
// relabelled by a Viterbi pass over the speakers' Gaussians, so turns change where the voices do and short turns
// inside a window are found; last, short stretches inside a turn where another voice joins in (a backchannel) are
// given to that voice.
#pragma once

#include "common/error.h"

#include <vector>

constexpr int voxd_diarize_rate         = 16000;
constexpr int voxd_diarize_max_speakers = 16;

struct voxd_time_span {
    double start; // seconds
    double end;
};

struct voxd_diarize_params {
    int min_speakers = 1;
    int max_speakers = voxd_diarize_max_speakers;
};

struct voxd_speaker_turn {
    double start; // seconds
    double end;
    int speaker; // numbered from 0 in the order the speakers first speak
};

struct voxd_diarization {
    std::vector<voxd_speaker_turn> turns; // sorted, not overlapping, within the speech given
    int n_speakers = 0;
    std::vector<int> reference_speakers; // for each reference clip, the speaker it matches; -1 when none
};

// Speakers of `samples` (mono, voxd_diarize_rate) within `speech` (sorted spans). Each of `references` (clips of
// known speakers at the same rate) is matched to at most one speaker, one speaker to at most one reference.
// Throws voxd_error "invalid_argument" for bad parameters, "aborted" once `abort` is set (checked between stages).
voxd_diarization voxd_diarize(const std::vector<float> & samples, const std::vector<voxd_time_span> & speech,
                              const std::vector<std::vector<float>> & references, const voxd_diarize_params & params, const voxd_abort_ptr & abort);
