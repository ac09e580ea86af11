// SphinxModel and SphinxStream: pocketsphinx (stt/sphinx.h) as JS classes whose calls run on worker threads.
#include "async.h"
#include "bindings.h"

#include "stt/sphinx.h"

#include <algorithm>

namespace {

// JS: `SphinxModel.load({ hmm?, lm?, dict?, maxIdleDecoders? }) -> Promise<SphinxModel>`;
// `model.transcribe(samples16k, abort?) -> Promise<{ text, segments }>`; `model.openStream({ stableBlocks? }) ->
// Promise<SphinxStream>`; `model.stats() -> { transcribe: { decoders, idle }, live: { decoders, idle } }`;
// `model.release()`.
class voxd_sphinx_model_js : public Napi::ObjectWrap<voxd_sphinx_model_js> {
public:
    static Napi::Function define(Napi::Env env) {
        const voxd_sphinx_paths paths;
        Napi::Object defaults = Napi::Object::New(env);
        defaults.Set("hmm", paths.hmm);
        defaults.Set("lm", paths.lm);
        defaults.Set("dict", paths.dict);
        return DefineClass(env, "SphinxModel",
                           {
                               StaticMethod<&voxd_sphinx_model_js::load>("load"),
                               InstanceMethod<&voxd_sphinx_model_js::transcribe>("transcribe"),
                               InstanceMethod<&voxd_sphinx_model_js::open_stream>("openStream"),
                               InstanceMethod<&voxd_sphinx_model_js::stats>("stats"),
                               InstanceMethod<&voxd_sphinx_model_js::release>("release"),
                               StaticValue("sampleRate", Napi::Number::New(env, 16000)),
                               StaticValue("defaultPaths", defaults),
                           });
    }

    explicit voxd_sphinx_model_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_sphinx_model_js>(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);
    Napi::Value open_stream(const Napi::CallbackInfo & info);
    Napi::Value stats(const Napi::CallbackInfo & info);

    Napi::Value release(const Napi::CallbackInfo & info) {
        m_model = {}; // workers in flight hold their own reference; the last one frees the decoders
        return info.Env().Undefined();
    }

    const voxd_sphinx_model & loaded(Napi::Env env) const {
        if (!m_model.clips) {
            throw voxd_make_js_error(env, "closed", "the pocketsphinx model was released");
        }
        return m_model;
    }

    voxd_sphinx_model m_model;
};

// Live transcription on one pooled decoder, held from openStream to close (or collection). JS:
// `stream.feed(samples16k, abort?) -> Promise<string>` (the newly stable text), `stream.finish(abort?) ->
// Promise<{ delta, transcript }>`, `stream.reset() -> Promise<void>`, `stream.close() -> Promise<void>`.
class voxd_sphinx_stream_js : public Napi::ObjectWrap<voxd_sphinx_stream_js> {
public:
    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "SphinxStream",
                           {
                               InstanceMethod<&voxd_sphinx_stream_js::feed>("feed"),
                               InstanceMethod<&voxd_sphinx_stream_js::finish>("finish"),
                               InstanceMethod<&voxd_sphinx_stream_js::reset>("reset"),
                               InstanceMethod<&voxd_sphinx_stream_js::close>("close"),
                               StaticValue("blockSamples", Napi::Number::New(env, (double) voxd_sphinx_stream::block_samples)),
                           });
    }

    explicit voxd_sphinx_stream_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_sphinx_stream_js>(info) {}

    std::shared_ptr<voxd_sphinx_stream> m_stream; // set by openStream; null once closed

private:
    std::shared_ptr<voxd_sphinx_stream> opened(Napi::Env env) const {
        if (!m_stream) {
            throw voxd_make_js_error(env, "closed", "the pocketsphinx stream was closed");
        }
        return m_stream;
    }

    Napi::Value feed(const Napi::CallbackInfo & info) {
        Napi::Env env                              = info.Env();
        std::shared_ptr<voxd_sphinx_stream> stream = opened(env);
        std::vector<float> samples                 = voxd_copy_samples(info[0], "samples");
        voxd_abort_ptr abort                       = voxd_abort_flag::from_value(info[1]);
        return voxd_async_worker<std::string>::run(
            env, "voxd.sphinx.stream.feed", [stream, samples = std::move(samples), abort]() { return stream->feed(samples, abort); },
            [](Napi::Env env, std::string & delta) -> Napi::Value { return Napi::String::New(env, delta); });
    }

    Napi::Value finish(const Napi::CallbackInfo & info) {
        Napi::Env env                              = info.Env();
        std::shared_ptr<voxd_sphinx_stream> stream = opened(env);
        voxd_abort_ptr abort                       = voxd_abort_flag::from_value(info[0]);
        return voxd_async_worker<voxd_sphinx_stream_result>::run(
            env, "voxd.sphinx.stream.finish", [stream, abort]() { return stream->finish(abort); },
            [](Napi::Env env, voxd_sphinx_stream_result & r) -> Napi::Value {
                Napi::Object o = Napi::Object::New(env);
                o.Set("delta", r.delta);
                o.Set("transcript", r.transcript);
                return o;
            });
    }

    Napi::Value reset(const Napi::CallbackInfo & info) {
        std::shared_ptr<voxd_sphinx_stream> stream = opened(info.Env());
        return voxd_async_worker<bool>::run(
            info.Env(), "voxd.sphinx.stream.reset",
            [stream]() {
                stream->reset();
                return true;
            },
            [](Napi::Env env, bool &) -> Napi::Value { return env.Undefined(); });
    }

    Napi::Value close(const Napi::CallbackInfo & info) {
        Napi::Env env                              = info.Env();
        std::shared_ptr<voxd_sphinx_stream> stream = std::move(m_stream); // later calls reject with `closed`
        if (!stream) {
            Napi::Promise::Deferred done = Napi::Promise::Deferred::New(env); // closed already
            done.Resolve(env.Undefined());
            return done.Promise();
        }
        return voxd_async_worker<bool>::run(
            env, "voxd.sphinx.stream.close",
            [stream]() {
                stream->close();
                return true;
            },
            [](Napi::Env env, bool &) -> Napi::Value { return env.Undefined(); });
    }
};

Napi::Value voxd_sphinx_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    voxd_sphinx_paths paths;
    size_t max_idle = 2;
    if (info[0].IsObject()) {
        Napi::Object o = info[0].As<Napi::Object>();
        auto path      = [&](const char * key, std::string & out) {
            Napi::Value v = o.Get(key);
            if (v.IsUndefined() || v.IsNull()) {
                return;
            }
            if (!v.IsString() || v.As<Napi::String>().Utf8Value().empty()) {
                throw voxd_make_js_error(env, "invalid_argument", std::string("SphinxModel.load(options): ") + key + " must be a non-empty string");
            }
            out = v.As<Napi::String>().Utf8Value();
        };
        path("hmm", paths.hmm);
        path("lm", paths.lm);
        path("dict", paths.dict);
        Napi::Value idle = o.Get("maxIdleDecoders");
        if (idle.IsNumber()) {
            max_idle = (size_t) std::max(0, idle.As<Napi::Number>().Int32Value());
        }
    } else if (!info[0].IsUndefined() && !info[0].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "SphinxModel.load(options): options must be an object");
    }
    return voxd_async_worker<voxd_sphinx_model>::run(
        env, "voxd.sphinx.load", [paths, max_idle]() { return voxd_sphinx_model::load(paths, max_idle); },
        [](Napi::Env env, voxd_sphinx_model & model) -> Napi::Value {
            Napi::Object obj     = voxd_class(env, "SphinxModel").New({});
            Unwrap(obj)->m_model = model;
            return obj;
        });
}

Napi::Value voxd_sphinx_model_js::transcribe(const Napi::CallbackInfo & info) {
    Napi::Env env                          = info.Env();
    std::shared_ptr<voxd_sphinx_pool> pool = loaded(env).clips;
    std::vector<float> samples             = voxd_copy_samples(info[0], "samples");
    voxd_abort_ptr abort                   = voxd_abort_flag::from_value(info[1]);

    using result = std::vector<voxd_sphinx_segment>;
    return voxd_async_worker<result>::run(
        env, "voxd.sphinx.transcribe", [pool, samples = std::move(samples), abort]() { return pool->transcribe(samples, abort); },
        [](Napi::Env env, result & segs) -> Napi::Value {
            std::string text;
            Napi::Array arr = Napi::Array::New(env, segs.size());
            for (size_t i = 0; i < segs.size(); i++) {
                const voxd_sphinx_segment & s = segs[i];
                text += (text.empty() ? "" : " ") + s.text;
                Napi::Array words = Napi::Array::New(env, s.words.size());
                for (size_t j = 0; j < s.words.size(); j++) {
                    Napi::Object w = Napi::Object::New(env);
                    w.Set("word", s.words[j].word);
                    w.Set("start", s.words[j].start);
                    w.Set("end", s.words[j].end);
                    w.Set("probability", s.words[j].probability);
                    words.Set((uint32_t) j, w);
                }
                Napi::Object o = Napi::Object::New(env);
                o.Set("start", s.start);
                o.Set("end", s.end);
                o.Set("text", s.text);
                o.Set("words", words);
                arr.Set((uint32_t) i, o);
            }
            Napi::Object out = Napi::Object::New(env);
            out.Set("text", text);
            out.Set("segments", arr);
            return out;
        });
}

Napi::Value voxd_sphinx_model_js::stats(const Napi::CallbackInfo & info) {
    Napi::Env env                   = info.Env();
    const voxd_sphinx_model & model = loaded(env);
    auto describe                   = [&](voxd_sphinx_pool & pool) {
        const voxd_sphinx_pool::stats_t st = pool.stats();
        Napi::Object o                     = Napi::Object::New(env);
        o.Set("decoders", (double) st.decoders);
        o.Set("idle", (double) st.idle);
        return o;
    };
    Napi::Object out = Napi::Object::New(env);
    out.Set("transcribe", describe(*model.clips));
    out.Set("live", describe(*model.live));
    return out;
}

Napi::Value voxd_sphinx_model_js::open_stream(const Napi::CallbackInfo & info) {
    Napi::Env env                          = info.Env();
    std::shared_ptr<voxd_sphinx_pool> pool = loaded(env).live;
    size_t stable_blocks                   = 0;
    if (info[0].IsObject()) {
        Napi::Value v = info[0].As<Napi::Object>().Get("stableBlocks");
        if (!v.IsUndefined()) {
            if (!v.IsNumber() || v.As<Napi::Number>().DoubleValue() < 0 || v.As<Napi::Number>().DoubleValue() > 1000) {
                throw voxd_make_js_error(env, "invalid_argument", "SphinxModel.openStream(options): stableBlocks must be a number 0..1000");
            }
            stable_blocks = (size_t) v.As<Napi::Number>().Int32Value();
        }
    }
    using opened = std::shared_ptr<voxd_sphinx_stream>;
    return voxd_async_worker<opened>::run(
        env, "voxd.sphinx.openStream", [pool, stable_blocks]() { return std::make_shared<voxd_sphinx_stream>(pool, stable_blocks); },
        [](Napi::Env env, opened & stream) -> Napi::Value {
            Napi::Object obj                             = voxd_class(env, "SphinxStream").New({});
            voxd_sphinx_stream_js::Unwrap(obj)->m_stream = stream;
            return obj;
        });
}

} // namespace

void voxd_bind_sphinx(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "SphinxModel", voxd_sphinx_model_js::define(env));
    voxd_export_class(env, exports, "SphinxStream", voxd_sphinx_stream_js::define(env));
}
