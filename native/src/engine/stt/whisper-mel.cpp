#include "stt/whisper-mel.h"

#include "stt/whisper-batch-model.h"

#include "whisper.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

// A complex FFT of a real frame of `n` samples (n = 400 = 2^4 * 25): radix-2 splits down to an odd length, which
// takes a plain DFT. `out` gets n interleaved (re, im) pairs; `work` holds 6n floats for the levels below.
static void voxd_whisper_fft(const float * in, int n, float * out, float * work, const float * cos_t, const float * sin_t) {
    const int step = VOXD_WHISPER_N_FFT / n; // twiddle stride in the tables of size N_FFT
    if (n % 2 == 1) {
        for (int k = 0; k < n; k++) {
            float re = 0.0f, im = 0.0f;
            for (int j = 0; j < n; j++) {
                const int idx = (j * k % n) * step;
                re += in[j] * cos_t[idx];
                im -= in[j] * sin_t[idx];
            }
            out[2 * k]     = re;
            out[2 * k + 1] = im;
        }
        return;
    }
    const int h   = n / 2;
    float * even  = work;
    float * odd   = work + h;
    float * e_out = work + n;
    float * o_out = work + 2 * n;
    for (int i = 0; i < h; i++) {
        even[i] = in[2 * i];
        odd[i]  = in[2 * i + 1];
    }
    voxd_whisper_fft(even, h, e_out, work + 3 * n, cos_t, sin_t);
    voxd_whisper_fft(odd, h, o_out, work + 3 * n, cos_t, sin_t);
    for (int k = 0; k < h; k++) {
        const float c = cos_t[k * step], s = sin_t[k * step];
        const float re       = c * o_out[2 * k] + s * o_out[2 * k + 1];
        const float im       = c * o_out[2 * k + 1] - s * o_out[2 * k];
        out[2 * k]           = e_out[2 * k] + re;
        out[2 * k + 1]       = e_out[2 * k + 1] + im;
        out[2 * (k + h)]     = e_out[2 * k] - re;
        out[2 * (k + h) + 1] = e_out[2 * k + 1] - im;
    }
}

std::vector<float> voxd_whisper_mel(const std::vector<float> & filters, int n_mels, const std::vector<float> & samples, int & n_frames) {
    const int pad = VOXD_WHISPER_N_FFT / 2;
    std::vector<float> x(samples);
    x.resize(samples.size() + (size_t) VOXD_WHISPER_WINDOW_S * WHISPER_SAMPLE_RATE, 0.0f);
    const int64_t len = (int64_t) x.size();
    std::vector<float> padded((size_t) (len + 2 * pad));
    for (int64_t i = 0; i < len + 2 * pad; i++) {
        int64_t j = i - pad;
        if (j < 0)
            j = -j;
        if (j >= len)
            j = 2 * (len - 1) - j;
        padded[(size_t) i] = x[(size_t) std::clamp<int64_t>(j, 0, len - 1)];
    }
    n_frames = (int) (len / VOXD_WHISPER_HOP);

    float cos_t[VOXD_WHISPER_N_FFT], sin_t[VOXD_WHISPER_N_FFT], hann[VOXD_WHISPER_N_FFT];
    for (int i = 0; i < VOXD_WHISPER_N_FFT; i++) {
        const double a = 2.0 * M_PI * i / VOXD_WHISPER_N_FFT;
        cos_t[i]       = (float) std::cos(a);
        sin_t[i]       = (float) std::sin(a);
        hann[i]        = (float) (0.5 * (1.0 - std::cos(a))); // periodic Hann
    }
    std::vector<float> mel((size_t) n_mels * n_frames);
    std::vector<float> frame(VOXD_WHISPER_N_FFT), spec(2 * VOXD_WHISPER_N_FFT), power(VOXD_WHISPER_N_BINS), work(6 * VOXD_WHISPER_N_FFT);
    float max_log = -1e30f;
    for (int f = 0; f < n_frames; f++) {
        const float * src = padded.data() + (size_t) f * VOXD_WHISPER_HOP;
        for (int i = 0; i < VOXD_WHISPER_N_FFT; i++) {
            frame[(size_t) i] = src[i] * hann[i];
        }
        voxd_whisper_fft(frame.data(), VOXD_WHISPER_N_FFT, spec.data(), work.data(), cos_t, sin_t);
        for (int k = 0; k < VOXD_WHISPER_N_BINS; k++) {
            power[(size_t) k] = spec[2 * k] * spec[2 * k] + spec[2 * k + 1] * spec[2 * k + 1];
        }
        for (int b = 0; b < n_mels; b++) {
            const float * filt = filters.data() + (size_t) b * VOXD_WHISPER_N_BINS;
            double sum         = 0.0;
            for (int k = 0; k < VOXD_WHISPER_N_BINS; k++) {
                sum += (double) filt[k] * power[(size_t) k];
            }
            const float v                  = (float) std::log10(std::max(sum, 1e-10));
            mel[(size_t) b * n_frames + f] = v;
            max_log                        = std::max(max_log, v);
        }
    }
    for (float & v : mel) {
        v = (std::max(v, max_log - 8.0f) + 4.0f) / 4.0f;
    }
    return mel;
}
