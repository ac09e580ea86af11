// The audio decoder, with FFmpeg's libraries (libavformat, libavcodec, libswresample): a whole file held in
// memory becomes float32 samples at the rate an engine wants (or the source's), down-mixed to mono or kept as
// mono/stereo. What it shares with the encoder (RAII deleters, FFmpeg's error lines) is in common/ffmpeg.h.
#pragma once

#include "common/error.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

struct voxd_decode_params {
    int sample_rate    = 16000; // output rate, Hz; 0 = the source's (of its first frame)
    int channels       = 1;     // output channels: 1 = down-mixed to mono; 0 = the source's, at most 2 (more are down-mixed to stereo)
    double max_seconds = 0;     // > 0: fail with audio_too_long as soon as the decoded audio is longer
};

struct voxd_decoded_audio {
    std::vector<float> samples; // at sample_rate; interleaved when channels is 2
    int sample_rate        = 0;
    int channels           = 1;
    int source_sample_rate = 0; // of the first decoded frame
    int source_channels    = 0;
    std::string codec;      // FFmpeg codec name: "mp3", "aac", "pcm_s16le", "opus", ...
    std::string container;  // short container name: "wav", "mp4", "m4a", "webm", "ogg", ...
    bool truncated = false; // FFmpeg met errors, or the audio is shorter than the header says: samples
                            // hold what decoded (best effort: a cut-off WAV or Ogg is not always noticed)
};

// Decodes a whole in-memory file on the calling thread (never the JS thread: it takes milliseconds to seconds).
// `data` is only read during the call. Throws voxd_error with code "invalid_audio", "audio_too_long" or
// "aborted" (checked between packets).
voxd_decoded_audio voxd_decode_audio(const uint8_t * data, size_t size, const voxd_decode_params & params, const voxd_abort_ptr & abort);
