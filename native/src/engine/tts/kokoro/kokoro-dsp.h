// Kokoro's host-side signal work: the frames per token, the generator's harmonic source and its short-time spectrum,
// the inverse transform of the generator's output, and the LSTM recurrence (a ggml custom op). Each follows the
// upstream model's arithmetic closely enough to match it number for number (docs/models.md "Kokoro").
#pragma once

#include <cstdint>
#include <vector>

struct ggml_tensor;

constexpr int VOXD_KOKORO_N_FFT      = 20; // the generator's STFT: 20-point frames, hop 5, periodic Hann window
constexpr int VOXD_KOKORO_HOP        = 5;
constexpr int VOXD_KOKORO_N_BINS     = VOXD_KOKORO_N_FFT / 2 + 1;
constexpr int VOXD_KOKORO_HARMONICS  = 9;   // the fundamental and 8 overtones
constexpr int VOXD_KOKORO_SOURCE_UP  = 300; // F0 is predicted per half frame: 300 samples
constexpr int VOXD_KOKORO_SPEC_PER_F = 60;  // spectrum frames per F0 value (300 / hop)

// Frames per token: round(sum / speed) half to even, at least 1 (upstream: torch.round, clamp(min=1)).
std::vector<int32_t> voxd_kokoro_durations(const std::vector<float> & sigmoid_sums, float speed);

// The generator's harmonic source for `n_f0` F0 values (Hz, one per half frame): 300 samples per value. `merge_w`
// and `merge_b` are the source module's linear layer (9 harmonics to 1). Noise (unvoiced hiss and voiced jitter) is
// drawn from `seed` when `noise`; without it the source is deterministic sines.
std::vector<float> voxd_kokoro_harmonic_source(const float * f0, int n_f0, const float * merge_w, float merge_b, uint64_t seed, bool noise);

// The source's short-time spectrum: 22 channels of samples / 5 + 1 frames each, channel-major (magnitudes of the 11
// bins, then their phases).
std::vector<float> voxd_kokoro_source_spectrum(const std::vector<float> & source);

// Audio from the generator's last convolution (22 channels of `n_frames` frames, channel-major: log magnitudes of
// the 11 bins, then values whose sine is their phase): 5 * (n_frames - 1) samples.
std::vector<float> voxd_kokoro_inverse_stft(const float * post, int n_frames);

// The custom op of a bidirectional LSTM layer (PyTorch's gate order i, f, g, o; zero initial state): dst [2H, L]
// (forward then backward hidden state per step) from src[0] = the input projection x W_ih + b_ih of both directions
// [8H, L], src[1] = W_hh of both [H, 8H], src[2] = b_hh of both [8H]. One task per direction.
void voxd_kokoro_lstm_op(ggml_tensor * dst, int ith, int nth, void * userdata);
