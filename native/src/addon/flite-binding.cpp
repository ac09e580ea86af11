// FliteModel: flite's voices (tts/flite.h) as a JS class whose syntheses run on worker threads and stream.
#include "async.h"
#include "bindings.h"
#include "pcm-stream.h"

#include "tts/flite.h"

#include <algorithm>
#include <cmath>

namespace {

// JS: `FliteModel.load() -> Promise<FliteModel>`;
// `model.synthesize(text, { voice, speed }, onAudio?, abort?) -> Promise<Float32Array>` (16 kHz mono);
// `model.voices` ([{ id, name, description }]); `model.deterministic`; `model.release()`.
class voxd_flite_model_js : public Napi::ObjectWrap<voxd_flite_model_js> {
public:
    static Napi::Function define(Napi::Env env) {
        const std::vector<voxd_flite_voice> voices = voxd_flite_model::voices(nullptr);
        Napi::Array ids                            = Napi::Array::New(env, voices.size());
        for (size_t i = 0; i < voices.size(); i++) {
            ids.Set((uint32_t) i, voices[i].id);
        }
        return DefineClass(env, "FliteModel",
                           {
                               StaticMethod<&voxd_flite_model_js::load>("load"),
                               InstanceMethod<&voxd_flite_model_js::synthesize>("synthesize"),
                               InstanceMethod<&voxd_flite_model_js::release>("release"),
                               InstanceAccessor<&voxd_flite_model_js::voices>("voices"),
                               InstanceAccessor<&voxd_flite_model_js::deterministic>("deterministic"),
                               StaticValue("sampleRate", Napi::Number::New(env, voxd_flite_model::sample_rate)),
                               StaticValue("voiceIds", ids),
                           });
    }

    explicit voxd_flite_model_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_flite_model_js>(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info) {
        using loaded = std::shared_ptr<const voxd_flite_model>;
        return voxd_async_worker<loaded>::run(
            info.Env(), "voxd.flite.load", []() { return voxd_flite_model::load(); },
            [](Napi::Env env, loaded & model) -> Napi::Value {
                Napi::Object obj     = voxd_class(env, "FliteModel").New({});
                Unwrap(obj)->m_model = model;
                return obj;
            });
    }

    Napi::Value voices(const Napi::CallbackInfo & info) {
        Napi::Env env                              = info.Env();
        const std::vector<voxd_flite_voice> voices = voxd_flite_model::voices(m_model.get());
        Napi::Array out                            = Napi::Array::New(env, voices.size());
        for (size_t i = 0; i < voices.size(); i++) {
            Napi::Object v = Napi::Object::New(env);
            v.Set("id", voices[i].id);
            v.Set("name", voices[i].name);
            v.Set("description", voices[i].description);
            out.Set((uint32_t) i, v);
        }
        return out;
    }

    Napi::Value deterministic(const Napi::CallbackInfo & info) { return Napi::Boolean::New(info.Env(), m_model && m_model->deterministic()); }

    Napi::Value synthesize(const Napi::CallbackInfo & info);

    Napi::Value release(const Napi::CallbackInfo & info) {
        m_model.reset(); // syntheses in flight keep their own reference; flite's voices stay registered
        return info.Env().Undefined();
    }

    std::shared_ptr<const voxd_flite_model> m_model;
};

Napi::Value voxd_flite_model_js::synthesize(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!m_model) {
        throw voxd_make_js_error(env, "closed", "the flite model was released");
    }
    if (!info[0].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "synthesize(text, options): text must be a string");
    }
    std::string text = info[0].As<Napi::String>().Utf8Value();
    std::replace(text.begin(), text.end(), '\0', ' '); // flite reads a C string
    if (!info[1].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "synthesize(text, options): options must be an object");
    }
    Napi::Object options                       = info[1].As<Napi::Object>();
    Napi::Value voice_value                    = options.Get("voice");
    const std::string voice_id                 = voice_value.IsString() ? voice_value.As<Napi::String>().Utf8Value() : std::string();
    const std::vector<voxd_flite_voice> voices = voxd_flite_model::voices(nullptr);
    const auto found                           = std::find_if(voices.begin(), voices.end(), [&](const voxd_flite_voice & v) { return v.id == voice_id; });
    if (found == voices.end()) {
        throw voxd_make_js_error(env, "invalid_argument", "synthesize(text, options): unknown voice '" + voice_id + "' (slt, kal, awb, rms)");
    }
    double speed            = 1.0;
    Napi::Value speed_value = options.Get("speed");
    if (!speed_value.IsUndefined() && !speed_value.IsNull()) {
        speed = speed_value.IsNumber() ? speed_value.As<Napi::Number>().DoubleValue() : NAN;
        if (!std::isfinite(speed) || speed < 0.25 || speed > 4.0) {
            throw voxd_make_js_error(env, "invalid_argument", "synthesize(text, options): speed must be a number from 0.25 to 4");
        }
    }
    if (!info[2].IsUndefined() && !info[2].IsNull() && !info[2].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "onAudio must be a function");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[3]);

    const size_t voice = (size_t) (found - voices.begin());
    auto run           = [model = m_model, text = std::move(text), voice, speed = (float) speed, abort](voxd_pcm_sink & sink) {
        model->synthesize(text, voice, speed, sink, abort);
    };
    auto job = std::make_shared<voxd_pcm_stream_job>(std::move(run), abort);
    return voxd_pcm_stream_job::start(env, job, info[2], "voxd.flite.synthesize", "voxd.flite.audio");
}

} // namespace

void voxd_bind_flite(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "FliteModel", voxd_flite_model_js::define(env));
}
