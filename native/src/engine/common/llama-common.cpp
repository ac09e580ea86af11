#include "common/llama-common.h"
#include "common/engine-log.h"
#include "common/error.h"

#include "llama-context.h" // llama_context::get_sched: the context's backends, for voxd_llama_use_row_kernels

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "gguf.h"
#include "mtmd-helper.h"

#include <algorithm>
#include <mutex>
#include <numeric>

namespace {

thread_local std::string t_last_error;
thread_local std::string t_error_line;

// libmtmd's lines go to the engine log; the last error line of this thread is kept for the error that follows it
void log_keeping_errors(ggml_log_level level, const char * text, void * user_data) {
    if (level == GGML_LOG_LEVEL_ERROR || (level == GGML_LOG_LEVEL_CONT && !t_error_line.empty())) {
        t_error_line += text ? text : "";
        const size_t nl = t_error_line.find('\n');
        if (nl != std::string::npos) {
            t_last_error = t_error_line.substr(0, nl);
            t_error_line.clear();
        }
    }
    voxd_engine_log(level, text, user_data);
}

struct gguf_deleter {
    void operator()(gguf_context * ctx) const { gguf_free(ctx); }
};

} // namespace

void voxd_llama_backend_init() {
    static std::once_flag once;
    std::call_once(once, [] {
        llama_backend_init();
        mtmd_log_set(log_keeping_errors, nullptr);        // libmtmd's own (clip) lines
        mtmd_helper_log_set(log_keeping_errors, nullptr); // and its helper's (the audio-LM prefill)
    });
}

void voxd_llama_clear_last_error() {
    t_last_error.clear();
}

std::string voxd_llama_last_error() {
    std::string msg = t_last_error;
    while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) {
        msg.pop_back();
    }
    return msg.empty() ? std::string() : "; " + msg;
}

std::string voxd_gguf_string(const std::string & path, const char * key, const char * what) {
    gguf_init_params params{ /*no_alloc =*/true, /*ctx =*/nullptr };
    std::unique_ptr<gguf_context, gguf_deleter> ctx(gguf_init_from_file(path.c_str(), params)); // owns the header
    if (!ctx) {
        throw voxd_error("model_load_failed", std::string(what) + " " + path + " is not a readable GGUF file");
    }
    const int64_t id = gguf_find_key(ctx.get(), key);
    if (id < 0 || gguf_get_kv_type(ctx.get(), id) != GGUF_TYPE_STRING) {
        return "";
    }
    return gguf_get_val_str(ctx.get(), id);
}

std::vector<llama_token> voxd_tokenize(const llama_vocab * vocab, const std::string & text, bool parse_special) {
    std::vector<llama_token> ids(text.size() + 16);
    const int n = llama_tokenize(vocab, text.c_str(), (int32_t) text.size(), ids.data(), (int32_t) ids.size(), false, parse_special);
    ids.resize((size_t) std::max(n, 0));
    return ids;
}

voxd_llama_model_ptr voxd_llama_load_model(const std::string & path, llama_model_params params, const char * what) {
    params.use_extra_bufts = false;
    voxd_llama_model_ptr model(llama_model_load_from_file(path.c_str(), params));
    if (!model) {
        throw voxd_error("model_load_failed", std::string("llama.cpp could not load the ") + what + " " + path + voxd_llama_last_error());
    }
    return model;
}

voxd_llama_context_ptr voxd_llama_batch_context(llama_model * model, const voxd_llama_batch_context_options & options, const std::string & path) {
    llama_context_params cparams = llama_context_default_params();
    cparams.n_ctx                = (uint32_t) (options.n_ctx_seq * options.n_seq);
    cparams.n_batch              = (uint32_t) options.n_batch;
    cparams.n_ubatch             = (uint32_t) options.n_batch;
    cparams.n_seq_max            = (uint32_t) options.n_seq;
    cparams.kv_unified           = false;
    cparams.flash_attn_type      = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    cparams.n_threads            = options.threads;
    cparams.n_threads_batch      = options.threads;
    cparams.embeddings           = options.embeddings;
    cparams.no_perf              = true;
    voxd_llama_context_ptr ctx(llama_init_from_model(model, cparams));
    if (!ctx) {
        throw voxd_error("model_load_failed", "llama.cpp could not create a context for " + path + voxd_llama_last_error());
    }
    voxd_llama_use_row_kernels(ctx.get());
    return ctx;
}

void voxd_llama_use_row_kernels(llama_context * lctx, bool on) {
    // llama.cpp has no public call for its backends; get_sched() is its internal C++ API, pinned with the sources
    ggml_backend_sched_t sched = lctx->get_sched(); // owned by lctx
    for (int i = 0; i < ggml_backend_sched_get_n_backends(sched); i++) {
        ggml_backend_t backend = ggml_backend_sched_get_backend(sched, i); // owned by lctx
        if (ggml_backend_is_cpu(backend)) {
            ggml_backend_cpu_set_use_ref(backend, on);
        }
    }
}

void voxd_llama_decode_runs(const std::vector<llama_seq_id> & seq_ids, const std::function<void(const std::vector<int> & rows, bool companion)> & decode) {
    std::vector<int> order(seq_ids.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int a, int b) { return seq_ids[(size_t) a] < seq_ids[(size_t) b]; });
#if defined(__x86_64__) || defined(_M_X64) || defined(__i386__) || defined(_M_IX86)
    for (size_t b = 0; b < order.size();) {
        size_t e = b + 1;
        while (e < order.size() && seq_ids[(size_t) order[e]] == seq_ids[(size_t) order[e - 1]] + 1) {
            e++;
        }
        decode(std::vector<int>(order.begin() + (ptrdiff_t) b, order.begin() + (ptrdiff_t) e), e - b == 1);
        b = e;
    }
#else
    for (int row : order) {
        decode({ row }, false);
    }
#endif
}
