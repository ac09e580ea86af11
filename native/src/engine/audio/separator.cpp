#include "audio/separator.h"

#include "common/rfft.h"

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>
#include <memory>

namespace {

// ---- STFT ----
//
// Periodic Hann windows at 75 % overlap for analysis and synthesis: the squared windows of the four frames over any
// sample sum to exactly 1.5, so dividing by it reconstructs the input. Frame t starts at t*hop - 3*hop (the signal
// is zero outside [0, n)), so every sample, the first and last included, lies under four whole frames.
struct voxd_stft {
    int rate;
    int n_fft;
    int hop;
    int n_bins;
    int64_t n_samples;
    int64_t n_frames;

    std::vector<float> window;
    float synth_scale; // window / 1.5: the synthesis window

    voxd_stft(int rate, int64_t n_samples) : rate(rate), n_samples(n_samples) {
        // ~46 ms frames (2048 at 44.1 kHz): the nearest power of two on a log scale
        const int e = (int) std::lround(std::log2(rate * 2048.0 / 44100.0));
        n_fft       = 1 << std::clamp(e, 8, 14);
        hop         = n_fft / 4;
        n_bins      = n_fft / 2 + 1;
        n_frames    = n_samples > 0 ? (n_samples - 1) / hop + 4 : 0;
        window.resize(n_fft);
        for (int k = 0; k < n_fft; k++) {
            window[k] = (float) (0.5 - 0.5 * std::cos(2.0 * voxd_pi * k / n_fft));
        }
        synth_scale = 1.0f / 1.5f;
    }

    int64_t frame_start(int64_t t) const { return t * hop - 3 * (int64_t) hop; }
    double bin_hz(int f) const { return (double) f * rate / n_fft; }
    double frames_per_second() const { return (double) rate / hop; }
};

// The spectra of frames [first, first + frames) of every channel: x[(c * frames + t) * bins + f].
struct voxd_spec_window {
    int64_t first = 0;
    int frames    = 0;
    int bins      = 0;
    int channels  = 0;
    std::vector<voxd_cpx> x;

    voxd_cpx * frame(int c, int t) { return x.data() + ((size_t) c * frames + t) * bins; }
    const voxd_cpx * frame(int c, int t) const { return x.data() + ((size_t) c * frames + t) * bins; }
};

void voxd_analyse(const voxd_stft & stft, voxd_rfft & fft, const std::vector<std::vector<float>> & input, int64_t first, int frames, voxd_spec_window & spec) {
    spec.first    = first;
    spec.frames   = frames;
    spec.bins     = stft.n_bins;
    spec.channels = (int) input.size();
    spec.x.resize((size_t) spec.channels * frames * stft.n_bins);
    std::vector<float> buf(stft.n_fft);
    for (int c = 0; c < spec.channels; c++) {
        const float * x = input[c].data();
        for (int t = 0; t < frames; t++) {
            const int64_t start = stft.frame_start(first + t);
            for (int k = 0; k < stft.n_fft; k++) {
                const int64_t i = start + k;
                buf[k]          = i >= 0 && i < stft.n_samples ? x[i] * stft.window[k] : 0.0f;
            }
            fft.forward(buf.data(), spec.frame(c, t));
        }
    }
}

// Overlap-adds mask x spectrum of window frames [t0, t1) into `out` (masks laid out like the spectra).
void voxd_synthesise(const voxd_stft & stft, voxd_rfft & fft, const voxd_spec_window & spec, const std::vector<float> & mask, int t0, int t1,
                     std::vector<std::vector<float>> & out) {
    std::vector<voxd_cpx> bins(stft.n_bins);
    std::vector<float> buf(stft.n_fft);
    for (int c = 0; c < spec.channels; c++) {
        float * y = out[c].data();
        for (int t = t0; t < t1; t++) {
            const voxd_cpx * x = spec.frame(c, t);
            const float * m    = mask.data() + ((size_t) c * spec.frames + t) * spec.bins;
            for (int f = 0; f < stft.n_bins; f++) {
                bins[f] = m[f] * x[f];
            }
            fft.inverse(bins.data(), buf.data());
            const int64_t start = stft.frame_start(spec.first + t);
            for (int k = 0; k < stft.n_fft; k++) {
                const int64_t i = start + k;
                if (i >= 0 && i < stft.n_samples) {
                    y[i] += buf[k] * stft.window[k] * stft.synth_scale;
                }
            }
        }
    }
}

// Median of v[0..n) (reorders v; the upper median for even n).
inline float voxd_median(float * v, int n) {
    std::nth_element(v, v + n / 2, v + n);
    return v[n / 2];
}

// ---- harmonic/percussive masks ----
//
// Fitzgerald's median filtering: along time a sustained partial survives and a click is removed (harmonic
// estimate); along frequency a broadband click survives and a partial is removed (percussive estimate). The soft
// mask is P^2 / (P^2 + H^2).
struct voxd_hpss_params {
    int half_time; // frames each side of the time median
    int half_freq; // bins each side of the frequency median

    explicit voxd_hpss_params(const voxd_stft & stft) {
        half_time = std::max(2, (int) std::lround(0.10 * stft.frames_per_second())); // ~0.2 s kernel
        half_freq = std::max(2, (int) std::lround(250.0 / stft.bin_hz(1)));          // ~500 Hz kernel
    }
};

// Percussive soft masks of window frames [t0, t1) of channel c into mask (same layout as the spectra).
void voxd_percussive_mask(const voxd_spec_window & spec, const voxd_hpss_params & p, int c, int t0, int t1, std::vector<float> & mask) {
    const int bins   = spec.bins;
    const int frames = spec.frames;
    // magnitudes, bin-major so the time median reads contiguous memory
    std::vector<float> mag_tf((size_t) frames * bins);
    std::vector<float> mag_ft((size_t) frames * bins);
    for (int t = 0; t < frames; t++) {
        const voxd_cpx * x = spec.frame(c, t);
        for (int f = 0; f < bins; f++) {
            const float m                   = std::abs(x[f]);
            mag_tf[(size_t) t * bins + f]   = m;
            mag_ft[(size_t) f * frames + t] = m;
        }
    }
    std::vector<float> harm((size_t) (t1 - t0) * bins);
    std::vector<float> scratch(2 * (size_t) std::max(p.half_time, p.half_freq) + 1);
    for (int f = 0; f < bins; f++) {
        const float * row = mag_ft.data() + (size_t) f * frames;
        for (int t = t0; t < t1; t++) {
            const int a = std::max(0, t - p.half_time);
            const int b = std::min(frames, t + p.half_time + 1);
            std::copy(row + a, row + b, scratch.begin());
            harm[(size_t) (t - t0) * bins + f] = voxd_median(scratch.data(), b - a);
        }
    }
    for (int t = t0; t < t1; t++) {
        const float * col = mag_tf.data() + (size_t) t * bins;
        float * m         = mask.data() + ((size_t) c * frames + t) * bins;
        for (int f = 0; f < bins; f++) {
            const int a = std::max(0, f - p.half_freq);
            const int b = std::min(bins, f + p.half_freq + 1);
            std::copy(col + a, col + b, scratch.begin());
            const float perc = voxd_median(scratch.data(), b - a);
            const float h    = harm[(size_t) (t - t0) * bins + f];
            const float pp   = perc * perc;
            const float hh   = h * h;
            m[f]             = pp + hh > 0.0f ? pp / (pp + hh) : 0.5f;
        }
    }
}

// ---- voice masks ----
//
// The background is what repeats or stays. Repetition (REPET-SIM): for each frame, the frames most similar to it
// (cosine similarity of band magnitudes, at least min_distance away, searched within the window); the per-bin
// minimum of those few frames estimates the background (a median needs many repetitions; with two or three, the
// voice in the similar frames inflates it). A low per-bin quantile of the window floors it (stationary noise). The
// voice is the excess over the background, as a Wiener mask V^2 / (V^2 + B^2). A second pass searches the
// similarity on the first pass's background estimate, so frames are matched by their background rather than by the
// voice over it. The mask is weighted by a speech-band prior and, for stereo, by how centred each bin is.
struct voxd_voice_params {
    int min_distance;     // frames: similar frames are searched at least this far away
    int neighbours;       // similar frames whose per-bin minimum is the repeating background
    float floor_quantile; // per-bin quantile of the window taken as stationary noise
    int bands;            // similarity features
    int passes;

    explicit voxd_voice_params(const voxd_stft & stft) {
        min_distance   = std::max(1, (int) std::lround(0.5 * stft.frames_per_second()));
        neighbours     = 4;
        floor_quantile = 0.2f;
        bands          = 48;
        passes         = 2;
    }
};

// Speech-band prior: a smooth band-pass, ~80 Hz to ~8 kHz.
float voxd_speech_prior(double hz) {
    if (hz <= 0) {
        return 0.0f;
    }
    const double lo = std::pow(80.0 / hz, 4);
    const double hi = std::pow(hz / 8000.0, 8);
    return (float) (1.0 / ((1.0 + lo) * (1.0 + hi)));
}

// Unit-norm similarity features of `mag` (frames x bins): magnitudes summed over log-spaced bands from 50 Hz up,
// square-root compressed.
void voxd_voice_features(const std::vector<float> & mag, const std::vector<int> & band_of, int frames, int bins, int bands, std::vector<float> & feat) {
    feat.assign((size_t) frames * bands, 0.0f);
    for (int t = 0; t < frames; t++) {
        float * v       = feat.data() + (size_t) t * bands;
        const float * m = mag.data() + (size_t) t * bins;
        for (int f = 0; f < bins; f++) {
            v[band_of[f]] += m[f];
        }
        double norm = 0;
        for (int b = 0; b < bands; b++) {
            v[b] = std::sqrt(v[b]);
            norm += (double) v[b] * v[b];
        }
        const float inv = norm > 0 ? (float) (1.0 / std::sqrt(norm)) : 0.0f;
        for (int b = 0; b < bands; b++) {
            v[b] *= inv;
        }
    }
}

void voxd_voice_mask(const voxd_stft & stft, const voxd_spec_window & spec, const voxd_voice_params & p, int t0, int t1, std::vector<float> & mask) {
    const int bins     = spec.bins;
    const int frames   = spec.frames;
    const int channels = spec.channels;

    // mean magnitude of the channels
    std::vector<float> mag((size_t) frames * bins, 0.0f);
    for (int c = 0; c < channels; c++) {
        for (int t = 0; t < frames; t++) {
            const voxd_cpx * x = spec.frame(c, t);
            float * m          = mag.data() + (size_t) t * bins;
            for (int f = 0; f < bins; f++) {
                m[f] += std::abs(x[f]) / (float) channels;
            }
        }
    }

    std::vector<int> band_of(bins);
    const double lo_hz = 50.0;
    const double hi_hz = stft.rate / 2.0;
    for (int f = 0; f < bins; f++) {
        const double hz = std::max(stft.bin_hz(f), lo_hz);
        band_of[f]      = std::min(p.bands - 1, (int) (p.bands * std::log(hz / lo_hz) / std::log(hi_hz / lo_hz)));
    }

    // stationary floor: a low quantile of each bin over the window
    std::vector<float> floor(bins);
    {
        std::vector<float> col(frames);
        const int k = std::min(frames - 1, (int) (p.floor_quantile * frames));
        for (int f = 0; f < bins; f++) {
            for (int t = 0; t < frames; t++) {
                col[t] = mag[(size_t) t * bins + f];
            }
            std::nth_element(col.begin(), col.begin() + k, col.end());
            floor[f] = col[k];
        }
    }

    std::vector<float> voice((size_t) frames * bins, 0.0f); // the Wiener mask before the priors
    std::vector<float> source = mag;                        // what the similarity features are made of
    std::vector<float> feat;
    std::vector<std::pair<float, int>> sims;
    sims.reserve(frames);
    for (int pass = 0; pass < p.passes; pass++) {
        voxd_voice_features(source, band_of, frames, bins, p.bands, feat);
        // earlier passes feed the next pass's features, which every frame of the window needs
        const bool last = pass + 1 == p.passes;
        const int a     = last ? t0 : 0;
        const int b     = last ? t1 : frames;
        for (int t = a; t < b; t++) {
            const float * ft = feat.data() + (size_t) t * p.bands;
            sims.clear();
            for (int u = 0; u < frames; u++) {
                if (std::abs(u - t) < p.min_distance) {
                    continue;
                }
                const float * fu = feat.data() + (size_t) u * p.bands;
                float s          = 0;
                for (int j = 0; j < p.bands; j++) {
                    s += ft[j] * fu[j];
                }
                sims.emplace_back(s, u);
            }
            const int k = std::min((int) sims.size(), p.neighbours);
            std::partial_sort(sims.begin(), sims.begin() + k, sims.end(),
                              [](const std::pair<float, int> & x, const std::pair<float, int> & y) { return x.first > y.first; });
            const float * m = mag.data() + (size_t) t * bins;
            float * v       = voice.data() + (size_t) t * bins;
            for (int f = 0; f < bins; f++) {
                float rep = m[f];
                for (int j = 0; j < k; j++) {
                    rep = std::min(rep, mag[(size_t) sims[j].second * bins + f]);
                }
                const float bg = std::min(m[f], std::max(rep, floor[f]));
                const float fg = m[f] - bg;
                const float ff = fg * fg;
                const float bb = bg * bg;
                v[f]           = ff + bb > 0.0f ? ff / (ff + bb) : 0.0f;
            }
        }
        if (!last) {
            for (size_t i = 0; i < source.size(); i++) {
                source[i] = mag[i] * (1.0f - voice[i]);
            }
        }
    }

    std::vector<float> prior(bins);
    for (int f = 0; f < bins; f++) {
        prior[f] = voxd_speech_prior(stft.bin_hz(f));
    }
    for (int t = t0; t < t1; t++) {
        float * m0      = mask.data() + (size_t) t * bins; // channel 0
        const float * v = voice.data() + (size_t) t * bins;
        for (int f = 0; f < bins; f++) {
            m0[f] = v[f] * prior[f];
        }
        if (channels == 2) {
            // a voice mixed equally into both channels: 2 Re(L R*) / (|L|^2 + |R|^2) is 1 there, less elsewhere
            const voxd_cpx * l = spec.frame(0, t);
            const voxd_cpx * r = spec.frame(1, t);
            for (int f = 0; f < bins; f++) {
                const float num = 2.0f * (l[f].real() * r[f].real() + l[f].imag() * r[f].imag());
                const float den = std::norm(l[f]) + std::norm(r[f]);
                m0[f] *= den > 0.0f ? std::clamp(num / den, 0.0f, 1.0f) : 1.0f;
            }
            std::copy(m0, m0 + bins, mask.begin() + ((size_t) frames + t) * bins);
        }
    }
}

// ---- the block loop ----

// Low-band weight of the bass method: 1 well below 250 Hz, 0.5 at 250 Hz, a smooth 8th-order roll-off above.
float voxd_bass_weight(double hz) {
    return (float) (1.0 / (1.0 + std::pow(hz / 250.0, 8)));
}

// Frames of one block (~12 s); the context frames on each side feed the medians and the similarity search.
constexpr double voxd_block_seconds   = 12.0;
constexpr double voxd_voice_context_s = 4.0;

std::vector<std::vector<float>> voxd_apply_method(const std::vector<std::vector<float>> & input, int rate, voxd_separation_method method,
                                                  const voxd_abort_ptr & abort) {
    const int channels = (int) input.size();
    const int64_t n    = (int64_t) input[0].size();
    std::vector<std::vector<float>> out(channels, std::vector<float>((size_t) n, 0.0f));
    if (n == 0) {
        return out;
    }
    const voxd_stft stft(rate, n);
    voxd_rfft fft(stft.n_fft);
    const voxd_hpss_params hpss(stft);
    const voxd_voice_params voice(stft);

    const int64_t block = std::max<int64_t>(1, std::lround(voxd_block_seconds * stft.frames_per_second()));
    // the time median reaches half_time frames each side: with that much context a frame's mask does not depend
    // on where the blocks are cut
    const int64_t context = method == voxd_separation_method::voice ? std::lround(voxd_voice_context_s * stft.frames_per_second()) : hpss.half_time;

    voxd_spec_window spec;
    std::vector<float> mask;
    for (int64_t b0 = 0; b0 < stft.n_frames; b0 += block) {
        voxd_check_abort(abort);
        const int64_t b1 = std::min(stft.n_frames, b0 + block);
        const int64_t w0 = std::max<int64_t>(0, b0 - context);
        const int64_t w1 = std::min(stft.n_frames, b1 + context);
        voxd_analyse(stft, fft, input, w0, (int) (w1 - w0), spec);
        voxd_check_abort(abort);
        mask.assign(spec.x.size(), 0.0f);
        const int t0 = (int) (b0 - w0);
        const int t1 = (int) (b1 - w0);
        switch (method) {
            case voxd_separation_method::percussive:
                for (int c = 0; c < channels; c++) {
                    voxd_percussive_mask(spec, hpss, c, t0, t1, mask);
                }
                break;
            case voxd_separation_method::bass:
                for (int c = 0; c < channels; c++) {
                    voxd_percussive_mask(spec, hpss, c, t0, t1, mask);
                    for (int t = t0; t < t1; t++) {
                        float * m = mask.data() + ((size_t) c * spec.frames + t) * spec.bins;
                        for (int f = 0; f < spec.bins; f++) {
                            m[f] = (1.0f - m[f]) * voxd_bass_weight(stft.bin_hz(f));
                        }
                    }
                }
                break;
            case voxd_separation_method::voice: voxd_voice_mask(stft, spec, voice, t0, t1, mask); break;
            default: throw voxd_error("invalid_argument", "not a primary separation method");
        }
        voxd_check_abort(abort);
        voxd_synthesise(stft, fft, spec, mask, t0, t1, out);
    }
    return out;
}

} // namespace

bool voxd_parse_separation_method(const std::string & name, voxd_separation_method & method) {
    static const std::pair<const char *, voxd_separation_method> names[] = {
        { "percussive", voxd_separation_method::percussive },
        { "harmonic", voxd_separation_method::harmonic },
        { "voice", voxd_separation_method::voice },
        { "accompaniment", voxd_separation_method::accompaniment },
        { "bass", voxd_separation_method::bass },
    };
    for (const auto & [n, m] : names) {
        if (name == n) {
            method = m;
            return true;
        }
    }
    return false;
}

std::vector<std::vector<float>> voxd_separate(const std::vector<std::vector<float>> & channels, int sample_rate, voxd_separation_method method,
                                              const voxd_abort_ptr & abort) {
    if (channels.empty() || channels.size() > 2) {
        throw voxd_error("invalid_argument", "separate: 1 or 2 channels are supported");
    }
    if (channels.size() == 2 && channels[0].size() != channels[1].size()) {
        throw voxd_error("invalid_argument", "separate: the channels must have the same length");
    }
    if (sample_rate < voxd_separate_min_rate || sample_rate > voxd_separate_max_rate) {
        throw voxd_error("invalid_argument", "separate: sampleRate must be an integer from " + std::to_string(voxd_separate_min_rate) + " to " +
                                                 std::to_string(voxd_separate_max_rate));
    }
    // complements are the input minus the primary target: each pair then sums to the input exactly
    voxd_separation_method primary = method;
    if (method == voxd_separation_method::harmonic) {
        primary = voxd_separation_method::percussive;
    } else if (method == voxd_separation_method::accompaniment) {
        primary = voxd_separation_method::voice;
    }
    std::vector<std::vector<float>> target = voxd_apply_method(channels, sample_rate, primary, abort);
    if (primary != method) {
        for (size_t c = 0; c < channels.size(); c++) {
            for (size_t i = 0; i < target[c].size(); i++) {
                target[c][i] = channels[c][i] - target[c][i];
            }
        }
    }
    return target;
}
