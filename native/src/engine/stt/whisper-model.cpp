#include "stt/whisper-model.h"

#include "common/cpu-gate.h"
#include "common/file-size.h"
#include "common/ggml-file-check.h"
#include "common/ggml-graph.h"

#include "ggml.h"
#include "whisper.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdint>
#include <optional>

// ---- file check ----

// The header's hparams and every record of the file (common/ggml-file-check.h).
static void voxd_whisper_check_file(const std::string & path) {
    voxd_ggml_file_check file(path, "whisper.cpp model");
    file.read_magic();
    int32_t hp[11];
    for (int32_t & v : hp) {
        v = file.read_i32();
    }
    const auto [n_vocab, n_audio_ctx, n_audio_state, n_audio_head, n_audio_layer, n_text_ctx, n_text_state, n_text_head, n_text_layer, n_mels, ftype] = hp;

    // whisper.cpp hard-codes the special token ids of the Whisper tokenizer: smaller vocabularies index past them
    const bool sane = n_vocab >= 51864 && n_vocab <= (1 << 20) && n_audio_ctx > 0 && n_audio_ctx <= (1 << 16) && n_text_ctx > 0 && n_text_ctx <= (1 << 16) &&
                      n_audio_state > 0 && n_audio_state <= (1 << 16) && n_text_state == n_audio_state && n_audio_head > 0 &&
                      n_audio_state % n_audio_head == 0 && n_text_head > 0 && n_text_state % n_text_head == 0 && n_audio_layer > 0 && n_audio_layer <= 256 &&
                      n_text_layer > 0 && n_text_layer <= 256 && n_mels > 0 && n_mels <= 512 && voxd_ggml_ftype_known(ftype);
    if (!sane) {
        file.fail("implausible hyperparameters");
    }

    const int32_t n_mel = file.read_i32();
    const int32_t n_fft = file.read_i32();
    if (n_mel != n_mels || n_fft != 1 + WHISPER_N_FFT / 2) {
        file.fail("mel filters do not match the hyperparameters");
    }
    file.skip((int64_t) n_mel * n_fft * (int64_t) sizeof(float));

    const int32_t n_words = file.read_i32();
    if (n_words < 0 || n_words > n_vocab) {
        file.fail("bad vocabulary size");
    }
    for (int32_t i = 0; i < n_words; i++) {
        const int32_t len = file.read_i32();
        if (len < 0 || len > 1024) {
            file.fail("bad vocabulary entry");
        }
        file.skip(len);
    }

    // as many tensors as whisper_model_load creates for these hparams
    file.check_tensors(1, 11 + 15 * (int64_t) n_audio_layer + 24 * (int64_t) n_text_layer);
}

// ---- whisper.cpp's context and states ----

voxd_whisper_model::~voxd_whisper_model() {
    voxd_release_batcher(m_batcher);
}

void voxd_whisper_model::context_deleter::operator()(whisper_context * ctx) const {
    whisper_free(ctx);
}

void voxd_whisper_model::state_deleter::operator()(whisper_state * state) const {
    whisper_free_state(state);
}

whisper_context * voxd_whisper_model::context() {
    std::lock_guard<std::mutex> lock(m_mutex);
    if (!m_ctx) {
        m_ctx.reset(whisper_init_from_file_with_params_no_state(m_path.c_str(), m_cparams));
        if (!m_ctx) {
            throw voxd_error("transcription_failed", "whisper.cpp cannot load " + m_path + " (out of memory?)");
        }
    }
    return m_ctx.get();
}

voxd_whisper_model::state_ptr voxd_whisper_model::acquire() {
    whisper_context * ctx = context();
    if (state_ptr st = m_idle.take()) {
        return st;
    }
    state_ptr st(whisper_init_state(ctx));
    if (!st) {
        throw voxd_error("transcription_failed", "cannot allocate a whisper state (out of memory?)");
    }
    return st;
}

void voxd_whisper_model::release(state_ptr st) {
    m_idle.give(std::move(st));
}

// ---- model ----

std::shared_ptr<voxd_whisper_model> voxd_whisper_model::load(const std::string & path, const voxd_whisper_load_options & options) {
    std::shared_ptr<voxd_whisper_model> model(new voxd_whisper_model());
    model->m_path = path;
    model->m_idle.set_max_idle(options.max_idle_states);
    model->m_cparams                 = whisper_context_default_params();
    voxd_whisper_batch_options batch = options.batch;
    if (options.use_gpu) {
        model->m_cparams.use_gpu = batch.use_gpu = *options.use_gpu;
    }
    if (options.flash_attn) {
        model->m_cparams.flash_attn = *options.flash_attn;
    }
    if (options.gpu_device) {
        model->m_cparams.gpu_device = batch.gpu_device = *options.gpu_device;
    }
    voxd_whisper_check_file(path);
    model->m_batcher = std::make_unique<voxd_whisper_batcher>(path, batch);
    return model;
}

// A local lookup, because whisper_lang_id logs an error for every unknown name a client sends.
std::string voxd_whisper_model::language_code(std::string name) const {
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return (char) std::tolower(c); });
    const int n = (int) languages().size();
    for (int id = 0; id < n; id++) {
        if (name == whisper_lang_str(id) || name == whisper_lang_str_full(id)) {
            return whisper_lang_str(id);
        }
    }
    return "";
}

std::vector<std::string> voxd_whisper_model::languages() const {
    const int n = m_batcher->multilingual() ? std::min(m_batcher->n_languages(), whisper_lang_max_id() + 1) : 1; // id 0 is English
    std::vector<std::string> out;
    for (int id = 0; id < n; id++) {
        out.push_back(whisper_lang_str(id));
    }
    return out;
}

int64_t voxd_whisper_model::weight_bytes() const {
    return voxd_file_bytes(m_path);
}

const char * voxd_whisper_model::size_name() const {
    switch (m_batcher->hparams()[4]) { // n_audio_layer
        case 4: return "tiny";
        case 6: return "base";
        case 12: return "small";
        case 24: return "medium";
        case 32: return "large";
        default: return "unknown";
    }
}
