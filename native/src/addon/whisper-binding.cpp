// WhisperModel: a Whisper model (stt/whisper-model.h) as a JS class; its transcriptions (stt/whisper-transcription.h)
// run on the model's batcher or on a worker, and stream their segments to JS.
#include "async.h"
#include "bindings.h"
#include "model-object.h"

#include "stt/whisper-model.h"
#include "stt/whisper-transcription.h"

#include <atomic>
#include <climits>
#include <cmath>
#include <optional>

namespace {

// ---- one transcription ----

// One transcribe() call as JS sees it: segments stream through a thread-safe function while it runs, and its end
// settles a promise (a batched job's from the batcher's thread, through the same function). Shared by the worker
// or batcher, the promise settlement and every queued segment delivery, so it lives until the last of them is done.
class voxd_whisper_job : public voxd_whisper_transcription, public std::enable_shared_from_this<voxd_whisper_job> {
public:
    using voxd_whisper_transcription::voxd_whisper_transcription;

    // Segments go to JS through this while the job runs. transcribe() creates it on the main thread with one
    // thread reference, which belongs to the job's runner: it calls non-blocking (an unbounded queue, so never
    // waiting on JS) and releases the reference exactly once, when the job ends; Node frees the TSFN after the calls
    // still queued have run. Each queued call holds the job (shared_ptr) it delivers for. A batched job always has
    // one (it also settles the promise); on whisper.cpp's path only when the caller streams.
    Napi::ThreadSafeFunction tsfn;
    bool streaming = false;
    std::shared_ptr<Napi::FunctionReference> callback; // the caller's onSegment; main thread only
    std::unique_ptr<Napi::Promise::Deferred> deferred; // a batched job's promise; main thread only

    // ---- a batched job's end, on the batcher's thread ----

    void on_done(const std::string & language) override {
        settle([language](Napi::Env env, voxd_whisper_job & job) { job.deferred->Resolve(job.result_to_js(env, language)); });
    }

    void on_error(const std::string & code, const std::string & message) override {
        m_failed.store(true); // set before the rejection, so no segment reaches JS after it
        settle([code, message](Napi::Env env, voxd_whisper_job & job) { job.deferred->Reject(voxd_make_js_error(env, code, message).Value()); });
    }

    // Worker thread: runs the transcription on whisper.cpp's path; returns the language.
    std::string execute() {
        struct tsfn_release {
            voxd_whisper_job & job;
            ~tsfn_release() {
                if (job.streaming)
                    job.tsfn.Release();
            }
        } guard{ *this };
        try {
            return run_whisper_cpp();
        } catch (...) {
            m_failed.store(true); // set before the rejection, so no segment reaches JS after it
            throw;
        }
    }

    // Main thread: hands the segments not yet delivered to `fn`, in order. Called by queued TSFN calls and once
    // more before the promise settles, so every segment arrives exactly once and before the result.
    void deliver(Napi::Env env, Napi::Function fn) {
        if (m_failed.load()) {
            return;
        }
        const size_t first = m_delivered;
        std::string language;
        const std::vector<voxd_whisper_segment> batch = segments_since(m_delivered, language);
        for (size_t k = 0; k < batch.size() && !aborted(); k++) { // nothing more once the caller gave up
            try {
                fn.Call({ segment_to_js(env, batch[k], first + k), Napi::String::New(env, language) });
            } catch (const Napi::Error &) {
                // the exception is cleared; it must not escape into libuv. The engine's wrapper catches its own.
            }
        }
    }

    Napi::Value result_to_js(Napi::Env env, const std::string & language) {
        size_t from = 0;
        std::string detected;
        const std::vector<voxd_whisper_segment> all = segments_since(from, detected);
        Napi::Object out                            = Napi::Object::New(env);
        out.Set("language", language);
        Napi::Array segments = Napi::Array::New(env, all.size());
        for (size_t i = 0; i < all.size(); i++) {
            segments.Set((uint32_t) i, segment_to_js(env, all[i], i));
        }
        out.Set("segments", segments);
        return out;
    }

protected:
    void segment_added() override {
        if (streaming) {
            tsfn.NonBlockingCall([job = shared_from_this()](Napi::Env env, Napi::Function fn) { job->deliver(env, fn); });
        }
    }

private:
    // A batched job ends: the segments still queued, then the promise, on the main thread; the TSFN is released.
    template <typename F> void settle(F finish) {
        if (m_settled.exchange(true)) {
            return;
        }
        drop_samples(); // a long clip's copy need not outlive the decoding
        const napi_status queued = tsfn.NonBlockingCall([job = shared_from_this(), finish](Napi::Env env, Napi::Function) {
            try {
                if (job->callback) {
                    job->deliver(env, job->callback->Value());
                }
                finish(env, *job);
            } catch (const Napi::Error &) {
                // the promise stays pending only if V8 itself failed; nothing may escape into libuv
            }
            job->callback.reset(); // a JS reference: deleted here, on the main thread, not where the job ends
        });
        if (queued != napi_ok && callback) {
            callback->SuppressDestruct(); // the environment is going away: the reference goes with it
        }
        tsfn.Release();
    }

    static Napi::Value segment_to_js(Napi::Env env, const voxd_whisper_segment & seg, size_t index) {
        Napi::Object o = Napi::Object::New(env);
        o.Set("index", (double) index);
        o.Set("start", (double) seg.t0 / 100.0);
        o.Set("end", (double) seg.t1 / 100.0);
        o.Set("text", seg.text);
        Napi::Array tokens = Napi::Array::New(env, seg.tokens.size());
        for (size_t i = 0; i < seg.tokens.size(); i++) {
            tokens.Set((uint32_t) i, seg.tokens[i]);
        }
        o.Set("tokens", tokens);
        o.Set("avgLogprob", seg.avg_logprob);
        o.Set("noSpeechProb", seg.no_speech_prob);
        o.Set("temperature", std::round((double) seg.temperature * 1000.0) / 1000.0); // 0.2f, not 0.200000003
        if (!seg.words.empty()) {
            Napi::Array words = Napi::Array::New(env, seg.words.size());
            for (size_t i = 0; i < seg.words.size(); i++) {
                Napi::Object w = Napi::Object::New(env);
                w.Set("word", seg.words[i].word);
                w.Set("start", (double) seg.words[i].t0 / 100.0);
                w.Set("end", (double) seg.words[i].t1 / 100.0);
                w.Set("probability", seg.words[i].probability);
                words.Set((uint32_t) i, w);
            }
            o.Set("words", words);
        }
        return o;
    }

    std::atomic<bool> m_failed{ false };  // the job failed: segments still queued are dropped
    std::atomic<bool> m_settled{ false }; // a batched job's end was reported
    size_t m_delivered = 0;               // segments JS has received; main thread only
};

// ---- argument parsing (main thread) ----

voxd_whisper_params voxd_whisper_parse_params(Napi::Env env, const Napi::Value & value, const voxd_whisper_model & model) {
    voxd_whisper_params params;
    if (value.IsUndefined() || value.IsNull()) {
        return params;
    }
    if (!value.IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "params must be an object");
    }
    Napi::Object p  = value.As<Napi::Object>();
    auto bad        = [&](const std::string & message) { return voxd_make_js_error(env, "invalid_argument", message); };
    auto opt_string = [&](const char * key) -> std::string {
        Napi::Value v = p.Get(key);
        if (v.IsUndefined() || v.IsNull())
            return "";
        if (!v.IsString())
            throw bad(std::string(key) + " must be a string");
        return v.As<Napi::String>().Utf8Value();
    };
    auto opt_bool = [&](const char * key, bool fallback) {
        Napi::Value v = p.Get(key);
        if (v.IsUndefined() || v.IsNull())
            return fallback;
        if (!v.IsBoolean())
            throw bad(std::string(key) + " must be a boolean");
        return v.As<Napi::Boolean>().Value();
    };
    auto opt_number = [&](const char * key, double fallback, double lo, double hi) {
        Napi::Value v = p.Get(key);
        if (v.IsUndefined() || v.IsNull())
            return fallback;
        const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
        if (!(d >= lo && d <= hi))
            throw bad(std::string(key) + " must be a number in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
        return d;
    };

    const bool multilingual    = model.batcher().multilingual();
    const std::string language = opt_string("language");
    if (!language.empty() && language != "auto") {
        params.language = model.language_code(language);
        if (params.language.empty()) {
            throw bad(multilingual ? "unknown language '" + language + "'" : "this model is English-only; it cannot transcribe '" + language + "'");
        }
    }
    params.translate = opt_bool("translate", false);
    if (params.translate && !multilingual) {
        throw bad("this model is English-only; it cannot translate");
    }
    params.initial_prompt  = opt_string("initialPrompt");
    params.temperature     = (float) opt_number("temperature", 0.0, 0.0, 1.0);
    params.temperature_inc = (float) opt_number("temperatureInc", 0.2, 0.0, 1.0);
    params.max_tokens      = (int) opt_number("maxTokens", 0, 0, 1 << 20);
    params.word_timestamps = opt_bool("wordTimestamps", false);
    params.threads         = (int) opt_number("threads", 0, 0, 256);
    params.no_context      = opt_bool("noContext", false);
    return params;
}

// ---- model ----

// JS: `WhisperModel.load(path, { useGpu?, flashAttn?, gpuDevice?, maxIdleStates?, maxBatch?, threads? }) ->
// Promise<WhisperModel>`; `model.info()`; `model.timings()` (the batcher's sums);
// `model.transcribe(samples16k, params?, onSegment?, abort?) -> Promise<{ language, segments }>`;
// `model.release()` drops this object's hold on the weights (transcriptions in flight finish first).
class voxd_whisper_model_js : public voxd_model_object<voxd_whisper_model_js, voxd_whisper_model> {
public:
    static constexpr const char * k_model_name = "the whisper model";

    static Napi::Function define(Napi::Env env);
    explicit voxd_whisper_model_js(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value info(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);
    Napi::Value timings(const Napi::CallbackInfo & info);
};

Napi::Function voxd_whisper_model_js::define(Napi::Env env) {
    return DefineClass(env, "WhisperModel",
                       {
                           StaticMethod<&voxd_whisper_model_js::load>("load"),
                           InstanceMethod<&voxd_whisper_model_js::info>("info"),
                           InstanceMethod<&voxd_whisper_model_js::transcribe>("transcribe"),
                           InstanceMethod<&voxd_whisper_model_js::timings>("timings"),
                           InstanceMethod("release", &voxd_whisper_model_js::release),
                           StaticValue("sampleRate", Napi::Number::New(env, WHISPER_SAMPLE_RATE)),
                       });
}

voxd_whisper_model_js::voxd_whisper_model_js(const Napi::CallbackInfo & info) : voxd_model_object(info) {}

Napi::Value voxd_whisper_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "WhisperModel.load(path, options): path must be a string");
    }
    const std::string path = info[0].As<Napi::String>().Utf8Value();
    voxd_whisper_load_options options;
    if (info[1].IsObject()) {
        Napi::Object o = info[1].As<Napi::Object>();
        auto integer   = [&](const char * key, int lo, int hi) { return voxd_integer_option(env, o, key, lo, hi, "WhisperModel.load"); };
        if (o.Get("useGpu").IsBoolean())
            options.use_gpu = o.Get("useGpu").As<Napi::Boolean>().Value();
        if (o.Get("flashAttn").IsBoolean())
            options.flash_attn = o.Get("flashAttn").As<Napi::Boolean>().Value();
        if (auto v = integer("gpuDevice", 0, 64))
            options.gpu_device = *v;
        if (auto v = integer("maxIdleStates", 0, 64))
            options.max_idle_states = (size_t) *v;
        if (auto v = integer("maxBatch", 1, 256))
            options.batch.max_batch = *v;
        if (auto v = integer("threads", 0, 256))
            options.batch.threads = *v;
        if (auto v = integer("maxEncode", 0, 256))
            options.batch.max_encode = *v;
    } else if (!info[1].IsUndefined() && !info[1].IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "WhisperModel.load(path, options): options must be an object");
    }

    using loaded_t = std::shared_ptr<voxd_whisper_model>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.whisper.load", [path, options]() { return voxd_whisper_model::load(path, options); },
        [](Napi::Env env, loaded_t & model) -> Napi::Value {
            voxd_track_executor(env, model->batcher().executor());
            return wrap(env, "WhisperModel", model, model->weight_bytes());
        });
}

Napi::Value voxd_whisper_model_js::info(const Napi::CallbackInfo & info) {
    Napi::Env env                               = info.Env();
    std::shared_ptr<voxd_whisper_model> whisper = loaded(env);
    const voxd_whisper_batcher & model          = whisper->batcher(); // hparams are immutable: safe beside running work
    const std::vector<int32_t> hp               = model.hparams();
    Napi::Object o                              = Napi::Object::New(env);
    o.Set("multilingual", model.multilingual());
    o.Set("type", whisper->size_name());
    const char * names[] = { "nVocab",     "nAudioCtx", "nAudioState", "nAudioHead", "nAudioLayer", "nTextCtx",
                             "nTextState", "nTextHead", "nTextLayer",  "nMels",      "ftype" };
    for (size_t i = 0; i < hp.size(); i++) {
        o.Set(names[i], hp[i]);
    }
    o.Set("gpu", model.on_gpu());
    const std::vector<std::string> codes = whisper->languages();
    Napi::Array languages                = Napi::Array::New(env, codes.size());
    for (size_t id = 0; id < codes.size(); id++) {
        languages.Set((uint32_t) id, codes[id]);
    }
    o.Set("languages", languages);
    return o;
}

Napi::Value voxd_whisper_model_js::timings(const Napi::CallbackInfo & info) {
    Napi::Env env                      = info.Env();
    const voxd_whisper_batch_timings t = loaded(env)->batcher().timings();
    Napi::Object o                     = Napi::Object::New(env);
    o.Set("encodeMs", (double) t.encode_us / 1000.0);
    o.Set("encodeCalls", (double) t.encode_calls);
    o.Set("encodeWindows", (double) t.encode_windows);
    o.Set("decodeMs", (double) t.decode_us / 1000.0);
    o.Set("decodeCalls", (double) t.decode_calls);
    o.Set("decodeRows", (double) t.decode_rows);
    o.Set("sampleMs", (double) t.sample_us / 1000.0);
    return o;
}

Napi::Value voxd_whisper_model_js::transcribe(const Napi::CallbackInfo & info) {
    Napi::Env env                             = info.Env();
    std::shared_ptr<voxd_whisper_model> model = loaded(env);
    std::vector<float> samples                = voxd_copy_samples(info[0], "samples");
    if (samples.size() > (size_t) INT32_MAX) {
        throw voxd_make_js_error(env, "invalid_argument", "samples: too long for whisper.cpp (at most 2^31 - 1)");
    }
    voxd_whisper_params params = voxd_whisper_parse_params(env, info[1], *model);
    if (!info[2].IsUndefined() && !info[2].IsNull() && !info[2].IsFunction()) {
        throw voxd_make_js_error(env, "invalid_argument", "onSegment must be a function");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[3]);
    const bool batched   = !params.word_timestamps; // the batcher makes no word timestamps: whisper.cpp's path does

    auto job = std::make_shared<voxd_whisper_job>(model, std::move(params), std::move(samples), abort);
    // the final flush calls the callback directly; the reference lives with the job, used on the main thread only
    if (info[2].IsFunction()) {
        Napi::Function fn = info[2].As<Napi::Function>();
        job->callback     = std::make_shared<Napi::FunctionReference>(Napi::Persistent(fn));
        job->tsfn         = Napi::ThreadSafeFunction::New(env, fn, "voxd.whisper.segment", 0 /* unbounded queue */, 1 /* the runner */);
        job->streaming    = true;
    }

    if (batched) {
        if (!job->streaming) { // the TSFN also settles the promise: a batched job always has one
            job->tsfn = Napi::ThreadSafeFunction::New(env, Napi::Function::New(env, [](const Napi::CallbackInfo &) {}), "voxd.whisper.job", 0, 1);
        }
        job->deferred         = std::make_unique<Napi::Promise::Deferred>(Napi::Promise::Deferred::New(env));
        Napi::Promise promise = job->deferred->Promise();
        voxd_run_in_background(env, "voxd.whisper.submit", [job, model]() {
            try {
                model->batcher().submit(job); // computes the features here, off the event loop
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
    return voxd_async_worker<std::string>::run(
        env, "voxd.whisper.transcribe", [job]() { return job->execute(); },
        [job](Napi::Env env, std::string & language) -> Napi::Value {
            if (job->callback) {
                job->deliver(env, job->callback->Value()); // segments still queued in the TSFN arrive before the result
            }
            return job->result_to_js(env, language);
        });
}

} // namespace

void voxd_bind_whisper(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "WhisperModel", voxd_whisper_model_js::define(env));
}
