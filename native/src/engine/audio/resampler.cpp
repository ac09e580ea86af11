#include "audio/resampler.h"

extern "C" {
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

// ---- the filter ----
//
// libswresample's own polyphase engine, not soxr (which Debian's build has): soxr holds back about 75 ms of
// output at 24 -> 16 kHz until flush, too much latency for realtime turns; this filter holds back ~2 ms.
// FFmpeg's defaults (32 taps, cutoff 0.97) leave a wide aliasing band: a 8.5 kHz tone in 24 kHz input comes out
// of a 16 kHz conversion only 26 dB down (as 7.5 kHz). 64 taps with the cutoff at 0.91 of the lower Nyquist
// rate (measured at 24 -> 16 kHz: flat within 0.05 dB to 6.5 kHz, -0.9 dB at 7 kHz, >= 90 dB of attenuation from
// 8.2 kHz up) keep speech's band and reject what would fold back into it.
namespace {
constexpr int voxd_filter_size = 64;
constexpr double voxd_cutoff   = 0.91;
// Input handed to swr_convert at once (any chunk is cut into such pieces): keeps its int output count small.
constexpr size_t voxd_piece = 1024;
} // namespace

voxd_stream_resampler::voxd_stream_resampler(int input_rate, int output_rate) : m_in_rate(input_rate), m_out_rate(output_rate) {
    for (int rate : { input_rate, output_rate }) {
        if (rate < min_rate || rate > max_rate) {
            throw voxd_error("invalid_argument", "sample rates must be integers from " + std::to_string(min_rate) + " to " + std::to_string(max_rate) +
                                                     " Hz (got " + std::to_string(rate) + ")");
        }
    }
    if (input_rate == output_rate) {
        return;
    }
    AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO; // not const: FFmpeg 5.1's prototype takes a plain pointer
    int ret              = swr_alloc_set_opts2(&m_swr, &mono, AV_SAMPLE_FMT_FLT, output_rate, &mono, AV_SAMPLE_FMT_FLT, input_rate, 0, nullptr);
    if (ret >= 0) {
        ret = av_opt_set_int(m_swr, "filter_size", voxd_filter_size, 0);
    }
    if (ret >= 0) {
        ret = av_opt_set_double(m_swr, "cutoff", voxd_cutoff, 0);
    }
    if (ret >= 0) {
        ret = swr_init(m_swr);
    }
    if (ret < 0) {
        swr_free(&m_swr);
        throw voxd_error("native_error", "the resampler could not be set up for " + std::to_string(input_rate) + " -> " + std::to_string(output_rate) + " Hz");
    }
}

voxd_stream_resampler::~voxd_stream_resampler() {
    swr_free(&m_swr);
}

void voxd_stream_resampler::process(const float * in, size_t n, std::vector<float> & out) {
    // NaN or infinity would spread through the filter into every later output sample: silence instead
    float clean[voxd_piece];
    for (size_t done = 0; done < n;) {
        const size_t k = std::min(n - done, voxd_piece);
        bool finite    = true;
        for (size_t i = 0; i < k && finite; i++) {
            finite = std::isfinite(in[done + i]);
        }
        const float * src = in + done;
        if (!finite) {
            for (size_t i = 0; i < k; i++) {
                clean[i] = std::isfinite(in[done + i]) ? in[done + i] : 0.0f;
            }
            src = clean;
        }
        if (m_swr) {
            convert(src, (int) k, out);
        } else {
            out.insert(out.end(), src, src + k);
        }
        done += k;
    }
}

void voxd_stream_resampler::flush(std::vector<float> & out) {
    if (m_swr) {
        convert(nullptr, 0, out);
        reset();
    }
}

void voxd_stream_resampler::reset() {
    if (m_swr && swr_init(m_swr) < 0) { // re-initialising clears the held input and the output position
        throw voxd_error("native_error", "the resampler could not be reset");
    }
}

void voxd_stream_resampler::convert(const float * in, int n, std::vector<float> & out) {
    const int room = swr_get_out_samples(m_swr, n);
    if (room < 0) {
        throw voxd_error("native_error", "the audio could not be resampled");
    }
    if (room == 0) {
        return;
    }
    const size_t old = out.size();
    out.resize(old + (size_t) room);
    auto * dst       = reinterpret_cast<uint8_t *>(out.data() + old);
    const auto * src = reinterpret_cast<const uint8_t *>(in);
    const int got    = swr_convert(m_swr, &dst, room, in ? &src : nullptr, n);
    out.resize(old + (size_t) std::max(got, 0));
    if (got < 0) {
        throw voxd_error("native_error", "the audio could not be resampled");
    }
}
