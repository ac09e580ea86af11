// Resampler: the stream resampler (audio/resampler.h) as a JS class.
#include "async.h"
#include "bindings.h"

#include "audio/resampler.h"

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

// Every method runs synchronously on the JS thread, unlike the other engines: converting a 100 ms chunk takes
// tens of microseconds (measured: ~40 us at 24 -> 16 kHz, ~110 us at 44.1 -> 16 kHz, i.e. 900 to 2500 times
// realtime), about what a libuv worker round trip alone costs (a copy of the input, queueing, two thread hops,
// a promise settled on a later tick), and async calls would also have to be serialised to keep chunks in order.

namespace {

class voxd_resampler_js : public Napi::ObjectWrap<voxd_resampler_js> {
public:
    static Napi::Function define(Napi::Env env) {
        return DefineClass(env, "Resampler",
                           {
                               InstanceMethod<&voxd_resampler_js::process>("process"),
                               InstanceMethod<&voxd_resampler_js::flush>("flush"),
                               InstanceMethod<&voxd_resampler_js::reset>("reset"),
                               InstanceAccessor<&voxd_resampler_js::input_rate>("inputRate"),
                               InstanceAccessor<&voxd_resampler_js::output_rate>("outputRate"),
                           });
    }

    explicit voxd_resampler_js(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_resampler_js>(info) {
        Napi::Env env = info.Env();
        if (!info[0].IsObject()) {
            throw voxd_make_js_error(env, "invalid_argument", "new Resampler(options): options must be an object { inputRate, outputRate }");
        }
        Napi::Object options = info[0].As<Napi::Object>();
        const int in_rate    = rate_option(env, options, "inputRate");
        const int out_rate   = rate_option(env, options, "outputRate");
        try {
            m_resampler = std::make_unique<voxd_stream_resampler>(in_rate, out_rate);
        } catch (const voxd_error & e) {
            throw voxd_make_js_error(env, e.code, e.what());
        }
    }

private:
    static int rate_option(Napi::Env env, const Napi::Object & options, const char * name) {
        Napi::Value v     = options.Get(name);
        const double rate = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : 0;
        if (!(rate >= voxd_stream_resampler::min_rate && rate <= voxd_stream_resampler::max_rate) || rate != std::floor(rate)) {
            throw voxd_make_js_error(env, "invalid_argument",
                                     std::string("new Resampler: ") + name + " must be an integer from " + std::to_string(voxd_stream_resampler::min_rate) +
                                         " to " + std::to_string(voxd_stream_resampler::max_rate));
        }
        return (int) rate;
    }

    Napi::Value process(const Napi::CallbackInfo & info) {
        Napi::Env env                   = info.Env();
        const napi_typedarray_type type = info[0].IsTypedArray() ? info[0].As<Napi::TypedArray>().TypedArrayType() : napi_uint8_clamped_array;
        m_out.clear();
        try {
            if (type == napi_float32_array) {
                Napi::Float32Array a = info[0].As<Napi::Float32Array>();
                m_resampler->process(a.Data(), a.ElementLength(), m_out);
            } else if (type == napi_int16_array) {
                Napi::Int16Array a = info[0].As<Napi::Int16Array>();
                m_in.resize(a.ElementLength());
                const int16_t * src = a.Data();
                for (size_t i = 0; i < m_in.size(); i++) {
                    m_in[i] = (float) src[i] * (1.0f / 32768.0f);
                }
                m_resampler->process(m_in.data(), m_in.size(), m_out);
            } else {
                throw voxd_error("invalid_argument", "Resampler.process(samples): samples must be a Float32Array or an Int16Array");
            }
        } catch (const voxd_error & e) {
            throw voxd_make_js_error(env, e.code, e.what());
        }
        return result(env);
    }

    Napi::Value flush(const Napi::CallbackInfo & info) {
        m_out.clear();
        try {
            m_resampler->flush(m_out);
        } catch (const voxd_error & e) {
            throw voxd_make_js_error(info.Env(), e.code, e.what());
        }
        return result(info.Env());
    }

    Napi::Value reset(const Napi::CallbackInfo & info) {
        try {
            m_resampler->reset();
        } catch (const voxd_error & e) {
            throw voxd_make_js_error(info.Env(), e.code, e.what());
        }
        return info.Env().Undefined();
    }

    Napi::Value input_rate(const Napi::CallbackInfo & info) { return Napi::Number::New(info.Env(), m_resampler->input_rate()); }
    Napi::Value output_rate(const Napi::CallbackInfo & info) { return Napi::Number::New(info.Env(), m_resampler->output_rate()); }

    // A fresh array per call (the caller keeps it); the scratch vectors are reused across calls.
    Napi::Value result(Napi::Env env) {
        Napi::Float32Array arr = Napi::Float32Array::New(env, m_out.size());
        if (!m_out.empty()) {
            std::memcpy(arr.Data(), m_out.data(), m_out.size() * sizeof(float));
        }
        return arr;
    }

    std::unique_ptr<voxd_stream_resampler> m_resampler;
    std::vector<float> m_in;  // Int16 input as float
    std::vector<float> m_out; // this call's output
};

} // namespace

void voxd_bind_resampler(Napi::Env env, Napi::Object exports) {
    voxd_export_class(env, exports, "Resampler", voxd_resampler_js::define(env));
}
