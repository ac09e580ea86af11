#include "stt/parakeet-model.h"

#include "common/cpu-gate.h"
#include "common/file-size.h"
#include "common/ggml-file-check.h"
#include "common/ggml-graph.h"

#include "parakeet.h"

#include <algorithm>
#include <atomic>
#include <climits>

// ---- file check ----

// The header's hparams and every record of the file (common/ggml-file-check.h), against what libparakeet's loader and
// graphs assume without checking. Fills what the JS side reports.
static voxd_parakeet_info voxd_parakeet_check_file(const std::string & path) {
    voxd_ggml_file_check file(path, "Parakeet model");
    file.read_magic();
    int32_t hp[15];
    for (int32_t & v : hp) {
        v = file.read_i32();
    }
    const auto [n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_mels, ftype, n_fft, subsampling, n_channels, n_kernel, n_pred_dim,
                n_pred_layers, n_durations, n_max_symbols] = hp;
    // The graph hard-codes three stride-2 convolutions (a factor of 8) and sine/cosine pairs per position; the loader
    // makes room for at most 9 prediction-network tensors (2 LSTM layers), keeps n_vocab x n_audio_ctx logits in an
    // int, and decodes up to n_max_tokens symbols per frame.
    const bool sane = n_vocab > 0 && n_vocab <= (1 << 20) && n_audio_ctx >= 100 && n_audio_ctx <= (1 << 16) &&
                      (int64_t) n_vocab * n_audio_ctx < (int64_t(1) << 31) && n_audio_state > 0 && n_audio_state <= (1 << 16) && n_audio_state % 2 == 0 &&
                      n_audio_head > 0 && n_audio_state % n_audio_head == 0 && n_audio_layer > 0 && n_audio_layer <= 256 && n_mels > 0 && n_mels <= 512 &&
                      n_mels % 8 == 0 && voxd_ggml_ftype_known(ftype) && n_fft >= 2 && n_fft <= 4096 && subsampling == 8 && n_channels > 0 &&
                      n_channels <= 4096 && n_kernel > 0 && n_kernel % 2 == 1 && n_kernel <= 255 && n_pred_dim > 0 && n_pred_dim <= (1 << 14) &&
                      n_pred_layers > 0 && n_pred_layers <= 2 && n_durations > 0 && n_durations <= 64 && n_max_symbols > 0 && n_max_symbols <= 100;
    if (!sane) {
        file.fail("implausible hyperparameters");
    }

    const int32_t n_mel = file.read_i32();
    const int32_t n_fb  = file.read_i32();
    if (n_mel != n_mels || n_fb != n_fft / 2 + 1) {
        file.fail("mel filters do not match the hyperparameters");
    }
    file.skip((int64_t) n_mel * n_fb * (int64_t) sizeof(float));
    const int32_t n_window = file.read_i32();
    if (n_window < 0 || n_window > n_fft) {
        file.fail("bad window length");
    }
    file.skip((int64_t) n_window * (int64_t) sizeof(float));
    // a duration is how many encoder frames a token advances: a huge one overflows the frame index
    for (int32_t i = 0; i < n_durations; i++) {
        if ((uint32_t) file.read_i32() > 64) {
            file.fail("a TDT duration is over 64 frames");
        }
    }

    // libparakeet reads as many pieces as the file says but indexes them by n_vocab
    if (file.read_i32() != n_vocab) {
        file.fail("the vocabulary does not have n_vocab pieces");
    }
    voxd_parakeet_info info{ n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_mels, ftype, false };
    std::string piece;
    for (int32_t i = 0; i < n_vocab; i++) {
        const int32_t len = file.read_i32();
        if (len < 0 || len > 1024) {
            file.fail("bad vocabulary entry");
        }
        piece.resize((size_t) len);
        file.read_bytes(piece.data(), len);
        // U+2581 (the word marker every tokenizer has) is E2 96 81; a letter beyond ASCII starts with C3 and up
        info.multilingual =
            info.multilingual || std::any_of(piece.begin(), piece.end(), [](char c) { return (unsigned char) c >= 0xC3 && (unsigned char) c < 0xE2; });
    }

    // As many tensors as parakeet_model_load creates (subsampling 12, per layer 29, the embedding, 3 per LSTM layer,
    // joint 6, the 0-d BatchNorm counter included), holding as many elements as it allocates from the hparams before
    // reading any: hparams that ask for more than the file holds would fail that allocation, which it does not check.
    const int64_t d = n_audio_state, c = n_channels, p = n_pred_dim, v = n_vocab, k = n_kernel;
    const int64_t subsampling_elements = 32 * c + 2 * c * c + (n_mels / 8) * c * d + d;
    const int64_t layer_elements       = 24 * d * d + (16 + k) * d + 1;
    const int64_t prediction_elements  = p * (v + 1) + n_pred_layers * (8 * p * p + 4 * p);
    const int64_t joint_elements       = p * p + p + d * p + p + (p + 1) * (v + 1 + n_durations);
    const int64_t expected_elements    = subsampling_elements + n_audio_layer * layer_elements + prediction_elements + joint_elements;
    const int64_t elements             = file.check_tensors(0, 12 + 29 * (int64_t) n_audio_layer + 1 + 3 * (int64_t) n_pred_layers + 6);
    if (elements != expected_elements) {
        file.fail("its tensors hold " + std::to_string(elements) + " values where the hyperparameters call for " + std::to_string(expected_elements));
    }
    return info;
}

// ---- context and states ----

void voxd_parakeet_model::context_deleter::operator()(parakeet_context * ctx) const {
    parakeet_free(ctx);
}

void voxd_parakeet_model::state_deleter::operator()(parakeet_state * state) const {
    parakeet_free_state(state);
}

voxd_parakeet_model::~voxd_parakeet_model() = default;

std::shared_ptr<voxd_parakeet_model> voxd_parakeet_model::load(const std::string & path, const voxd_parakeet_load_options & options) {
    std::shared_ptr<voxd_parakeet_model> model(new voxd_parakeet_model());
    model->m_info = voxd_parakeet_check_file(path);
    model->m_idle.set_max_idle(options.max_idle_states);
    parakeet_context_params cparams = parakeet_context_default_params();
    if (options.use_gpu) {
        cparams.use_gpu = *options.use_gpu;
    }
    if (options.gpu_device) {
        cparams.gpu_device = *options.gpu_device;
    }
    model->m_use_gpu = cparams.use_gpu && voxd_gpu_available();
    model->m_ctx.reset(parakeet_init_from_file_with_params_no_state(path.c_str(), cparams));
    if (!model->m_ctx) {
        throw voxd_error("model_load_failed", "libparakeet cannot load " + path + " (see the [engine] log lines above)");
    }
    model->m_weight_bytes = voxd_file_bytes(path);
    model->m_texts.resize((size_t) model->m_info.n_vocab + 1);
    for (int32_t id = 0; id <= model->m_info.n_vocab; id++) {
        const char * piece = parakeet_token_to_str(model->m_ctx.get(), id); // owned by the context's vocabulary
        const int len      = parakeet_token_to_text(piece, false, nullptr, 0);
        std::string & text = model->m_texts[(size_t) id];
        text.resize((size_t) len + 1);
        parakeet_token_to_text(piece, false, text.data(), len + 1);
        text.resize((size_t) len);
    }
    return model;
}

voxd_parakeet_model::state_ptr voxd_parakeet_model::acquire() {
    if (state_ptr st = m_idle.take()) {
        return st;
    }
    state_ptr st(parakeet_init_state(m_ctx.get()));
    if (!st) {
        throw voxd_error("transcription_failed", "libparakeet cannot allocate a decoding state (out of memory?)");
    }
    return st;
}

// ---- transcription ----

std::vector<voxd_parakeet_token> voxd_parakeet_model::transcribe(const std::vector<float> & samples, const voxd_parakeet_params & params,
                                                                 const voxd_abort_ptr & abort) {
    voxd_check_abort(abort);
    if (samples.size() < min_samples) {
        return {};
    }
    if (samples.size() > (size_t) INT_MAX) {
        throw voxd_error("invalid_argument", "the clip is longer than libparakeet takes (2^31 samples)");
    }
    state_ptr st = acquire();
    // a GPU runs the graphs; the CPU thread only feeds it
    const int threads = m_use_gpu ? 1 : std::max(1, std::min(params.threads, voxd_cpu_gate::available_cores()));
    std::vector<voxd_parakeet_token> tokens;
    {
        const voxd_cpu_gate::lease cores(threads);
        parakeet_full_params fp     = parakeet_full_default_params(PARAKEET_SAMPLING_GREEDY);
        fp.n_threads                = threads;
        fp.no_context               = true;
        fp.abort_callback           = [](void * data) { return static_cast<std::atomic<bool> *>(data)->load(std::memory_order_relaxed); };
        fp.abort_callback_user_data = abort.get(); // borrowed: `abort` outlives the call
        const int rc                = parakeet_full_with_state(m_ctx.get(), st.get(), fp, samples.data(), (int) samples.size());
        voxd_check_abort(abort); // the state is freed: an aborted call may leave it mid-graph
        if (rc != 0) {
            throw voxd_error("transcription_failed", "libparakeet failed to transcribe the clip (code " + std::to_string(rc) + ")");
        }
        tokens = collect(st.get(), params.max_tokens);
    }
    // a clip past the short path re-made the state's encoder buffers at its length: keep only states of the usual size
    if (samples.size() <= (size_t) m_info.n_audio_ctx * 160) {
        m_idle.give(std::move(st));
    }
    return tokens;
}

std::vector<voxd_parakeet_token> voxd_parakeet_model::collect(parakeet_state * st, int max_tokens) const {
    std::vector<voxd_parakeet_token> tokens;
    const int n_segments = parakeet_full_n_segments_from_state(st);
    for (int s = 0; s < n_segments; s++) {
        const int n_tokens = parakeet_full_n_tokens_from_state(st, s);
        for (int i = 0; i < n_tokens; i++) {
            if (max_tokens > 0 && (int) tokens.size() >= max_tokens) {
                return tokens;
            }
            const parakeet_token_data td = parakeet_full_get_token_data_from_state(st, s, i);
            const bool known             = td.id >= 0 && td.id < (int32_t) m_texts.size();
            tokens.push_back(
                { td.id, known ? m_texts[(size_t) td.id] : std::string(), td.frame_index, td.duration_value, td.p, td.plog, td.t0, td.t1, td.is_word_start });
        }
    }
    return tokens;
}
