// Where a synthesis puts its samples while it makes them. The addon's sink streams them to JS in chunks
// (addon/pcm-stream.h); an engine's own probe or a test just collects them.
#pragma once

#include <cstddef>
#include <vector>

class voxd_pcm_sink {
public:
    virtual ~voxd_pcm_sink() = default;

    // Appends `n` samples (read during the call only). May throw std::bad_alloc.
    virtual void append(const float * samples, size_t n) = 0;

    // Marks every sample appended so far as deliverable, when at least `min_new` (>= 1) are new since the last
    // time: the engine says when a chunk is worth sending. May throw std::bad_alloc.
    virtual void ready(size_t min_new) = 0;
};

// A sink that only keeps the samples.
class voxd_pcm_collector : public voxd_pcm_sink {
public:
    void append(const float * samples, size_t n) override { m_samples.insert(m_samples.end(), samples, samples + n); }
    void ready(size_t) override {}

    std::vector<float> & samples() { return m_samples; }

private:
    std::vector<float> m_samples;
};
