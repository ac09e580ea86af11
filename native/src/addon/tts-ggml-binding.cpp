// TtsGgmlModel and TtsGgmlBatch: GGML TTS (tts/ggml/tts-model.h) as JS classes; serial syntheses stream on
// workers, batch sessions step all their requests at once.
#include "async.h"
#include "bindings.h"
#include "pcm-stream.h"

#include "tts/ggml/tts-model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

namespace {

// JS: `TtsGgmlModel.load({ model, mmproj, threads?, sequences?, generator? }) -> Promise<TtsGgmlModel>`; `model.info()` ->
// `{ arch, sampleRate, variant, sequences }`; `model.synthesize(request, onAudio?, abort?) -> Promise<Float32Array>`;
// `model.createBatch() -> TtsGgmlBatch`; `model.timings()` -> where generation time went; `model.release()`. A request is `{ text, reference?, language?, seed?, temperature?,
// maxFrames? }`.
class voxd_tts_ggml_model_js : public Napi::ObjectWrap<voxd_tts_ggml_model_js> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_tts_ggml_model_js(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value synthesize(const Napi::CallbackInfo & info);
    Napi::Value create_batch(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
    Napi::Value release(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_tts_ggml_model> loaded(Napi::Env env) const; // throws "closed" after release()

    std::shared_ptr<voxd_tts_ggml_model> m_data;
    voxd_external_memory m_memory; // the backbone and mmproj weights, reported to V8 while this object holds them
};

// JS: `batch.add(request) -> slot` (throws `invalid_argument`, or `batch_full` when the model has no free
// sequence); `batch.cancel(slot)`; `batch.step() -> Promise<[{ slot, samples } | { slot, error }]>` (one frame for
// every request, new ones prepared first; the finished ones with all their audio, or their own error);
// `batch.active`; `batch.close()`.
class voxd_tts_ggml_batch_js : public Napi::ObjectWrap<voxd_tts_ggml_batch_js> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_tts_ggml_batch_js(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_tts_ggml_model> m_data; // set by createBatch(); null after close()

private:
    Napi::Value add(const Napi::CallbackInfo & info);
    Napi::Value cancel(const Napi::CallbackInfo & info);
    Napi::Value step(const Napi::CallbackInfo & info);
    Napi::Value active(const Napi::CallbackInfo & info);
    Napi::Value close(const Napi::CallbackInfo & info);

    std::map<int, std::shared_ptr<voxd_tts_ggml_request>> m_requests; // by slot; the JS thread's only
    int m_next_slot = 0;
    bool m_stepping = false;
};

// A request object from JS: `{ text, reference?, voiceKey?, language?, seed?, temperature?, maxFrames? }`.
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
    Napi::Value voice_key = req.Get("voiceKey");
    if (voice_key.IsString()) {
        out.voice_key = voice_key.As<Napi::String>().Utf8Value();
    } else if (!voice_key.IsUndefined() && !voice_key.IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "request.voiceKey must be a string");
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
        out.seed = voxd_tts_ggml_model::random_seed();
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

// A request of `model` from JS, holding one of its sequences (`batch`: for a batch session).
std::shared_ptr<voxd_tts_ggml_request> request_from_js(Napi::Env env, voxd_tts_ggml_model & model, const Napi::Value & value, bool batch) {
    voxd_tts_gen_request parsed = parse_request(env, value);
    try {
        return model.start_request(std::move(parsed), batch);
    } catch (const voxd_error & e) {
        throw voxd_make_js_error(env, e.code, e.what());
    }
}

Napi::Function voxd_tts_ggml_model_js::define(Napi::Env env) {
    return DefineClass(env, "TtsGgmlModel",
                       {
                           StaticMethod<&voxd_tts_ggml_model_js::load>("load"),
                           InstanceMethod<&voxd_tts_ggml_model_js::info>("info"),
                           InstanceMethod<&voxd_tts_ggml_model_js::synthesize>("synthesize"),
                           InstanceMethod<&voxd_tts_ggml_model_js::create_batch>("createBatch"),
                           InstanceMethod<&voxd_tts_ggml_model_js::timings>("timings"),
                           InstanceMethod<&voxd_tts_ggml_model_js::release>("release"),
                       });
}

voxd_tts_ggml_model_js::voxd_tts_ggml_model_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_tts_ggml_model_js>(info) {}

std::shared_ptr<voxd_tts_ggml_model> voxd_tts_ggml_model_js::loaded(Napi::Env env) const {
    if (!m_data) {
        throw voxd_make_js_error(env, "closed", "the TTS model was released");
    }
    return m_data;
}

Napi::Value voxd_tts_ggml_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "TtsGgmlModel.load(options): options must be an object");
    }
    Napi::Object o = info[0].As<Napi::Object>();
    voxd_tts_ggml_load_options opt;
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
        if (opt.sequences < 1 || opt.sequences > voxd_tts_ggml_model::max_sequences) {
            throw voxd_make_js_error(env, "invalid_argument",
                                     "TtsGgmlModel.load(options): options.sequences must be from 1 to " + std::to_string(voxd_tts_ggml_model::max_sequences));
        }
    }
    Napi::Value generator   = o.Get("generator");
    const std::string named = generator.IsString() ? generator.As<Napi::String>().Utf8Value() : "";
    if (!generator.IsUndefined() && named != "batched" && named != "libmtmd") {
        throw voxd_make_js_error(env, "invalid_argument", "TtsGgmlModel.load(options): options.generator must be 'batched' or 'libmtmd'");
    }
    opt.libmtmd    = named == "libmtmd";
    using loaded_t = std::shared_ptr<voxd_tts_ggml_model>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.tts_ggml.load", [opt]() { return voxd_tts_ggml_model::load(opt); },
        [](Napi::Env env, loaded_t & data) -> Napi::Value {
            Napi::Object obj    = voxd_class(env, "TtsGgmlModel").New({});
            Unwrap(obj)->m_data = data;
            Unwrap(obj)->m_memory.set(env, data->weight_bytes);
            // the executor's thread ends with the environment at the latest; aliasing: a weak reference to `data`
            voxd_track_executor(env, std::shared_ptr<voxd_executor>(data, &data->executor));
            return obj;
        });
}

Napi::Value voxd_tts_ggml_model_js::info(const Napi::CallbackInfo & info) {
    Napi::Env env    = info.Env();
    auto data        = loaded(env);
    Napi::Object out = Napi::Object::New(env);
    out.Set("arch", data->arch);
    out.Set("sampleRate", data->sample_rate);
    out.Set("variant", data->variant);
    out.Set("sequences", (double) data->sequences());
    return out;
}

Napi::Value voxd_tts_ggml_model_js::synthesize(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    auto request  = request_from_js(env, *loaded(env), info[0], false);
    if (!info[1].IsUndefined() && !info[1].IsNull() && !info[1].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "onAudio must be a function");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[2]);
    auto job             = std::make_shared<voxd_pcm_stream_job>(
        [request = std::move(request), abort](voxd_pcm_sink & sink) mutable {
            // the sequence goes back to the pool when the synthesis ends, not when the last queued audio delivery lets
            // go of the job: the next request may need it at once
            const std::shared_ptr<voxd_tts_ggml_request> held = std::move(request);
            held->data->synthesize(*held, sink, abort);
        },
        abort);
    return voxd_pcm_stream_job::start(env, job, info[1], "voxd.tts_ggml.synthesize", "voxd.tts_ggml.audio");
}

Napi::Value voxd_tts_ggml_model_js::timings(const Napi::CallbackInfo & info) {
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

Napi::Value voxd_tts_ggml_model_js::create_batch(const Napi::CallbackInfo & info) {
    Napi::Env env                               = info.Env();
    auto data                                   = loaded(env);
    Napi::Object obj                            = voxd_class(env, "TtsGgmlBatch").New({});
    voxd_tts_ggml_batch_js::Unwrap(obj)->m_data = data;
    return obj;
}

Napi::Value voxd_tts_ggml_model_js::release(const Napi::CallbackInfo & info) {
    m_data.reset(); // syntheses in flight keep their own reference and finish first
    m_memory.reset();
    return info.Env().Undefined();
}

// ---- batch sessions ----

Napi::Function voxd_tts_ggml_batch_js::define(Napi::Env env) {
    return DefineClass(env, "TtsGgmlBatch",
                       {
                           InstanceMethod<&voxd_tts_ggml_batch_js::add>("add"),
                           InstanceMethod<&voxd_tts_ggml_batch_js::cancel>("cancel"),
                           InstanceMethod<&voxd_tts_ggml_batch_js::step>("step"),
                           InstanceAccessor<&voxd_tts_ggml_batch_js::active>("active"),
                           InstanceMethod<&voxd_tts_ggml_batch_js::close>("close"),
                       });
}

voxd_tts_ggml_batch_js::voxd_tts_ggml_batch_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_tts_ggml_batch_js>(info) {}

Napi::Value voxd_tts_ggml_batch_js::add(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!m_data) {
        throw voxd_make_js_error(env, "closed", "the batch session was closed");
    }
    auto request = request_from_js(env, *m_data, info[0], true);
    try {
        m_data->gen->plan(request->seq); // reads the vocabulary only: safe beside a running step
    } catch (const voxd_error & e) {
        throw voxd_make_js_error(env, e.code, e.what());
    }
    const int slot = m_next_slot++;
    m_requests.emplace(slot, std::move(request));
    return Napi::Number::New(env, slot);
}

Napi::Value voxd_tts_ggml_batch_js::cancel(const Napi::CallbackInfo & info) {
    const auto it = info[0].IsNumber() ? m_requests.find(info[0].As<Napi::Number>().Int32Value()) : m_requests.end();
    if (it != m_requests.end()) {
        it->second->seq.cancelled.store(true); // a step in flight skips it from its next turn on
        m_requests.erase(it);
    }
    return info.Env().Undefined();
}

Napi::Value voxd_tts_ggml_batch_js::step(const Napi::CallbackInfo & info) {
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
            data->step(seqs);
            return members;
        },
        [self_ref](Napi::Env env, members_t & members) -> Napi::Value {
            voxd_tts_ggml_batch_js * batch = Unwrap(self_ref->Value());
            batch->m_stepping              = false;
            Napi::Array finished           = Napi::Array::New(env);
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

Napi::Value voxd_tts_ggml_batch_js::active(const Napi::CallbackInfo & info) {
    return Napi::Number::New(info.Env(), (double) m_requests.size());
}

Napi::Value voxd_tts_ggml_batch_js::close(const Napi::CallbackInfo & info) {
    for (auto & [slot, request] : m_requests) {
        request->seq.cancelled.store(true);
    }
    m_requests.clear();
    m_data.reset();
    return info.Env().Undefined();
}

} // namespace

void voxd_bind_tts_ggml(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "TtsGgmlModel", voxd_tts_ggml_model_js::define(env));
    voxd_export_class(env, exports, "TtsGgmlBatch", voxd_tts_ggml_batch_js::define(env));
}
