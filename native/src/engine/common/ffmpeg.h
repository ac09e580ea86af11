// What the decoder (audio/decoder.cpp) and the encoder (audio/encoder.cpp) share of FFmpeg: RAII over the objects both
// own (each deleter is the library's free function) and FFmpeg's log, whose error lines become the reason in our
// error messages (common/ffmpeg.cpp).
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswresample/swresample.h>
}

#include <memory>
#include <string>

// An AVIOContext over our own buffer; avio may have replaced that buffer, so the current one is freed.
struct voxd_avio_deleter {
    void operator()(AVIOContext * io) const {
        av_freep(&io->buffer);
        avio_context_free(&io);
    }
};
struct voxd_codec_deleter {
    void operator()(AVCodecContext * ctx) const { avcodec_free_context(&ctx); }
};
struct voxd_packet_deleter {
    void operator()(AVPacket * pkt) const { av_packet_free(&pkt); }
};
struct voxd_frame_deleter {
    void operator()(AVFrame * frame) const { av_frame_free(&frame); }
};
struct voxd_swr_deleter {
    void operator()(SwrContext * swr) const { swr_free(&swr); }
};

using voxd_avio_ptr   = std::unique_ptr<AVIOContext, voxd_avio_deleter>;
using voxd_codec_ptr  = std::unique_ptr<AVCodecContext, voxd_codec_deleter>;
using voxd_packet_ptr = std::unique_ptr<AVPacket, voxd_packet_deleter>;
using voxd_frame_ptr  = std::unique_ptr<AVFrame, voxd_frame_deleter>;
using voxd_swr_ptr    = std::unique_ptr<SwrContext, voxd_swr_deleter>;

// Routes FFmpeg's log into voxd_av_error_scope: error lines only, never printed. Process-wide (FFmpeg has one log
// callback); the addon's init calls it in every environment, which installs the same callback again.
void voxd_ffmpeg_init();

// Captures the last error line FFmpeg logs on this thread for the lifetime of the scope (FFmpeg's log prints
// nothing; error lines only become the reason in our error messages).
struct voxd_av_error_scope {
    std::string last;
    voxd_av_error_scope();
    ~voxd_av_error_scope();
    voxd_av_error_scope(const voxd_av_error_scope &)             = delete;
    voxd_av_error_scope & operator=(const voxd_av_error_scope &) = delete;
};

// FFmpeg's own words for `err` (the last logged error line when there is one: it says more).
std::string voxd_av_reason(int err, const voxd_av_error_scope & log);
