// Audio encoding with FFmpeg's libraries (libavcodec, libavformat, libswresample): mono float32 samples become
// one file in a response format (mp3, wav, flac, ogg, opus, aac, pcm), incrementally, written to memory.
#pragma once

#include "voxd-async.h"

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

private:
    struct impl;
    std::unique_ptr<impl> m_impl;
};

// JS: `new AudioEncoder({ format, sampleRate, bitrate?, streaming? })`; `encoder.encode(samples) -> Promise<Buffer>`;
// `encoder.finish(samples?) -> Promise<Buffer>`; `outputSampleRate`, `codec`, `format`, `sampleRate`, `streaming`;
// static `formats` (those this FFmpeg build can encode). One call at a time: a call made before the previous
// one's promise settled throws `busy`; calls after finish() throw `closed`.
class voxd_audio_encoder : public Napi::ObjectWrap<voxd_audio_encoder> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_audio_encoder(const Napi::CallbackInfo & info);

private:
    Napi::Value encode(const Napi::CallbackInfo & info);
    Napi::Value finish(const Napi::CallbackInfo & info);
    Napi::Value output_sample_rate(const Napi::CallbackInfo & info);
    Napi::Value codec(const Napi::CallbackInfo & info);
    Napi::Value format(const Napi::CallbackInfo & info);
    Napi::Value sample_rate(const Napi::CallbackInfo & info);
    Napi::Value streaming(const Napi::CallbackInfo & info);

    // Queues one call on a worker thread; `last` = finish().
    Napi::Value run(Napi::Env env, std::vector<float> samples, bool last);

    // Touched by the worker of the call in flight only, and by JS only while no call is in flight (`m_busy`), so
    // it needs no lock; shared with that worker so a collected JS object never frees it under a running call.
    struct state {
        std::unique_ptr<voxd_encoder> encoder; // null after finish() ran or a call failed
        std::string failure;                   // why a call failed: later calls say so
    };
    std::shared_ptr<state> m_state;

    // JS thread only.
    bool m_busy     = false; // a call is queued or running: set when queued, cleared when it settles
    bool m_finished = false; // finish() was called
    voxd_encoder_params m_params;
    std::string m_format;
    std::string m_codec;
    int m_output_rate = 0;
};

// Exports AudioEncoder.
void voxd_encode_init(Napi::Env env, Napi::Object exports);
