// Offline English text-to-speech with CMU flite 2.2 (Debian's libflite1): the built-in voices slt, kal, awb and
// rms, all at 16 kHz. The libraries are opened with dlopen on first use, never linked, so the addon loads where
// flite is not installed and only this engine fails, with an `engine_unavailable` error naming the package.
#pragma once

#include "voxd-async.h"

#include <memory>
#include <string>
#include <vector>

struct voxd_flite_voices; // the registered voices (voxd-flite.cpp)

// JS: `FliteModel.load() -> Promise<FliteModel>`;
// `model.synthesize(text, { voice, speed }, onAudio?, abort?) -> Promise<Float32Array>` (16 kHz mono);
// `model.voices` ([{ id, name, description }]); `model.deterministic`; `model.release()`.
class voxd_flite_model : public Napi::ObjectWrap<voxd_flite_model> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_flite_model(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value synthesize(const Napi::CallbackInfo & info);
    Napi::Value voices(const Napi::CallbackInfo & info);
    Napi::Value deterministic(const Napi::CallbackInfo & info);
    Napi::Value release(const Napi::CallbackInfo & info);

    std::shared_ptr<const voxd_flite_voices> m_voices;
};

// Exports FliteModel (opening flite itself waits for the first FliteModel.load).
void voxd_flite_init(Napi::Env env, Napi::Object exports);
