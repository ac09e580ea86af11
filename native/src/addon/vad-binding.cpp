// VadModel and VadStream: Silero VAD (stt/vad.h) as JS classes whose calls run on worker threads.
#include "async.h"
#include "bindings.h"

#include "stt/vad.h"

namespace {

// JS: `VadModel.load(path) -> Promise<VadModel>`; `model.segments(samples, params, abort?)`;
// `model.openStream() -> Promise<VadStream>`.
class voxd_vad_model_js : public Napi::ObjectWrap<voxd_vad_model_js> {
public:
    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "VadModel",
                           {
                               StaticMethod<&voxd_vad_model_js::load>("load"),
                               InstanceMethod<&voxd_vad_model_js::segments>("segments"),
                               InstanceMethod<&voxd_vad_model_js::open_stream>("openStream"),
                           });
    }

    explicit voxd_vad_model_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_vad_model_js>(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value segments(const Napi::CallbackInfo & info);
    Napi::Value open_stream(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_vad_pool> m_pool;
};

// JS: a streaming detector that carries LSTM state between calls. `stream.process(samples16k)` resolves to one
// speech probability per complete 512-sample frame; a partial frame is kept for the next call. Calls queue on
// the stream's lock, so overlapping ones run in order.
class voxd_vad_stream_js : public Napi::ObjectWrap<voxd_vad_stream_js> {
public:
    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "VadStream",
                           {
                               InstanceMethod<&voxd_vad_stream_js::process>("process"),
                               InstanceMethod<&voxd_vad_stream_js::reset>("reset"),
                               InstanceMethod<&voxd_vad_stream_js::close>("close"),
                               StaticValue("frameSamples", Napi::Number::New(env, voxd_vad_stream::frame_samples)),
                           });
    }

    explicit voxd_vad_stream_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_vad_stream_js>(info) {}

    std::shared_ptr<voxd_vad_stream> m_stream; // set by openStream; shared with the workers in flight

private:
    // A VadStream made by `new` in JS rather than by openStream has no stream: closed from the start.
    std::shared_ptr<voxd_vad_stream> opened(Napi::Env env) const {
        if (!m_stream) {
            throw voxd_make_js_error(env, "closed", "the VAD stream is closed");
        }
        return m_stream;
    }

    Napi::Value process(const Napi::CallbackInfo & info) {
        std::shared_ptr<voxd_vad_stream> stream = opened(info.Env());
        std::vector<float> samples              = voxd_copy_samples(info[0], "samples");
        return voxd_async_worker<std::vector<float>>::run(
            info.Env(), "voxd.vad.process", [stream, samples = std::move(samples)]() { return stream->process(samples); },
            [](Napi::Env env, std::vector<float> & probs) -> Napi::Value {
                Napi::Float32Array arr = Napi::Float32Array::New(env, probs.size());
                std::copy(probs.begin(), probs.end(), arr.Data());
                return arr;
            });
    }

    // Runs behind any process() in flight, so the reset applies between calls, never inside one.
    Napi::Value reset(const Napi::CallbackInfo & info) {
        std::shared_ptr<voxd_vad_stream> stream = opened(info.Env());
        return voxd_async_worker<bool>::run(
            info.Env(), "voxd.vad.reset",
            [stream]() {
                stream->reset();
                return true;
            },
            [](Napi::Env env, bool &) -> Napi::Value { return env.Undefined(); });
    }

    // Queued like reset(): waits for a process() in flight instead of blocking the event loop on its lock.
    Napi::Value close(const Napi::CallbackInfo & info) {
        std::shared_ptr<voxd_vad_stream> stream = opened(info.Env());
        return voxd_async_worker<bool>::run(
            info.Env(), "voxd.vad.close",
            [stream]() {
                stream->close();
                return true;
            },
            [](Napi::Env env, bool &) -> Napi::Value { return env.Undefined(); });
    }
};

Napi::Value voxd_vad_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "VadModel.load(path): path must be a string");
    }
    auto pool    = std::make_shared<voxd_vad_pool>(info[0].As<Napi::String>().Utf8Value());
    using loaded = std::shared_ptr<voxd_vad_pool>;
    return voxd_async_worker<loaded>::run(
        env, "voxd.vad.load",
        [pool]() {
            pool->release(pool->acquire()); // loads once to validate the file, then keeps the context warm
            return pool;
        },
        [](Napi::Env env, loaded & pool) -> Napi::Value {
            Napi::Object obj    = voxd_class(env, "VadModel").New({});
            Unwrap(obj)->m_pool = pool;
            return obj;
        });
}

Napi::Value voxd_vad_model_js::segments(const Napi::CallbackInfo & info) {
    Napi::Env env              = info.Env();
    std::vector<float> samples = voxd_copy_samples(info[0], "samples");
    voxd_vad_params params     = voxd_vad_params::defaults();
    if (info[1].IsObject()) {
        Napi::Object p = info[1].As<Napi::Object>();
        auto num       = [&](const char * key, double fallback) {
            Napi::Value v = p.Get(key);
            return v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : fallback;
        };
        params.threshold               = (float) num("threshold", params.threshold);
        params.min_speech_duration_ms  = (int) num("minSpeechDurationMs", params.min_speech_duration_ms);
        params.min_silence_duration_ms = (int) num("minSilenceDurationMs", params.min_silence_duration_ms);
        params.max_speech_duration_s   = (float) num("maxSpeechDurationS", params.max_speech_duration_s);
        params.speech_pad_ms           = (int) num("speechPadMs", params.speech_pad_ms);
    }
    voxd_abort_ptr abort                = voxd_abort_flag::from_value(info[2]);
    std::shared_ptr<voxd_vad_pool> pool = m_pool;

    using result = std::vector<voxd_vad_segment>;
    return voxd_async_worker<result>::run(
        env, "voxd.vad.segments", [pool, samples = std::move(samples), params, abort]() { return pool->segments(samples, params, abort); },
        [](Napi::Env env, result & segs) -> Napi::Value {
            Napi::Array arr = Napi::Array::New(env, segs.size());
            for (size_t i = 0; i < segs.size(); i++) {
                Napi::Object o = Napi::Object::New(env);
                o.Set("start", segs[i].start);
                o.Set("end", segs[i].end);
                arr.Set(i, o);
            }
            return arr;
        });
}

Napi::Value voxd_vad_model_js::open_stream(const Napi::CallbackInfo & info) {
    std::shared_ptr<voxd_vad_pool> pool = m_pool;
    using opened                        = std::shared_ptr<voxd_vad_stream>;
    return voxd_async_worker<opened>::run(
        info.Env(), "voxd.vad.open", [pool]() { return std::make_shared<voxd_vad_stream>(pool); },
        [](Napi::Env env, opened & stream) -> Napi::Value {
            Napi::Object obj                          = voxd_class(env, "VadStream").New({});
            voxd_vad_stream_js::Unwrap(obj)->m_stream = stream;
            return obj;
        });
}

} // namespace

void voxd_bind_vad(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "VadModel", voxd_vad_model_js::define(env));
    voxd_export_class(env, exports, "VadStream", voxd_vad_stream_js::define(env));
}
