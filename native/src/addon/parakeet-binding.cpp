// ParakeetModel: a Parakeet TDT model (stt/parakeet-model.h) as a JS class; its transcriptions run on worker threads.
#include "async.h"
#include "bindings.h"

#include "stt/parakeet-model.h"

namespace {

// JS: `ParakeetModel.load(path, { useGpu?, gpuDevice?, maxIdleStates? }) -> Promise<ParakeetModel>`; `model.info()`;
// `model.transcribe(samples16k, { threads?, maxTokens? }, abort?) -> Promise<ParakeetToken[]>` (times in seconds);
// `model.release()` drops this object's hold on the weights (transcriptions in flight finish first).
class voxd_parakeet_model_js : public Napi::ObjectWrap<voxd_parakeet_model_js> {
public:
    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "ParakeetModel",
                           {
                               StaticMethod<&voxd_parakeet_model_js::load>("load"),
                               InstanceMethod<&voxd_parakeet_model_js::info>("info"),
                               InstanceMethod<&voxd_parakeet_model_js::transcribe>("transcribe"),
                               InstanceMethod<&voxd_parakeet_model_js::release>("release"),
                               StaticValue("sampleRate", Napi::Number::New(env, 16000)),
                           });
    }

    explicit voxd_parakeet_model_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_parakeet_model_js>(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);

    Napi::Value release(const Napi::CallbackInfo & info) {
        m_model = nullptr; // transcriptions in flight hold their own reference; the last one frees the weights
        m_memory.reset();
        return info.Env().Undefined();
    }

    std::shared_ptr<voxd_parakeet_model> loaded(Napi::Env env) const {
        if (!m_model) {
            throw voxd_make_js_error(env, "closed", "the Parakeet model was released");
        }
        return m_model;
    }

    std::shared_ptr<voxd_parakeet_model> m_model;
    voxd_external_memory m_memory; // the weights, reported to V8 while this object holds them
};

Napi::Value voxd_parakeet_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "ParakeetModel.load(path, options): path must be a string");
    }
    const std::string path = info[0].As<Napi::String>().Utf8Value();
    voxd_parakeet_load_options options;
    if (info[1].IsObject()) {
        const Napi::Object o = info[1].As<Napi::Object>();
        if (o.Get("useGpu").IsBoolean()) {
            options.use_gpu = o.Get("useGpu").As<Napi::Boolean>().Value();
        }
        options.gpu_device = voxd_integer_option(env, o, "gpuDevice", 0, 64, "ParakeetModel.load");
        if (auto v = voxd_integer_option(env, o, "maxIdleStates", 0, 64, "ParakeetModel.load")) {
            options.max_idle_states = (size_t) *v;
        }
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "ParakeetModel.load(path, options): options must be an object");
    }
    using loaded_t = std::shared_ptr<voxd_parakeet_model>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.parakeet.load", [path, options]() { return voxd_parakeet_model::load(path, options); },
        [](Napi::Env env, loaded_t & model) -> Napi::Value {
            Napi::Object obj     = voxd_class(env, "ParakeetModel").New({});
            Unwrap(obj)->m_model = model;
            Unwrap(obj)->m_memory.set(env, model->weight_bytes());
            return obj;
        });
}

Napi::Value voxd_parakeet_model_js::info(const Napi::CallbackInfo & info) {
    Napi::Env env                                    = info.Env();
    const std::shared_ptr<voxd_parakeet_model> model = loaded(env);
    const voxd_parakeet_info & hp                    = model->info();
    Napi::Object o                                   = Napi::Object::New(env);
    o.Set("nVocab", hp.n_vocab);
    o.Set("nAudioCtx", hp.n_audio_ctx);
    o.Set("nAudioState", hp.n_audio_state);
    o.Set("nAudioHead", hp.n_audio_head);
    o.Set("nAudioLayer", hp.n_audio_layer);
    o.Set("nMels", hp.n_mels);
    o.Set("ftype", hp.ftype);
    o.Set("multilingual", hp.multilingual);
    o.Set("gpu", model->use_gpu());
    return o;
}

Napi::Value voxd_parakeet_model_js::transcribe(const Napi::CallbackInfo & info) {
    Napi::Env env                              = info.Env();
    std::shared_ptr<voxd_parakeet_model> model = loaded(env);
    std::vector<float> samples                 = voxd_copy_samples(info[0], "samples");
    voxd_parakeet_params params;
    if (info[1].IsObject()) {
        const Napi::Object o = info[1].As<Napi::Object>();
        params.threads       = voxd_integer_option(env, o, "threads", 1, 256, "ParakeetModel.transcribe").value_or(params.threads);
        params.max_tokens    = voxd_integer_option(env, o, "maxTokens", 0, 1 << 30, "ParakeetModel.transcribe").value_or(0);
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "ParakeetModel.transcribe(samples, params): params must be an object");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[2]);

    using tokens_t = std::vector<voxd_parakeet_token>;
    return voxd_async_worker<tokens_t>::run(
        env, "voxd.parakeet.transcribe", [model, samples = std::move(samples), params, abort]() { return model->transcribe(samples, params, abort); },
        [](Napi::Env env, tokens_t & tokens) -> Napi::Value {
            constexpr double frames_per_second = 100.0; // libparakeet's times are mel frames; dividing keeps 3.28 exact
            Napi::Array out                    = Napi::Array::New(env, tokens.size());
            for (size_t i = 0; i < tokens.size(); i++) {
                const voxd_parakeet_token & t = tokens[i];
                Napi::Object o                = Napi::Object::New(env);
                o.Set("id", t.id);
                o.Set("text", t.text);
                o.Set("start", (double) t.t0 / frames_per_second);
                o.Set("end", (double) t.t1 / frames_per_second);
                o.Set("frame", t.frame);
                o.Set("duration", t.duration);
                o.Set("p", t.p);
                o.Set("logprob", t.plog);
                o.Set("wordStart", t.word_start);
                out.Set((uint32_t) i, o);
            }
            return out;
        });
}

} // namespace

void voxd_bind_parakeet(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "ParakeetModel", voxd_parakeet_model_js::define(env));
}
