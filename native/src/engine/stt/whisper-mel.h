// Whisper's log-mel spectrogram, computed as the reference implementation computes it.
#pragma once

#include <vector>

// Whisper's log-mel features (the reference implementation's: centred frames with reflected edges, power spectrum,
// `filters` (n_mels x 201, from the model file), log10 clamped 8 below the maximum, scaled): n_mels rows of `n_frames` frames, computed
// over the samples followed by 30 s of silence, so every window start within the audio has a full window.
std::vector<float> voxd_whisper_mel(const std::vector<float> & filters, int n_mels, const std::vector<float> & samples, int & n_frames);
