// separate: the built-in separator (audio/separator.h) on a worker thread.
#include "async.h"
#include "bindings.h"

#include "audio/separator.h"

#include <cmath>

static Napi::Value voxd_separate_js(const Napi::CallbackInfo & info) {
    Napi::Env env      = info.Env();
    const char * usage = "separate(channels, options, abort?)";
    if (!info[0].IsArray()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": channels must be an array of Float32Array");
    }
    Napi::Array list = info[0].As<Napi::Array>();
    if (list.Length() < 1 || list.Length() > 2) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": 1 or 2 channels are supported");
    }
    if (!info[1].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": options must be an object");
    }
    Napi::Object options    = info[1].As<Napi::Object>();
    Napi::Value rate        = options.Get("sampleRate");
    const double rate_value = rate.IsNumber() ? rate.As<Napi::Number>().DoubleValue() : 0;
    if (!(rate_value >= voxd_separate_min_rate && rate_value <= voxd_separate_max_rate) || rate_value != std::floor(rate_value)) {
        throw voxd_make_js_error(env, "invalid_argument",
                                 "separate: sampleRate must be an integer from " + std::to_string(voxd_separate_min_rate) + " to " +
                                     std::to_string(voxd_separate_max_rate));
    }
    Napi::Value method_value = options.Get("method");
    voxd_separation_method method;
    if (!method_value.IsString() || !voxd_parse_separation_method(method_value.As<Napi::String>().Utf8Value(), method)) {
        throw voxd_make_js_error(env, "invalid_argument", "separate: method must be one of percussive, harmonic, voice, accompaniment, bass");
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[2]);

    // copied: the caller may reuse its buffers while the worker runs; NaN and infinities become silence
    std::vector<std::vector<float>> channels;
    for (uint32_t c = 0; c < list.Length(); c++) {
        channels.push_back(voxd_copy_samples(list.Get(c), "separate: every channel"));
        for (float & v : channels.back()) {
            if (!std::isfinite(v)) {
                v = 0.0f;
            }
        }
    }
    if (channels.size() == 2 && channels[0].size() != channels[1].size()) {
        throw voxd_make_js_error(env, "invalid_argument", "separate: the channels must have the same length");
    }

    using result_t = std::vector<std::vector<float>>;
    return voxd_async_worker<result_t>::run(
        env, "voxd.separate",
        [channels = std::move(channels), rate = (int) rate_value, method, abort]() { return voxd_separate(channels, rate, method, abort); },
        [](Napi::Env env, result_t & result) -> Napi::Value {
            Napi::Array out = Napi::Array::New(env, result.size());
            for (size_t c = 0; c < result.size(); c++) {
                out.Set((uint32_t) c, voxd_owned_array<Napi::Float32Array>(env, std::move(result[c])));
            }
            return out;
        });
}

void voxd_bind_separator(Napi::Env env, Napi::Object exports) {
    exports.Set("separate", Napi::Function::New<voxd_separate_js>(env, "separate"));
}
