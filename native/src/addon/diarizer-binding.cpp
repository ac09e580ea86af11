// diarize: the built-in speaker diarizer (stt/diarizer.h) on a worker thread.
#include "async.h"
#include "bindings.h"

#include "stt/diarizer.h"

#include <cmath>

static Napi::Value voxd_diarize_js(const Napi::CallbackInfo & info) {
    Napi::Env env      = info.Env();
    const char * usage = "diarize(samples, speech, references, options, abort?)";
    // copied: the caller may reuse its buffers while the worker runs; NaN and infinities become silence
    auto finite_samples = [](const Napi::Value & value, const char * what) {
        std::vector<float> samples = voxd_copy_samples(value, what);
        for (float & v : samples) {
            if (!std::isfinite(v)) {
                v = 0.0f;
            }
        }
        return samples;
    };
    std::vector<float> samples = finite_samples(info[0], "diarize: samples");
    if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_float64_array) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": speech must be a Float64Array of start, end pairs");
    }
    Napi::Float64Array flat = info[1].As<Napi::Float64Array>();
    if (flat.ElementLength() % 2 != 0) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": speech must hold start, end pairs");
    }
    std::vector<voxd_time_span> speech;
    for (size_t i = 0; i < flat.ElementLength(); i += 2) {
        speech.push_back({ flat[i], flat[i + 1] });
    }
    if (!info[2].IsArray()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": references must be an array of Float32Array");
    }
    Napi::Array list = info[2].As<Napi::Array>();
    std::vector<std::vector<float>> references;
    for (uint32_t i = 0; i < list.Length(); i++) {
        references.push_back(finite_samples(list.Get(i), "diarize: every reference"));
    }
    if (!info[3].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": options must be an object");
    }
    Napi::Object options = info[3].As<Napi::Object>();
    voxd_diarize_params params;
    params.min_speakers  = voxd_integer_option(env, options, "minSpeakers", 1, voxd_diarize_max_speakers, "diarize").value_or(params.min_speakers);
    params.max_speakers  = voxd_integer_option(env, options, "maxSpeakers", 1, voxd_diarize_max_speakers, "diarize").value_or(params.max_speakers);
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[4]);

    return voxd_async_worker<voxd_diarization>::run(
        env, "voxd.diarize",
        [samples = std::move(samples), speech = std::move(speech), references = std::move(references), params, abort]() {
            return voxd_diarize(samples, speech, references, params, abort);
        },
        [](Napi::Env env, voxd_diarization & result) -> Napi::Value {
            std::vector<double> turns;
            for (const voxd_speaker_turn & t : result.turns) {
                turns.insert(turns.end(), { t.start, t.end, (double) t.speaker });
            }
            Napi::Object out = Napi::Object::New(env);
            out.Set("turns", voxd_owned_array<Napi::Float64Array>(env, std::move(turns)));
            out.Set("speakers", Napi::Number::New(env, result.n_speakers));
            out.Set("references", voxd_owned_array<Napi::Int32Array>(env, std::move(result.reference_speakers)));
            return out;
        });
}

void voxd_bind_diarizer(Napi::Env env, Napi::Object exports) {
    exports.Set("diarize", Napi::Function::New<voxd_diarize_js>(env, "diarize"));
}
