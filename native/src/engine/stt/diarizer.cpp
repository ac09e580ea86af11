#include "stt/diarizer.h"

#include "common/rfft.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace {

// ---- features ----

constexpr int n_fft          = 512;
constexpr int frame_length   = 400; // 25 ms
constexpr int frame_step     = 160; // 10 ms
constexpr double frame_rate  = (double) voxd_diarize_rate / frame_step;
constexpr int n_mels         = 40;
constexpr int n_ceps         = 19; // c1..c19: c0, the loudness, says more about the microphone than the voice
constexpr double mel_low_hz  = 60.0;
constexpr double mel_high_hz = 7600.0;
constexpr double quiet_below = 1e-5; // frames 50 dB under the clip's loud speech carry no voice to compare

double hz_to_mel(double hz) {
    return 2595.0 * std::log10(1.0 + hz / 700.0);
}

double mel_to_hz(double mel) {
    return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
}

// MFCCs of 25 ms Hamming frames every 10 ms (pre-emphasis, 40 triangular mel bands, DCT-II), and each frame's
// energy for telling voice from near-silence.
struct voxd_mfcc {
    std::vector<float> ceps;   // n_frames x n_ceps
    std::vector<float> energy; // n_frames
    int n_frames = 0;

    explicit voxd_mfcc(const std::vector<float> & samples) {
        const int n = (int) samples.size();
        n_frames    = n < frame_length ? 0 : (n - frame_length) / frame_step + 1;
        ceps.resize((size_t) n_frames * n_ceps);
        energy.resize(n_frames);

        std::array<float, frame_length> window;
        for (int i = 0; i < frame_length; i++) {
            window[i] = (float) (0.54 - 0.46 * std::cos(2.0 * voxd_pi * i / (frame_length - 1)));
        }
        const int n_bins = n_fft / 2 + 1;
        std::vector<float> bands((size_t) n_mels * n_bins, 0.0f);
        const double mel_low  = hz_to_mel(mel_low_hz);
        const double mel_step = (hz_to_mel(mel_high_hz) - mel_low) / (n_mels + 1);
        for (int m = 0; m < n_mels; m++) {
            const double left   = mel_to_hz(mel_low + m * mel_step);
            const double centre = mel_to_hz(mel_low + (m + 1) * mel_step);
            const double right  = mel_to_hz(mel_low + (m + 2) * mel_step);
            for (int k = 0; k < n_bins; k++) {
                const double hz                = (double) k * voxd_diarize_rate / n_fft;
                const double w                 = std::min((hz - left) / (centre - left), (right - hz) / (right - centre));
                bands[(size_t) m * n_bins + k] = (float) std::max(0.0, w);
            }
        }
        std::vector<float> dct((size_t) n_ceps * n_mels);
        for (int c = 0; c < n_ceps; c++) {
            for (int m = 0; m < n_mels; m++) {
                dct[(size_t) c * n_mels + m] = (float) (std::sqrt(2.0 / n_mels) * std::cos(voxd_pi * (c + 1) * (m + 0.5) / n_mels));
            }
        }

        voxd_rfft fft(n_fft);
        std::vector<float> frame(n_fft, 0.0f);
        std::vector<voxd_cpx> spectrum(n_bins);
        std::vector<float> power(n_bins);
        std::vector<float> log_mel((size_t) n_frames * n_mels);
        float loudest = 0.0f;
        for (int t = 0; t < n_frames; t++) {
            const int at = t * frame_step;
            for (int i = 0; i < frame_length; i++) {
                const float previous = at + i > 0 ? samples[at + i - 1] : samples[0];
                frame[i]             = (samples[at + i] - 0.97f * previous) * window[i];
            }
            fft.forward(frame.data(), spectrum.data());
            double total = 0.0;
            for (int k = 0; k < n_bins; k++) {
                power[k] = std::norm(spectrum[k]);
                total += power[k];
            }
            energy[t] = (float) total;
            loudest   = std::max(loudest, energy[t]);
            for (int m = 0; m < n_mels; m++) {
                const float * w = &bands[(size_t) m * n_bins];
                double sum      = 0.0;
                for (int k = 0; k < n_bins; k++) {
                    sum += w[k] * power[k];
                }
                log_mel[(size_t) t * n_mels + m] = (float) sum;
            }
        }
        // a floor relative to the clip, so digital silence does not become an outlier of its own
        const float floor = std::max(loudest * 1e-9f, std::numeric_limits<float>::min());
        for (int t = 0; t < n_frames; t++) {
            float * lm = &log_mel[(size_t) t * n_mels];
            for (int m = 0; m < n_mels; m++) {
                lm[m] = std::log(std::max(lm[m], floor));
            }
            for (int c = 0; c < n_ceps; c++) {
                const float * d = &dct[(size_t) c * n_mels];
                float sum       = 0.0f;
                for (int m = 0; m < n_mels; m++) {
                    sum += d[m] * lm[m];
                }
                ceps[(size_t) t * n_ceps + c] = sum;
            }
        }
    }

    const float * at(int t) const { return &ceps[(size_t) t * n_ceps]; }
};

// Frames loud enough to describe a voice, among `frames` (indices): within 50 dB of the loudest 5 % of them.
std::vector<int> voiced_frames(const voxd_mfcc & mfcc, const std::vector<int> & frames) {
    if (frames.empty()) {
        return {};
    }
    std::vector<float> levels;
    levels.reserve(frames.size());
    for (int t : frames) {
        levels.push_back(mfcc.energy[t]);
    }
    const size_t p95 = (size_t) ((levels.size() - 1) * 0.95);
    std::nth_element(levels.begin(), levels.begin() + (ptrdiff_t) p95, levels.end());
    const double threshold = levels[p95] * quiet_below;
    std::vector<int> voiced;
    for (int t : frames) {
        if (mfcc.energy[t] > threshold) {
            voiced.push_back(t);
        }
    }
    return voiced;
}

// ---- Gaussians and the Bayesian information criterion ----

// Sufficient statistics of a set of frames (every second frame: 10 ms frames overlap by 15 ms, and counting each as
// independent would let the likelihood outweigh the criterion's penalty).
struct voxd_frame_stats {
    double n = 0.0;
    std::array<double, n_ceps> sum{};
    std::array<double, n_ceps * n_ceps> outer{};

    void add(const float * x) {
        n += 1.0;
        for (int i = 0; i < n_ceps; i++) {
            sum[i] += x[i];
            for (int j = 0; j <= i; j++) {
                outer[i * n_ceps + j] += (double) x[i] * x[j];
            }
        }
    }

    // The same mean and covariance, as if from `weight` times as many frames.
    voxd_frame_stats scaled(double weight) const {
        voxd_frame_stats out = *this;
        out.n *= weight;
        for (double & v : out.sum) {
            v *= weight;
        }
        for (double & v : out.outer) {
            v *= weight;
        }
        return out;
    }

    void merge(const voxd_frame_stats & other) {
        n += other.n;
        for (int i = 0; i < n_ceps; i++) {
            sum[i] += other.sum[i];
        }
        for (int i = 0; i < n_ceps * n_ceps; i++) {
            outer[i] += other.outer[i];
        }
    }
};

constexpr int bic_frame_stride     = 2;
constexpr double covariance_floor  = 1e-3; // keeps a cluster of few frames from a singular covariance
constexpr double bic_penalty_scale = 1.75; // λ: chosen on bench/diarization.ts's dialogues (docs/models.md)
// The frames a cluster brings to a comparison count for at most 600 (12 s of speech): a Gaussian only approximates
// a voice, and with evidence growing without bound one speaker's recordings end up told apart (a speaker of 20 s and
// more was split in 5 of 12 long two-person dialogues of the bench's clips; in 3 with this bound; the bench's own
// set is unchanged).
constexpr double bic_max_frames = 600.0;

// A full-covariance Gaussian: mean and the lower Cholesky factor of the (floored) covariance.
struct voxd_gaussian {
    std::array<double, n_ceps> mean{};
    std::array<double, n_ceps * n_ceps> chol{};
    double log_det = 0.0;

    explicit voxd_gaussian(const voxd_frame_stats & s) {
        const double n = std::max(s.n, 1.0);
        for (int i = 0; i < n_ceps; i++) {
            mean[i] = s.sum[i] / n;
        }
        std::array<double, n_ceps * n_ceps> cov{};
        for (int i = 0; i < n_ceps; i++) {
            for (int j = 0; j <= i; j++) {
                cov[i * n_ceps + j] = s.outer[i * n_ceps + j] / n - mean[i] * mean[j];
            }
            cov[i * n_ceps + i] += covariance_floor;
        }
        for (int j = 0; j < n_ceps; j++) {
            double d = cov[j * n_ceps + j];
            for (int k = 0; k < j; k++) {
                d -= chol[j * n_ceps + k] * chol[j * n_ceps + k];
            }
            d                    = std::sqrt(std::max(d, covariance_floor));
            chol[j * n_ceps + j] = d;
            log_det += 2.0 * std::log(d);
            for (int i = j + 1; i < n_ceps; i++) {
                double v = cov[i * n_ceps + j];
                for (int k = 0; k < j; k++) {
                    v -= chol[i * n_ceps + k] * chol[j * n_ceps + k];
                }
                chol[i * n_ceps + j] = v / d;
            }
        }
    }

    // Log-density of `x`, up to the constant every Gaussian of the same dimension shares.
    double log_likelihood(const float * x) const {
        std::array<double, n_ceps> z;
        double q = 0.0;
        for (int i = 0; i < n_ceps; i++) {
            double v = x[i] - mean[i];
            for (int k = 0; k < i; k++) {
                v -= chol[i * n_ceps + k] * z[k];
            }
            z[i] = v / chol[i * n_ceps + i];
            q += z[i] * z[i];
        }
        return -0.5 * (q + log_det);
    }
};

// ΔBIC of modelling two sets of frames by one Gaussian rather than two: below zero, they are one speaker. Each set
// counts for at most bic_max_frames.
double delta_bic(const voxd_frame_stats & full_a, const voxd_frame_stats & full_b) {
    const voxd_frame_stats a = full_a.scaled(std::min(1.0, bic_max_frames / full_a.n));
    const voxd_frame_stats b = full_b.scaled(std::min(1.0, bic_max_frames / full_b.n));
    voxd_frame_stats both    = a;
    both.merge(b);
    const double parameters = n_ceps + 0.5 * n_ceps * (n_ceps + 1);
    const double gain       = 0.5 * (both.n * voxd_gaussian(both).log_det - a.n * voxd_gaussian(a).log_det - b.n * voxd_gaussian(b).log_det);
    return gain - bic_penalty_scale * 0.5 * parameters * std::log(both.n);
}

// ---- windows and their clustering ----

constexpr int window_frames    = 150; // 1.5 s
constexpr int window_step      = 75;
constexpr int min_window_voice = 30; // voiced frames a window needs to describe a voice
constexpr int max_windows      = 2000;
constexpr int initial_clusters = 8;

struct voxd_window {
    int region;
    int first; // the region's voiced frames [first, last)
    int last;
    std::array<float, 2 * n_ceps> embedding;
};

// Average-linkage clustering of `points` (unit vectors, cosine distance) into `k` clusters, by the nearest-neighbour
// chain (the merges of the whole hierarchy, O(n²)), then the first n - k merges in order of height.
std::vector<int> average_linkage(const std::vector<std::array<float, 2 * n_ceps>> & points, int k, const voxd_abort_ptr & abort) {
    const int n = (int) points.size();
    std::vector<float> dist((size_t) n * n);
    for (int i = 0; i < n; i++) {
        for (int j = i; j < n; j++) {
            float dot = 0.0f;
            for (int d = 0; d < 2 * n_ceps; d++) {
                dot += points[i][d] * points[j][d];
            }
            dist[(size_t) i * n + j] = dist[(size_t) j * n + i] = 1.0f - dot;
        }
    }
    voxd_check_abort(abort);
    struct merge_step {
        float height;
        int a, b;
    };
    std::vector<merge_step> merges;
    std::vector<int> size(n, 1);
    std::vector<bool> active(n, true);
    std::vector<int> chain;
    int remaining = n;
    while (remaining > 1) {
        if (chain.empty()) {
            chain.push_back((int) (std::find(active.begin(), active.end(), true) - active.begin()));
        }
        const int top = chain.back();
        int nearest   = -1;
        for (int j = 0; j < n; j++) {
            // ties go to the previous link, so the chain always ends in a reciprocal pair
            if (j != top && active[j] &&
                (nearest < 0 || dist[(size_t) top * n + j] < dist[(size_t) top * n + nearest] ||
                 (chain.size() > 1 && j == chain[chain.size() - 2] && dist[(size_t) top * n + j] == dist[(size_t) top * n + nearest]))) {
                nearest = j;
            }
        }
        if (chain.size() > 1 && nearest == chain[chain.size() - 2]) {
            chain.pop_back();
            chain.pop_back();
            merges.push_back({ dist[(size_t) top * n + nearest], top, nearest });
            // Lance-Williams: the merged cluster lives on in `nearest`
            for (int j = 0; j < n; j++) {
                if (active[j] && j != top && j != nearest) {
                    const float d = (size[top] * dist[(size_t) top * n + j] + size[nearest] * dist[(size_t) nearest * n + j]) / (size[top] + size[nearest]);
                    dist[(size_t) nearest * n + j] = dist[(size_t) j * n + nearest] = d;
                }
            }
            size[nearest] += size[top];
            active[top] = false;
            remaining--;
        } else {
            chain.push_back(nearest);
        }
    }
    std::stable_sort(merges.begin(), merges.end(), [](const merge_step & x, const merge_step & y) { return x.height < y.height; });
    std::vector<int> parent(n);
    std::iota(parent.begin(), parent.end(), 0);
    auto root = [&](int i) {
        while (parent[i] != i) {
            i = parent[i] = parent[parent[i]];
        }
        return i;
    };
    for (int m = 0; m < n - k && m < (int) merges.size(); m++) {
        parent[root(merges[m].a)] = root(merges[m].b);
    }
    std::vector<int> label(n, -1), ids(n, -1);
    int next = 0;
    for (int i = 0; i < n; i++) {
        int & id = ids[root(i)];
        if (id < 0) {
            id = next++;
        }
        label[i] = id;
    }
    return label;
}

// ---- relabelling frames ----

// Log-likelihoods averaged over ±50 ms before the Viterbi pass, and a change of speaker costs 2 nats of them: short
// enough for a backchannel of a third of a second to become a turn (bench/diarization.ts: known speakers' short
// segments named right 44 % with ±0.25 s and 5 nats, 68 % with these).
constexpr int smoothing_frames  = 5;
constexpr double switch_penalty = 2.0;
constexpr int resegment_passes  = 2;

// The log-likelihood of each of `frames` (one stretch of speech) under each of `models`, averaged over ±`half_window`
// frames (frames x models).
std::vector<double> smoothed_log_likelihoods(const voxd_mfcc & mfcc, const std::vector<int> & frames, const std::vector<voxd_gaussian> & models,
                                             int half_window) {
    const int n = (int) frames.size(), k = (int) models.size();
    std::vector<double> prefix((size_t) (n + 1) * k, 0.0);
    for (int t = 0; t < n; t++) {
        for (int c = 0; c < k; c++) {
            prefix[(size_t) (t + 1) * k + c] = prefix[(size_t) t * k + c] + models[c].log_likelihood(mfcc.at(frames[t]));
        }
    }
    std::vector<double> smooth((size_t) n * k);
    for (int t = 0; t < n; t++) {
        const int lo = std::max(0, t - half_window), hi = std::min(n, t + half_window + 1);
        for (int c = 0; c < k; c++) {
            smooth[(size_t) t * k + c] = (prefix[(size_t) hi * k + c] - prefix[(size_t) lo * k + c]) / (hi - lo);
        }
    }
    return smooth;
}

// The speaker of each of `n_frames` frames by Viterbi over their smoothed log-likelihoods (frames x k).
std::vector<int> viterbi(const std::vector<double> & smooth, int n_frames, int k) {
    std::vector<double> score(k), next(k);
    std::vector<int> back((size_t) n_frames * k);
    for (int c = 0; c < k; c++) {
        score[c] = smooth[c];
    }
    for (int t = 1; t < n_frames; t++) {
        const int best = (int) (std::max_element(score.begin(), score.end()) - score.begin());
        for (int c = 0; c < k; c++) {
            const bool stay          = score[c] >= score[best] - switch_penalty;
            back[(size_t) t * k + c] = stay ? c : best;
            next[c]                  = (stay ? score[c] : score[best] - switch_penalty) + smooth[(size_t) t * k + c];
        }
        std::swap(score, next);
    }
    std::vector<int> path(n_frames);
    path[n_frames - 1] = (int) (std::max_element(score.begin(), score.end()) - score.begin());
    for (int t = n_frames - 1; t > 0; t--) {
        path[t - 1] = back[(size_t) t * k + path[t]];
    }
    return path;
}

// ---- the steps ----

// A span of speech and its voiced frames.
struct voxd_region {
    voxd_time_span span;
    std::vector<int> frames;
};

struct voxd_speech_frames {
    std::vector<voxd_region> regions; // those with voiced frames
};

voxd_speech_frames speech_frames(const voxd_mfcc & mfcc, const std::vector<voxd_time_span> & speech) {
    std::vector<int> all;
    for (const voxd_time_span & s : speech) {
        const int last = std::min(mfcc.n_frames, (int) std::lround(s.end * frame_rate));
        for (int t = std::max(0, (int) std::lround(s.start * frame_rate)); t < last; t++) {
            all.push_back(t);
        }
    }
    // one loudness reference for the whole clip: a quiet speaker's frames are still voiced
    const std::vector<int> voiced = voiced_frames(mfcc, all);
    std::vector<bool> is_voiced(mfcc.n_frames, false);
    for (int t : voiced) {
        is_voiced[t] = true;
    }
    voxd_speech_frames result;
    for (const voxd_time_span & s : speech) {
        voxd_region region{ s, {} };
        const int last = std::min(mfcc.n_frames, (int) std::lround(s.end * frame_rate));
        for (int t = std::max(0, (int) std::lround(s.start * frame_rate)); t < last; t++) {
            if (is_voiced[t]) {
                region.frames.push_back(t);
            }
        }
        if (!region.frames.empty()) {
            result.regions.push_back(std::move(region));
        }
    }
    return result;
}

// Windows of about 1.5 s over each region's voiced frames; hops grow on long clips so there are at most max_windows.
std::vector<voxd_window> speech_windows(const voxd_mfcc & mfcc, const voxd_speech_frames & speech) {
    size_t total = 0;
    for (const voxd_region & region : speech.regions) {
        total += region.frames.size();
    }
    const int step = std::max(window_step, (int) ((total + max_windows - 1) / max_windows));
    std::vector<voxd_window> windows;
    for (size_t r = 0; r < speech.regions.size(); r++) {
        const std::vector<int> & region = speech.regions[r].frames;
        const int n                     = (int) region.size();
        if (n < min_window_voice) {
            continue;
        }
        std::vector<int> starts;
        for (int s = 0; s + window_frames < n; s += step) {
            starts.push_back(s);
        }
        starts.push_back(std::max(0, n - window_frames)); // the last window ends with the region
        for (int s : starts) {
            const int e = std::min(n, s + window_frames);
            voxd_window w{ (int) r, s, e, {} };
            std::array<double, n_ceps> sum{}, sq{};
            for (int i = s; i < e; i++) {
                const float * x = mfcc.at(region[i]);
                for (int c = 0; c < n_ceps; c++) {
                    sum[c] += x[c];
                    sq[c] += (double) x[c] * x[c];
                }
            }
            for (int c = 0; c < n_ceps; c++) {
                const double mean       = sum[c] / (e - s);
                w.embedding[c]          = (float) mean;
                w.embedding[n_ceps + c] = (float) std::sqrt(std::max(0.0, sq[c] / (e - s) - mean * mean));
            }
            windows.push_back(w);
        }
    }
    return windows;
}

// Windows' embeddings standardised over the clip (each dimension to zero mean, unit spread) and scaled to unit length.
std::vector<std::array<float, 2 * n_ceps>> standardised(const std::vector<voxd_window> & windows) {
    const size_t n = windows.size();
    std::array<double, 2 * n_ceps> mean{}, spread{};
    for (const voxd_window & w : windows) {
        for (int d = 0; d < 2 * n_ceps; d++) {
            mean[d] += w.embedding[d] / n;
        }
    }
    for (const voxd_window & w : windows) {
        for (int d = 0; d < 2 * n_ceps; d++) {
            spread[d] += (w.embedding[d] - mean[d]) * (w.embedding[d] - mean[d]) / n;
        }
    }
    std::vector<std::array<float, 2 * n_ceps>> points(n);
    for (size_t i = 0; i < n; i++) {
        double norm = 0.0;
        for (int d = 0; d < 2 * n_ceps; d++) {
            points[i][d] = (float) ((windows[i].embedding[d] - mean[d]) / (std::sqrt(spread[d]) + 1e-8));
            norm += (double) points[i][d] * points[i][d];
        }
        const float scale = norm > 0.0 ? (float) (1.0 / std::sqrt(norm)) : 0.0f;
        for (float & v : points[i]) {
            v *= scale;
        }
    }
    return points;
}

std::vector<voxd_frame_stats> cluster_stats(const voxd_mfcc & mfcc, const std::vector<int> & frames, const std::vector<int> & labels, int k) {
    std::vector<voxd_frame_stats> stats(k);
    for (size_t i = 0; i < frames.size(); i += bic_frame_stride) {
        if (labels[i] >= 0) {
            stats[labels[i]].add(mfcc.at(frames[i]));
        }
    }
    return stats;
}

// Merges clusters (relabelling `labels`) while ΔBIC says two are one speaker, or while there are more than
// `max_speakers`, and never below `min_speakers`. Returns the number of clusters left.
int merge_by_bic(std::vector<voxd_frame_stats> & stats, std::vector<int> & labels, int min_speakers, int max_speakers) {
    std::vector<int> alive(stats.size());
    std::iota(alive.begin(), alive.end(), 0);
    while ((int) alive.size() > std::max(1, min_speakers)) {
        double best = std::numeric_limits<double>::infinity();
        int bi = -1, bj = -1;
        for (size_t i = 0; i < alive.size(); i++) {
            for (size_t j = i + 1; j < alive.size(); j++) {
                const double d = delta_bic(stats[alive[i]], stats[alive[j]]);
                if (d < best) {
                    best = d;
                    bi   = alive[i];
                    bj   = alive[j];
                }
            }
        }
        if (best >= 0.0 && (int) alive.size() <= max_speakers) {
            break;
        }
        stats[bi].merge(stats[bj]);
        alive.erase(std::find(alive.begin(), alive.end(), bj));
        for (int & l : labels) {
            if (l == bj) {
                l = bi;
            }
        }
    }
    std::vector<int> renumber(stats.size(), -1);
    std::vector<voxd_frame_stats> kept;
    for (int a : alive) {
        renumber[a] = (int) kept.size();
        kept.push_back(stats[a]);
    }
    for (int & l : labels) {
        l = l >= 0 ? renumber[l] : -1;
    }
    stats = std::move(kept);
    return (int) stats.size();
}

// Relabels every voiced frame by Viterbi over the clusters' Gaussians, region by region, re-estimating them between
// passes; clusters left with no frames disappear.
void resegment(const voxd_mfcc & mfcc, const voxd_speech_frames & speech, const std::vector<int> & frames, std::vector<int> & labels,
               std::vector<voxd_frame_stats> & stats, const voxd_abort_ptr & abort) {
    for (int pass = 0; pass < resegment_passes && stats.size() > 1; pass++) {
        voxd_check_abort(abort);
        std::vector<voxd_gaussian> models;
        for (const voxd_frame_stats & s : stats) {
            models.emplace_back(s);
        }
        const int k   = (int) models.size();
        size_t offset = 0;
        for (const voxd_region & region : speech.regions) {
            const int n                 = (int) region.frames.size();
            const std::vector<int> path = viterbi(smoothed_log_likelihoods(mfcc, region.frames, models, smoothing_frames), n, k);
            std::copy(path.begin(), path.end(), labels.begin() + (ptrdiff_t) offset);
            offset += n;
        }
        std::vector<int> count(k, 0);
        for (int l : labels) {
            count[l]++;
        }
        std::vector<int> renumber(k, -1);
        int kept = 0;
        for (int c = 0; c < k; c++) {
            if (count[c] > 0) {
                renumber[c] = kept++;
            }
        }
        for (int & l : labels) {
            l = renumber[l];
        }
        stats = cluster_stats(mfcc, frames, labels, kept);
    }
}

// ---- short turns under another's ----

// A backchannel spoken under someone else's turn mixes two voices, and the one-speaker-at-a-time Viterbi mostly gives
// it to the turn around it. An intrusion is a stretch of 0.1 to 1 s inside one speaker's turn (the host: the speaker
// of most frames within ±0.75 s) where another speaker's log-likelihood, averaged over ±80 ms, comes within 10 nats
// of the host's. It is given to that speaker when the evidence adds up: the mean margin of the other speaker over
// the host, minus the host's fit in standard deviations from its fit on its own frames (a mixture fits it worse),
// plus 0.3 per dB that the stretch is louder than the host's speech around it (voices add up), is above -4.5.
// The weights come from a logistic fit on bench/diarization.ts's seeds 1-3 (docs/models.md), the averaging from a
// sweep on them.
constexpr int intrusion_smoothing       = 8;
constexpr int host_half_window          = 75;
constexpr double intrusion_within_nats  = 10.0;
constexpr int intrusion_min_frames      = 10;
constexpr int intrusion_max_frames      = 100;
constexpr int intrusion_context_frames  = 50; // of the host's speech on each side, for the loudness comparison
constexpr double intrusion_db_weight    = 0.3;
constexpr double intrusion_min_evidence = -4.5;

// Gives intrusions (above) to the speaker who intrudes, relabelling `labels` (every voiced frame, region after
// region) against the speakers' Gaussians `stats`.
void label_intrusions(const voxd_mfcc & mfcc, const voxd_speech_frames & speech, const std::vector<voxd_frame_stats> & stats, std::vector<int> & labels) {
    const int k = (int) stats.size();
    if (k < 2) {
        return;
    }
    std::vector<voxd_gaussian> models;
    for (const voxd_frame_stats & s : stats) {
        models.emplace_back(s);
    }
    std::vector<std::vector<double>> smooth; // per region, frames x k
    for (const voxd_region & region : speech.regions) {
        smooth.push_back(smoothed_log_likelihoods(mfcc, region.frames, models, intrusion_smoothing));
    }
    // how well each speaker fits its own frames: mean and standard deviation of the smoothed log-likelihood
    std::vector<double> sum(k, 0.0), sum_sq(k, 0.0), count(k, 0.0);
    size_t offset = 0;
    for (size_t r = 0; r < speech.regions.size(); r++) {
        for (size_t t = 0; t < speech.regions[r].frames.size(); t++) {
            const int c    = labels[offset + t];
            const double v = smooth[r][t * k + c];
            sum[c] += v;
            sum_sq[c] += v * v;
            count[c] += 1.0;
        }
        offset += speech.regions[r].frames.size();
    }
    std::vector<double> fit_mean(k), fit_sd(k);
    for (int c = 0; c < k; c++) {
        fit_mean[c] = sum[c] / std::max(count[c], 1.0);
        fit_sd[c]   = std::max(std::sqrt(std::max(sum_sq[c] / std::max(count[c], 1.0) - fit_mean[c] * fit_mean[c], 0.0)), 1e-6);
    }

    offset = 0;
    for (size_t r = 0; r < speech.regions.size(); r++) {
        const std::vector<int> & frames = speech.regions[r].frames;
        const std::vector<double> & ll  = smooth[r];
        const int n                     = (int) frames.size();
        int * label                     = labels.data() + offset;
        // the host of every frame, by a sliding count of labels, and the other speaker that fits it best
        std::vector<int> host(n), rival(n, -1);
        std::vector<int> votes(k, 0);
        for (int t = 0; t < std::min(n, host_half_window); t++) {
            votes[label[t]]++;
        }
        for (int t = 0; t < n; t++) {
            if (t + host_half_window < n) {
                votes[label[t + host_half_window]]++;
            }
            if (t - host_half_window - 1 >= 0) {
                votes[label[t - host_half_window - 1]]--;
            }
            host[t]          = (int) (std::max_element(votes.begin(), votes.end()) - votes.begin());
            const double * f = &ll[(size_t) t * k];
            int best         = -1;
            for (int c = 0; c < k; c++) {
                if (c != host[t] && (best < 0 || f[c] > f[best])) {
                    best = c;
                }
            }
            if (f[best] > f[host[t]] - intrusion_within_nats) {
                rival[t] = best;
            }
        }
        // runs of one rival inside one host's stretch, weighed
        for (int t = 0; t < n;) {
            if (rival[t] < 0) {
                t++;
                continue;
            }
            const int intruder = rival[t], h = host[t], first = t;
            while (t < n && rival[t] == intruder && host[t] == h) {
                t++;
            }
            const int length = t - first;
            if (first == 0 || t == n || host[t] != h || length < intrusion_min_frames || length > intrusion_max_frames) {
                continue;
            }
            double margin = 0.0, host_fit = 0.0, inside = 0.0, around = 0.0;
            for (int u = first; u < t; u++) {
                margin += ll[(size_t) u * k + intruder] - ll[(size_t) u * k + h];
                host_fit += (ll[(size_t) u * k + h] - fit_mean[h]) / fit_sd[h];
                inside += mfcc.energy[frames[u]];
            }
            int n_around = 0;
            for (int u = std::max(0, first - intrusion_context_frames); u < std::min(n, t + intrusion_context_frames); u++) {
                if (u < first || u >= t) {
                    around += mfcc.energy[frames[u]];
                    n_around++;
                }
            }
            const double louder_db = 10.0 * std::log10((inside / length + 1e-12) / (around / std::max(n_around, 1) + 1e-12));
            if ((margin - host_fit) / length + intrusion_db_weight * louder_db > intrusion_min_evidence) {
                std::fill(label + first, label + t, intruder);
            }
        }
        offset += n;
    }
}

// A reference names a speaker when ΔBIC says they are one by at least this much per frame of the clip: a voice that
// is merely the nearest stays unnamed (true matches measured at -2.8 to -4 per frame, a stranger's at -0.4).
constexpr double reference_margin = 1.0;

// The reference clips' speakers: pairs of (reference, speaker) taken best first by ΔBIC while it says they are one
// speaker by reference_margin, each reference and each speaker at most once.
std::vector<int> match_references(const std::vector<std::vector<float>> & references, const std::vector<voxd_frame_stats> & speakers) {
    std::vector<voxd_frame_stats> clips;
    for (const std::vector<float> & clip : references) {
        const voxd_mfcc mfcc(clip);
        std::vector<int> all(mfcc.n_frames);
        std::iota(all.begin(), all.end(), 0);
        const std::vector<int> voiced = voiced_frames(mfcc, all);
        voxd_frame_stats s;
        for (size_t i = 0; i < voiced.size(); i += bic_frame_stride) {
            s.add(mfcc.at(voiced[i]));
        }
        clips.push_back(s);
    }
    struct pair_score {
        double bic;
        int reference, speaker;
    };
    std::vector<pair_score> pairs;
    for (size_t r = 0; r < clips.size(); r++) {
        for (size_t k = 0; k < speakers.size(); k++) {
            if (clips[r].n > 0 && speakers[k].n > 0) {
                pairs.push_back({ delta_bic(clips[r], speakers[k]), (int) r, (int) k });
            }
        }
    }
    std::sort(pairs.begin(), pairs.end(), [](const pair_score & a, const pair_score & b) { return a.bic < b.bic; });
    std::vector<int> matched(references.size(), -1);
    std::vector<bool> taken(speakers.size(), false);
    for (const pair_score & p : pairs) {
        if (p.bic < -reference_margin * clips[p.reference].n && matched[p.reference] < 0 && !taken[p.speaker]) {
            matched[p.reference] = p.speaker;
            taken[p.speaker]     = true;
        }
    }
    return matched;
}

} // namespace

voxd_diarization voxd_diarize(const std::vector<float> & samples, const std::vector<voxd_time_span> & speech,
                              const std::vector<std::vector<float>> & references, const voxd_diarize_params & params, const voxd_abort_ptr & abort) {
    if (params.min_speakers < 1 || params.max_speakers < params.min_speakers || params.max_speakers > voxd_diarize_max_speakers) {
        throw voxd_error("invalid_argument", "diarize: speakers must satisfy 1 <= min <= max <= " + std::to_string(voxd_diarize_max_speakers));
    }
    for (size_t i = 0; i < speech.size(); i++) {
        if (!(speech[i].start >= 0.0 && speech[i].end >= speech[i].start) || (i > 0 && speech[i].start < speech[i - 1].end)) {
            throw voxd_error("invalid_argument", "diarize: speech spans must be sorted, non-negative and not overlapping");
        }
    }
    voxd_check_abort(abort);
    const voxd_mfcc mfcc(samples);
    const voxd_speech_frames regions = speech_frames(mfcc, speech);
    std::vector<int> frames; // every voiced frame, region after region
    for (const voxd_region & region : regions.regions) {
        frames.insert(frames.end(), region.frames.begin(), region.frames.end());
    }
    voxd_diarization result;
    result.reference_speakers.assign(references.size(), -1);
    if (frames.empty()) {
        return result;
    }
    voxd_check_abort(abort);

    // windows -> initial clusters -> each voiced frame labelled by the window whose centre is nearest
    const std::vector<voxd_window> windows = speech_windows(mfcc, regions);
    std::vector<int> labels(frames.size(), 0);
    int k = 1;
    if (windows.size() > 1) {
        const int initial                   = std::min((int) windows.size(), std::max(initial_clusters, params.min_speakers));
        const std::vector<int> window_label = average_linkage(standardised(windows), initial, abort);
        k                                   = *std::max_element(window_label.begin(), window_label.end()) + 1;
        // each voiced frame takes the label of the nearest window centre in its region (none: -1, for now)
        size_t w = 0, offset = 0;
        for (size_t r = 0; r < regions.regions.size(); r++) {
            const size_t first = w;
            while (w < windows.size() && windows[w].region == (int) r) {
                w++;
            }
            const int n = (int) regions.regions[r].frames.size();
            for (int t = 0; t < n; t++) {
                int nearest    = -1;
                double closest = std::numeric_limits<double>::infinity();
                for (size_t i = first; i < w; i++) {
                    const double d = std::abs(t - 0.5 * (windows[i].first + windows[i].last));
                    if (d < closest) {
                        closest = d;
                        nearest = window_label[i];
                    }
                }
                labels[offset + t] = nearest;
            }
            offset += n;
        }
    }
    voxd_check_abort(abort);
    std::vector<voxd_frame_stats> stats = cluster_stats(mfcc, frames, labels, k);
    merge_by_bic(stats, labels, params.min_speakers, params.max_speakers);
    for (int & l : labels) {
        l = std::max(l, 0); // frames of regions too short for a window start with the first speaker; Viterbi decides
    }
    resegment(mfcc, regions, frames, labels, stats, abort);
    label_intrusions(mfcc, regions, stats, labels);

    // turns: runs of one speaker over each region's voiced frames, changing halfway between two frames of different
    // speakers; the first and last turn of a region reach its ends. Speakers are numbered by first appearance.
    std::vector<int> order(stats.size(), -1);
    size_t offset = 0;
    for (const voxd_region & region : regions.regions) {
        const size_t n = region.frames.size();
        for (size_t t = 0; t < n; t++) {
            int & speaker = order[labels[offset + t]];
            if (speaker < 0) {
                speaker = result.n_speakers++;
            }
            if (t == 0) {
                result.turns.push_back({ region.span.start, region.span.end, speaker });
            } else if (result.turns.back().speaker != speaker) {
                const double change     = 0.5 * (region.frames[t - 1] + 1 + region.frames[t]) / frame_rate;
                result.turns.back().end = change;
                result.turns.push_back({ change, region.span.end, speaker });
            }
        }
        offset += n;
    }
    const std::vector<int> matched = match_references(references, stats);
    for (size_t r = 0; r < matched.size(); r++) {
        result.reference_speakers[r] = matched[r] < 0 ? -1 : order[matched[r]];
    }
    return result;
}
