#include "async.h"

#include "common/executor.h"

#include <algorithm>
#include <cmath>
#include <vector>

Napi::Function voxd_abort_flag::define(Napi::Env env) {
    return DefineClass(env, "AbortFlag",
                       {
                           InstanceMethod<&voxd_abort_flag::abort>("abort"),
                           InstanceAccessor<&voxd_abort_flag::aborted>("aborted"),
                       });
}

voxd_abort_flag::voxd_abort_flag(const Napi::CallbackInfo & info) : Napi::ObjectWrap<voxd_abort_flag>(info) {}

Napi::Value voxd_abort_flag::abort(const Napi::CallbackInfo & info) {
    m_flag->store(true);
    return info.Env().Undefined();
}

Napi::Value voxd_abort_flag::aborted(const Napi::CallbackInfo & info) {
    return Napi::Boolean::New(info.Env(), m_flag->load());
}

voxd_abort_ptr voxd_abort_flag::from_value(const Napi::Value & value) {
    Napi::Env env = value.Env();
    if (value.IsObject()) {
        // only a real AbortFlag may be unwrapped: other wrapped objects hold other C++ types
        if (value.As<Napi::Object>().InstanceOf(voxd_class(env, "AbortFlag"))) {
            return Unwrap(value.As<Napi::Object>())->flag();
        }
    }
    if (!value.IsUndefined() && !value.IsNull()) {
        throw voxd_make_js_error(env, "invalid_argument", "abort must be an AbortFlag");
    }
    return voxd_never_aborted();
}

Napi::Error voxd_make_js_error(Napi::Env env, const std::string & code, const std::string & message) {
    Napi::Error error = Napi::Error::New(env, message);
    error.Set("code", Napi::String::New(env, code));
    return error;
}

std::vector<float> voxd_copy_samples(const Napi::Value & value, const char * what) {
    if (!value.IsTypedArray() || value.As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
        throw voxd_make_js_error(value.Env(), "invalid_argument", std::string(what) + " must be a Float32Array");
    }
    Napi::Float32Array array = value.As<Napi::Float32Array>();
    return std::vector<float>(array.Data(), array.Data() + array.ElementLength());
}

void voxd_export_class(Napi::Env env, Napi::Object exports, const char * name, Napi::Function ctor) {
    env.GetInstanceData<voxd_addon_data>()->classes[name] = Napi::Persistent(ctor);
    exports.Set(name, ctor);
}

Napi::Function voxd_class(Napi::Env env, const char * name) {
    return env.GetInstanceData<voxd_addon_data>()->class_of(name);
}

void voxd_env_threads::track(std::weak_ptr<voxd_executor> executor) {
    // models come and go over a server's life: drop the entries of those already freed
    m_executors.erase(std::remove_if(m_executors.begin(), m_executors.end(), [](const std::weak_ptr<voxd_executor> & e) { return e.expired(); }),
                      m_executors.end());
    m_executors.push_back(std::move(executor));
}

void voxd_env_threads::stop_all() noexcept {
    for (const std::weak_ptr<voxd_executor> & weak : m_executors) {
        // held while it stops: the engine cannot be freed (and the executor destroyed) under stop()
        if (std::shared_ptr<voxd_executor> executor = weak.lock()) {
            executor->stop();
        }
    }
    m_executors.clear();
}

void voxd_track_executor(Napi::Env env, std::weak_ptr<voxd_executor> executor) {
    env.GetInstanceData<voxd_addon_data>()->threads->track(std::move(executor));
}

namespace {
class voxd_background_worker : public Napi::AsyncWorker {
public:
    voxd_background_worker(Napi::Env env, const char * name, std::function<void()> work) : Napi::AsyncWorker(env, name), m_work(std::move(work)) {}

protected:
    void Execute() override { m_work(); }
    void OnOK() override {}

private:
    std::function<void()> m_work;
};
} // namespace

void voxd_run_in_background(Napi::Env env, const char * name, std::function<void()> work) {
    (new voxd_background_worker(env, name, std::move(work)))->Queue(); // owned by libuv until done
}

std::optional<int> voxd_integer_option(Napi::Env env, const Napi::Object & options, const char * key, int lo, int hi, const char * where) {
    Napi::Value v = options.Get(key);
    if (v.IsUndefined() || v.IsNull()) {
        return std::nullopt;
    }
    const double d = v.IsNumber() ? v.As<Napi::Number>().DoubleValue() : NAN;
    if (!(d >= lo && d <= hi) || d != std::floor(d)) {
        throw voxd_make_js_error(env, "invalid_argument",
                                 std::string(where) + ": " + key + " must be an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    }
    return (int) d;
}
