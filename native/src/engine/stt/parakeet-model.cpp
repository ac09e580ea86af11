#include "stt/parakeet-model.h"

#include "common/file-size.h"
#include "common/ggml-file-check.h"

#include <algorithm>

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

// ---- the model ----

voxd_parakeet_model::~voxd_parakeet_model() {
    voxd_release_batcher(m_batcher);
}

std::shared_ptr<voxd_parakeet_model> voxd_parakeet_model::load(const std::string & path, const voxd_parakeet_batch_options & options) {
    std::shared_ptr<voxd_parakeet_model> model(new voxd_parakeet_model());
    model->m_info         = voxd_parakeet_check_file(path);
    model->m_batcher      = std::make_unique<voxd_parakeet_batcher>(path, options);
    model->m_weight_bytes = voxd_file_bytes(path);
    return model;
}
