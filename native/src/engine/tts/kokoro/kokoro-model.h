// Kokoro-82M (hexgrad; StyleTTS 2 with an iSTFTNet vocoder) in GGML: a phoneme sequence and a 256-value style vector
// in, 24 kHz audio out, in one forward pass (not autoregressive). The weights come straight from the released PyTorch
// checkpoint (`kokoro-v1_0.pth`, common/torch-checkpoint.h); docs/models.md "Kokoro" describes the model.
//
// The forward pass runs in four stages, each a ggml graph or host code, cut where upstream's own data flow needs the
// host (docs/architecture.md "Kokoro"):
//   1. text (graph): ALBERT over the tokens, the duration encoder and the duration head; the text encoder
//   2. durations (host): frames per token, `round(sum(sigmoid(logits)) / speed)` at least 1, as upstream rounds
//   3. prosody (graph): the shared LSTM over the frames, F0 and energy curves
//   4. the harmonic source (host: sines at F0, their short-time spectrum), then the decoder and the generator
//      (graph), then the inverse short-time Fourier transform (host)
// Several inputs run as one batch: stages 1 and 3 stack their rows (each LSTM stops at its own row's end, attention
// sees only its own row's tokens); the decoder runs each row as its own subgraph of the same graph. A row's result
// does not depend on what runs beside it.
#pragma once

#include "common/error.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

constexpr int VOXD_KOKORO_SAMPLE_RATE   = 24000;
constexpr int VOXD_KOKORO_STYLE_DIM     = 256; // a voice pack row: 128 for the decoder, then 128 for the predictor
constexpr int VOXD_KOKORO_FRAME_SAMPLES = 600; // one duration frame: 25 ms
constexpr int VOXD_KOKORO_MAX_TOKENS    = 512; // ALBERT's positions, the two pad tokens included
constexpr float VOXD_KOKORO_MIN_SPEED   = 0.25f;
constexpr float VOXD_KOKORO_MAX_SPEED   = 4.0f;

struct voxd_kokoro_load_options {
    std::string checkpoint; // kokoro-v1_0.pth (or a checkpoint of the same layout)
    int bert_layers = 12;   // ALBERT applies its one shared layer this many times (config.json plbert)
    int bert_heads  = 12;   // and splits it into this many heads
    int threads     = 0;    // 0: voxd_default_threads()
};

struct voxd_kokoro_input {
    std::vector<int32_t> ids; // token ids, the pad 0 at each end included (at most VOXD_KOKORO_MAX_TOKENS)
    std::vector<float> style; // VOXD_KOKORO_STYLE_DIM values
    float speed   = 1.0f;     // durations are divided by it
    uint64_t seed = 0;        // the harmonic source's noise
    bool noise    = true;     // false: no noise in the harmonic source (for matching the upstream model's output)
    // Stages given instead of computed, by the names voxd_kokoro_output::stages uses ("decoder_in_F0",
    // "decoder_in_N", "generator_har"), for checking the later stages on the upstream model's own inputs: the
    // generator's harmonic source amplifies float rounding in F0 (docs/models.md "Kokoro").
    std::map<std::string, std::vector<float>> given;
};

struct voxd_kokoro_output {
    std::vector<float> audio;       // VOXD_KOKORO_FRAME_SAMPLES x the frames
    std::vector<int32_t> durations; // frames per token
    // with keep_stages: intermediate tensors by the upstream module's name, in PyTorch's memory order for batch 1
    std::map<std::string, std::vector<float>> stages;
};

// Where synthesis time went, summed over a model's life (microseconds): each stage's graphs and the host's signal work.
struct voxd_kokoro_timings {
    std::atomic<uint64_t> calls{ 0 };
    std::atomic<uint64_t> rows{ 0 };
    std::atomic<uint64_t> frames{ 0 };
    std::atomic<uint64_t> text_us{ 0 };
    std::atomic<uint64_t> prosody_us{ 0 };
    std::atomic<uint64_t> source_us{ 0 }; // the harmonic source and its spectrum (host)
    std::atomic<uint64_t> decoder_us{ 0 };
    std::atomic<uint64_t> istft_us{ 0 }; // host
};

struct voxd_kokoro_model; // tts/kokoro/kokoro-weights.h

// Reads and checks the checkpoint. Throws voxd_error("model_load_failed") naming what is missing or mis-shaped.
std::shared_ptr<voxd_kokoro_model> voxd_kokoro_load(const voxd_kokoro_load_options & options);

// Token vocabulary size the checkpoint's embeddings have (ids must be below it).
int voxd_kokoro_vocab_size(const voxd_kokoro_model & model);
int64_t voxd_kokoro_weight_bytes(const voxd_kokoro_model & model);
const voxd_kokoro_timings & voxd_kokoro_get_timings(const voxd_kokoro_model & model);

// The inputs' audio, in order, as one batch; calls on one model take turns (any thread). Throws
// voxd_error("invalid_argument") for an input out of range, "synthesis_failed" when a graph fails, "aborted".
std::vector<voxd_kokoro_output> voxd_kokoro_synthesize(voxd_kokoro_model & model, const std::vector<voxd_kokoro_input> & inputs, bool keep_stages,
                                                       const voxd_abort_ptr & abort);
