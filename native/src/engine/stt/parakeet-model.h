// A whisper.cpp Parakeet TDT model file, run by whisper.cpp's libparakeet (parakeet.h): one read-only context of
// weights shared by every transcription, and one parakeet_state (the compute buffers, mel, LSTM state and encoder
// output of one clip) per transcription in flight, pooled. libparakeet decodes one clip per call, whole (its mel is
// normalised over the whole clip and its attention sees every frame), so concurrent clips run side by side, each on
// its own state with the cores it leased (common/cpu-gate.h): a clip's tokens are the same alone or beside others,
// and the same as parakeet-cli's on the same file (docs/architecture.md "Parakeet").
#pragma once

#include "common/error.h"
#include "common/idle-pool.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct parakeet_context;
struct parakeet_state;

// What the file says, for the JS side (languages, size) and for the checks before loading.
struct voxd_parakeet_info {
    int32_t n_vocab       = 0;
    int32_t n_audio_ctx   = 0; // mel frames libparakeet's short path holds (5000: 50 s)
    int32_t n_audio_state = 0;
    int32_t n_audio_head  = 0;
    int32_t n_audio_layer = 0;
    int32_t n_mels        = 0;
    int32_t ftype         = 0;
    // Some vocabulary piece holds a letter beyond ASCII: v3's multilingual tokenizer (v2's is English only).
    bool multilingual = false;
};

// One decoded token. Times are mel frames (10 ms), after libparakeet moved each punctuation mark onto the end of
// the word before it.
struct voxd_parakeet_token {
    int32_t id = 0;
    std::string text; // as it joins the transcript: U+2581 becomes a space, control pieces ""
    int32_t frame    = 0;
    int32_t duration = 0; // TDT duration, encoder frames (80 ms each)
    float p          = 0.0f;
    float plog       = 0.0f;
    int64_t t0       = 0;
    int64_t t1       = 0;
    bool word_start  = false; // the piece begins with U+2581: a new word
};

struct voxd_parakeet_load_options {
    std::optional<bool> use_gpu; // libparakeet's default: the GPU when the build has one
    std::optional<int> gpu_device;
    size_t max_idle_states = 2;
};

struct voxd_parakeet_params {
    int threads    = 1;
    int max_tokens = 0; // tokens kept, 0 = all
};

// Shared (shared_ptr) by its owner (the JS ParakeetModel) and every transcription in flight: the weights are freed
// when the last of them lets go, never under a running transcription.
class voxd_parakeet_model {
public:
    // Checks the file's layout (libparakeet accepts truncated or tensor-less files) and loads it. Throws voxd_error
    // "model_load_failed".
    static std::shared_ptr<voxd_parakeet_model> load(const std::string & path, const voxd_parakeet_load_options & options);
    ~voxd_parakeet_model();
    voxd_parakeet_model(const voxd_parakeet_model &)             = delete;
    voxd_parakeet_model & operator=(const voxd_parakeet_model &) = delete;

    const voxd_parakeet_info & info() const { return m_info; }
    int64_t weight_bytes() const { return m_weight_bytes; }
    bool use_gpu() const { return m_use_gpu; }

    // Shortest clip transcribed: libparakeet normalises each mel band over the clip's frames and needs two of them.
    static constexpr size_t min_samples = 2 * 160;

    // The whole clip (16 kHz mono), decoded greedily; its tokens in order. A clip shorter than min_samples has none.
    // Any thread; concurrent calls run side by side. Throws voxd_error "aborted" or "transcription_failed".
    std::vector<voxd_parakeet_token> transcribe(const std::vector<float> & samples, const voxd_parakeet_params & params, const voxd_abort_ptr & abort);

private:
    voxd_parakeet_model() = default;

    struct context_deleter {
        void operator()(parakeet_context * ctx) const;
    };
    struct state_deleter {
        void operator()(parakeet_state * state) const;
    };
    using state_ptr = std::unique_ptr<parakeet_state, state_deleter>;

    state_ptr acquire(); // an idle state or a newly allocated one (throws voxd_error)

    // The tokens of a finished call; `st` is borrowed.
    std::vector<voxd_parakeet_token> collect(parakeet_state * st, int max_tokens) const;

    voxd_parakeet_info m_info;
    int64_t m_weight_bytes = 0;
    bool m_use_gpu         = false;
    std::vector<std::string> m_texts; // each token id's text, made once at load

    std::unique_ptr<parakeet_context, context_deleter> m_ctx; // declared before `m_idle`: idle states are freed first
    voxd_idle_pool<state_ptr> m_idle;                         // states kept for reuse: each holds compute buffers
};
