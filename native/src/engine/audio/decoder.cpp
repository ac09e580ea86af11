#include "audio/decoder.h"
#include "common/ffmpeg.h"

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libswresample/swresample.h>
}

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

namespace {

[[noreturn]] void voxd_invalid_audio(const std::string & message) {
    throw voxd_error("invalid_audio", message);
}

// ---- RAII over FFmpeg's objects (the rest are shared with the encoder: common/ffmpeg.h) ----

struct voxd_format_deleter {
    void operator()(AVFormatContext * fmt) const { avformat_close_input(&fmt); }
};
using voxd_format_ptr = std::unique_ptr<AVFormatContext, voxd_format_deleter>;

// ---- reading from memory: seekable, so MP4 files with their index (moov) at the end work ----

struct voxd_mem_reader {
    const uint8_t * data; // borrowed: the caller's buffer outlives the decode
    size_t size;
    size_t pos;
    const std::atomic<bool> * abort; // borrowed from the caller's voxd_abort_ptr
};

int voxd_mem_read(void * opaque, uint8_t * buf, int buf_size) {
    auto * r = static_cast<voxd_mem_reader *>(opaque);
    if (r->abort->load(std::memory_order_relaxed)) {
        return AVERROR_EXIT; // lets a long header parse stop too, not only the packet loop
    }
    if (r->pos >= r->size) {
        return AVERROR_EOF;
    }
    const size_t n = std::min((size_t) buf_size, r->size - r->pos);
    std::memcpy(buf, r->data + r->pos, n);
    r->pos += n;
    return (int) n;
}

int64_t voxd_mem_seek(void * opaque, int64_t offset, int whence) {
    auto * r = static_cast<voxd_mem_reader *>(opaque);
    whence &= ~AVSEEK_FORCE;
    if (whence == AVSEEK_SIZE) {
        return (int64_t) r->size;
    }
    int64_t base;
    switch (whence) {
        case SEEK_SET: base = 0; break;
        case SEEK_CUR: base = (int64_t) r->pos; break;
        case SEEK_END: base = (int64_t) r->size; break;
        default: return AVERROR(EINVAL);
    }
    // headers may claim any offset: refuse what lies outside the buffer instead of overflowing
    if ((offset > 0 && offset > (int64_t) r->size - base) || (offset < 0 && -offset > base)) {
        return AVERROR(EINVAL);
    }
    r->pos = (size_t) (base + offset);
    return (int64_t) r->pos;
}

int voxd_interrupted(void * opaque) {
    return static_cast<const std::atomic<bool> *>(opaque)->load(std::memory_order_relaxed) ? 1 : 0;
}

// Demuxers never open other files or URLs on our behalf (playlists, MP4 external references).
int voxd_refuse_io_open(AVFormatContext *, AVIOContext **, const char *, int, AVDictionary **) {
    return AVERROR(EPERM);
}

// ---- containers ----

// Demuxers voxd lets run (FFmpeg's names). The rest are refused after probing, before they parse anything:
// playlist and concat demuxers reach for other files, and image, video-only or subtitle formats hold no audio.
const char * const voxd_audio_containers[] = {
    "wav", "w64", "mp3",  "flac",   "mov,mp4,m4a,3gp,3g2,mj2", "aac", "ogg", "matroska,webm", "aiff", "caf", "au", "amr", "ac3", "eac3", "wv",
    "ape", "asf", "mpeg", "mpegts",
};

bool voxd_container_allowed(const AVInputFormat * fmt) {
    for (const char * name : voxd_audio_containers) {
        if (std::strcmp(fmt->name, name) == 0) {
            return true;
        }
    }
    return false;
}

const char * voxd_format_long_name(const AVInputFormat * fmt) {
    return fmt->long_name ? fmt->long_name : fmt->name;
}

// A short name for the container: FFmpeg names some demuxers by family ("matroska,webm").
std::string voxd_container_name(const AVFormatContext * fmt, const uint8_t * data, size_t size) {
    const std::string name = fmt->iformat->name;
    if (name == "matroska,webm") {
        // the EBML header's DocType element (ID 0x4282, a one-byte size, then the text) tells them apart
        static const uint8_t doctype_webm[] = { 0x42, 0x82, 0x84, 'w', 'e', 'b', 'm' };
        const uint8_t * end                 = data + std::min<size_t>(size, 64);
        return std::search(data, end, doctype_webm, doctype_webm + sizeof(doctype_webm)) != end ? "webm" : "matroska";
    }
    if (name == "mov,mp4,m4a,3gp,3g2,mj2") {
        const AVDictionaryEntry * brand = av_dict_get(fmt->metadata, "major_brand", nullptr, 0);
        if (brand && std::strncmp(brand->value, "M4A", 3) == 0)
            return "m4a";
        if (brand && std::strncmp(brand->value, "qt", 2) == 0)
            return "mov";
        if (brand && std::strncmp(brand->value, "3g", 2) == 0)
            return "3gp";
        return "mp4";
    }
    return name;
}

// The audio stream to decode: the one marked default, else the first. (av_find_best_stream would skip
// streams whose rate and channels the header leaves to the decoder, as raw MP3 and FLAC do.)
int voxd_pick_audio_stream(const AVFormatContext * fmt) {
    int first = -1;
    for (unsigned i = 0; i < fmt->nb_streams; i++) {
        const AVStream * st = fmt->streams[i];
        if (st->codecpar->codec_type != AVMEDIA_TYPE_AUDIO) {
            continue;
        }
        if (st->disposition & AV_DISPOSITION_DEFAULT) {
            return (int) i;
        }
        if (first < 0) {
            first = (int) i;
        }
    }
    return first;
}

std::string voxd_codec_description(AVCodecID id) {
    const AVCodecDescriptor * desc = avcodec_descriptor_get(id);
    if (!desc) {
        return "unknown";
    }
    return desc->long_name ? std::string(desc->name) + " (" + desc->long_name + ")" : std::string(desc->name);
}

std::string voxd_seconds_text(double seconds) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", seconds);
    return buf;
}

// ---- down-mix and resample ----

// Converts decoded frames of any layout, rate and sample format to float32 at the output rate, mono or
// interleaved stereo. Rebuilt when a stream changes format mid-way (chained Ogg, MP3 rate switches), after
// draining the old one; an output rate or channel count of 0 is taken from the first frame and then kept.
class voxd_resampler {
public:
    voxd_resampler(int out_rate, int out_channels) : m_out_rate(out_rate), m_out_channels(out_channels) {}

    int rate() const { return m_out_rate; }         // 0 until the first frame when it follows the source
    int channels() const { return m_out_channels; } // likewise
    ~voxd_resampler() { av_channel_layout_uninit(&m_in_layout); }

    void push(const AVFrame * frame, std::vector<float> & out) {
        if (!m_swr || frame->sample_rate != m_in_rate || frame->format != m_in_format || av_channel_layout_compare(&frame->ch_layout, &m_in_layout) != 0) {
            drain(out);
            configure(frame);
        }
        convert(const_cast<const uint8_t **>(frame->extended_data), frame->nb_samples, out);
    }

    // Emits the samples the resampler still holds (its filter delay).
    void drain(std::vector<float> & out) {
        if (m_swr) {
            convert(nullptr, 0, out);
        }
    }

private:
    void configure(const AVFrame * frame) {
        const int channels = frame->ch_layout.nb_channels;
        if (channels <= 0 || frame->sample_rate <= 0 || frame->format < 0) {
            voxd_invalid_audio("the audio stream has an invalid format (" + std::to_string(channels) + " channels at " + std::to_string(frame->sample_rate) +
                               " Hz)");
        }
        if (frame->sample_rate < min_rate || frame->sample_rate > max_rate) {
            // a corrupt header saying 1 Hz would turn a small file into gigabytes of resampled output
            voxd_invalid_audio("the audio's sample rate of " + std::to_string(frame->sample_rate) + " Hz is out of range (" + std::to_string(min_rate) +
                               " to " + std::to_string(max_rate) + " Hz)");
        }
        if (channels > max_channels) {
            voxd_invalid_audio("the audio has " + std::to_string(channels) + " channels; at most " + std::to_string(max_channels) + " are supported");
        }
        av_channel_layout_uninit(&m_in_layout);
        if (av_channel_layout_copy(&m_in_layout, &frame->ch_layout) < 0) {
            throw std::bad_alloc();
        }
        m_in_rate   = frame->sample_rate;
        m_in_format = frame->format;
        if (m_out_rate == 0) {
            m_out_rate = m_in_rate;
        }
        if (m_out_channels == 0) {
            m_out_channels = std::min(channels, 2);
        }

        SwrContext * raw = nullptr;
        // not const: FFmpeg 5.1's prototype takes a plain pointer
        AVChannelLayout out_layout = m_out_channels == 1 ? (AVChannelLayout) AV_CHANNEL_LAYOUT_MONO : (AVChannelLayout) AV_CHANNEL_LAYOUT_STEREO;
        int ret = swr_alloc_set_opts2(&raw, &out_layout, AV_SAMPLE_FMT_FLT, m_out_rate, &m_in_layout, (AVSampleFormat) m_in_format, m_in_rate, 0, nullptr);
        m_swr.reset(raw);
        if (ret >= 0 && m_out_channels == 1) {
            ret = set_downmix(raw, out_layout, channels);
        } else if (ret >= 0 && channels > 2 && m_in_layout.order != AV_CHANNEL_ORDER_NATIVE) {
            ret = set_unlabelled_stereo_mix(raw, channels);
        }
        if (ret >= 0) {
            ret = swr_init(raw);
        }
        if (ret < 0) {
            char layout[128] = "?";
            av_channel_layout_describe(&m_in_layout, layout, sizeof(layout));
            m_swr.reset();
            voxd_invalid_audio(std::string("the audio format cannot be converted (") + layout + ", " + std::to_string(m_in_rate) + " Hz)");
        }
    }

    // Mono is a weighted sum of the channels whose weights add up to at most 1, so it cannot exceed full
    // scale: FFmpeg's down-mix for known layouts (centre and surround at -3 dB, LFE dropped), which for stereo
    // is the average of the two; the plain average for channels without known positions.
    int set_downmix(SwrContext * swr, const AVChannelLayout & mono, int channels) {
        std::vector<double> matrix((size_t) max_channels * max_channels, 0.0); // swr_build_matrix2 writes a full table
        if (channels > 1 && m_in_layout.order == AV_CHANNEL_ORDER_NATIVE) {
            const int ret =
                swr_build_matrix2(&m_in_layout, &mono, M_SQRT1_2, M_SQRT1_2, 0.0, 1e9, 1.0, matrix.data(), max_channels, AV_MATRIX_ENCODING_NONE, nullptr);
            if (ret < 0) {
                return ret;
            }
            double sum = 0;
            for (int i = 0; i < channels; i++) {
                sum += std::fabs(matrix[i]);
            }
            if (sum <= 0) {
                return AVERROR(EINVAL);
            }
            for (int i = 0; i < channels && sum > 1; i++) {
                matrix[i] /= sum;
            }
        } else {
            std::fill(matrix.begin(), matrix.begin() + channels, 1.0 / channels);
        }
        return swr_set_matrix(swr, matrix.data(), max_channels);
    }

    // libswresample knows no stereo mix for channels without positions (a 40-channel WAV, say): they alternate
    // between left and right, each side the average of its channels, as interleaved pairs usually are.
    static int set_unlabelled_stereo_mix(SwrContext * swr, int channels) {
        std::vector<double> matrix((size_t) 2 * max_channels, 0.0); // row stride max_channels, one row per output
        const int left  = (channels + 1) / 2;
        const int right = channels / 2;
        for (int i = 0; i < channels; i++) {
            const bool is_left                       = i % 2 == 0;
            matrix[(is_left ? 0 : max_channels) + i] = 1.0 / (is_left ? left : right);
        }
        return swr_set_matrix(swr, matrix.data(), max_channels);
    }

    void convert(const uint8_t ** in, int n_in, std::vector<float> & out) {
        const int room = swr_get_out_samples(m_swr.get(), n_in);
        if (room < 0) {
            voxd_invalid_audio("the audio could not be resampled");
        }
        if (room == 0) {
            return;
        }
        const size_t old = out.size();
        out.resize(old + (size_t) room * m_out_channels);
        auto * dst  = reinterpret_cast<uint8_t *>(out.data() + old); // packed float: one plane, channels interleaved
        const int n = swr_convert(m_swr.get(), &dst, room, in, n_in);
        out.resize(old + (size_t) std::max(n, 0) * m_out_channels);
        if (n < 0) {
            voxd_invalid_audio("the audio could not be resampled");
        }
    }

    static constexpr int max_channels = 64; // libswresample's limit (its internal SWR_CH_MAX)
    static constexpr int min_rate     = 1000;
    static constexpr int max_rate     = 768000;

    int m_out_rate;
    int m_out_channels;
    voxd_swr_ptr m_swr;
    AVChannelLayout m_in_layout = {};
    int m_in_rate               = 0;
    int m_in_format             = -1;
};

// Most samples reserved up front from a header's duration claim when no maxSeconds bounds it: the claim may be a lie
// (a WAV saying 4 GB). Under maxSeconds the claim is taken up to that bound: reserved memory that a lie leaves unused
// is never touched, so it costs address space only, while an honest long file is decoded without the vector doubling
// (each doubling copies everything decoded so far, and the last left twice the samples in memory at its peak).
constexpr size_t voxd_max_reserve = (size_t) 1 << 22;

} // namespace

voxd_decoded_audio voxd_decode_audio(const uint8_t * data, size_t size, const voxd_decode_params & params, const voxd_abort_ptr & abort) {
    voxd_check_abort(abort);
    if (size == 0) {
        voxd_invalid_audio("the file is empty");
    }
    voxd_av_error_scope av_log_scope;
    voxd_mem_reader reader{ data, size, 0, abort.get() };

    constexpr int io_buffer_size = 32 * 1024;
    auto * io_buffer             = static_cast<uint8_t *>(av_malloc(io_buffer_size)); // owned by `io` once it exists
    if (!io_buffer) {
        throw std::bad_alloc();
    }
    voxd_avio_ptr io(avio_alloc_context(io_buffer, io_buffer_size, 0, &reader, voxd_mem_read, nullptr, voxd_mem_seek));
    if (!io) {
        av_free(io_buffer);
        throw std::bad_alloc();
    }

    // probe first, so that only known audio containers ever parse the data
    const AVInputFormat * input_format = nullptr;
    int ret                            = av_probe_input_buffer2(io.get(), &input_format, "", nullptr, 0, 0);
    voxd_check_abort(abort);
    if (ret < 0 || !input_format) {
        voxd_invalid_audio("the file is not an audio file voxd can read (no known container format)");
    }
    if (!voxd_container_allowed(input_format)) {
        voxd_invalid_audio(std::string("the file is not an audio file voxd can read (it looks like ") + voxd_format_long_name(input_format) +
                           ", which is not an audio container)");
    }

    voxd_format_ptr fmt(avformat_alloc_context());
    if (!fmt) {
        throw std::bad_alloc();
    }
    fmt->pb = io.get(); // borrowed: `io` is declared first, so it outlives the format context
    fmt->flags |= AVFMT_FLAG_CUSTOM_IO;
    fmt->io_open                     = voxd_refuse_io_open;
    fmt->interrupt_callback.callback = voxd_interrupted;
    fmt->interrupt_callback.opaque   = abort.get();
    {
        AVFormatContext * raw = fmt.release(); // avformat_open_input frees it on failure
        ret                   = avformat_open_input(&raw, nullptr, input_format, nullptr);
        fmt.reset(raw);
    }
    voxd_check_abort(abort);
    if (ret < 0) {
        voxd_invalid_audio(std::string("the file could not be read as ") + voxd_format_long_name(input_format) + ": " + voxd_av_reason(ret, av_log_scope));
    }

    int stream_index = voxd_pick_audio_stream(fmt.get());
    if (stream_index < 0 && (fmt->ctx_flags & AVFMTCTX_NOHEADER)) {
        // streams of this container (MPEG-TS) appear while packets are read
        avformat_find_stream_info(fmt.get(), nullptr);
        voxd_check_abort(abort);
        stream_index = voxd_pick_audio_stream(fmt.get());
    }
    if (stream_index < 0) {
        voxd_invalid_audio(std::string("the ") + voxd_format_long_name(input_format) + " file has no audio stream");
    }
    const AVCodecID codec_id = fmt->streams[stream_index]->codecpar->codec_id;
    const AVCodec * decoder  = avcodec_find_decoder(codec_id);
    if (!decoder) {
        if (codec_id == AV_CODEC_ID_NONE) {
            voxd_invalid_audio("the audio stream's codec is unknown");
        }
        voxd_invalid_audio("the audio codec " + voxd_codec_description(codec_id) + " is not supported");
    }
    for (unsigned i = 0; i < fmt->nb_streams; i++) {
        if ((int) i != stream_index) {
            fmt->streams[i]->discard = AVDISCARD_ALL; // no demuxing work for video or other tracks
        }
    }
    AVStream * stream = fmt->streams[stream_index];

    voxd_codec_ptr dec(avcodec_alloc_context3(decoder));
    if (!dec) {
        throw std::bad_alloc();
    }
    ret = avcodec_parameters_to_context(dec.get(), stream->codecpar);
    if (ret >= 0) {
        dec->pkt_timebase = stream->time_base;
        dec->thread_count = 1; // each decode already has a libuv worker of its own
        ret               = avcodec_open2(dec.get(), decoder, nullptr);
    }
    if (ret < 0) {
        voxd_invalid_audio("the " + voxd_codec_description(stream->codecpar->codec_id) +
                           " audio stream could not be opened: " + voxd_av_reason(ret, av_log_scope));
    }

    voxd_decoded_audio out;
    out.codec     = avcodec_get_name(stream->codecpar->codec_id);
    out.container = voxd_container_name(fmt.get(), data, size);

    voxd_resampler resampler(params.sample_rate, params.channels);
    // what the header says (WAV data size, FLAC STREAMINFO, MP3 Xing frame, MP4 index, ...), when it says
    double declared_seconds = 0;
    if (stream->duration > 0 && stream->duration != AV_NOPTS_VALUE) {
        declared_seconds = (double) stream->duration * av_q2d(stream->time_base);
    } else if (fmt->duration > 0 && fmt->duration != AV_NOPTS_VALUE) {
        declared_seconds = (double) fmt->duration / AV_TIME_BASE;
    }
    if (declared_seconds > 0 && resampler.rate() > 0 && resampler.channels() > 0) {
        const double per_second = (double) resampler.rate() * resampler.channels();
        const double expected   = declared_seconds * per_second * 1.02 + 4096;
        const double bound      = params.max_seconds > 0 ? params.max_seconds * per_second + 4096 : (double) voxd_max_reserve;
        out.samples.reserve((size_t) std::min(expected, bound));
    }

    voxd_packet_ptr pkt(av_packet_alloc());
    voxd_frame_ptr frame(av_frame_alloc());
    if (!pkt || !frame) {
        throw std::bad_alloc();
    }
    int n_decode_errors = 0;
    int last_error      = 0;
    int read_error      = 0;

    auto check_length = [&]() {
        if (params.max_seconds > 0 && (double) out.samples.size() > params.max_seconds * resampler.rate() * resampler.channels()) {
            throw voxd_error("audio_too_long", "the audio is longer than the limit of " + voxd_seconds_text(params.max_seconds) + " seconds");
        }
    };
    // Receives every frame the decoder has ready. Returns AVERROR(EAGAIN) when it wants input, AVERROR_EOF once
    // drained, another error for a corrupt frame (skipped, as the ffmpeg tool does).
    auto receive_frames = [&]() {
        for (;;) {
            const int r = avcodec_receive_frame(dec.get(), frame.get());
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) {
                return r;
            }
            if (r < 0) {
                n_decode_errors++;
                last_error = r;
                return r;
            }
            if (frame->nb_samples > 0) {
                if (out.source_sample_rate == 0) {
                    out.source_sample_rate = frame->sample_rate;
                    out.source_channels    = frame->ch_layout.nb_channels;
                }
                resampler.push(frame.get(), out.samples);
                check_length();
            }
            av_frame_unref(frame.get());
        }
    };

    for (;;) {
        voxd_check_abort(abort);
        ret = av_read_frame(fmt.get(), pkt.get());
        if (ret < 0) {
            if (ret != AVERROR_EOF) {
                read_error = ret; // corrupt or cut short: keep what decoded so far, as the ffmpeg tool does
            }
            break;
        }
        if (pkt->stream_index != stream_index) {
            av_packet_unref(pkt.get());
            continue;
        }
        ret = avcodec_send_packet(dec.get(), pkt.get());
        av_packet_unref(pkt.get());
        if (ret < 0 && ret != AVERROR(EAGAIN)) {
            n_decode_errors++;
            last_error = ret;
        }
        receive_frames();
    }
    voxd_check_abort(abort);
    if (avcodec_send_packet(dec.get(), nullptr) >= 0) { // flush: codecs with delay hold the last frames
        // bounded: a decoder that keeps failing while it drains must not spin forever
        for (int n_failed = 0; n_failed < 64; n_failed++) {
            ret = receive_frames();
            if (ret == AVERROR_EOF || ret == AVERROR(EAGAIN)) {
                break;
            }
        }
    }
    if (out.source_sample_rate > 0) {
        resampler.drain(out.samples);
        check_length();
    }

    // a file cut short (an upload that stopped) usually decodes without a single error: compare with the header
    out.sample_rate              = resampler.rate();
    out.channels                 = resampler.channels();
    const double decoded_seconds = out.sample_rate > 0 ? (double) out.samples.size() / out.channels / out.sample_rate : 0;
    const bool cut_short         = declared_seconds > 0 && decoded_seconds + std::max(0.1, 0.02 * declared_seconds) < declared_seconds;
    out.truncated                = read_error != 0 || n_decode_errors > 0 || cut_short;
    if (out.samples.empty()) {
        const int err = read_error != 0 ? read_error : last_error;
        if (err != 0) {
            voxd_invalid_audio("the audio data is corrupt or truncated: nothing could be decoded (" + voxd_av_reason(err, av_log_scope) + ")");
        }
        voxd_invalid_audio("no audio samples could be decoded");
    }
    for (float & x : out.samples) {
        if (!std::isfinite(x)) {
            x = 0.0f; // NaN or infinity in float PCM: engines would turn it into garbage for the whole clip
        }
    }
    if (out.samples.capacity() > out.samples.size() + out.samples.size() / 4) {
        out.samples.shrink_to_fit(); // the buffer goes to JS as is: don't hand it up to twice the memory
    }
    return out;
}
