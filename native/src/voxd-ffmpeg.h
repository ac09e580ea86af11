// RAII over the FFmpeg objects the decoder and the encoder both own: each deleter is the library's free function.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libswresample/swresample.h>
}

#include <memory>

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
