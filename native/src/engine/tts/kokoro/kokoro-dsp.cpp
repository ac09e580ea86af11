#include "tts/kokoro/kokoro-dsp.h"

#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace {

constexpr double k_pi = 3.14159265358979323846;

// The periodic Hann window of the STFT and its inverse.
const std::vector<float> & hann_window() {
    static const std::vector<float> window = [] {
        std::vector<float> w(VOXD_KOKORO_N_FFT);
        for (int n = 0; n < VOXD_KOKORO_N_FFT; n++) {
            w[(size_t) n] = (float) (0.5 - 0.5 * std::cos(2.0 * k_pi * n / VOXD_KOKORO_N_FFT));
        }
        return w;
    }();
    return window;
}

// cos and sin of 2 pi k n / N for every k n mod N.
struct twiddles {
    float c[VOXD_KOKORO_N_FFT];
    float s[VOXD_KOKORO_N_FFT];
    twiddles() {
        for (int i = 0; i < VOXD_KOKORO_N_FFT; i++) {
            c[i] = (float) std::cos(2.0 * k_pi * i / VOXD_KOKORO_N_FFT);
            s[i] = (float) std::sin(2.0 * k_pi * i / VOXD_KOKORO_N_FFT);
        }
    }
};
const twiddles & table() {
    static const twiddles t;
    return t;
}

// Sum of a[i] * b[i] in eight fixed lanes, so the order (and the result) is the same on every call and compilers
// can vectorise it without reassociating.
float dot(const float * a, const float * b, int n) {
    float lane[8] = {};
    int i         = 0;
    for (; i + 8 <= n; i += 8) {
        for (int j = 0; j < 8; j++) {
            lane[j] += a[i + j] * b[i + j];
        }
    }
    float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
    for (; i < n; i++) {
        sum += a[i] * b[i];
    }
    return sum;
}

float sigmoid(float x) {
    return 1.0f / (1.0f + std::exp(-x));
}

} // namespace

std::vector<int32_t> voxd_kokoro_durations(const std::vector<float> & sigmoid_sums, float speed) {
    std::vector<int32_t> frames(sigmoid_sums.size());
    for (size_t i = 0; i < frames.size(); i++) {
        // nearbyint rounds half to even in the default rounding mode, as torch.round does
        frames[i] = std::max<int32_t>(1, (int32_t) std::nearbyint(sigmoid_sums[i] / speed));
    }
    return frames;
}

std::vector<float> voxd_kokoro_harmonic_source(const float * f0, int n_f0, const float * merge_w, float merge_b, uint64_t seed, bool noise) {
    const int H       = VOXD_KOKORO_HARMONICS;
    const int up      = VOXD_KOKORO_SOURCE_UP;
    const size_t n_up = (size_t) n_f0 * up;

    // Phase per F0 value: upstream takes each harmonic's cycles per sample (f / 24000 mod 1) at the sample rate,
    // downsamples them linearly by 300 (which, on a curve held constant over each 300 samples, gives that value
    // back), sums them up (in double, as torch's CPU cumsum does), and scales by 2 pi.
    std::vector<float> phase_low((size_t) n_f0 * H);
    for (int h = 0; h < H; h++) {
        double running = 0.0;
        for (int j = 0; j < n_f0; j++) {
            const float fn = f0[j] * (float) (h + 1);
            const float x  = fn / 24000.0f;
            float rad      = std::fmod(x, 1.0f);
            if (rad != 0.0f && rad < 0.0f) {
                rad += 1.0f;
            }
            running += rad;
            phase_low[(size_t) j * H + h] = (float) running * 2.0f * (float) k_pi * (float) up;
        }
    }

    // Back to the sample rate by linear interpolation (align_corners false), sines of the harmonics, voiced where F0
    // exceeds 10 Hz, merged into one source by the linear layer and tanh. The phases reach 1e5 radians, where one
    // float step is 0.01 radians: the interpolation is computed as torch's CPU kernel computes it (the source position
    // in double, the weights in float, the second product fused into the first), so the phases agree to the bit.
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> source(n_up);
    const double scale = (double) (1.0f / (float) up);
    float sine[VOXD_KOKORO_HARMONICS];
    for (size_t t = 0; t < n_up; t++) {
        const double src  = std::max(0.0, scale * ((double) t + 0.5) - 0.5);
        const int64_t i0  = std::min<int64_t>((int64_t) src, n_f0 - 1);
        const int64_t i1  = i0 < n_f0 - 1 ? i0 + 1 : i0;
        const float w1    = (float) std::min(std::max(src - (double) i0, 0.0), 1.0);
        const float w0    = 1.0f - w1;
        const bool voiced = f0[t / up] > 10.0f;
        for (int h = 0; h < H; h++) {
            const float second = w1 * phase_low[(size_t) i1 * H + h];
            const float p      = std::fma(w0, phase_low[(size_t) i0 * H + h], second);
            const float s      = std::sin(p) * 0.1f;
            float v            = voiced ? s : 0.0f;
            if (noise) {
                v += (voiced ? 0.003f : 0.1f / 3.0f) * gauss(rng);
            }
            sine[h] = v;
        }
        float merged = merge_b;
        for (int h = 0; h < H; h++) {
            merged += merge_w[h] * sine[h];
        }
        source[t] = std::tanh(merged);
    }
    return source;
}

std::vector<float> voxd_kokoro_source_spectrum(const std::vector<float> & source) {
    const size_t n_up = source.size();
    // The STFT: centred frames (reflect-padded by n_fft / 2), periodic Hann window, magnitude and phase per bin.
    const int pad                     = VOXD_KOKORO_N_FFT / 2;
    const int n_frames                = (int) (n_up / VOXD_KOKORO_HOP) + 1;
    const std::vector<float> & window = hann_window();
    const twiddles & tw               = table();
    std::vector<float> spec((size_t) 2 * VOXD_KOKORO_N_BINS * n_frames);
    float frame[VOXD_KOKORO_N_FFT];
    for (int f = 0; f < n_frames; f++) {
        for (int n = 0; n < VOXD_KOKORO_N_FFT; n++) {
            int64_t i = (int64_t) f * VOXD_KOKORO_HOP + n - pad;
            if (i < 0) {
                i = -i;
            } else if (i >= (int64_t) n_up) {
                i = 2 * ((int64_t) n_up - 1) - i;
            }
            frame[n] = window[(size_t) n] * source[(size_t) std::clamp<int64_t>(i, 0, (int64_t) n_up - 1)];
        }
        for (int k = 0; k < VOXD_KOKORO_N_BINS; k++) {
            float re = 0.0f, im = 0.0f;
            for (int n = 0; n < VOXD_KOKORO_N_FFT; n++) {
                const int idx = (k * n) % VOXD_KOKORO_N_FFT;
                re += frame[n] * tw.c[idx];
                im -= frame[n] * tw.s[idx];
            }
            if (k == 0 || k == VOXD_KOKORO_N_BINS - 1) {
                im = 0.0f; // exactly, as a real FFT gives: the phase of these bins is then 0 or pi
            }
            spec[(size_t) k * n_frames + f]                        = std::hypot(re, im);
            spec[(size_t) (VOXD_KOKORO_N_BINS + k) * n_frames + f] = std::atan2(im, re);
        }
    }
    return spec;
}

std::vector<float> voxd_kokoro_inverse_stft(const float * post, int n_frames) {
    const int N                       = VOXD_KOKORO_N_FFT;
    const int pad                     = N / 2;
    const int64_t n_out               = (int64_t) VOXD_KOKORO_HOP * (n_frames - 1);
    const std::vector<float> & window = hann_window();
    const twiddles & tw               = table();

    std::vector<float> sum((size_t) (n_out + N), 0.0f);
    std::vector<float> envelope((size_t) (n_out + N), 0.0f);
    float re[VOXD_KOKORO_N_BINS], im[VOXD_KOKORO_N_BINS];
    for (int f = 0; f < n_frames; f++) {
        for (int k = 0; k < VOXD_KOKORO_N_BINS; k++) {
            const float magnitude = std::exp(post[(size_t) k * n_frames + f]);
            const float phase     = std::sin(post[(size_t) (VOXD_KOKORO_N_BINS + k) * n_frames + f]);
            re[k]                 = magnitude * std::cos(phase);
            im[k]                 = magnitude * std::sin(phase);
        }
        for (int n = 0; n < N; n++) {
            // the inverse real DFT: the imaginary parts of the DC and Nyquist bins do not count
            float v = re[0] + ((n & 1) ? -re[N / 2] : re[N / 2]);
            for (int k = 1; k < N / 2; k++) {
                const int idx = (k * n) % N;
                v += 2.0f * (re[k] * tw.c[idx] - im[k] * tw.s[idx]);
            }
            const size_t at = (size_t) f * VOXD_KOKORO_HOP + n;
            sum[at] += v / (float) N * window[(size_t) n];
            envelope[at] += window[(size_t) n] * window[(size_t) n];
        }
    }
    std::vector<float> audio((size_t) n_out);
    for (int64_t i = 0; i < n_out; i++) {
        audio[(size_t) i] = sum[(size_t) (i + pad)] / envelope[(size_t) (i + pad)];
    }
    return audio;
}

void voxd_kokoro_lstm_op(ggml_tensor * dst, int ith, int nth, void * userdata) {
    (void) userdata;
    const ggml_tensor * xp   = dst->src[0];
    const ggml_tensor * w_hh = dst->src[1];
    const ggml_tensor * b_hh = dst->src[2];
    const int H              = (int) w_hh->ne[0];
    const int L              = (int) xp->ne[1];
    std::vector<float> h((size_t) H), c((size_t) H), gates((size_t) 4 * H);
    for (int dir = ith; dir < 2; dir += nth) {
        std::fill(h.begin(), h.end(), 0.0f);
        std::fill(c.begin(), c.end(), 0.0f);
        const float * w = (const float *) w_hh->data + (size_t) dir * 4 * H * H;
        const float * b = (const float *) b_hh->data + (size_t) dir * 4 * H;
        for (int step = 0; step < L; step++) {
            const int t     = dir == 0 ? step : L - 1 - step;
            const float * x = (const float *) ((const char *) xp->data + (size_t) t * xp->nb[1]) + (size_t) dir * 4 * H;
            for (int r = 0; r < 4 * H; r++) {
                gates[(size_t) r] = x[r] + (dot(w + (size_t) r * H, h.data(), H) + b[r]);
            }
            float * out = (float *) ((char *) dst->data + (size_t) t * dst->nb[1]) + (size_t) dir * H;
            for (int j = 0; j < H; j++) {
                const float i_gate = sigmoid(gates[(size_t) j]);
                const float f_gate = sigmoid(gates[(size_t) (H + j)]);
                const float g_gate = std::tanh(gates[(size_t) (2 * H + j)]);
                const float o_gate = sigmoid(gates[(size_t) (3 * H + j)]);
                c[(size_t) j]      = f_gate * c[(size_t) j] + i_gate * g_gate;
                h[(size_t) j]      = o_gate * std::tanh(c[(size_t) j]);
                out[j]             = h[(size_t) j];
            }
        }
    }
}
