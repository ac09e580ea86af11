#include "voxd-tts-ggml.h"
#include "voxd-pcm-stream.h"

#include "gguf.h"
#include "llama.h"
#include "mtmd-helper.h"
#include "mtmd.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

namespace {

// Architectures of backbones this engine drives, and the generator type each needs in its mmproj.
constexpr const char * k_arch_pockettts = "pockettts";

// Prompt rows decoded per llama_decode (the helper's step_prompt) and the context of the one sequence: a reference
// clip (at most 30 s, mtmd truncates it: 375 rows at 12.5 Hz), a text chunk (at most 50 tokens) and its frames
// (at most ceil((50 / 3 + 2) * 12.5) = 234) fit in 2048 with room to spare.
constexpr int k_n_batch = 512;
constexpr int k_n_ctx   = 2048;

// Decoded audio is collected (and streamed to JS) every this many frames: the helper decodes latents in windows
// of 8 frames, and reading its output flushes a partial window, so collecting on the same boundary keeps the
// decoder's windows as llama-tts has them for single-chunk text.
constexpr int k_collect_frames = 8;

// ---- logging: libmtmd's lines go to the addon's callback; the last error line of this thread is kept ----

ggml_log_callback  g_forward_log = nullptr;
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
    if (g_forward_log) {
        g_forward_log(level, text, user_data);
    }
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
    std::call_once(once, [] { llama_backend_init(); });
}

struct gguf_deleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};

// general.architecture of a GGUF file, read from its header only. Throws model_load_failed when the file is not
// a readable GGUF.
std::string gguf_architecture(const std::string & path, const char * what) {
    gguf_init_params params{ /*no_alloc =*/ true, /*ctx =*/ nullptr };
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

struct load_options {
    std::string model;
    std::string mmproj;
    int         threads = 0;
};

std::shared_ptr<voxd_tts_ggml_data> load_model(const load_options & opt) {
    backend_init_once();
    t_last_error.clear();

    if (opt.mmproj.empty()) {
        throw voxd_error("model_load_failed", "no mmproj given: a GGML TTS model is a backbone GGUF plus its mmproj GGUF");
    }
    const std::string arch = gguf_architecture(opt.model, "model");
    if (arch != k_arch_pockettts) {
        throw voxd_error("model_load_failed", "model " + opt.model + " has architecture '" + arch +
                                                  "', which the GGML TTS engine does not support (it supports pockettts)");
    }
    const std::string mm_arch = gguf_architecture(opt.mmproj, "mmproj");
    if (mm_arch != "clip") {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " has architecture '" + mm_arch + "', not clip: it is not an mmproj");
    }

    const int threads = opt.threads > 0 ? opt.threads : (int) std::min(8u, std::max(1u, std::thread::hardware_concurrency()));
    auto data = std::make_shared<voxd_tts_ggml_data>();
    data->arch = arch;

    llama_model_params mparams = llama_model_default_params();
    data->model.reset(llama_model_load_from_file(opt.model.c_str(), mparams));
    if (!data->model) {
        throw voxd_error("model_load_failed", "llama.cpp could not load the backbone " + opt.model + last_error_suffix());
    }
    data->n_embd = llama_model_n_embd(data->model.get());

    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx           = k_n_ctx;
    cparams.n_batch         = k_n_batch;
    cparams.n_ubatch        = k_n_batch;
    cparams.n_seq_max       = 1;
    cparams.n_threads       = threads;
    cparams.n_threads_batch = threads;
    cparams.embeddings      = true; // the generator reads the backbone's hidden state
    cparams.no_perf         = true;
    data->lctx.reset(llama_init_from_model(data->model.get(), cparams));
    if (!data->lctx) {
        throw voxd_error("model_load_failed", "llama.cpp could not create a context for " + opt.model + last_error_suffix());
    }
    data->n_batch = k_n_batch;

    mtmd_context_params mm = mtmd_context_params_default();
    mm.n_threads     = threads;
    mm.print_timings = false;
    data->mctx.reset(mtmd_init_from_file(opt.mmproj.c_str(), data->model.get(), mm));
    if (!data->mctx) {
        throw voxd_error("model_load_failed", "libmtmd could not load the mmproj " + opt.mmproj + last_error_suffix());
    }
    const mtmd_gen_audio_info info = mtmd_gen_audio_get_info(data->mctx.get());
    if (info.type == MTMD_GEN_AUDIO_TYPE_NONE) {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " has no audio generator (it is not a TTS mmproj)");
    }
    if (info.type != MTMD_GEN_AUDIO_TYPE_POCKETTTS) {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " holds another TTS model's generator than the pockettts backbone needs");
    }
    if (info.sample_rate <= 0) {
        throw voxd_error("model_load_failed", "mmproj " + opt.mmproj + " declares no output sample rate");
    }
    data->sample_rate = info.sample_rate;
    data->variant     = info.model_variant ? info.model_variant : "";

    data->gen.reset(mtmd_helper_gen_audio_init(data->lctx.get(), data->mctx.get()));
    if (!data->gen) {
        throw voxd_error("model_load_failed", "libmtmd could not create the audio generation helper");
    }
    return data;
}

// ---- one synthesis ----

struct synthesis_params {
    std::string        text;
    std::vector<float> reference; // mono at the model's rate; empty = no reference
    bool               has_reference = false;
    uint32_t           seed          = 0;
    int                max_frames    = 0; // 0 = the model's own limit
};

// Runs on a worker; audio is appended as frames are decoded and streamed to JS (see voxd-pcm-stream.h).
class voxd_tts_ggml_job : public voxd_pcm_stream_job {
public:
    voxd_tts_ggml_job(std::shared_ptr<voxd_tts_ggml_data> data, synthesis_params params, voxd_abort_ptr abort)
        : m_data(std::move(data)), m_params(std::move(params)), m_abort(std::move(abort)) {}

private:
    // Clears the sequence's KV cells whatever way the synthesis ends.
    struct kv_clear {
        llama_context * lctx; // borrowed
        ~kv_clear() { llama_memory_clear(llama_get_memory(lctx), true); }
    };

    void run() override {
        std::lock_guard<std::mutex> lock(m_data->mutex); // one synthesis at a time on the model's context
        voxd_tts_ggml_data & d = *m_data;
        t_last_error.clear();
        voxd_check_abort(m_abort);
        llama_memory_clear(llama_get_memory(d.lctx.get()), true);
        kv_clear clear_after{ d.lctx.get() };

        force_reseed();

        mtmd::bitmap_ptr speaker; // owns the reference clip's bitmap until the end of the synthesis
        if (m_params.has_reference) {
            speaker.reset(mtmd_bitmap_init_from_audio(m_params.reference.size(), m_params.reference.data()));
            if (!speaker) {
                throw voxd_error("synthesis_failed", "libmtmd could not take the reference clip" + last_error_suffix());
            }
        }

        mtmd_helper_gen_audio_inp inp{};
        inp.seq_id      = 0;
        inp.prompt      = m_params.text.c_str();
        inp.prompt_len  = m_params.text.size();
        inp.speaker_ref = speaker.get();
        inp.lang        = nullptr;
        inp.top_k       = 0; // the generator's defaults
        inp.top_p       = 0.0f;
        inp.seed        = m_params.seed;
        inp.out_type    = MTMD_HELPER_GEN_AUDIO_OUTTYPE_PCM;
        if (mtmd_helper_gen_audio_set_input(d.gen.get(), &inp) != 0) {
            const std::string why = last_error_suffix();
            if (why.find("empty prompt") != std::string::npos) {
                throw voxd_error("invalid_argument", "the text has nothing to speak");
            }
            throw voxd_error("synthesis_failed", "the audio generation helper refused the input" + why);
        }

        for (;;) {
            voxd_check_abort(m_abort);
            const int32_t left = mtmd_helper_gen_audio_step_prompt(d.gen.get(), d.n_batch);
            if (left < 0) {
                throw voxd_error("synthesis_failed", "the backbone failed on the prompt" + last_error_suffix());
            }
            if (left == 0) {
                break;
            }
        }

        const float * h_state = llama_get_embeddings_ith(d.lctx.get(), -1); // owned by lctx, valid until the next decode
        if (!h_state) {
            throw voxd_error("synthesis_failed", "the backbone gave no hidden state (is it a TTS backbone?)");
        }
        int  frames = 0;
        bool stop   = false;
        while (!stop && (m_params.max_frames <= 0 || frames < m_params.max_frames)) {
            voxd_check_abort(m_abort);
            const float * h_next = nullptr; // owned by the helper, valid until its next step
            if (mtmd_helper_gen_audio_step_gen(d.gen.get(), LLAMA_TOKEN_NULL, h_state, &h_next, &stop) != 0) {
                throw voxd_error("synthesis_failed", "frame " + std::to_string(frames) + " failed" + last_error_suffix());
            }
            if (!h_next) {
                break;
            }
            h_state = h_next;
            frames++;
            if (frames % k_collect_frames == 0) {
                collect();
            }
        }
        collect();
    }

    // clip reseeds its sampler only when the seed differs from the last one it saw, so a request repeating the
    // previous request's seed would continue that request's random stream. One generator step with another seed
    // (its output is discarded) makes the synthesis's first step reseed.
    void force_reseed() {
        voxd_tts_ggml_data & d = *m_data;
        std::vector<float> zeros((size_t) d.n_embd, 0.0f);
        mtmd_gen_inp inp = mtmd_gen_inp_default(d.mctx.get());
        inp.type = MTMD_GEN_PROCESS_TYPE_GEN_CODE;
        inp.embd = zeros.data();
        inp.seed = m_params.seed ^ 1u;
        mtmd_gen_out out{};
        if (mtmd_gen_audio_process(d.mctx.get(), &inp, &out) != 0) {
            throw voxd_error("synthesis_failed", "the generator failed" + last_error_suffix());
        }
    }

    // Appends the audio decoded since the last call (the helper's output is all of it so far, in its own buffer).
    void collect() {
        int32_t      rate = 0;
        const char * data = nullptr; // owned by the helper, valid until its next get_output or reset
        size_t       len  = 0;
        int64_t      n    = 0;
        if (mtmd_helper_gen_audio_get_output(m_data->gen.get(), &rate, &data, &len, &n) != 0) {
            throw voxd_error("synthesis_failed", "the decoder failed" + last_error_suffix());
        }
        const size_t total = len / sizeof(float);
        const float * pcm  = reinterpret_cast<const float *>(data);
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            if (total <= m_samples.size()) {
                return;
            }
            for (size_t i = m_samples.size(); i < total; i++) {
                const float v = pcm[i];
                m_samples.push_back(std::isfinite(v) ? v : 0.0f);
            }
        }
        make_ready(1);
    }

    std::shared_ptr<voxd_tts_ggml_data> m_data; // keeps the model alive while this runs
    synthesis_params                    m_params;
    voxd_abort_ptr                      m_abort;
};

uint32_t random_seed() {
    static std::mutex mutex;
    static std::mt19937 rng{ std::random_device{}() };
    std::lock_guard<std::mutex> lock(mutex);
    uint32_t s;
    do {
        s = (uint32_t) rng();
    } while (s == UINT32_MAX); // UINT32_MAX means "random" to clip, which it would not reseed from
    return s;
}

} // namespace

void voxd_tts_ggml_data::model_deleter::operator()(llama_model * model) const { llama_model_free(model); }
void voxd_tts_ggml_data::context_deleter::operator()(llama_context * ctx) const { llama_free(ctx); }
void voxd_tts_ggml_data::mtmd_deleter::operator()(mtmd_context * ctx) const { mtmd_free(ctx); }
void voxd_tts_ggml_data::gen_deleter::operator()(mtmd_helper_gen_audio * gen) const { mtmd_helper_gen_audio_free(gen); }

Napi::Function voxd_tts_ggml_model::define(Napi::Env env) {
    return DefineClass(env, "TtsGgmlModel", {
        StaticMethod<&voxd_tts_ggml_model::load>("load"),
        InstanceMethod<&voxd_tts_ggml_model::info>("info"),
        InstanceMethod<&voxd_tts_ggml_model::synthesize>("synthesize"),
        InstanceMethod<&voxd_tts_ggml_model::release>("release"),
    });
}

voxd_tts_ggml_model::voxd_tts_ggml_model(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_tts_ggml_model>(info) {}

std::shared_ptr<voxd_tts_ggml_data> voxd_tts_ggml_model::loaded(Napi::Env env) const {
    if (!m_data) {
        throw voxd_make_js_error(env, "closed", "the TTS model was released");
    }
    return m_data;
}

Napi::Value voxd_tts_ggml_model::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "TtsGgmlModel.load(options): options must be an object");
    }
    Napi::Object o = info[0].As<Napi::Object>();
    load_options opt;
    if (!o.Get("model").IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "TtsGgmlModel.load(options): options.model must be a path");
    }
    opt.model = o.Get("model").As<Napi::String>().Utf8Value();
    Napi::Value mmproj = o.Get("mmproj");
    if (mmproj.IsString()) {
        opt.mmproj = mmproj.As<Napi::String>().Utf8Value();
    } else if (!mmproj.IsUndefined() && !mmproj.IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "TtsGgmlModel.load(options): options.mmproj must be a path");
    }
    Napi::Value threads = o.Get("threads");
    if (threads.IsNumber()) {
        opt.threads = std::max(0, threads.As<Napi::Number>().Int32Value());
    }
    using loaded_t = std::shared_ptr<voxd_tts_ggml_data>;
    return voxd_async_worker<loaded_t>::run(env, "voxd.tts_ggml.load",
        [opt]() { return load_model(opt); },
        [](Napi::Env env, loaded_t & data) -> Napi::Value {
            Napi::Object obj = voxd_class(env, "TtsGgmlModel").New({});
            Unwrap(obj)->m_data = data;
            return obj;
        });
}

Napi::Value voxd_tts_ggml_model::info(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    auto data = loaded(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("arch", data->arch);
    out.Set("sampleRate", data->sample_rate);
    out.Set("variant", data->variant);
    return out;
}

Napi::Value voxd_tts_ggml_model::synthesize(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    auto data = loaded(env);
    if (!info[0].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "synthesize(request): request must be an object");
    }
    Napi::Object req = info[0].As<Napi::Object>();
    synthesis_params params;
    if (!req.Get("text").IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "synthesize(request): request.text must be a string");
    }
    params.text = req.Get("text").As<Napi::String>().Utf8Value();
    std::replace(params.text.begin(), params.text.end(), '\0', ' ');
    Napi::Value ref = req.Get("reference");
    if (!ref.IsUndefined() && !ref.IsNull()) {
        params.reference = voxd_copy_samples(ref, "request.reference");
        if (params.reference.empty()) {
            throw voxd_make_js_error(env, "invalid_argument", "synthesize(request): request.reference is empty");
        }
        params.has_reference = true;
    }
    Napi::Value seed = req.Get("seed");
    if (!seed.IsUndefined() && !seed.IsNull()) {
        const double s = seed.IsNumber() ? seed.As<Napi::Number>().DoubleValue() : -1.0;
        if (!(s >= 0 && s < 4294967295.0) || std::floor(s) != s) {
            throw voxd_make_js_error(env, "invalid_argument", "synthesize(request): request.seed must be an integer from 0 to 4294967294");
        }
        params.seed = (uint32_t) s;
    } else {
        params.seed = random_seed();
    }
    Napi::Value max_frames = req.Get("maxFrames");
    if (!max_frames.IsUndefined() && !max_frames.IsNull()) {
        const double m = max_frames.IsNumber() ? max_frames.As<Napi::Number>().DoubleValue() : -1.0;
        if (!(m >= 1 && m <= 1e6) || std::floor(m) != m) {
            throw voxd_make_js_error(env, "invalid_argument", "synthesize(request): request.maxFrames must be a positive integer");
        }
        params.max_frames = (int) m;
    }
    if (!info[1].IsUndefined() && !info[1].IsNull() && !info[1].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "onAudio must be a function");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[2]);

    auto job = std::make_shared<voxd_tts_ggml_job>(data, std::move(params), abort);
    return voxd_pcm_stream_job::start(env, job, info[1], "voxd.tts_ggml.synthesize", "voxd.tts_ggml.audio");
}

Napi::Value voxd_tts_ggml_model::release(const Napi::CallbackInfo & info) {
    m_data.reset(); // syntheses in flight keep their own reference and finish first
    return info.Env().Undefined();
}

void voxd_tts_ggml_init(Napi::Env env, Napi::Object exports, ggml_log_callback log) {
    g_forward_log = log;
    mtmd_helper_log_set(voxd_tts_ggml_log, nullptr); // also libmtmd's own (clip) lines
    voxd_export_class(env, exports, "TtsGgmlModel", voxd_tts_ggml_model::define(env));
}
