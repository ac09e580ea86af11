// Pocket TTS's generator (the flow net) and audio decoder (mimi) as GGML graphs of our own over the mmproj's
// weights, batched across sequences. libmtmd's generator call takes one request's frame or decoder window at a time
// and keeps its tensors private, so the mmproj's `a.gen.*` tensors are read once more here (the voice encoder stays
// with libmtmd): one graph makes the next latent of every sequence in a step, one graph decodes the windows of
// every sequence whose window is due. The arithmetic is the reference's; the layout is ours: activations are
// channel-first, so a causal convolution is one weight product over overlapping views of its input (no im2col
// copy) and a transposed convolution of stride s a causal one with s times the output channels. A sequence meets
// the same kernels alone as in any batch (docs/architecture.md "GGML text-to-speech"), so its audio does not depend
// on what runs beside it.
// Pure engine code: no N-API here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

// One sequence's next frame.
struct voxd_pocket_frame {
    const float * h_state = nullptr; // the backbone's last hidden state (n_embd floats), borrowed
    uint32_t seed         = 0;       // seeds the noise the flow starts from
    float temperature     = 0.7f;    // the noise's variance

    std::vector<float> latent; // out: n_latent floats
    std::vector<float> embd;   // out: the next backbone input, n_embd floats
    bool eos = false;          // out: the end-of-speech head fired
};

// The audio decoder's memory of one sequence between its windows: left context of every causal convolution and
// the transformer's key/value window. Empty: a cold start.
struct voxd_pocket_decoder_state {
    std::vector<float> values;
    int64_t pos = 0; // transformer positions decoded so far
};

// One sequence's window for the decoder.
struct voxd_pocket_window {
    const std::vector<float> * latents = nullptr; // n_frames x n_latent, borrowed
    voxd_pocket_decoder_state * state  = nullptr; // read and replaced, borrowed
    std::vector<float> * audio         = nullptr; // samples appended, borrowed
    std::string error;                            // out: why it was not decoded ("" when it was)
};

struct voxd_pocket_weights; // tensors, backend, allocators

class voxd_pocket_graphs {
public:
    // Reads the generator's and decoder's tensors from the mmproj (throws voxd_error "model_load_failed" when one
    // is missing or of a shape the graphs cannot take). `n_embd`: the backbone's width. With `use_gpu`, the first
    // GPU when the addon has one and it runs both graphs, else the CPU.
    voxd_pocket_graphs(const std::string & mmproj, int n_embd, int threads, bool use_gpu);
    ~voxd_pocket_graphs();
    voxd_pocket_graphs(const voxd_pocket_graphs &)             = delete;
    voxd_pocket_graphs & operator=(const voxd_pocket_graphs &) = delete;

    // The flow net for every frame at once (throws voxd_error "synthesis_failed").
    void generate(const std::vector<voxd_pocket_frame *> & frames);
    // Decodes every window at once, those of one length in one graph; returns how many graphs it ran. A graph that
    // fails sets the `error` of its windows (their state is left as it was).
    int decode(std::vector<voxd_pocket_window> & windows);

    size_t weight_bytes() const; // on the backend

private:
    void decode_group(const std::vector<voxd_pocket_window *> & windows, int n_frames);

    std::unique_ptr<voxd_pocket_weights> m_w;
};
