// decodeAudio: the audio decoder (audio/decoder.h) on a worker thread.
#include "async.h"
#include "bindings.h"

#include "audio/decoder.h"

#include <cmath>

static Napi::Value voxd_decode_audio_js(const Napi::CallbackInfo & info) {
    Napi::Env env = info.Env();
    if (!info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_uint8_array) {
        throw voxd_make_js_error(env, "invalid_argument", "decodeAudio(data, options): data must be a Uint8Array");
    }
    if (!info[1].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", "decodeAudio(data, options): options must be an object");
    }
    Napi::Object options = info[1].As<Napi::Object>();
    voxd_decode_params params;
    Napi::Value rate = options.Get("sampleRate");
    if (rate.IsUndefined()) {
        params.sample_rate = 0; // the source's
    } else {
        const double rate_value = rate.IsNumber() ? rate.As<Napi::Number>().DoubleValue() : 0;
        if (!(rate_value >= 1000 && rate_value <= 384000) || rate_value != std::floor(rate_value)) {
            throw voxd_make_js_error(env, "invalid_argument", "decodeAudio: sampleRate must be an integer from 1000 to 384000");
        }
        params.sample_rate = (int) rate_value;
    }
    Napi::Value channels = options.Get("channels");
    if (!channels.IsUndefined()) {
        if (!channels.IsString() || (channels.As<Napi::String>().Utf8Value() != "mono" && channels.As<Napi::String>().Utf8Value() != "source")) {
            throw voxd_make_js_error(env, "invalid_argument", "decodeAudio: channels must be 'mono' or 'source'");
        }
        params.channels = channels.As<Napi::String>().Utf8Value() == "mono" ? 1 : 0;
    }
    Napi::Value max_seconds = options.Get("maxSeconds");
    if (!max_seconds.IsUndefined() && !max_seconds.IsNull()) {
        const double value = max_seconds.IsNumber() ? max_seconds.As<Napi::Number>().DoubleValue() : -1;
        if (!(value > 0) || !std::isfinite(value)) {
            throw voxd_make_js_error(env, "invalid_argument", "decodeAudio: maxSeconds must be a positive number");
        }
        params.max_seconds = value;
    }
    voxd_abort_ptr abort = voxd_abort_flag::from_value(info[2]);

    // copied: the caller may reuse or mutate its buffer while the worker runs
    Napi::Uint8Array input = info[0].As<Napi::Uint8Array>();
    std::vector<uint8_t> bytes(input.Data(), input.Data() + input.ByteLength());

    return voxd_async_worker<voxd_decoded_audio>::run(
        env, "voxd.audio.decode", [bytes = std::move(bytes), params, abort]() { return voxd_decode_audio(bytes.data(), bytes.size(), params, abort); },
        [](Napi::Env env, voxd_decoded_audio & audio) -> Napi::Value {
            const size_t n = audio.samples.size();
            Napi::Object o = Napi::Object::New(env);
            // the samples reach JS without a copy
            o.Set("samples", voxd_owned_array<Napi::Float32Array>(env, std::move(audio.samples)));
            o.Set("sampleRate", audio.sample_rate);
            o.Set("channels", audio.channels);
            o.Set("duration", (double) n / audio.channels / audio.sample_rate);
            o.Set("sourceSampleRate", audio.source_sample_rate);
            o.Set("sourceChannels", audio.source_channels);
            o.Set("codec", audio.codec);
            o.Set("container", audio.container);
            o.Set("truncated", audio.truncated);
            return o;
        });
}

void voxd_bind_decoder(Napi::Env env, Napi::Object exports) {
    exports.Set("decodeAudio", Napi::Function::New<voxd_decode_audio_js>(env, "decodeAudio"));
}
