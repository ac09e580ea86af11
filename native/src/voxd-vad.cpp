#include "voxd-vad.h"

#include "whisper.h"

#include <algorithm>

// ---- pool ----

void voxd_vad_pool::context_deleter::operator()(whisper_vad_context * ctx) const {
    whisper_vad_free(ctx);
}

voxd_vad_pool::~voxd_vad_pool() = default;

voxd_vad_pool::context_ptr voxd_vad_pool::acquire() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_idle.empty()) {
            context_ptr ctx = std::move(m_idle.back());
            m_idle.pop_back();
            return ctx;
        }
    }
    whisper_vad_context_params params = whisper_vad_default_context_params();
    params.n_threads                  = 1; // the model is tiny: more threads cost more in sync than they save
    params.use_gpu                    = false;
    context_ptr ctx(whisper_vad_init_from_file_with_params(m_path.c_str(), params));
    if (!ctx) {
        throw voxd_error("model_load_failed", "cannot load a Silero VAD model from " + m_path);
    }
    return ctx;
}

void voxd_vad_pool::release(context_ptr ctx) {
    whisper_vad_reset_state(ctx.get());
    std::lock_guard<std::mutex> lock(m_mutex);
    if (m_idle.size() < max_idle) {
        m_idle.push_back(std::move(ctx));
    }
}

// ---- model ----

Napi::Function voxd_vad_model::define(Napi::Env env) {
    return DefineClass(env, "VadModel",
                       {
                           StaticMethod<&voxd_vad_model::load>("load"),
                           InstanceMethod<&voxd_vad_model::segments>("segments"),
                           InstanceMethod<&voxd_vad_model::open_stream>("openStream"),
                       });
}

voxd_vad_model::voxd_vad_model(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_vad_model>(info) {}

Napi::Value voxd_vad_model::load(const Napi::CallbackInfo & info) {
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

struct voxd_vad_segment {
    double start;
    double end;
};

Napi::Value voxd_vad_model::segments(const Napi::CallbackInfo & info) {
    Napi::Env env              = info.Env();
    std::vector<float> samples = voxd_copy_samples(info[0], "samples");
    whisper_vad_params params  = whisper_vad_default_params();
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
        env, "voxd.vad.segments",
        [pool, samples = std::move(samples), params, abort]() {
            voxd_check_abort(abort);
            result out;
            if (samples.empty()) {
                return out;
            }
            voxd_vad_pool::context_ptr ctx = pool->acquire();
            whisper_vad_segments * segs    = whisper_vad_segments_from_samples(ctx.get(), params, samples.data(), (int) samples.size());
            std::unique_ptr<whisper_vad_segments, void (*)(whisper_vad_segments *)> owned(segs, whisper_vad_free_segments);
            pool->release(std::move(ctx));
            if (!owned) {
                throw voxd_error("vad_failed", "voice activity detection failed");
            }
            const int n = whisper_vad_segments_n_segments(owned.get());
            for (int i = 0; i < n; i++) {
                // whisper.cpp reports whole centiseconds; dividing in double keeps 0.32 as 0.32
                out.push_back({ whisper_vad_segments_get_segment_t0(owned.get(), i) / 100.0, whisper_vad_segments_get_segment_t1(owned.get(), i) / 100.0 });
            }
            return out;
        },
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

Napi::Value voxd_vad_model::open_stream(const Napi::CallbackInfo & info) {
    Napi::Env env                       = info.Env();
    std::shared_ptr<voxd_vad_pool> pool = m_pool;
    using opened                        = voxd_vad_pool::context_ptr;
    // the context travels in a shared_ptr so the std::function stays copyable
    auto slot = std::make_shared<opened>();
    return voxd_async_worker<bool>::run(
        env, "voxd.vad.open",
        [pool, slot]() {
            *slot = pool->acquire();
            return true;
        },
        [pool, slot](Napi::Env env, bool &) -> Napi::Value {
            Napi::Object obj         = voxd_class(env, "VadStream").New({});
            voxd_vad_stream * stream = voxd_vad_stream::Unwrap(obj);
            stream->m_state->pool    = pool;
            stream->m_state->ctx     = std::move(*slot);
            return obj;
        });
}

// ---- stream ----

Napi::Function voxd_vad_stream::define(Napi::Env env) {
    return DefineClass(env, "VadStream",
                       {
                           InstanceMethod<&voxd_vad_stream::process>("process"),
                           InstanceMethod<&voxd_vad_stream::reset>("reset"),
                           InstanceMethod<&voxd_vad_stream::close>("close"),
                           StaticValue("frameSamples", Napi::Number::New(env, frame_samples)),
                       });
}

voxd_vad_stream::voxd_vad_stream(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_vad_stream>(info), m_state(std::make_shared<state>()) {}

voxd_vad_stream::state::~state() {
    if (ctx && pool) {
        pool->release(std::move(ctx));
    }
}

Napi::Value voxd_vad_stream::process(const Napi::CallbackInfo & info) {
    Napi::Env env              = info.Env();
    std::vector<float> samples = voxd_copy_samples(info[0], "samples");
    std::shared_ptr<state> st  = m_state;
    using probs                = std::vector<float>;
    return voxd_async_worker<probs>::run(
        env, "voxd.vad.process",
        [st, samples = std::move(samples)]() {
            std::lock_guard<std::mutex> lock(st->mutex);
            if (!st->ctx) {
                throw voxd_error("closed", "the VAD stream is closed");
            }
            std::vector<float> & buf = st->pending;
            buf.insert(buf.end(), samples.begin(), samples.end());
            const size_t n_full = buf.size() / frame_samples * frame_samples;
            probs out;
            if (n_full == 0) {
                return out;
            }
            if (!whisper_vad_detect_speech_no_reset(st->ctx.get(), buf.data(), (int) n_full)) {
                throw voxd_error("vad_failed", "voice activity detection failed");
            }
            const int n     = whisper_vad_n_probs(st->ctx.get());
            const float * p = whisper_vad_probs(st->ctx.get());
            out.assign(p, p + n);
            buf.erase(buf.begin(), buf.begin() + (std::ptrdiff_t) n_full);
            return out;
        },
        [](Napi::Env env, probs & out) -> Napi::Value {
            Napi::Float32Array arr = Napi::Float32Array::New(env, out.size());
            std::copy(out.begin(), out.end(), arr.Data());
            return arr;
        });
}

Napi::Value voxd_vad_stream::reset(const Napi::CallbackInfo & info) {
    std::shared_ptr<state> st = m_state;
    // runs behind any process() in flight, so the reset applies between calls, never inside one
    return voxd_async_worker<bool>::run(
        info.Env(), "voxd.vad.reset",
        [st]() {
            std::lock_guard<std::mutex> lock(st->mutex);
            st->pending.clear();
            if (st->ctx) {
                whisper_vad_reset_state(st->ctx.get());
            }
            return true;
        },
        [](Napi::Env env, bool &) -> Napi::Value { return env.Undefined(); });
}

Napi::Value voxd_vad_stream::close(const Napi::CallbackInfo & info) {
    std::shared_ptr<state> st = m_state;
    // queued like reset(): waits for a process() in flight instead of blocking the event loop on its mutex
    return voxd_async_worker<bool>::run(
        info.Env(), "voxd.vad.close",
        [st]() {
            std::lock_guard<std::mutex> lock(st->mutex);
            if (st->ctx && st->pool) {
                st->pool->release(std::move(st->ctx));
            }
            st->ctx.reset();
            return true;
        },
        [](Napi::Env env, bool &) -> Napi::Value { return env.Undefined(); });
}

void voxd_vad_init(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "VadModel", voxd_vad_model::define(env));
    voxd_export_class(env, exports, "VadStream", voxd_vad_stream::define(env));
}
