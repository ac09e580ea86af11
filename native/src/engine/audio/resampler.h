// Streaming sample-rate conversion with libswresample: mono float32 chunks at one rate become mono float32 at
// another, with the filter state carried from chunk to chunk (realtime audio arrives in pieces).
#pragma once

#include "common/error.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

struct SwrContext;

// One stream's converter. The concatenated output of process() calls followed by flush() depends only on the
// concatenated input, not on how it was cut into chunks. Not thread-safe: one owner.
class voxd_stream_resampler {
public:
    static constexpr int min_rate = 1000;
    static constexpr int max_rate = 384000;

    // Throws voxd_error("invalid_argument") for rates outside min_rate..max_rate.
    voxd_stream_resampler(int input_rate, int output_rate);
    ~voxd_stream_resampler();

    int input_rate() const { return m_in_rate; }
    int output_rate() const { return m_out_rate; }

    // Appends to `out` the output that `n` more input samples complete (non-finite samples count as silence).
    void process(const float * in, size_t n, std::vector<float> & out);
    // Appends the output still held back by the filter delay, then starts a new stream (as reset()).
    void flush(std::vector<float> & out);
    // Drops the held input: the next process() starts a new stream.
    void reset();

private:
    void convert(const float * in, int n, std::vector<float> & out);

    int m_in_rate;
    int m_out_rate;
    SwrContext * m_swr = nullptr; // null when the rates are equal (a plain copy)
};
