// Audio encoding with FFmpeg's libraries (libavcodec, libavformat, libswresample): mono float32 samples become
// one file in a response format (mp3, wav, flac, ogg, opus, aac, pcm), incrementally, written to memory.
#pragma once

#include "common/error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// The `response_format`s of POST /v1/audio/speech.
enum class voxd_audio_format { mp3, wav, flac, ogg, opus, aac, pcm };

struct voxd_encoder_params {
    voxd_audio_format format = voxd_audio_format::wav;
    int sample_rate          = 24000; // of the input samples, Hz (8000 to 192000)
    int64_t bitrate          = 0;     // bits/s for mp3, aac, opus and ogg; 0 = the format's default
    bool streaming           = true;  // see voxd_encoder
};

// One file, encoded a chunk at a time. Output rate: the input rate when the codec takes it, else the nearest rate
// it takes (libswresample converts). Mono.
//
// Streaming: every call returns the container bytes produced so far, so the concatenation of all calls is one
// file with one header: the first call returns the header, Ogg pages are flushed at the end of every call, and
// WAV's RIFF and data sizes are 0xFFFFFFFF (the output cannot be rewound).
// Not streaming: the output is a seekable memory file; encode() returns nothing and finish() the whole file, its
// header completed (WAV sizes, FLAC STREAMINFO totals and MD5, MP3 Xing/LAME frame with gapless delay and padding).
//
// Not thread-safe: one call at a time (the JS class enforces it). FFmpeg state is created by the first call, so
// the worker thread pays for it; the constructor only validates and picks the codec.
class voxd_encoder {
public:
    static constexpr int min_rate        = 8000; // of the input samples, Hz
    static constexpr int max_rate        = 192000;
    static constexpr int64_t min_bitrate = 6000; // bits/s
    static constexpr int64_t max_bitrate = 512000;

    // Throws voxd_error "invalid_argument" (rate out of range) or "encoder_unavailable" (FFmpeg built without it).
    explicit voxd_encoder(const voxd_encoder_params & params);
    ~voxd_encoder();

    int output_sample_rate() const;
    const char * codec_name() const; // FFmpeg's encoder name: "libmp3lame", "pcm_s16le", "flac", ...

    // Encodes `n` samples (read during the call only; NaN and infinities become 0, values beyond ±1 are clipped)
    // and appends to `out` the bytes ready now. Throws voxd_error "invalid_argument" when the codec refuses the
    // configuration (first call), "encode_failed" when FFmpeg fails; the encoder is unusable after a throw.
    void encode(const float * samples, size_t n, std::vector<uint8_t> & out);

    // Encodes the last `n` samples (may be 0), drains the codec, writes the trailer and appends the remaining
    // bytes (the whole file when not streaming). Frees the FFmpeg state: no call may follow.
    void finish(const float * samples, size_t n, std::vector<uint8_t> & out);

    // The format of a `response_format` name; false for an unknown name.
    static bool parse_format(const std::string & name, voxd_audio_format & format);
    // The formats this FFmpeg build can encode, in the table's order.
    static std::vector<std::string> available_formats();
    // Every format name, ", "-separated, for error messages.
    static std::string format_names();

private:
    struct impl;
    std::unique_ptr<impl> m_impl;
};
