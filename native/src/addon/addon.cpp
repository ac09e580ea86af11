// Entry point of the voxd native addon: registers every class and function the TS layer sees (typed in
// src/native/, the single description of this surface), one binding file per engine.
#include "async.h"
#include "bindings.h"

#include "common/cpu-gate.h"
#include "common/engine-log.h"
#include "common/system-info.h"

#include <cstdio>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#ifndef VOXD_VERSION
#define VOXD_VERSION "dev"
#endif

static Napi::Value set_log_level(const Napi::CallbackInfo & info) {
    if (!info[0].IsNumber()) {
        throw voxd_make_js_error(info.Env(), "invalid_argument", "setLogLevel(level): level must be a number");
    }
    voxd_engine_log_set_level(info[0].As<Napi::Number>().Int32Value());
    return info.Env().Undefined();
}

// Ends the process now, as _exit does: no atexit handlers, no static destructors and no join of libuv's worker
// threads, which process.exit() waits for while an engine call runs (a second SIGTERM must not wait a minute).
static Napi::Value exit_now(const Napi::CallbackInfo & info) {
    const int code = info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : 1;
    std::fflush(stdout);
    std::fflush(stderr);
    _exit(code);
}

// Hands the heap's free pages back to the system. glibc keeps what a burst of large allocations freed (uploads,
// decoded audio) in its arenas, so the process stays at its peak resident size; malloc_trim returns the free pages
// of every arena. Elsewhere (musl, macOS) the allocator decides alone: false.
static Napi::Value trim_memory(const Napi::CallbackInfo & info) {
#if defined(__GLIBC__)
    return Napi::Boolean::New(info.Env(), malloc_trim(0) != 0);
#else
    return Napi::Boolean::New(info.Env(), false);
#endif
}

static Napi::Value system_info(const Napi::CallbackInfo & info) {
    Napi::Env env    = info.Env();
    Napi::Object out = Napi::Object::New(env);
    out.Set("version", VOXD_VERSION);
    const voxd_system_info engines = voxd_read_system_info();
    out.Set("ggmlVersion", engines.ggml_version);
    out.Set("ggmlCommit", engines.ggml_commit);
    out.Set("llama", engines.llama);
    out.Set("whisper", engines.whisper);
    Napi::Array devices = Napi::Array::New(env);
    for (size_t i = 0; i < engines.devices.size(); i++) {
        Napi::Object d = Napi::Object::New(env);
        d.Set("name", engines.devices[i].name);
        d.Set("description", engines.devices[i].description);
        devices.Set(i, d);
    }
    out.Set("devices", devices);
    const voxd_cpu_gate::stats gate = voxd_cpu_gate::snapshot();
    Napi::Object cores              = Napi::Object::New(env);
    cores.Set("capacity", gate.capacity);
    cores.Set("inUse", gate.in_use);
    cores.Set("peakInUse", gate.peak_in_use);
    cores.Set("acquisitions", (double) gate.acquisitions);
    cores.Set("waits", (double) gate.waits);
    out.Set("cpuGate", cores);
    return out;
}

static Napi::Object voxd_init(Napi::Env env, Napi::Object exports) {
    voxd_engine_log_init();

    auto * data = new voxd_addon_data(); // owned by the environment, freed by its finalizer
    env.SetInstanceData<voxd_addon_data>(data);

    // Runs when this environment is torn down (a worker_thread ends, or the process exits at the end of its event
    // loop; process.exit() skips it), after Node waited for the engine calls in flight and before it finalizes the
    // objects JS still holds: stops and joins the engines' own threads, even those of an engine something still holds.
    // It shares the thread registry with the instance data, so it works whichever of the two Node frees first.
    env.AddCleanupHook([threads = data->threads]() { threads->stop_all(); });

    // one init per engine module; each exports its classes and functions
    voxd_export_class(env, exports, "AbortFlag", voxd_abort_flag::define(env));
    voxd_bind_vad(env, exports);
    voxd_bind_whisper(env, exports);
    voxd_bind_parakeet(env, exports);
    voxd_bind_audio_lm(env, exports);
    voxd_bind_decoder(env, exports);
    voxd_bind_encoder(env, exports);
    voxd_bind_sphinx(env, exports);
    voxd_bind_flite(env, exports);
    voxd_bind_resampler(env, exports);
    voxd_bind_separator(env, exports);
    voxd_bind_diarizer(env, exports);
    voxd_bind_tts_ggml(env, exports);
    voxd_bind_kokoro(env, exports);

    exports.Set("systemInfo", Napi::Function::New<system_info>(env, "systemInfo"));
    exports.Set("setLogLevel", Napi::Function::New<set_log_level>(env, "setLogLevel"));
    exports.Set("trimMemory", Napi::Function::New<trim_memory>(env, "trimMemory"));
    exports.Set("exitNow", Napi::Function::New<exit_now>(env, "exitNow"));
    return exports;
}

NODE_API_MODULE(voxd, voxd_init)
