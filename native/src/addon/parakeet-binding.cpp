// ParakeetModel: a Parakeet TDT model (stt/parakeet-model.h) as a JS class; its transcriptions run on the model's
// batcher and settle their promises from its thread.
#include "async.h"
#include "bindings.h"

#include "stt/parakeet-model.h"

#include <atomic>

namespace {

// One transcribe() call: a clip on the batcher, whose end settles a promise on the main thread through a thread-safe
// function. It holds the model, so a released model's weights stay until its last clip ends; the queued settlement
// holds the job, so the job (and usually the model's last hold) ends on the main thread.
class voxd_parakeet_job : public voxd_parakeet_task, public std::enable_shared_from_this<voxd_parakeet_job> {
public:
    voxd_parakeet_job(std::shared_ptr<voxd_parakeet_model> model, voxd_abort_ptr abort) : m_model(std::move(model)), m_abort(std::move(abort)) {}

    // Created on the main thread with one thread reference, which settle() releases exactly once.
    Napi::ThreadSafeFunction tsfn;
    std::unique_ptr<Napi::Promise::Deferred> deferred; // main thread only

    bool aborted() const override { return m_abort->load(std::memory_order_relaxed); }

    void on_done(std::vector<voxd_parakeet_token> tokens) override {
        settle([tokens = std::move(tokens)](Napi::Env env, voxd_parakeet_job & job) { job.deferred->Resolve(tokens_to_js(env, tokens)); });
    }

    void on_error(const std::string & code, const std::string & message) override {
        settle([code, message](Napi::Env env, voxd_parakeet_job & job) { job.deferred->Reject(voxd_make_js_error(env, code, message).Value()); });
    }

private:
    template <typename F> void settle(F finish) {
        if (m_settled.exchange(true)) {
            return;
        }
        tsfn.NonBlockingCall([job = shared_from_this(), finish = std::move(finish)](Napi::Env env, Napi::Function) {
            try {
                finish(env, *job);
            } catch (const Napi::Error &) {
                // the promise stays pending only if V8 itself failed; nothing may escape into libuv
            }
        });
        tsfn.Release();
    }

    static Napi::Value tokens_to_js(Napi::Env env, const std::vector<voxd_parakeet_token> & tokens) {
        constexpr double frames_per_second = 100.0; // times are mel frames; dividing keeps 3.28 exact
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
    }

    std::shared_ptr<voxd_parakeet_model> m_model;
    voxd_abort_ptr m_abort;
    std::atomic<bool> m_settled{ false };
};

// JS: `ParakeetModel.load(path, { useGpu?, gpuDevice?, maxBatch?, threads?, maxEncode? }) -> Promise<ParakeetModel>`;
// `model.info()`; `model.timings()` (the batcher's sums);
// `model.transcribe(samples16k, { maxTokens? }, abort?) -> Promise<ParakeetToken[]>` (times in seconds);
// `model.release()` drops this object's hold on the weights (transcriptions in flight finish first).
class voxd_parakeet_model_js : public Napi::ObjectWrap<voxd_parakeet_model_js> {
public:
    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "ParakeetModel",
                           {
                               StaticMethod<&voxd_parakeet_model_js::load>("load"),
                               InstanceMethod<&voxd_parakeet_model_js::info>("info"),
                               InstanceMethod<&voxd_parakeet_model_js::timings>("timings"),
                               InstanceMethod<&voxd_parakeet_model_js::transcribe>("transcribe"),
                               InstanceMethod<&voxd_parakeet_model_js::release>("release"),
                               StaticValue("sampleRate", Napi::Number::New(env, 16000)),
                           });
    }

    explicit voxd_parakeet_model_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_parakeet_model_js>(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
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
    voxd_parakeet_batch_options options;
    if (info[1].IsObject()) {
        const Napi::Object o = info[1].As<Napi::Object>();
        if (o.Get("useGpu").IsBoolean()) {
            options.use_gpu = o.Get("useGpu").As<Napi::Boolean>().Value();
        }
        options.gpu_device = voxd_integer_option(env, o, "gpuDevice", 0, 64, "ParakeetModel.load").value_or(options.gpu_device);
        options.max_batch  = voxd_integer_option(env, o, "maxBatch", 1, 256, "ParakeetModel.load").value_or(options.max_batch);
        options.threads    = voxd_integer_option(env, o, "threads", 1, 256, "ParakeetModel.load").value_or(options.threads);
        options.max_encode = voxd_integer_option(env, o, "maxEncode", 1, 256, "ParakeetModel.load").value_or(options.max_encode);
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "ParakeetModel.load(path, options): options must be an object");
    }
    using loaded_t = std::shared_ptr<voxd_parakeet_model>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.parakeet.load", [path, options]() { return voxd_parakeet_model::load(path, options); },
        [](Napi::Env env, loaded_t & model) -> Napi::Value {
            Napi::Object obj     = voxd_class(env, "ParakeetModel").New({});
            Unwrap(obj)->m_model = model;
            voxd_track_executor(env, model->batcher().executor());
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
    o.Set("gpu", model->batcher().on_gpu());
    return o;
}

Napi::Value voxd_parakeet_model_js::timings(const Napi::CallbackInfo & info) {
    Napi::Env env                       = info.Env();
    const voxd_parakeet_batch_timings t = loaded(env)->batcher().timings();
    Napi::Object o                      = Napi::Object::New(env);
    o.Set("encodeMs", (double) t.encode_us / 1000.0);
    o.Set("encodeCalls", (double) t.encode_calls);
    o.Set("encodeClips", (double) t.encode_clips);
    o.Set("decodeMs", (double) t.decode_us / 1000.0);
    o.Set("decodeCalls", (double) t.decode_calls);
    o.Set("decodeRows", (double) t.decode_rows);
    o.Set("maxStepRows", (double) t.max_step_rows);
    return o;
}

Napi::Value voxd_parakeet_model_js::transcribe(const Napi::CallbackInfo & info) {
    Napi::Env env                              = info.Env();
    std::shared_ptr<voxd_parakeet_model> model = loaded(env);
    std::vector<float> samples                 = voxd_copy_samples(info[0], "samples");
    int max_tokens                             = 0;
    if (info[1].IsObject()) {
        max_tokens = voxd_integer_option(env, info[1].As<Napi::Object>(), "maxTokens", 0, 1 << 30, "ParakeetModel.transcribe").value_or(0);
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "ParakeetModel.transcribe(samples, params): params must be an object");
    }
    auto job              = std::make_shared<voxd_parakeet_job>(model, voxd_abort_flag::from_value(info[2]));
    job->tsfn             = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo &) {}), "voxd.parakeet.job", 0, 1);
    job->deferred         = std::make_unique<Napi::Promise::Deferred>(Napi::Promise::Deferred::New(env));
    Napi::Promise promise = job->deferred->Promise();
    voxd_run_in_background(env, "voxd.parakeet.submit", [job, model, samples = std::move(samples), max_tokens]() {
        try {
            model->batcher().submit(job, samples, max_tokens); // computes the mel here, off the event loop
        } catch (const voxd_error & e) {
            job->on_error(e.code, e.what());
        } catch (const std::bad_alloc &) {
            job->on_error("out_of_memory", "out of memory");
        } catch (const std::exception & e) {
            job->on_error("transcription_failed", e.what());
        }
    });
    return promise;
}

} // namespace

void voxd_bind_parakeet(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "ParakeetModel", voxd_parakeet_model_js::define(env));
}
