#include "tts/ggml/tts-model.h"
#include "common/cpu-gate.h"
#include "common/ggml-graph.h"
#include "common/engine-log.h"
#include "common/file-size.h"

#include "gguf.h"
#include "llama.h"
#include "mtmd.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <random>
#include <vector>

namespace {

// Architectures of backbones this engine drives, and the generator type each needs in its mmproj.
struct supported_arch {
    const char * arch;             // general.architecture of the backbone
    mtmd_gen_audio_type generator; // the audio generator its mmproj must hold
    int n_ctx_seq;                 // KV cells per sequence
};
// Pocket TTS: a reference clip (at most 30 s, mtmd truncates it: 375 rows at 12.5 Hz), a text chunk (at most 50
// tokens) and its frames (at most ceil((50 / 3 + 2) * 12.5) = 234) fit in 1024. Qwen3-TTS: one x-vector row, the
// text and its frames, which 2048 bounds to about 160 s of audio per request (the speech service cuts input at
// sentences).
constexpr supported_arch k_supported[] = {
    { "pockettts", MTMD_GEN_AUDIO_TYPE_POCKETTTS, 1024 },
    { "qwen3tts", MTMD_GEN_AUDIO_TYPE_QWEN3TTS, 2048 },
};

// Prompt rows decoded per llama_decode.
constexpr int k_n_batch = 512;

// The shortest reference clip taken: libmtmd's preprocessing and the Qwen3 speaker encoder's padded convolutions
// assert (abort the process) on clips of a few dozen milliseconds, and no voice is heard in less anyway.
constexpr double k_min_reference_seconds = 0.5;

// ---- logging: libmtmd's lines go to the engine log; the last error line of this thread is kept ----

thread_local std::string t_last_error;
thread_local std::string t_error_line;

void voxd_tts_ggml_log(ggml_log_level level, const char * text, void * user_data) {
    if (level == GGML_LOG_LEVEL_ERROR || (level == GGML_LOG_LEVEL_CONT && !t_error_line.empty())) {
        t_error_line += text ? text : "";
        const size_t nl = t_error_line.find('\n');
        if (nl != std::string::npos) {
            t_last_error = t_error_line.substr(0, nl);
            t_error_line.clear();
        }
    }
    voxd_engine_log(level, text, user_data);
}

// The last error line libmtmd (or the helper) logged on this thread, with a leading "; " when there is one.
std::string last_error_suffix() {
    std::string msg = t_last_error;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
        msg.pop_back();
    }
    return msg.empty() ? std::string() : "; " + msg;
}

void backend_init_once() {
    static std::once_flag once;
    std::call_once(once, [] {
        llama_backend_init();
        mtmd_log_set(voxd_tts_ggml_log, nullptr); // libmtmd's own (clip) lines
    });
}

struct gguf_deleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};

// general.architecture of a GGUF file, read from its header only. Throws model_load_failed when the file is not
// a readable GGUF.
std::string gguf_architecture(const std::string & path, const char * what) {
    gguf_init_params params{ /*no_alloc =*/true, /*ctx =*/nullptr };
    std::unique_ptr<gguf_context, gguf_deleter> ctx(gguf_init_from_file(path.c_str(), params)); // owns the header
    if (!ctx) {
        throw voxd_error("model_load_failed", std::string(what) + " " + path + " is not a readable GGUF file");
    }
    const int64_t key = gguf_find_key(ctx.get(), "general.architecture");
    if (key < 0 || gguf_get_kv_type(ctx.get(), key) != GGUF_TYPE_STRING) {
        throw voxd_error("model_load_failed", std::string(what) + " " + path + " has no general.architecture");
    }
    return gguf_get_val_str(ctx.get(), key);
}

} // namespace

std::shared_ptr<voxd_tts_ggml_model> voxd_tts_ggml_model::load(const voxd_tts_ggml_load_options & opt) {
    backend_init_once();
    t_last_error.clear();

    if (opt.mmproj.empty()) {
        throw voxd_error("model_load_failed", "no mmproj given: a GGML TTS model is a backbone GGUF plus its mmproj GGUF");
    }
    const std::string arch = gguf_architecture(opt.model, "model");
    const auto supported   = std::find_if(std::begin(k_supported), std::end(k_supported), [&](const supported_arch & s) { return arch == s.arch; });
    if (supported == std::end(k_supported)) {
        throw voxd_error("model_load_failed", "model " + opt.model + " has architecture '" + arch +
                                                  "', which the GGML TTS engine does not support (it supports pockettts and qwen3tts)");
    }
    const std::string mm_arch = gguf_architecture(opt.mmproj, "mmproj");
    if (mm_arch != "clip") {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " has architecture '" + mm_arch + "', not clip: it is not an mmproj");
    }

    const int threads = opt.threads > 0 ? opt.threads : voxd_default_threads();
    if (opt.sequences < 1 || opt.sequences > max_sequences) {
        throw voxd_error("invalid_argument", "a GGML TTS model holds from 1 to " + std::to_string(max_sequences) + " sequences");
    }
    auto data  = std::make_shared<voxd_tts_ggml_model>();
    data->arch = arch;

    llama_model_params mparams = llama_model_default_params();
    // plain weight buffers: repacked ones ("extra" buffer types) multiply 4 rows at a time with other kernels than
    // the rest, so a row's result would depend on its batch
    mparams.use_extra_bufts = false;
    data->model.reset(llama_model_load_from_file(opt.model.c_str(), mparams));
    if (!data->model) {
        throw voxd_error("model_load_failed", "llama.cpp could not load the backbone " + opt.model + last_error_suffix());
    }

    // one KV stream per sequence: a request's attention then reads the same cells whatever runs beside it
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx                = (uint32_t) (supported->n_ctx_seq * opt.sequences);
    cparams.n_batch              = k_n_batch;
    cparams.n_ubatch             = k_n_batch;
    cparams.n_seq_max            = (uint32_t) opt.sequences;
    cparams.kv_unified           = false;
    // attention as one flash-attention op (whose rows voxd_tts_use_row_kernels keeps apart), not as matrix products
    // whose row count is the step's rows in one KV stream (1 in a batch, 2 for a lone row and its companion)
    cparams.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cparams.n_threads       = threads;
    cparams.n_threads_batch = threads;
    cparams.embeddings      = true; // the generator reads the backbone's hidden state
    cparams.no_perf         = true;
    data->lctx.reset(llama_init_from_model(data->model.get(), cparams));
    if (!data->lctx) {
        throw voxd_error("model_load_failed", "llama.cpp could not create a context for " + opt.model + last_error_suffix());
    }

    // every backbone row computed by the same CPU kernels alone or in any batch (docs/architecture.md)
    voxd_tts_use_row_kernels(data->lctx.get());

    mtmd_context_params mm = mtmd_context_params_default();
    mm.n_threads           = threads;
    mm.print_timings       = false;
    data->mctx.reset(mtmd_init_from_file(opt.mmproj.c_str(), data->model.get(), mm));
    if (!data->mctx) {
        throw voxd_error("model_load_failed", "libmtmd could not load the mmproj " + opt.mmproj + last_error_suffix());
    }
    const mtmd_gen_audio_info info = mtmd_gen_audio_get_info(data->mctx.get());
    if (info.type == MTMD_GEN_AUDIO_TYPE_NONE) {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " has no audio generator (it is not a TTS mmproj)");
    }
    if (info.type != supported->generator) {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " holds another TTS model's generator than the " + arch + " backbone needs");
    }
    if (info.sample_rate <= 0) {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " declares no output sample rate");
    }
    data->sample_rate = info.sample_rate;
    data->variant     = info.model_variant ? info.model_variant : "";

    data->cpu_threads = voxd_gpu_available() ? 1 : threads; // llama.cpp offloads every layer to a GPU where there is one
    data->gen         = voxd_tts_generator::create(data->lctx.get(), data->mctx.get(), { opt.mmproj, threads, opt.libmtmd });
    for (int i = opt.sequences - 1; i >= 0; i--) {
        data->free_seq_ids.push_back(i);
    }
    data->weight_bytes = (int64_t) (llama_model_size(data->model.get()) + data->gen->own_weight_bytes()) + voxd_file_bytes(opt.mmproj);
    return data;
}

int voxd_tts_ggml_model::sequences() const {
    return (int) llama_n_seq_max(lctx.get());
}

// ---- requests ----

// Takes a free sequence of the model; null when every one is held. A batch member takes the lowest free id and a
// serial synthesis the highest, so a batch's ids stay in one run: llama.cpp decodes each run of consecutive ids
// apart (voxd_tts_generator::step).
std::shared_ptr<voxd_tts_ggml_request> voxd_tts_ggml_model::start_request(voxd_tts_gen_request request, bool batch) {
    if (!request.reference.empty() && request.reference.size() < (size_t) (k_min_reference_seconds * sample_rate)) {
        throw voxd_error("invalid_argument", "the reference clip is shorter than " + std::to_string(k_min_reference_seconds).substr(0, 3) + " s");
    }
    llama_seq_id seq_id;
    {
        std::lock_guard<std::mutex> lock(pool_mutex);
        std::vector<llama_seq_id> & ids = free_seq_ids;
        if (ids.empty()) {
            throw voxd_error("batch_full", "every sequence of the TTS model is taken");
        }
        const auto it = batch ? std::min_element(ids.begin(), ids.end()) : std::max_element(ids.begin(), ids.end());
        seq_id        = *it;
        ids.erase(it);
    }
    return std::make_shared<voxd_tts_ggml_request>(shared_from_this(), std::move(request), seq_id);
}

// One step of `seqs` on the model's executor thread. A failure of the shared decode ends every request of the step
// with it; each error gets the last line libmtmd logged, which only that thread knows.
void voxd_tts_ggml_model::step(const std::vector<voxd_tts_sequence *> & seqs) {
    voxd_tts_ggml_model & d = *this;
    d.executor.run([&] {
        // held for the whole step, the work between its graphs (sampling, reading outputs) included: a thread of this
        // step running beside another model's team would slow that team down as much as a team of its own
        const voxd_cpu_gate::lease cores(d.cpu_threads);
        t_last_error.clear();
        std::vector<voxd_tts_sequence *> running;
        for (voxd_tts_sequence * seq : seqs) {
            if (!seq->finished) {
                running.push_back(seq);
            }
        }
        try {
            d.gen->step(running);
        } catch (const std::exception & e) {
            const voxd_error * coded = dynamic_cast<const voxd_error *>(&e);
            for (voxd_tts_sequence * seq : running) {
                if (!seq->finished) {
                    seq->error_code = coded ? coded->code : "synthesis_failed";
                    seq->error      = e.what();
                    seq->finished   = true;
                }
            }
        }
        for (voxd_tts_sequence * seq : running) {
            if (!seq->error_code.empty()) {
                seq->error += last_error_suffix();
            }
        }
    });
}

void voxd_tts_ggml_model::synthesize(voxd_tts_ggml_request & request, voxd_pcm_sink & sink, const voxd_abort_ptr & abort) {
    voxd_tts_sequence & seq = request.seq;
    gen->plan(seq);
    const std::vector<voxd_tts_sequence *> one{ &seq };
    while (!seq.finished) {
        voxd_check_abort(abort);
        step(one);
        if (!seq.error_code.empty()) {
            throw voxd_error(seq.error_code, seq.error);
        }
        if (!seq.audio.empty()) {
            sink.append(seq.audio.data(), seq.audio.size());
            seq.audio.clear();
            sink.ready(1); // a decoder window at a time
        }
    }
}

uint32_t voxd_tts_ggml_model::random_seed() {
    static std::mutex mutex;
    static std::mt19937 rng{ std::random_device{}() };
    std::lock_guard<std::mutex> lock(mutex);
    uint32_t s;
    do {
        s = (uint32_t) rng();
    } while (s == UINT32_MAX); // the seeds a request may name stop below it
    return s;
}

voxd_tts_ggml_request::voxd_tts_ggml_request(std::shared_ptr<voxd_tts_ggml_model> data_, voxd_tts_gen_request request, llama_seq_id seq_id)
    : data(std::move(data_)), seq(std::move(request)) {
    seq.seq_id = seq_id;
}

voxd_tts_ggml_request::~voxd_tts_ggml_request() {
    std::lock_guard<std::mutex> lock(data->pool_mutex);
    data->free_seq_ids.push_back(seq.seq_id); // the next holder clears its KV cells first
}

void voxd_tts_ggml_model::model_deleter::operator()(llama_model * model) const {
    llama_model_free(model);
}
void voxd_tts_ggml_model::context_deleter::operator()(llama_context * ctx) const {
    llama_free(ctx);
}
void voxd_tts_ggml_model::mtmd_deleter::operator()(mtmd_context * ctx) const {
    mtmd_free(ctx);
}
