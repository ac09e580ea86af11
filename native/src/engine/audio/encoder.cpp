#include "audio/encoder.h"
#include "common/ffmpeg.h" // also voxd_av_error_scope: FFmpeg's error lines as the reason in our messages

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/channel_layout.h>
#include <libavutil/opt.h>
#include <libavutil/samplefmt.h>
#include <libswresample/swresample.h>
}

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>

namespace {

// ---- the formats ----

struct voxd_format_spec {
    voxd_audio_format format;
    const char * name;       // the response_format
    const char * encoder;    // FFmpeg's encoder
    const char * muxer;      // FFmpeg's muxer
    int64_t default_bitrate; // bits/s; 0: lossless, or (vorbis) the codec's quality mode, -q 3
};

const voxd_format_spec voxd_format_specs[] = {
    { voxd_audio_format::mp3, "mp3", "libmp3lame", "mp3", 64000 }, { voxd_audio_format::wav, "wav", "pcm_s16le", "wav", 0 },
    { voxd_audio_format::flac, "flac", "flac", "flac", 0 },        { voxd_audio_format::ogg, "ogg", "libvorbis", "ogg", 0 },
    { voxd_audio_format::opus, "opus", "libopus", "ogg", 32000 },  { voxd_audio_format::aac, "aac", "aac", "adts", 64000 },
    { voxd_audio_format::pcm, "pcm", "pcm_s16le", "s16le", 0 },
};

const voxd_format_spec & voxd_spec_of(voxd_audio_format format) {
    for (const voxd_format_spec & spec : voxd_format_specs) {
        if (spec.format == format) {
            return spec;
        }
    }
    throw voxd_error("invalid_argument", "unknown audio format");
}

bool voxd_is_lossy(voxd_audio_format f) {
    return f == voxd_audio_format::mp3 || f == voxd_audio_format::ogg || f == voxd_audio_format::opus || f == voxd_audio_format::aac;
}

constexpr int voxd_io_buffer_size = 32 * 1024;
constexpr int voxd_variable_frame = 4096;  // frame size for codecs that take any (PCM)
constexpr size_t voxd_input_block = 16384; // input samples converted at a time

// FFmpeg 7.1 (libavcodec 61.13) lists what an encoder takes through avcodec_get_supported_config; the AVCodec fields
// are deprecated there and gone in 8.0, and FFmpeg 5.1 to 7.0 have only the fields.
#define VOXD_HAS_SUPPORTED_CONFIG (LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100))

// The sample rates the codec takes (0-terminated), or null for any.
const int * voxd_codec_rates(const AVCodec * codec) {
#if VOXD_HAS_SUPPORTED_CONFIG
    const void * list = nullptr;
    return avcodec_get_supported_config(nullptr, codec, AV_CODEC_CONFIG_SAMPLE_RATE, 0, &list, nullptr) < 0 ? nullptr : static_cast<const int *>(list);
#else
    return codec->supported_samplerates;
#endif
}

// The sample formats the codec takes (AV_SAMPLE_FMT_NONE-terminated), or null for any.
const AVSampleFormat * voxd_codec_sample_formats(const AVCodec * codec) {
#if VOXD_HAS_SUPPORTED_CONFIG
    const void * list = nullptr;
    return avcodec_get_supported_config(nullptr, codec, AV_CODEC_CONFIG_SAMPLE_FORMAT, 0, &list, nullptr) < 0 ? nullptr
                                                                                                              : static_cast<const AVSampleFormat *>(list);
#else
    return codec->sample_fmts;
#endif
}

// The input rate when the codec takes it, else the nearest rate it takes (the higher one on a tie).
int voxd_pick_rate(const AVCodec * codec, int rate) {
    const int * rates = voxd_codec_rates(codec);
    if (!rates) {
        return rate;
    }
    int best = 0;
    for (const int * r = rates; *r != 0; r++) {
        if (*r == rate) {
            return rate;
        }
        const int d = std::abs(*r - rate), best_d = std::abs(best - rate);
        if (best == 0 || d < best_d || (d == best_d && *r > best)) {
            best = *r;
        }
    }
    return best != 0 ? best : rate;
}

// Float when the codec takes it (no precision lost before the codec), else 16-bit (FLAC, PCM), else its first.
AVSampleFormat voxd_pick_sample_format(const AVCodec * codec) {
    const AVSampleFormat * fmts = voxd_codec_sample_formats(codec);
    if (!fmts) {
        return AV_SAMPLE_FMT_FLT;
    }
    const AVSampleFormat wanted[] = { AV_SAMPLE_FMT_FLTP, AV_SAMPLE_FMT_FLT, AV_SAMPLE_FMT_S16, AV_SAMPLE_FMT_S16P };
    for (AVSampleFormat w : wanted) {
        for (const AVSampleFormat * f = fmts; *f != AV_SAMPLE_FMT_NONE; f++) {
            if (*f == w) {
                return w;
            }
        }
    }
    return fmts[0];
}

// ---- RAII over FFmpeg's objects (the rest are shared with the decoder: common/ffmpeg.h) ----

struct voxd_muxer_deleter {
    void operator()(AVFormatContext * fmt) const { avformat_free_context(fmt); }
}; // pb is ours
struct voxd_fifo_deleter {
    void operator()(AVAudioFifo * fifo) const { av_audio_fifo_free(fifo); }
};

using voxd_muxer_ptr = std::unique_ptr<AVFormatContext, voxd_muxer_deleter>;
using voxd_fifo_ptr  = std::unique_ptr<AVAudioFifo, voxd_fifo_deleter>;

// ---- writing to memory ----

// A growable memory file. Streaming: `data` holds the bytes not yet handed out and nobody seeks. Seekable:
// `data` is the whole file and muxers seek back to complete their headers in the trailer.
struct voxd_mem_output {
    std::vector<uint8_t> data;
    size_t pos = 0; // where the next write goes, in `data`
};

// FFmpeg 7 (libavformat 61) made the buffer of write callbacks const.
#if LIBAVFORMAT_VERSION_MAJOR >= 61
using voxd_write_buf = const uint8_t *;
#else
using voxd_write_buf = uint8_t *;
#endif

// Called by FFmpeg (C): must not throw.
int voxd_mem_write(void * opaque, voxd_write_buf buf, int size) noexcept {
    auto * out = static_cast<voxd_mem_output *>(opaque);
    if (size <= 0) {
        return 0;
    }
    try {
        const size_t end = out->pos + (size_t) size;
        if (end > out->data.size()) {
            out->data.resize(end);
        }
        std::memcpy(out->data.data() + out->pos, buf, (size_t) size);
        out->pos = end;
    } catch (...) {
        return AVERROR(ENOMEM);
    }
    return size;
}

int64_t voxd_mem_seek(void * opaque, int64_t offset, int whence) noexcept {
    auto * out = static_cast<voxd_mem_output *>(opaque);
    whence &= ~AVSEEK_FORCE;
    const int64_t size = (int64_t) out->data.size();
    if (whence == AVSEEK_SIZE) {
        return size;
    }
    int64_t base;
    switch (whence) {
        case SEEK_SET: base = 0; break;
        case SEEK_CUR: base = (int64_t) out->pos; break;
        case SEEK_END: base = size; break;
        default: return AVERROR(EINVAL);
    }
    if ((offset > 0 && offset > size - base) || (offset < 0 && -offset > base)) {
        return AVERROR(EINVAL); // muxers only seek back into what they wrote
    }
    out->pos = (size_t) (base + offset);
    return (int64_t) out->pos;
}

} // namespace

// ---- the encoder ----

struct voxd_encoder::impl {
    voxd_encoder_params params;
    const voxd_format_spec * spec; // static table entry
    const AVCodec * codec;         // FFmpeg's static table entry, never freed
    int out_rate;
    AVSampleFormat sample_fmt;

    // FFmpeg state, created by the first call. Declared in dependency order: members are destroyed in reverse,
    // so the muxer goes before the AVIOContext it writes to, which goes before the memory it writes into.
    voxd_mem_output output;
    voxd_avio_ptr io;
    voxd_muxer_ptr mux;
    AVStream * stream = nullptr; // owned by `mux`
    voxd_codec_ptr enc;
    voxd_swr_ptr swr;
    voxd_fifo_ptr fifo; // converted samples waiting for a whole codec frame
    voxd_frame_ptr frame;
    voxd_packet_ptr pkt;
    int frame_size   = 0;     // samples per frame sent to the codec
    bool variable    = false; // the codec takes frames of any size (PCM)
    bool small_last  = false; // the codec takes a short last frame
    int64_t next_pts = 0;     // in samples at out_rate
    bool opened      = false;
    bool done        = false;
    std::vector<float> clean;       // the sanitised input block
    std::vector<uint8_t> converted; // the resampler's output block

    [[noreturn]] void fail(const std::string & what, int err, const voxd_av_error_scope & log) {
        throw voxd_error("encode_failed", std::string(spec->name) + " encoding failed: " + what + " (" + voxd_av_reason(err, log) + ")");
    }

    void open(const voxd_av_error_scope & log) {
        const bool streaming = params.streaming;

        AVFormatContext * raw_mux = nullptr;
        int ret                   = avformat_alloc_output_context2(&raw_mux, nullptr, spec->muxer, nullptr);
        mux.reset(raw_mux);
        if (ret < 0 || !mux) {
            fail(std::string("no ") + spec->muxer + " muxer", ret, log);
        }

        // -- codec --
        enc.reset(avcodec_alloc_context3(codec));
        if (!enc) {
            throw std::bad_alloc();
        }
        AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
        if (av_channel_layout_copy(&enc->ch_layout, &mono) < 0) {
            throw std::bad_alloc();
        }
        enc->sample_rate  = out_rate;
        enc->sample_fmt   = sample_fmt;
        enc->time_base    = AVRational{ 1, out_rate };
        enc->thread_count = 1;                // each call already has a libuv worker of its own
        enc->flags |= AV_CODEC_FLAG_BITEXACT; // no version strings: the same input gives the same bytes
        // explicit: FFmpeg's generic default (200 kb/s) is not what any of these formats wants. 0 for vorbis
        // means libvorbis' VBR quality mode at -q 3; lossless codecs ignore it.
        enc->bit_rate = params.bitrate > 0 && voxd_is_lossy(params.format) ? params.bitrate : spec->default_bitrate;
        if (mux->oformat->flags & AVFMT_GLOBALHEADER) {
            enc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER; // Ogg: the codec headers go into the first pages
        }
        ret = avcodec_open2(enc.get(), codec, nullptr);
        if (ret < 0) {
            std::string what = std::string("the ") + codec->name + " encoder cannot encode mono " + std::to_string(out_rate) + " Hz";
            if (enc->bit_rate > 0) {
                what += " at " + std::to_string(enc->bit_rate) + " b/s";
            }
            throw voxd_error("invalid_argument", what + ": " + voxd_av_reason(ret, log));
        }
        variable   = (codec->capabilities & AV_CODEC_CAP_VARIABLE_FRAME_SIZE) || enc->frame_size <= 0;
        small_last = (codec->capabilities & AV_CODEC_CAP_SMALL_LAST_FRAME) != 0;
        frame_size = variable ? voxd_variable_frame : enc->frame_size;

        // -- resampler: float mono at the input rate to the codec's sample format at its rate --
        SwrContext * raw_swr = nullptr;
        ret                  = swr_alloc_set_opts2(&raw_swr, &mono, sample_fmt, out_rate, &mono, AV_SAMPLE_FMT_FLT, params.sample_rate, 0, nullptr);
        swr.reset(raw_swr);
        if (ret >= 0) {
            ret = swr_init(swr.get());
        }
        if (ret < 0) {
            fail("the resampler could not be set up", ret, log);
        }
        fifo.reset(av_audio_fifo_alloc(sample_fmt, 1, frame_size * 2));
        frame.reset(av_frame_alloc());
        pkt.reset(av_packet_alloc());
        if (!fifo || !frame || !pkt) {
            throw std::bad_alloc();
        }

        // -- muxer, writing to memory --
        auto * io_buffer = static_cast<uint8_t *>(av_malloc(voxd_io_buffer_size)); // owned by `io` once it exists
        if (!io_buffer) {
            throw std::bad_alloc();
        }
        // no seek callback when streaming: muxers then write their "size unknown" headers and never rewind
        io.reset(avio_alloc_context(io_buffer, voxd_io_buffer_size, 1, &output, nullptr, voxd_mem_write, streaming ? nullptr : voxd_mem_seek));
        if (!io) {
            av_free(io_buffer);
            throw std::bad_alloc();
        }
        mux->pb = io.get();                                       // borrowed: `io` outlives `mux`
        mux->flags |= AVFMT_FLAG_CUSTOM_IO | AVFMT_FLAG_BITEXACT; // bitexact: no library version strings, Ogg serial 0
        stream = avformat_new_stream(mux.get(), nullptr);
        if (!stream) {
            throw std::bad_alloc();
        }
        ret = avcodec_parameters_from_context(stream->codecpar, enc.get());
        if (ret < 0) {
            fail("the stream could not be set up", ret, log);
        }
        stream->time_base          = enc->time_base; // a hint: the muxer may pick its own (Ogg Opus: 1/48000)
        AVDictionary * mux_options = nullptr;        // freed below; what the muxer did not take stays in it
        if (params.format == voxd_audio_format::mp3) {
            av_dict_set(&mux_options, "id3v2_version", "0", 0); // no ID3 tag: it would hold no metadata
        }
        ret = avformat_write_header(mux.get(), &mux_options);
        av_dict_free(&mux_options);
        if (ret < 0) {
            fail("the header could not be written", ret, log);
        }
        opened = true;
    }

    // Sends one frame (null: drain) and muxes every packet the codec has ready.
    void send(const AVFrame * f, const voxd_av_error_scope & log) {
        int ret = avcodec_send_frame(enc.get(), f);
        if (ret < 0) {
            fail("the codec refused a frame", ret, log);
        }
        for (;;) {
            ret = avcodec_receive_packet(enc.get(), pkt.get());
            if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) {
                return;
            }
            if (ret < 0) {
                fail("the codec failed", ret, log);
            }
            pkt->stream_index = stream->index;
            av_packet_rescale_ts(pkt.get(), enc->time_base, stream->time_base);
            ret = av_write_frame(mux.get(), pkt.get());
            av_packet_unref(pkt.get());
            if (ret < 0) {
                fail("a packet could not be written", ret, log);
            }
        }
    }

    // Sends whole frames from the FIFO; `all`: the rest too (a short last frame, padded with silence for codecs
    // that want whole frames).
    void send_frames(bool all, const voxd_av_error_scope & log) {
        for (;;) {
            const int have = av_audio_fifo_size(fifo.get());
            if (have == 0 || (have < frame_size && !all)) {
                return;
            }
            const int n   = std::min(have, frame_size);
            const int len = n < frame_size && !variable && !small_last ? frame_size : n;
            av_frame_unref(frame.get());
            frame->nb_samples    = len;
            frame->format        = sample_fmt;
            frame->sample_rate   = out_rate;
            AVChannelLayout mono = AV_CHANNEL_LAYOUT_MONO;
            if (av_channel_layout_copy(&frame->ch_layout, &mono) < 0 || av_frame_get_buffer(frame.get(), 0) < 0) {
                throw std::bad_alloc();
            }
            if (av_audio_fifo_read(fifo.get(), reinterpret_cast<void **>(frame->data), n) != n) {
                fail("the sample queue failed", AVERROR_BUG, log);
            }
            if (len > n) {
                av_samples_set_silence(frame->data, n, len - n, 1, sample_fmt);
            }
            frame->pts = next_pts;
            next_pts += len;
            send(frame.get(), log);
            av_frame_unref(frame.get());
        }
    }

    // Resamples and queues `n_in` input samples (null: drain the resampler's delay).
    void convert(const float * in, int n_in, const voxd_av_error_scope & log) {
        const int room = swr_get_out_samples(swr.get(), n_in);
        if (room < 0) {
            fail("the resampler failed", room, log);
        }
        if (room == 0) {
            return;
        }
        converted.resize((size_t) room * (size_t) av_get_bytes_per_sample(sample_fmt));
        uint8_t * dst       = converted.data();
        const uint8_t * src = reinterpret_cast<const uint8_t *>(in);
        const int n         = swr_convert(swr.get(), &dst, room, in ? &src : nullptr, n_in);
        if (n < 0) {
            fail("the resampler failed", n, log);
        }
        void * planes[1] = { dst }; // mono: packed and planar are the same single plane
        if (n > 0 && av_audio_fifo_write(fifo.get(), planes, n) != n) {
            throw std::bad_alloc();
        }
    }

    void push(const float * samples, size_t n, const voxd_av_error_scope & log) {
        for (size_t off = 0; off < n; off += voxd_input_block) {
            const size_t len = std::min(voxd_input_block, n - off);
            clean.resize(len);
            for (size_t i = 0; i < len; i++) {
                const float x = samples[off + i];
                // NaN and infinities are silence (as the decoder does); beyond full scale is clipped
                clean[i] = std::isfinite(x) ? std::min(1.0f, std::max(-1.0f, x)) : 0.0f;
            }
            convert(clean.data(), (int) len, log);
            send_frames(false, log);
        }
    }

    // Everything the muxer wrote so far goes to `out`; `flush`: Ogg pages first (never after the trailer, which
    // wrote them all and freed the muxer's stream state).
    void hand_out(std::vector<uint8_t> & out, bool flush, const voxd_av_error_scope & log) {
        if (flush && (mux->oformat->flags & AVFMT_ALLOW_FLUSH)) {
            const int ret = av_write_frame(mux.get(), nullptr); // Ogg: writes the pages it holds, even partial ones
            if (ret < 0) {
                fail("the muxer could not flush", ret, log);
            }
        }
        avio_flush(io.get());
        if (io->error < 0) {
            fail("the output could not be written", io->error, log);
        }
        if (out.empty()) {
            out.swap(output.data);
        } else {
            out.insert(out.end(), output.data.begin(), output.data.end());
            output.data.clear();
        }
        output.pos = 0;
    }

    void release() {
        // the reverse of the declaration order, as the destructor would
        pkt.reset();
        frame.reset();
        fifo.reset();
        swr.reset();
        enc.reset();
        stream = nullptr;
        mux.reset();
        io.reset();
        output    = voxd_mem_output();
        clean     = std::vector<float>();
        converted = std::vector<uint8_t>();
    }
};

voxd_encoder::voxd_encoder(const voxd_encoder_params & params) : m_impl(std::make_unique<impl>()) {
    impl & s = *m_impl;
    s.params = params;
    s.spec   = &voxd_spec_of(params.format);
    if (params.sample_rate < min_rate || params.sample_rate > max_rate) {
        throw voxd_error("invalid_argument", "the sample rate must be from " + std::to_string(min_rate) + " to " + std::to_string(max_rate) + " Hz");
    }
    if (params.bitrate != 0 && (params.bitrate < voxd_encoder::min_bitrate || params.bitrate > voxd_encoder::max_bitrate)) {
        throw voxd_error("invalid_argument",
                         "the bitrate must be from " + std::to_string(voxd_encoder::min_bitrate) + " to " + std::to_string(voxd_encoder::max_bitrate) + " b/s");
    }
    s.codec = avcodec_find_encoder_by_name(s.spec->encoder);
    if (!s.codec) {
        throw voxd_error("encoder_unavailable",
                         std::string("the system's FFmpeg has no ") + s.spec->encoder + " encoder, which the " + s.spec->name + " format needs");
    }
    s.out_rate   = voxd_pick_rate(s.codec, params.sample_rate);
    s.sample_fmt = voxd_pick_sample_format(s.codec);
}

voxd_encoder::~voxd_encoder() = default;

int voxd_encoder::output_sample_rate() const {
    return m_impl->out_rate;
}

const char * voxd_encoder::codec_name() const {
    return m_impl->codec->name;
}

bool voxd_encoder::parse_format(const std::string & name, voxd_audio_format & format) {
    for (const voxd_format_spec & spec : voxd_format_specs) {
        if (name == spec.name) {
            format = spec.format;
            return true;
        }
    }
    return false;
}

void voxd_encoder::encode(const float * samples, size_t n, std::vector<uint8_t> & out) {
    impl & s = *m_impl;
    if (s.done) {
        throw voxd_error("closed", "the encoder is finished");
    }
    voxd_av_error_scope log;
    if (!s.opened) {
        s.open(log);
    }
    s.push(samples, n, log);
    if (s.variable) {
        s.send_frames(true, log); // PCM: every sample goes out with the call that brought it
    }
    if (s.params.streaming) {
        s.hand_out(out, true, log);
    }
}

void voxd_encoder::finish(const float * samples, size_t n, std::vector<uint8_t> & out) {
    impl & s = *m_impl;
    if (s.done) {
        throw voxd_error("closed", "the encoder is finished");
    }
    s.done = true;
    voxd_av_error_scope log;
    if (!s.opened) {
        s.open(log);
    }
    s.push(samples, n, log);
    s.convert(nullptr, 0, log); // the resampler's delay line
    s.send_frames(true, log);
    s.send(nullptr, log); // drain: codecs hold frames (lookahead, bit reservoir)
    const int ret = av_write_trailer(s.mux.get());
    if (ret < 0) {
        s.fail("the trailer could not be written", ret, log);
    }
    s.hand_out(out, false, log); // streaming: the last pages; seekable: the whole file
    s.release();
}

// Formats the linked FFmpeg can encode, in table order.
std::vector<std::string> voxd_encoder::available_formats() {
    std::vector<std::string> out;
    for (const voxd_format_spec & spec : voxd_format_specs) {
        if (avcodec_find_encoder_by_name(spec.encoder) && av_guess_format(spec.muxer, nullptr, nullptr)) {
            out.push_back(spec.name);
        }
    }
    return out;
}

std::string voxd_encoder::format_names() {
    std::string out;
    for (const voxd_format_spec & spec : voxd_format_specs) {
        out += out.empty() ? "" : ", ";
        out += spec.name;
    }
    return out;
}
