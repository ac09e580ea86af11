// KokoroModel: Kokoro-82M (tts/kokoro/kokoro-model.h) as a JS class, each synthesize() call one batch on a worker
// thread; its text frontend (tts/kokoro/phonemizer.h); and the PyTorch checkpoint reader (common/torch-checkpoint.h)
// for voice packs.
#include "async.h"
#include "batched-job.h"
#include "bindings.h"
#include "model-object.h"

#include "common/torch-checkpoint.h"
#include "tts/kokoro/kokoro-model.h"
#include "tts/kokoro/phonemizer.h"

#include <cmath>

namespace {

// JS: `KokoroModel.load({ checkpoint, bertLayers?, bertHeads?, threads? }) -> Promise<KokoroModel>`; `model.info()`;
// `model.synthesize(inputs: { ids: Int32Array, style: Float32Array, speed, seed, noise, given? }[], { stages? }, abort?)
//   -> Promise<{ audio: Float32Array, durations: Int32Array, stages?: Record<string, Float32Array> }[]>`;
// `model.timings()` (where synthesis time went, summed); `model.release()` drops this object's hold on the weights (a synthesis in flight finishes first).
class voxd_kokoro_model_js : public voxd_model_object<voxd_kokoro_model_js, voxd_kokoro_model> {
public:
    static constexpr const char * k_model_name = "the Kokoro model";

    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "KokoroModel",
                           {
                               StaticMethod<&voxd_kokoro_model_js::load>("load"),
                               InstanceMethod<&voxd_kokoro_model_js::info>("info"),
                               InstanceMethod<&voxd_kokoro_model_js::synthesize>("synthesize"),
                               InstanceMethod<&voxd_kokoro_model_js::timings>("timings"),
                               InstanceMethod("release", &voxd_kokoro_model_js::release),
                           });
    }

    explicit voxd_kokoro_model_js(const Napi::CallbackInfo & info) : voxd_model_object(info) {}

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value synthesize(const Napi::CallbackInfo & info);

    Napi::Value info(const Napi::CallbackInfo & info) {
        Napi::Env env  = info.Env();
        auto model     = loaded(env);
        Napi::Object o = Napi::Object::New(env);
        o.Set("sampleRate", VOXD_KOKORO_SAMPLE_RATE);
        o.Set("vocabSize", voxd_kokoro_vocab_size(*model));
        o.Set("weightBytes", (double) voxd_kokoro_weight_bytes(*model));
        return o;
    }

    Napi::Value timings(const Napi::CallbackInfo & info) {
        Napi::Env env                 = info.Env();
        const voxd_kokoro_timings & t = voxd_kokoro_get_timings(*loaded(env));
        Napi::Object o                = Napi::Object::New(env);
        o.Set("calls", (double) t.calls);
        o.Set("rows", (double) t.rows);
        o.Set("frames", (double) t.frames);
        o.Set("textMs", (double) t.text_us / 1000.0);
        o.Set("prosodyMs", (double) t.prosody_us / 1000.0);
        o.Set("sourceMs", (double) t.source_us / 1000.0);
        o.Set("decoderMs", (double) t.decoder_us / 1000.0);
        o.Set("istftMs", (double) t.istft_us / 1000.0);
        return o;
    }
};

Napi::Value voxd_kokoro_model_js::load(const Napi::CallbackInfo & info) {
    Napi::Env env      = info.Env();
    const char * where = "KokoroModel.load";
    if (!info[0].IsObject() || !info[0].As<Napi::Object>().Get("checkpoint").IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(where) + "(options): options.checkpoint must be a string");
    }
    const Napi::Object o = info[0].As<Napi::Object>();
    voxd_kokoro_load_options options;
    options.checkpoint  = o.Get("checkpoint").As<Napi::String>().Utf8Value();
    options.bert_layers = voxd_integer_option(env, o, "bertLayers", 1, 64, where).value_or(options.bert_layers);
    options.bert_heads  = voxd_integer_option(env, o, "bertHeads", 1, 64, where).value_or(options.bert_heads);
    options.threads     = voxd_integer_option(env, o, "threads", 1, 256, where).value_or(options.threads);
    using loaded_t      = std::shared_ptr<voxd_kokoro_model>;
    return voxd_async_worker<loaded_t>::run(
        env, "voxd.kokoro.load", [options]() { return voxd_kokoro_load(options); },
        [](Napi::Env env, loaded_t & model) -> Napi::Value { return wrap(env, "KokoroModel", model, voxd_kokoro_weight_bytes(*model)); });
}

Napi::Value voxd_kokoro_model_js::synthesize(const Napi::CallbackInfo & info) {
    Napi::Env env      = info.Env();
    const char * usage = "KokoroModel.synthesize(inputs, options, abort?)";
    auto model         = loaded(env);
    if (!info[0].IsArray()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": inputs must be an array");
    }
    const Napi::Array list = info[0].As<Napi::Array>();
    std::vector<voxd_kokoro_input> inputs(list.Length());
    for (uint32_t i = 0; i < list.Length(); i++) {
        const Napi::Value item = list.Get(i);
        if (!item.IsObject() || !item.As<Napi::Object>().Get("ids").IsTypedArray()) {
            throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": each input needs ids (an Int32Array)");
        }
        const Napi::Object o       = item.As<Napi::Object>();
        const Napi::TypedArray ids = o.Get("ids").As<Napi::TypedArray>();
        if (ids.TypedArrayType() != napi_int32_array) {
            throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": ids must be an Int32Array");
        }
        const Napi::Int32Array id_array = ids.As<Napi::Int32Array>();
        inputs[i].ids.assign(id_array.Data(), id_array.Data() + id_array.ElementLength());
        inputs[i].style = voxd_copy_samples(o.Get("style"), "style");
        if (o.Get("speed").IsNumber()) {
            inputs[i].speed = o.Get("speed").As<Napi::Number>().FloatValue();
        }
        if (o.Get("seed").IsNumber()) {
            const double seed = o.Get("seed").As<Napi::Number>().DoubleValue();
            if (!(seed >= 0 && seed <= 9007199254740991.0 && seed == std::floor(seed))) {
                throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": seed must be a non-negative integer");
            }
            inputs[i].seed = (uint64_t) seed;
        }
        if (o.Get("noise").IsBoolean()) {
            inputs[i].noise = o.Get("noise").As<Napi::Boolean>().Value();
        }
        if (o.Get("given").IsObject()) {
            const Napi::Object given = o.Get("given").As<Napi::Object>();
            const Napi::Array names  = given.GetPropertyNames();
            for (uint32_t k = 0; k < names.Length(); k++) {
                const std::string name = names.Get(k).As<Napi::String>().Utf8Value();
                inputs[i].given[name]  = voxd_copy_samples(given.Get(name), "a given stage");
            }
        }
    }
    bool keep_stages = false;
    if (info[1].IsObject() && info[1].As<Napi::Object>().Get("stages").IsBoolean()) {
        keep_stages = info[1].As<Napi::Object>().Get("stages").As<Napi::Boolean>().Value();
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[2]);
    using result_t       = std::vector<voxd_kokoro_output>;
    return voxd_async_worker<result_t>::run(
        env, "voxd.kokoro.synthesize",
        [model, inputs = std::move(inputs), keep_stages, abort]() { return voxd_kokoro_synthesize(*model, inputs, keep_stages, abort); },
        [keep_stages](Napi::Env env, result_t & outputs) -> Napi::Value {
            Napi::Array out = Napi::Array::New(env, outputs.size());
            for (size_t i = 0; i < outputs.size(); i++) {
                Napi::Object o = Napi::Object::New(env);
                o.Set("audio", voxd_owned_array<Napi::Float32Array>(env, std::move(outputs[i].audio)));
                o.Set("durations", voxd_owned_array<Napi::Int32Array>(env, std::move(outputs[i].durations)));
                if (keep_stages) {
                    Napi::Object stages = Napi::Object::New(env);
                    for (auto & [name, values] : outputs[i].stages) {
                        stages.Set(name, voxd_owned_array<Napi::Float32Array>(env, std::move(values)));
                    }
                    o.Set("stages", stages);
                }
                out.Set((uint32_t) i, o);
            }
            return out;
        });
}

// JS: `readTorchTensor(path, name) -> Promise<{ shape: number[], data: Float32Array }>` (a voice pack: name "").
Napi::Value voxd_read_torch_tensor_js(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString() || !info[1].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "readTorchTensor(path, name): path and name must be strings");
    }
    struct tensor {
        std::vector<int64_t> shape;
        std::vector<float> data;
    };
    return voxd_async_worker<tensor>::run(
        env, "voxd.torch.read",
        [path = info[0].As<Napi::String>().Utf8Value(), name = info[1].As<Napi::String>().Utf8Value()]() {
            const voxd_torch_checkpoint checkpoint(path);
            return tensor{ checkpoint.info(name).shape, checkpoint.read_f32(name) };
        },
        [](Napi::Env env, tensor & t) -> Napi::Value {
            Napi::Object o    = Napi::Object::New(env);
            Napi::Array shape = Napi::Array::New(env, t.shape.size());
            for (size_t i = 0; i < t.shape.size(); i++) {
                shape.Set((uint32_t) i, (double) t.shape[i]);
            }
            o.Set("shape", shape);
            o.Set("data", voxd_owned_array<Napi::Float32Array>(env, std::move(t.data)));
            return o;
        });
}

// JS: `kokoroPhonemes(text, langCode, dataDir) -> Promise<{ phonemes, textBegin, textEnd }[]>` (espeak-ng's data
// in `dataDir`, "" for the directory it was built with).
Napi::Value voxd_kokoro_phonemes_js(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsString() || !info[1].IsString() || !info[2].IsString()) {
        throw voxd_make_js_error(env, "invalid_argument", "kokoroPhonemes(text, langCode, dataDir): all three must be strings");
    }
    using result_t = std::vector<voxd_kokoro_piece>;
    return voxd_async_worker<result_t>::run(
        env, "voxd.kokoro.phonemes",
        [text = info[0].As<Napi::String>().Utf8Value(), lang = info[1].As<Napi::String>().Utf8Value(), dir = info[2].As<Napi::String>().Utf8Value()]() {
            return voxd_kokoro_phonemizer(dir).chunks(text, lang);
        },
        [](Napi::Env env, result_t & pieces) -> Napi::Value {
            Napi::Array out = Napi::Array::New(env, pieces.size());
            for (size_t i = 0; i < pieces.size(); i++) {
                Napi::Object o = Napi::Object::New(env);
                o.Set("phonemes", pieces[i].phonemes);
                o.Set("textBegin", (double) pieces[i].text_begin);
                o.Set("textEnd", (double) pieces[i].text_end);
                out.Set((uint32_t) i, o);
            }
            return out;
        });
}

} // namespace

void voxd_bind_kokoro(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "KokoroModel", voxd_kokoro_model_js::define(env));
    exports.Set("readTorchTensor", Napi::Function::New<voxd_read_torch_tensor_js>(env, "readTorchTensor"));
    exports.Set("kokoroPhonemes", Napi::Function::New<voxd_kokoro_phonemes_js>(env, "kokoroPhonemes"));
}
