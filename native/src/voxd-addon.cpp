// Entry point of the voxd native addon: registers every class and function the TS layer sees
// (typed in src/native/addon.ts, the single description of this surface).
#include "voxd-async.h"
#include "voxd-cpu-gate.h"
#include "voxd-decode.h"
#include "voxd-encode.h"
#include "voxd-ffmpeg.h"
#include "voxd-flite.h"
#include "voxd-resample.h"
#include "voxd-separate.h"
#include "voxd-sphinx.h"
#include "voxd-tts-ggml.h"
#include "voxd-vad.h"
#include "voxd-whisper.h"

#include "ggml-backend.h"
#include "ggml.h"
#include "llama.h"
#include "whisper.h"

#include <atomic>
#include <cstdio>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#ifndef VOXD_VERSION
#define VOXD_VERSION "dev"
#endif

// Engine log lines below this level are dropped; the rest go to stderr with an [engine] prefix.
static std::atomic<int> g_min_log_level{ GGML_LOG_LEVEL_WARN };

static void voxd_log_callback(ggml_log_level level, const char * text, void * /*user_data*/) {
    if (level == GGML_LOG_LEVEL_CONT || level < g_min_log_level.load()) {
        return;
    }
    std::fprintf(stderr, "[engine] %s", text);
}

static Napi::Value set_log_level(const Napi::CallbackInfo & info) {
    if (!info[0].IsNumber()) {
        throw voxd_make_js_error(info.Env(), "invalid_argument", "setLogLevel(level): level must be a number");
    }
    g_min_log_level.store(info[0].As<Napi::Number>().Int32Value());
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
    out.Set("ggmlVersion", ggml_version());
    out.Set("ggmlCommit", ggml_commit());
    out.Set("llama", llama_print_system_info());
    out.Set("whisper", whisper_print_system_info());
    Napi::Array devices = Napi::Array::New(env);
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t dev = ggml_backend_dev_get(i);
        Napi::Object d         = Napi::Object::New(env);
        d.Set("name", ggml_backend_dev_name(dev));
        d.Set("description", ggml_backend_dev_description(dev));
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
    whisper_log_set(voxd_log_callback, nullptr);
    llama_log_set(voxd_log_callback, nullptr);
    ggml_log_set(voxd_log_callback, nullptr);

    voxd_ffmpeg_init(); // FFmpeg's log, for the decoder and the encoder

    auto * data = new voxd_addon_data(); // owned by the environment, freed by its finalizer
    env.SetInstanceData<voxd_addon_data>(data);

    // Runs when this environment is torn down (a worker_thread ends, or the process exits at the end of its event
    // loop; process.exit() skips it), after Node waited for the engine calls in flight and before it finalizes the
    // objects JS still holds: stops and joins the engines' own threads, even those of an engine something still holds.
    // It shares the thread registry with the instance data, so it works whichever of the two Node frees first.
    env.AddCleanupHook([threads = data->threads]() { threads->stop_all(); });

    // one init per engine module; each exports its classes and functions
    voxd_export_class(env, exports, "AbortFlag", voxd_abort_flag::define(env));
    voxd_vad_init(env, exports);
    voxd_whisper_init(env, exports);
    voxd_decode_init(env, exports);
    voxd_encode_init(env, exports);
    voxd_sphinx_init(env, exports);
    voxd_flite_init(env, exports);
    voxd_resample_init(env, exports);
    voxd_separate_init(env, exports);
    voxd_tts_ggml_init(env, exports, voxd_log_callback);

    exports.Set("systemInfo", Napi::Function::New<system_info>(env, "systemInfo"));
    exports.Set("setLogLevel", Napi::Function::New<set_log_level>(env, "setLogLevel"));
    exports.Set("trimMemory", Napi::Function::New<trim_memory>(env, "trimMemory"));
    exports.Set("exitNow", Napi::Function::New<exit_now>(env, "exitNow"));
    return exports;
}

NODE_API_MODULE(voxd, voxd_init)
