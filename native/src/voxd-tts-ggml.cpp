#include "voxd-tts-ggml.h"
#include "voxd-cpu-gate.h"
#include "voxd-ggml-graph.h"
#include "voxd-pcm-stream.h"

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

// Sequences a model's context may hold (llama.cpp allows 256; each costs its KV cells).
constexpr int k_max_sequences = 64;

// ---- logging: libmtmd's lines go to the addon's callback; the last error line of this thread is kept ----

ggml_log_callback g_forward_log = nullptr;
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

struct load_options {
    std::string model;
    std::string mmproj;
    int threads   = 0;
    int sequences = 1;     // requests the context holds at once
    bool libmtmd  = false; // Pocket TTS: libmtmd's one-request generator and decoder (voxd_tts_generator_options)
};

std::shared_ptr<voxd_tts_ggml_data> load_model(const load_options & opt) {
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
    auto data         = std::make_shared<voxd_tts_ggml_data>();
    data->arch        = arch;

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
    return data;
}

// ---- requests ----

// Takes a free sequence of the model; null when every one is held. A batch member takes the lowest free id and a
// serial synthesis the highest, so a batch's ids stay in one run: llama.cpp decodes each run of consecutive ids
// apart (voxd_tts_generator::step).
std::shared_ptr<voxd_tts_ggml_request> start_request(const std::shared_ptr<voxd_tts_ggml_data> & data, voxd_tts_gen_request request, bool batch) {
    llama_seq_id seq_id;
    {
        std::lock_guard<std::mutex> lock(data->pool_mutex);
        std::vector<llama_seq_id> & ids = data->free_seq_ids;
        if (ids.empty()) {
            return nullptr;
        }
        const auto it = batch ? std::min_element(ids.begin(), ids.end()) : std::max_element(ids.begin(), ids.end());
        seq_id        = *it;
        ids.erase(it);
    }
    return std::make_shared<voxd_tts_ggml_request>(data, std::move(request), seq_id);
}

// One step of `seqs` on the model's executor thread. A failure of the shared decode ends every request of the step
// with it; each error gets the last line libmtmd logged, which only that thread knows.
void step_on_executor(voxd_tts_ggml_data & d, const std::vector<voxd_tts_sequence *> & seqs) {
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

// One request alone, stepped on a worker; audio is streamed to JS per decoder window (see voxd-pcm-stream.h).
class voxd_tts_ggml_job : public voxd_pcm_stream_job {
public:
    voxd_tts_ggml_job(std::shared_ptr<voxd_tts_ggml_request> request, voxd_abort_ptr abort) : m_request(std::move(request)), m_abort(std::move(abort)) {}

private:
    void run() override {
        // the sequence goes back to the pool when the synthesis ends, not when the last queued audio delivery
        // lets go of this job: the next request may need it at once
        struct release_request {
            std::shared_ptr<voxd_tts_ggml_request> & request;
            ~release_request() { request.reset(); }
        } release{ m_request };
        voxd_tts_ggml_data & d  = *m_request->data;
        voxd_tts_sequence & seq = m_request->seq;
        d.gen->plan(seq);
        const std::vector<voxd_tts_sequence *> step{ &seq };
        while (!seq.finished) {
            voxd_check_abort(m_abort);
            step_on_executor(d, step);
            if (!seq.error_code.empty()) {
                throw voxd_error(seq.error_code, seq.error);
            }
            if (!seq.audio.empty()) {
                {
                    std::lock_guard<std::mutex> lock(m_mutex);
                    m_samples.insert(m_samples.end(), seq.audio.begin(), seq.audio.end());
                }
                seq.audio.clear();
                make_ready(1);
            }
        }
    }

    std::shared_ptr<voxd_tts_ggml_request> m_request; // keeps the model and the sequence until run() ends
    voxd_abort_ptr m_abort;
};

// The seed of a request that names none.
uint32_t random_seed() {
    static std::mutex mutex;
    static std::mt19937 rng{ std::random_device{}() };
    std::lock_guard<std::mutex> lock(mutex);
    uint32_t s;
    do {
        s = (uint32_t) rng();
    } while (s == UINT32_MAX); // the seeds a request may name stop below it
    return s;
}

// A request object from JS: `{ text, reference?, language?, seed?, temperature?, maxFrames? }`.
voxd_tts_gen_request parse_request(Napi::Env env, const Napi::Value & value) {
    if (!value.IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "request must be an object");
    }
    Napi::Object req = value.As<Napi::Object>();
    voxd_tts_gen_request out;
    if (!req.Get("text").IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "request.text must be a string");
    }
    out.text = req.Get("text").As<Napi::String>().Utf8Value();
    std::replace(out.text.begin(), out.text.end(), '\0', ' ');
    Napi::Value ref = req.Get("reference");
    if (!ref.IsUndefined() && !ref.IsNull()) {
        out.reference = voxd_copy_samples(ref, "request.reference");
        if (out.reference.empty()) {
            throw voxd_make_js_error(env, "invalid_argument", "request.reference is empty");
        }
    }
    Napi::Value language = req.Get("language");
    if (language.IsString()) {
        out.language = language.As<Napi::String>().Utf8Value();
    } else if (!language.IsUndefined() && !language.IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "request.language must be a string");
    }
    // a number field, or nothing when absent; a present non-number reads as -1, which every range below refuses
    const auto number = [&](const char * key) -> std::optional<double> {
        Napi::Value v = req.Get(key);
        if (v.IsUndefined() || v.IsNull()) {
            return std::nullopt;
        }
        return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : -1.0;
    };
    const auto is_integer = [](double v) { return std::floor(v) == v; };
    if (const auto seed = number("seed")) {
        if (!(*seed >= 0 && *seed < 4294967295.0) || !is_integer(*seed)) {
            throw voxd_make_js_error(env, "invalid_argument", "request.seed must be an integer from 0 to 4294967294");
        }
        out.seed = (uint32_t) *seed;
    } else {
        out.seed = random_seed();
    }
    if (const auto temperature = number("temperature")) {
        if (!(*temperature >= 0 && *temperature <= 2)) {
            throw voxd_make_js_error(env, "invalid_argument", "request.temperature must be a number from 0 to 2");
        }
        out.temperature = (float) *temperature;
    }
    if (const auto max_frames = number("maxFrames")) {
        if (!(*max_frames >= 1 && *max_frames <= 1e6) || !is_integer(*max_frames)) {
            throw voxd_make_js_error(env, "invalid_argument", "request.maxFrames must be a positive integer");
        }
        out.max_frames = (int) *max_frames;
    }
    return out;
}

// A request of `data` from JS, holding one of its sequences (`batch`: for a batch session); throws `batch_full` when
// none is free.
std::shared_ptr<voxd_tts_ggml_request> request_from_js(Napi::Env env, const std::shared_ptr<voxd_tts_ggml_data> & data, const Napi::Value & value, bool batch) {
    voxd_tts_gen_request parsed = parse_request(env, value);
    if (!parsed.reference.empty() && parsed.reference.size() < (size_t) (k_min_reference_seconds * data->sample_rate)) {
        throw voxd_make_js_error(env, "invalid_argument", "request.reference is shorter than " + std::to_string(k_min_reference_seconds).substr(0, 3) + " s");
    }
    auto request = start_request(data, std::move(parsed), batch);
    if (!request) {
        throw voxd_make_js_error(env, "batch_full", "every sequence of the TTS model is taken");
    }
    return request;
}

} // namespace

voxd_tts_ggml_request::voxd_tts_ggml_request(std::shared_ptr<voxd_tts_ggml_data> data_, voxd_tts_gen_request request, llama_seq_id seq_id)
    : data(std::move(data_)), seq(std::move(request)) {
    seq.seq_id = seq_id;
}

voxd_tts_ggml_request::~voxd_tts_ggml_request() {
    std::lock_guard<std::mutex> lock(data->pool_mutex);
    data->free_seq_ids.push_back(seq.seq_id); // the next holder clears its KV cells first
}

void voxd_tts_ggml_data::model_deleter::operator()(llama_model * model) const {
    llama_model_free(model);
}
void voxd_tts_ggml_data::context_deleter::operator()(llama_context * ctx) const {
    llama_free(ctx);
}
void voxd_tts_ggml_data::mtmd_deleter::operator()(mtmd_context * ctx) const {
    mtmd_free(ctx);
}

Napi::Function voxd_tts_ggml_model::define(Napi::Env env) {
    return DefineClass(env, "TtsGgmlModel",
                       {
                           StaticMethod<&voxd_tts_ggml_model::load>("load"),
                           InstanceMethod<&voxd_tts_ggml_model::info>("info"),
                           InstanceMethod<&voxd_tts_ggml_model::synthesize>("synthesize"),
                           InstanceMethod<&voxd_tts_ggml_model::create_batch>("createBatch"),
                           InstanceMethod<&voxd_tts_ggml_model::timings>("timings"),
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
    opt.model          = o.Get("model").As<Napi::String>().Utf8Value();
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
    Napi::Value sequences = o.Get("sequences");
    if (sequences.IsNumber()) {
        opt.sequences = sequences.As<Napi::Number>().Int32Value();
        if (opt.sequences < 1 || opt.sequences > k_max_sequences) {
            throw voxd_make_js_error(env, "invalid_argument",
                                     "TtsGgmlModel.load(options): options.sequences must be from 1 to " + std::to_string(k_max_sequences));
        }
    }
    Napi::Value generator   = o.Get("generator");
    const std::string named = generator.IsString() ? generator.As<Napi::String>().Utf8Value() : "";
    if (!generator.IsUndefined() && named != "batched" && named != "libmtmd") {
        throw voxd_make_js_error(env, "invalid_argument", "TtsGgmlModel.load(options): options.generator must be 'batched' or 'libmtmd'");
    }
    opt.libmtmd    = named == "libmtmd";
    using loaded_t = std::shared_ptr<voxd_tts_ggml_data>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.tts_ggml.load", [opt]() { return load_model(opt); },
        [opt](Napi::Env env, loaded_t & data) -> Napi::Value {
            Napi::Object obj    = voxd_class(env, "TtsGgmlModel").New({});
            Unwrap(obj)->m_data = data;
            Unwrap(obj)->m_memory.set(env, (int64_t) (llama_model_size(data->model.get()) + data->gen->own_weight_bytes()) + voxd_file_bytes(opt.mmproj));
            // the executor's thread ends with the environment at the latest; aliasing: a weak reference to `data`
            voxd_track_executor(env, std::shared_ptr<voxd_executor>(data, &data->executor));
            return obj;
        });
}

Napi::Value voxd_tts_ggml_model::info(const Napi::CallbackInfo & info) {
    Napi::Env env    = info.Env();
    auto data        = loaded(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("arch", data->arch);
    out.Set("sampleRate", data->sample_rate);
    out.Set("variant", data->variant);
    out.Set("sequences", (double) llama_n_seq_max(data->lctx.get()));
    return out;
}

Napi::Value voxd_tts_ggml_model::synthesize(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    auto request  = request_from_js(env, loaded(env), info[0], false);
    if (!info[1].IsUndefined() && !info[1].IsNull() && !info[1].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "onAudio must be a function");
    }
    auto job = std::make_shared<voxd_tts_ggml_job>(std::move(request), voxd_abort_flag::from_value(info[2]));
    return voxd_pcm_stream_job::start(env, job, info[1], "voxd.tts_ggml.synthesize", "voxd.tts_ggml.audio");
}

Napi::Value voxd_tts_ggml_model::timings(const Napi::CallbackInfo & info) {
    Napi::Env env              = info.Env();
    const voxd_tts_timings & t = loaded(env)->gen->timings();
    Napi::Object out           = Napi::Object::New(env);
    const auto ms              = [](const std::atomic<uint64_t> & us) { return (double) us.load() / 1000.0; };
    out.Set("frames", (double) t.frames.load());
    out.Set("backboneMs", ms(t.backbone_us));
    out.Set("backboneRows", (double) t.backbone_rows.load());
    out.Set("backboneCalls", (double) t.backbone_calls.load());
    out.Set("promptMs", ms(t.prompt_us));
    out.Set("encoderMs", ms(t.encoder_us));
    out.Set("generatorMs", ms(t.generator_us));
    out.Set("generatorRows", (double) t.generator_rows.load());
    out.Set("generatorCalls", (double) t.generator_calls.load());
    out.Set("decoderMs", ms(t.decoder_us));
    out.Set("decoderWindows", (double) t.decoder_windows.load());
    out.Set("decoderCalls", (double) t.decoder_calls.load());
    return out;
}

Napi::Value voxd_tts_ggml_model::create_batch(const Napi::CallbackInfo & info) {
    Napi::Env env                            = info.Env();
    auto data                                = loaded(env);
    Napi::Object obj                         = voxd_class(env, "TtsGgmlBatch").New({});
    voxd_tts_ggml_batch::Unwrap(obj)->m_data = data;
    return obj;
}

Napi::Value voxd_tts_ggml_model::release(const Napi::CallbackInfo & info) {
    m_data.reset(); // syntheses in flight keep their own reference and finish first
    m_memory.reset();
    return info.Env().Undefined();
}

// ---- batch sessions ----

Napi::Function voxd_tts_ggml_batch::define(Napi::Env env) {
    return DefineClass(env, "TtsGgmlBatch",
                       {
                           InstanceMethod<&voxd_tts_ggml_batch::add>("add"),
                           InstanceMethod<&voxd_tts_ggml_batch::cancel>("cancel"),
                           InstanceMethod<&voxd_tts_ggml_batch::step>("step"),
                           InstanceAccessor<&voxd_tts_ggml_batch::active>("active"),
                           InstanceMethod<&voxd_tts_ggml_batch::close>("close"),
                       });
}

voxd_tts_ggml_batch::voxd_tts_ggml_batch(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_tts_ggml_batch>(info) {}

Napi::Value voxd_tts_ggml_batch::add(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!m_data) {
        throw voxd_make_js_error(env, "closed", "the batch session was closed");
    }
    auto request = request_from_js(env, m_data, info[0], true);
    try {
        m_data->gen->plan(request->seq); // reads the vocabulary only: safe beside a running step
    } catch (const voxd_error & e) {
        throw voxd_make_js_error(env, e.code, e.what());
    }
    const int slot = m_next_slot++;
    m_requests.emplace(slot, std::move(request));
    return Napi::Number::New(env, slot);
}

Napi::Value voxd_tts_ggml_batch::cancel(const Napi::CallbackInfo & info) {
    const auto it = info[0].IsNumber() ? m_requests.find(info[0].As<Napi::Number>().Int32Value()) : m_requests.end();
    if (it != m_requests.end()) {
        it->second->seq.cancelled.store(true); // a step in flight skips it from its next turn on
        m_requests.erase(it);
    }
    return info.Env().Undefined();
}

Napi::Value voxd_tts_ggml_batch::step(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!m_data) {
        throw voxd_make_js_error(env, "closed", "the batch session was closed");
    }
    if (m_stepping) {
        throw voxd_make_js_error(env, "busy", "step() was called before the previous step ended");
    }
    m_stepping      = true;
    using members_t = std::vector<std::pair<int, std::shared_ptr<voxd_tts_ggml_request>>>;
    members_t members(m_requests.begin(), m_requests.end()); // the step's own holds: a cancel cannot free them under it
    auto data         = m_data;
    Napi::Object self = Value();
    auto self_ref     = std::make_shared<Napi::ObjectReference>(Napi::Persistent(self)); // keeps this object until the step ends
    return voxd_async_worker<members_t>::run(
        env, "voxd.tts_ggml.step",
        [data, members]() {
            std::vector<voxd_tts_sequence *> seqs;
            for (const auto & m : members) {
                seqs.push_back(&m.second->seq);
            }
            step_on_executor(*data, seqs);
            return members;
        },
        [self_ref](Napi::Env env, members_t & members) -> Napi::Value {
            voxd_tts_ggml_batch * batch = Unwrap(self_ref->Value());
            batch->m_stepping           = false;
            Napi::Array finished        = Napi::Array::New(env);
            for (const auto & [slot, request] : members) {
                const voxd_tts_sequence & seq = request->seq;
                if (!seq.finished || batch->m_requests.erase(slot) == 0) {
                    continue; // still going, or cancelled meanwhile
                }
                Napi::Object item = Napi::Object::New(env);
                item.Set("slot", slot);
                if (seq.error_code.empty()) {
                    Napi::Float32Array samples = Napi::Float32Array::New(env, seq.audio.size());
                    std::copy(seq.audio.begin(), seq.audio.end(), samples.Data());
                    item.Set("samples", samples);
                } else {
                    item.Set("error", voxd_make_js_error(env, seq.error_code, seq.error).Value());
                }
                finished.Set(finished.Length(), item);
            }
            return finished;
        });
}

Napi::Value voxd_tts_ggml_batch::active(const Napi::CallbackInfo & info) {
    return Napi::Number::New(info.Env(), (double) m_requests.size());
}

Napi::Value voxd_tts_ggml_batch::close(const Napi::CallbackInfo & info) {
    for (auto & [slot, request] : m_requests) {
        request->seq.cancelled.store(true);
    }
    m_requests.clear();
    m_data.reset();
    return info.Env().Undefined();
}

void voxd_tts_ggml_init(Napi::Env env, Napi::Object exports, ggml_log_callback log) {
    g_forward_log = log;
    mtmd_log_set(voxd_tts_ggml_log, nullptr); // libmtmd's own (clip) lines
    voxd_export_class(env, exports, "TtsGgmlModel", voxd_tts_ggml_model::define(env));
    voxd_export_class(env, exports, "TtsGgmlBatch", voxd_tts_ggml_batch::define(env));
}
