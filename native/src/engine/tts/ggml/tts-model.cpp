#include "tts/ggml/tts-model.h"
#include "common/cpu-gate.h"
#include "common/ggml-graph.h"
#include "common/file-size.h"

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

} // namespace

std::shared_ptr<voxd_tts_ggml_model> voxd_tts_ggml_model::load(const voxd_tts_ggml_load_options & opt) {
    voxd_llama_backend_init();
    voxd_llama_clear_last_error();

    if (opt.mmproj.empty()) {
        throw voxd_error("model_load_failed", "no mmproj given: a GGML TTS model is a backbone GGUF plus its mmproj GGUF");
    }
    const std::string arch = voxd_gguf_string(opt.model, "general.architecture", "model");
    const auto supported   = std::find_if(std::begin(k_supported), std::end(k_supported), [&](const supported_arch & s) { return arch == s.arch; });
    if (supported == std::end(k_supported)) {
        throw voxd_error("model_load_failed", "model " + opt.model + " has architecture '" + arch +
                                                  "', which the GGML TTS engine does not support (it supports pockettts and qwen3tts)");
    }
    const std::string mm_arch = voxd_gguf_string(opt.mmproj, "general.architecture", "mmproj");
    if (mm_arch != "clip") {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " has architecture '" + mm_arch + "', not clip: it is not an mmproj");
    }

    const int threads = opt.threads > 0 ? opt.threads : voxd_default_threads();
    if (opt.sequences < 1 || opt.sequences > max_sequences) {
        throw voxd_error("invalid_argument", "a GGML TTS model holds from 1 to " + std::to_string(max_sequences) + " sequences");
    }
    auto data  = std::make_shared<voxd_tts_ggml_model>();
    data->arch = arch;

    data->model = voxd_llama_load_model(opt.model, llama_model_default_params(), "backbone");
    // every backbone row computed by the same CPU kernels alone or in any batch (docs/architecture.md); the
    // generator reads the backbone's hidden state
    data->lctx = voxd_llama_batch_context(data->model.get(), { supported->n_ctx_seq, opt.sequences, k_n_batch, threads, true }, opt.model);

    mtmd_context_params mm = mtmd_context_params_default();
    mm.n_threads           = threads;
    mm.print_timings       = false;
    data->mctx.reset(mtmd_init_from_file(opt.mmproj.c_str(), data->model.get(), mm));
    if (!data->mctx) {
        throw voxd_error("model_load_failed", "libmtmd could not load the mmproj " + opt.mmproj + voxd_llama_last_error());
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
        voxd_llama_clear_last_error();
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
                seq->error += voxd_llama_last_error();
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
