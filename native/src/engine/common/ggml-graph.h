// What voxd's own GGML graphs share (batched Whisper, the Pocket TTS generator and decoder): the backend they run
// on and the row floor that keeps a row's kernels the same alone as in any batch.
#pragma once

#include "common/cpu-gate.h"
#include "common/error.h"
#include "common/executor.h"

#include "ggml-backend.h"
#include "ggml-cpp.h"
#include "ggml-cpu.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

// Every weight product must take the same CPU kernel for a row alone as in a batch (docs/architecture.md "Batched
// Whisper"): on x86 ggml gives 2 or more rows to llamafile's tinyBLAS and a lone row to vec_dot, elsewhere tinyBLAS
// starts at 4 or 8 rows; so a graph never has fewer rows than this, padded with rows whose results are dropped.
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
constexpr int VOXD_MIN_PRODUCT_ROWS = 2;
#else
constexpr int VOXD_MIN_PRODUCT_ROWS = 8;
#endif

// CPU threads when a model's options leave it open: every core the process may run on (a container's cpuset or a
// taskset may allow fewer than the machine has: a thread more than cores would spin at ggml's barriers), up to 8.
inline int voxd_default_threads() {
    return std::min(8, voxd_cpu_gate::available_cores());
}

// Whether the addon has a GPU backend with a device: where it does, llama.cpp and whisper.cpp put their models on it
// unless told otherwise, and a computation there keeps no team of CPU threads spinning (common/cpu-gate.h).
inline bool voxd_gpu_available() {
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU) {
            return true;
        }
    }
    return false;
}

// The `device`-th GPU when `use_gpu` and the addon was built with a GPU backend, else the CPU; `is_cpu` says which.
// The caller owns the backend (ggml_backend_free).
inline ggml_backend_t voxd_graph_backend_init(bool use_gpu, int device, bool & is_cpu) {
    if (use_gpu) {
        int seen = 0;
        for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
            ggml_backend_dev_t dev = ggml_backend_dev_get(i);
            if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU && seen++ == device) {
                if (ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr)) {
                    is_cpu = false;
                    return backend;
                }
            }
        }
    }
    is_cpu = true;
    return ggml_backend_cpu_init();
}

// A backend and the weights our graphs read, in one buffer; members are freed in reverse order (the buffer and the
// metadata before the backend).
struct voxd_graph_weights {
    ggml_backend_ptr backend;
    ggml_context_ptr ctx;        // the weights' metadata
    ggml_backend_buffer_ptr buf; // the weights
    bool is_cpu = true;
    // the graphs (by name) whose ops the GPU backend was found to run; the executor thread's (voxd_graph_compute)
    mutable std::set<std::string> gpu_checked;
};

// The metadata of one graph of ours (its tensors are allocated by a ggml_gallocr): freed when the step ends.
struct voxd_graph_ctx {
    ggml_context * ctx = nullptr;
    ggml_cgraph * gf   = nullptr;

    explicit voxd_graph_ctx(size_t n_nodes) {
        ggml_init_params ip = { ggml_tensor_overhead() * n_nodes + ggml_graph_overhead_custom(n_nodes, false), nullptr, true };
        ctx                 = ggml_init(ip);
        if (!ctx) {
            throw voxd_error("transcription_failed", "cannot allocate a graph");
        }
        gf = ggml_new_graph_custom(ctx, n_nodes, false);
    }
    ~voxd_graph_ctx() { ggml_free(ctx); }
    voxd_graph_ctx(const voxd_graph_ctx &)             = delete;
    voxd_graph_ctx & operator=(const voxd_graph_ctx &) = delete;
};

// Columns [c0, c0 + n) of a 2-D tensor (several jobs' frames stacked side by side): a contiguous view.
inline ggml_tensor * voxd_columns(ggml_context * ctx, ggml_tensor * x, int64_t c0, int64_t n) {
    return ggml_view_2d(ctx, x, x->ne[0], n, x->nb[1], (size_t) c0 * x->nb[1]);
}

// The 2-D tensors `parts`, side by side (the inverse of voxd_columns).
inline ggml_tensor * voxd_concat_columns(ggml_context * ctx, const std::vector<ggml_tensor *> & parts) {
    ggml_tensor * out = parts[0];
    for (size_t i = 1; i < parts.size(); i++) {
        out = ggml_concat(ctx, out, parts[i], 1);
    }
    return out;
}

// LayerNorm over each column (ggml's norm, then the scale and the shift), with the epsilon Whisper and Parakeet use.
inline ggml_tensor * voxd_layer_norm(ggml_context * ctx, ggml_tensor * x, ggml_tensor * w, ggml_tensor * b) {
    return ggml_add(ctx, ggml_mul(ctx, ggml_norm(ctx, x, 1e-5f), w), b);
}

// Runs a graph on the weights' backend; returns how long it took, in microseconds. A GPU backend that lacks one of
// the graph's ops fails the call, naming it, where ggml would abort the process.
inline uint64_t voxd_graph_compute(const voxd_graph_weights & w, ggml_cgraph * gf, const std::string & what) {
    if (!w.is_cpu && !w.gpu_checked.count(what)) { // each kind of graph once: its first has every op its kind has
        for (int i = 0; i < ggml_graph_n_nodes(gf); i++) {
            ggml_tensor * node = ggml_graph_node(gf, i);
            if (!ggml_backend_supports_op(w.backend.get(), node)) {
                throw voxd_error("transcription_failed", std::string("the GPU backend cannot run ") + ggml_op_desc(node) + " (the " + what + ")");
            }
        }
        w.gpu_checked.insert(what);
    }
    uint64_t us = 0;
    {
        voxd_stage_timer timer(us); // adds the time when it goes out of scope, before the return reads it
        if (ggml_backend_graph_compute(w.backend.get(), gf) != GGML_STATUS_SUCCESS) {
            throw voxd_error("transcription_failed", "the " + what + " failed");
        }
    }
    return us;
}
