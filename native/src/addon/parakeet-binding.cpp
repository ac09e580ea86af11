// ParakeetModel: a Parakeet TDT model (stt/parakeet-model.h) as a JS class; its transcriptions run on the model's
// batcher and settle their promises from its thread.
#include "batched-job.h"
#include "bindings.h"
#include "model-object.h"

#include "stt/parakeet-model.h"

namespace {

// One transcribe() call: a clip on the batcher, whose end settles its promise (batched-job.h).
class voxd_parakeet_job : public voxd_parakeet_task, public voxd_batched_job<voxd_parakeet_job, voxd_parakeet_model> {
public:
    using voxd_batched_job::voxd_batched_job;

    bool aborted() const override { return is_aborted(); }

    void on_done(std::vector<voxd_parakeet_token> tokens) override {
        resolve([tokens = std::move(tokens)](Napi::Env env) { return tokens_to_js(env, tokens); });
    }

    void on_error(const std::string & code, const std::string & message) override { reject(code, message); }

private:
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
};

// JS: `ParakeetModel.load(path, { useGpu?, gpuDevice?, maxBatch?, threads?, maxEncode? }) -> Promise<ParakeetModel>`;
// `model.info()`; `model.timings()` (the batcher's sums);
// `model.transcribe(samples16k, { maxTokens? }, abort?) -> Promise<ParakeetToken[]>` (times in seconds);
// `model.release()` drops this object's hold on the weights (transcriptions in flight finish first).
class voxd_parakeet_model_js : public voxd_model_object<voxd_parakeet_model_js, voxd_parakeet_model> {
public:
    static constexpr const char * k_model_name = "the Parakeet model";

    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "ParakeetModel",
                           {
                               StaticMethod<&voxd_parakeet_model_js::load>("load"),
                               InstanceMethod<&voxd_parakeet_model_js::info>("info"),
                               InstanceMethod<&voxd_parakeet_model_js::timings>("timings"),
                               InstanceMethod<&voxd_parakeet_model_js::transcribe>("transcribe"),
                               InstanceMethod("release", &voxd_parakeet_model_js::release),
                               StaticValue("sampleRate", Napi::Number::New(env, 16000)),
                           });
    }

    explicit voxd_parakeet_model_js(const Napi::CallbackInfo & info) : voxd_model_object(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);
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
            voxd_track_executor(env, model->batcher().executor());
            return wrap(env, "ParakeetModel", model, model->weight_bytes());
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
    Napi::Promise promise = job->start(env, "voxd.parakeet.job", env.Undefined());
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
