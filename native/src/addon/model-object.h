// The JS object of a model whose weights it holds (WhisperModel, ParakeetModel, AudioLmModel, KokoroModel): the native
// model, its weights reported to V8 (voxd_external_memory) while held, and `model.release()`, which drops the hold.
// Calls in flight hold their own reference to the model, so the last of them frees the weights.
#pragma once

#include "async.h"

#include <napi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

// `Derived::k_model_name` names the model in the error a call on a released model throws ("the Parakeet model").
template <typename Derived, typename Model> class voxd_model_object : public Napi::ObjectWrap<Derived> {
public:
    explicit voxd_model_object(const Napi::CallbackInfo & info) : Napi::ObjectWrap<Derived>(info) {}

protected:
    // Main thread, settling a load: a new object of the class exported as `class_name`, holding `model`, whose
    // weights take `bytes`.
    static Napi::Object wrap(Napi::Env env, const char * class_name, std::shared_ptr<Model> model, int64_t bytes) {
        Napi::Object obj         = voxd_class(env, class_name).New({});
        voxd_model_object & self = *Derived::Unwrap(obj);
        self.m_model             = std::move(model);
        self.m_memory.set(env, bytes);
        return obj;
    }

    // JS: `model.release()`. Define it with the runtime form, `InstanceMethod("release", &Derived::release)`: a
    // template argument cannot take a base class's member.
    Napi::Value release(const Napi::CallbackInfo & info) {
        m_model = nullptr;
        m_memory.reset();
        return info.Env().Undefined();
    }

    // The model; throws a JS "closed" error once it was released.
    std::shared_ptr<Model> loaded(Napi::Env env) const {
        if (!m_model) {
            throw voxd_make_js_error(env, "closed", std::string(Derived::k_model_name) + " was released");
        }
        return m_model;
    }

private:
    std::shared_ptr<Model> m_model;
    voxd_external_memory m_memory;
};
