// AudioLmModel: an audio language model (stt/audio-lm.h) as a JS class; its transcriptions run on the model's
// batcher, stream their text through the caller's callback and settle their promises from the batcher's thread.
#include "batched-job.h"
#include "bindings.h"
#include "model-object.h"

#include "stt/audio-lm.h"

#include <algorithm>
#include <vector>

namespace {

// One transcribe() call: a job on the batcher, whose text pieces go to the caller's onText and whose end settles its
// promise (batched-job.h).
class voxd_audio_lm_job_js : public voxd_audio_lm_task, public voxd_batched_job<voxd_audio_lm_job_js, voxd_audio_lm_model> {
public:
    using voxd_batched_job::voxd_batched_job;

    bool aborted() const override { return is_aborted(); }

    void on_text(const std::string & text) override {
        if (!text.empty()) {
            report([text](Napi::Env env) { return std::vector<napi_value>{ Napi::String::New(env, text) }; });
        }
    }

    void on_done(voxd_audio_lm_result result) override {
        resolve([result = std::move(result)](Napi::Env env) { return result_to_js(env, result); });
    }

    void on_error(const std::string & code, const std::string & message) override { reject(code, message); }

private:
    static Napi::Value result_to_js(Napi::Env env, const voxd_audio_lm_result & result) {
        Napi::Object o     = Napi::Object::New(env);
        Napi::Array tokens = Napi::Array::New(env, result.tokens.size());
        for (size_t i = 0; i < result.tokens.size(); i++) {
            tokens.Set((uint32_t) i, result.tokens[i]);
        }
        o.Set("tokens", tokens);
        Napi::Float32Array logprobs = Napi::Float32Array::New(env, result.logprobs.size());
        std::copy(result.logprobs.begin(), result.logprobs.end(), logprobs.Data());
        o.Set("logprobs", logprobs);
        o.Set("text", Napi::String::New(env, result.text));
        o.Set("promptTokens", result.prompt_tokens);
        o.Set("truncated", result.truncated);
        return o;
    }
};

std::string string_option(Napi::Env env, const Napi::Object & o, const char * key, const char * where) {
    const Napi::Value v = o.Get(key);
    if (v.IsUndefined() || v.IsNull()) {
        return "";
    }
    if (!v.IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(where) + ": " + key + " must be a string");
    }
    return v.As<Napi::String>().Utf8Value();
}

// JS: `AudioLmModel.load(model, mmproj, { useGpu?, gpuDevice?, maxBatch?, threads?, ctxPerJob? }) -> Promise<AudioLmModel>`;
// `model.info()`; `model.timings()` (the batcher's sums);
// `model.transcribe(samples16k, { system?, user?, assistant?, maxTokens?, temperature?, seed? }, onText?, abort?)
//   -> Promise<{ tokens, logprobs, text, promptTokens, truncated }>`, onText(piece) called with each piece of the answer first;
// `model.release()` drops this object's hold on the weights (transcriptions in flight finish first).
class voxd_audio_lm_model_js : public voxd_model_object<voxd_audio_lm_model_js, voxd_audio_lm_model> {
public:
    static constexpr const char * k_model_name = "the audio language model";

    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "AudioLmModel",
                           {
                               StaticMethod<&voxd_audio_lm_model_js::load>("load"),
                               InstanceMethod<&voxd_audio_lm_model_js::info>("info"),
                               InstanceMethod<&voxd_audio_lm_model_js::timings>("timings"),
                               InstanceMethod<&voxd_audio_lm_model_js::transcribe>("transcribe"),
                               InstanceMethod("release", &voxd_audio_lm_model_js::release),
                               StaticValue("sampleRate", Napi::Number::New(env, 16000)),
                           });
    }

    explicit voxd_audio_lm_model_js(const Napi::CallbackInfo & info) : voxd_model_object(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);
};

Napi::Value voxd_audio_lm_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString() || !info[1].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "AudioLmModel.load(model, mmproj, options): model and mmproj must be strings");
    }
    voxd_audio_lm_options options;
    options.model  = info[0].As<Napi::String>().Utf8Value();
    options.mmproj = info[1].As<Napi::String>().Utf8Value();
    if (info[2].IsObject()) {
        const Napi::Object o = info[2].As<Napi::Object>();
        if (o.Get("useGpu").IsBoolean()) {
            options.use_gpu = o.Get("useGpu").As<Napi::Boolean>().Value();
        }
        options.gpu_device = voxd_integer_option(env, o, "gpuDevice", 0, 64, "AudioLmModel.load").value_or(options.gpu_device);
        options.max_batch  = voxd_integer_option(env, o, "maxBatch", 1, 64, "AudioLmModel.load").value_or(options.max_batch);
        options.threads    = voxd_integer_option(env, o, "threads", 1, 256, "AudioLmModel.load").value_or(options.threads);
        options.n_ctx_seq  = voxd_integer_option(env, o, "ctxPerJob", 64, 1 << 20, "AudioLmModel.load").value_or(options.n_ctx_seq);
    } else if (!info[2].IsUndefined() && !info[2].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "AudioLmModel.load(model, mmproj, options): options must be an object");
    }
    using loaded_t = std::shared_ptr<voxd_audio_lm_model>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.audio_lm.load", [options]() { return voxd_audio_lm_model::load(options); },
        [](Napi::Env env, loaded_t & model) -> Napi::Value {
            voxd_track_executor(env, model->batcher().executor());
            return wrap(env, "AudioLmModel", model, model->batcher().weight_bytes());
        });
}

Napi::Value voxd_audio_lm_model_js::info(const Napi::CallbackInfo & info) {
    Napi::Env env                 = info.Env();
    const voxd_audio_lm_info & hp = loaded(env)->batcher().info();
    Napi::Object o                = Napi::Object::New(env);
    o.Set("arch", hp.arch);
    o.Set("projector", hp.projector);
    o.Set("ctxPerJob", hp.n_ctx_seq);
    o.Set("nVocab", hp.n_vocab);
    o.Set("gpu", hp.gpu);
    return o;
}

Napi::Value voxd_audio_lm_model_js::timings(const Napi::CallbackInfo & info) {
    Napi::Env env                 = info.Env();
    const voxd_audio_lm_timings t = loaded(env)->batcher().timings();
    Napi::Object o                = Napi::Object::New(env);
    o.Set("prefillMs", (double) t.prefill_us / 1000.0);
    o.Set("prefillJobs", (double) t.prefill_jobs);
    o.Set("decodeMs", (double) t.decode_us / 1000.0);
    o.Set("decodeSteps", (double) t.decode_steps);
    o.Set("decodeCalls", (double) t.decode_calls);
    o.Set("decodeRows", (double) t.decode_rows);
    o.Set("maxStepRows", (double) t.max_step_rows);
    return o;
}

Napi::Value voxd_audio_lm_model_js::transcribe(const Napi::CallbackInfo & info) {
    Napi::Env env                              = info.Env();
    std::shared_ptr<voxd_audio_lm_model> model = loaded(env);
    voxd_audio_lm_request request;
    request.samples              = voxd_copy_samples(info[0], "samples");
    constexpr const char * where = "AudioLmModel.transcribe";
    if (info[1].IsObject()) {
        const Napi::Object o = info[1].As<Napi::Object>();
        request.has_system   = o.Get("system").IsString(); // an empty one too
        request.system       = string_option(env, o, "system", where);
        request.user         = string_option(env, o, "user", where);
        request.assistant    = string_option(env, o, "assistant", where);
        request.max_tokens   = voxd_integer_option(env, o, "maxTokens", 0, 1 << 30, where).value_or(0);
        const Napi::Value t  = o.Get("temperature");
        if (t.IsNumber()) {
            request.temperature = std::max(0.0f, t.As<Napi::Number>().FloatValue());
        }
        const Napi::Value seed = o.Get("seed");
        if (seed.IsNumber()) {
            request.seed = seed.As<Napi::Number>().Uint32Value();
        }
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "AudioLmModel.transcribe(samples, params): params must be an object");
    }
    if (!info[2].IsUndefined() && !info[2].IsNull() && !info[2].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "AudioLmModel.transcribe: onText must be a function");
    }
    auto job              = std::make_shared<voxd_audio_lm_job_js>(model, voxd_abort_flag::from_value(info[3]));
    Napi::Promise promise = job->start(env, "voxd.audio_lm.job", info[2]);
    try {
        model->batcher().submit(job, std::move(request)); // queues it: the executor thread does the work
    } catch (const voxd_error & e) {
        job->on_error(e.code, e.what());
    }
    return promise;
}

} // namespace

void voxd_bind_audio_lm(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "AudioLmModel", voxd_audio_lm_model_js::define(env));
}
