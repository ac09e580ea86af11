// AudioEncoder: the encoder (audio/encoder.h) as a JS class whose calls run on worker threads.
#include "async.h"
#include "bindings.h"

#include "audio/encoder.h"

#include <cmath>

// JS: `new AudioEncoder({ format, sampleRate, bitrate?, streaming? })`; `encoder.encode(samples) -> Promise<Buffer>`;
// `encoder.finish(samples?) -> Promise<Buffer>`; `outputSampleRate`, `codec`, `format`, `sampleRate`, `streaming`;
// static `formats` (those this FFmpeg build can encode). One call at a time: a call made before the previous
// one's promise settled throws `busy`; calls after finish() throw `closed`.
class voxd_audio_encoder : public Napi::ObjectWrap<voxd_audio_encoder> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_audio_encoder(const Napi::CallbackInfo & info);

private:
    Napi::Value encode(const Napi::CallbackInfo & info);
    Napi::Value finish(const Napi::CallbackInfo & info);
    Napi::Value output_sample_rate(const Napi::CallbackInfo & info);
    Napi::Value codec(const Napi::CallbackInfo & info);
    Napi::Value format(const Napi::CallbackInfo & info);
    Napi::Value sample_rate(const Napi::CallbackInfo & info);
    Napi::Value streaming(const Napi::CallbackInfo & info);

    // Queues one call on a worker thread; `last` = finish().
    Napi::Value run(Napi::Env env, std::vector<float> samples, bool last);

    // Touched by the worker of the call in flight only, and by JS only while no call is in flight (`m_busy`), so
    // it needs no lock; shared with that worker so a collected JS object never frees it under a running call.
    struct state {
        std::unique_ptr<voxd_encoder> encoder; // null after finish() ran or a call failed
        std::string failure;                   // why a call failed: later calls say so
    };
    std::shared_ptr<state> m_state;

    // JS thread only.
    bool m_busy     = false; // a call is queued or running: set when queued, cleared when it settles
    bool m_finished = false; // finish() was called
    voxd_encoder_params m_params;
    std::string m_format;
    std::string m_codec;
    int m_output_rate = 0;
};

namespace {

struct voxd_encode_result {
    std::vector<uint8_t> bytes;
    std::string code; // non-empty: the call failed
    std::string message;
};

// Small results are copied into a plain Buffer; larger ones hand their vector to the Buffer without a copy.
Napi::Value voxd_bytes_to_js(Napi::Env env, std::vector<uint8_t> & bytes) {
    constexpr size_t copy_below = 64 * 1024;
    if (bytes.size() < copy_below) {
        return Napi::Buffer<uint8_t>::Copy(env, bytes.data(), bytes.size());
    }
    if (bytes.capacity() > bytes.size() + bytes.size() / 4) {
        bytes.shrink_to_fit(); // the memory file grew by doubling: don't hand JS up to twice the memory
    }
    auto owned                   = std::make_unique<std::vector<uint8_t>>(std::move(bytes));
    Napi::Buffer<uint8_t> buffer = Napi::Buffer<uint8_t>::New(
        env, owned->data(), owned->size(), [](Napi::Env, uint8_t *, std::vector<uint8_t> * data) { delete data; }, owned.get());
    owned.release(); // now owned by `buffer`
    return buffer;
}

} // namespace

Napi::Function voxd_audio_encoder::define(Napi::Env env) {
    std::vector<std::string> formats = voxd_encoder::available_formats();
    Napi::Array list                 = Napi::Array::New(env, formats.size());
    for (size_t i = 0; i < formats.size(); i++) {
        list.Set(i, formats[i]);
    }
    return DefineClass(env, "AudioEncoder",
                       {
                           InstanceMethod<&voxd_audio_encoder::encode>("encode"),
                           InstanceMethod<&voxd_audio_encoder::finish>("finish"),
                           InstanceAccessor<&voxd_audio_encoder::output_sample_rate>("outputSampleRate"),
                           InstanceAccessor<&voxd_audio_encoder::codec>("codec"),
                           InstanceAccessor<&voxd_audio_encoder::format>("format"),
                           InstanceAccessor<&voxd_audio_encoder::sample_rate>("sampleRate"),
                           InstanceAccessor<&voxd_audio_encoder::streaming>("streaming"),
                           StaticValue("formats", list),
                       });
}

voxd_audio_encoder::voxd_audio_encoder(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_audio_encoder>(info), m_state(std::make_shared<state>()) {
    Napi::Env env      = info.Env();
    const char * usage = "new AudioEncoder({ format, sampleRate, bitrate?, streaming? })";
    if (!info[0].IsObject()) {
        throw voxd_make_js_error(env, "invalid_argument", std::string(usage) + ": options must be an object");
    }
    Napi::Object options = info[0].As<Napi::Object>();

    Napi::Value format = options.Get("format");
    m_format           = format.IsString() ? format.As<Napi::String>().Utf8Value() : "";
    if (!voxd_encoder::parse_format(m_format, m_params.format)) {
        throw voxd_make_js_error(env, "invalid_argument", "AudioEncoder: format must be one of " + voxd_encoder::format_names());
    }
    Napi::Value rate        = options.Get("sampleRate");
    const double rate_value = rate.IsNumber() ? rate.As<Napi::Number>().DoubleValue() : 0;
    if (!(rate_value >= voxd_encoder::min_rate && rate_value <= voxd_encoder::max_rate) || rate_value != std::floor(rate_value)) {
        throw voxd_make_js_error(env, "invalid_argument",
                                 "AudioEncoder: sampleRate must be an integer from " + std::to_string(voxd_encoder::min_rate) + " to " +
                                     std::to_string(voxd_encoder::max_rate));
    }
    m_params.sample_rate = (int) rate_value;
    Napi::Value bitrate  = options.Get("bitrate");
    if (!bitrate.IsUndefined() && !bitrate.IsNull()) {
        const double value = bitrate.IsNumber() ? bitrate.As<Napi::Number>().DoubleValue() : -1;
        if (!(value >= (double) voxd_encoder::min_bitrate && value <= (double) voxd_encoder::max_bitrate) || value != std::floor(value)) {
            throw voxd_make_js_error(env, "invalid_argument",
                                     "AudioEncoder: bitrate must be an integer from " + std::to_string(voxd_encoder::min_bitrate) + " to " +
                                         std::to_string(voxd_encoder::max_bitrate) + " (b/s)");
        }
        m_params.bitrate = (int64_t) value;
    }
    Napi::Value streaming = options.Get("streaming");
    if (!streaming.IsUndefined() && !streaming.IsBoolean()) {
        throw voxd_make_js_error(env, "invalid_argument", "AudioEncoder: streaming must be a boolean");
    }
    m_params.streaming = streaming.IsBoolean() ? streaming.As<Napi::Boolean>().Value() : true;

    try {
        m_state->encoder = std::make_unique<voxd_encoder>(m_params);
    } catch (const voxd_error & e) {
        throw voxd_make_js_error(env, e.code, e.what());
    }
    m_codec       = m_state->encoder->codec_name();
    m_output_rate = m_state->encoder->output_sample_rate();
}

Napi::Value voxd_audio_encoder::encode(const Napi::CallbackInfo & info) {
    return run(info.Env(), voxd_copy_samples(info[0], "AudioEncoder.encode(samples): samples"), false);
}

Napi::Value voxd_audio_encoder::finish(const Napi::CallbackInfo & info) {
    std::vector<float> samples;
    if (!info[0].IsUndefined() && !info[0].IsNull()) {
        samples = voxd_copy_samples(info[0], "AudioEncoder.finish(samples?): samples");
    }
    return run(info.Env(), std::move(samples), true);
}

Napi::Value voxd_audio_encoder::run(Napi::Env env, std::vector<float> samples, bool last) {
    if (m_busy) {
        throw voxd_make_js_error(env, "busy", "the audio encoder is already running a call: await each call before the next");
    }
    if (m_finished) {
        throw voxd_make_js_error(env, "closed", "the audio encoder is finished");
    }
    if (!m_state->failure.empty()) { // read while no call is in flight
        throw voxd_make_js_error(env, "encode_failed", "the audio encoder failed earlier: " + m_state->failure);
    }
    m_busy                    = true;
    m_finished                = last;
    std::shared_ptr<state> st = m_state;
    // the worker catches its own errors, so that the promise settles through to_js on the JS thread in every
    // case: that is where `m_busy` is cleared. `self` keeps the JS object alive until then.
    auto self = std::make_shared<Napi::ObjectReference>(Napi::Persistent(Value()));
    return voxd_async_worker<voxd_encode_result>::run(
        env, last ? "voxd.encode.finish" : "voxd.encode",
        [st, samples = std::move(samples), last]() {
            voxd_encode_result r;
            try {
                if (!st->encoder) {
                    throw voxd_error("closed", "the audio encoder is finished");
                }
                if (last) {
                    st->encoder->finish(samples.data(), samples.size(), r.bytes);
                    st->encoder.reset();
                } else {
                    st->encoder->encode(samples.data(), samples.size(), r.bytes);
                }
            } catch (const voxd_error & e) {
                r.code    = e.code;
                r.message = e.what();
            } catch (const std::bad_alloc &) {
                r.code    = "out_of_memory";
                r.message = "out of memory";
            } catch (const std::exception & e) {
                r.code    = "native_error";
                r.message = e.what();
            }
            if (!r.code.empty()) {
                st->encoder.reset(); // its FFmpeg state is in an unknown state: nothing more goes through it
                st->failure = r.message;
                r.bytes.clear();
            }
            return r;
        },
        [self](Napi::Env env, voxd_encode_result & r) -> Napi::Value {
            voxd_audio_encoder::Unwrap(self->Value())->m_busy = false;
            if (!r.code.empty()) {
                throw voxd_make_js_error(env, r.code, r.message);
            }
            return voxd_bytes_to_js(env, r.bytes);
        });
}

Napi::Value voxd_audio_encoder::output_sample_rate(const Napi::CallbackInfo & info) {
    return Napi::Number::New(info.Env(), m_output_rate);
}

Napi::Value voxd_audio_encoder::codec(const Napi::CallbackInfo & info) {
    return Napi::String::New(info.Env(), m_codec);
}

Napi::Value voxd_audio_encoder::format(const Napi::CallbackInfo & info) {
    return Napi::String::New(info.Env(), m_format);
}

Napi::Value voxd_audio_encoder::sample_rate(const Napi::CallbackInfo & info) {
    return Napi::Number::New(info.Env(), m_params.sample_rate);
}

Napi::Value voxd_audio_encoder::streaming(const Napi::CallbackInfo & info) {
    return Napi::Boolean::New(info.Env(), m_params.streaming);
}

void voxd_bind_encoder(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "AudioEncoder", voxd_audio_encoder::define(env));
}
