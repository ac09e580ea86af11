// What the engines over libllama and libmtmd share (tts/ggml: speech generation; stt/audio-lm: audio language
// models as recognizers): one-time backend set-up and the error line libmtmd last logged, GGUF header reads, owning
// pointers, and the rules that make a row's result the same alone or in any batch on the CPU (docs/architecture.md
// "GGML text-to-speech", "Batch invariance").
#pragma once

#include "llama.h"
#include "mtmd.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

// llama_backend_init and libmtmd's log routed to the engine log, once per process.
void voxd_llama_backend_init();

// Forgets this thread's last logged error line (call before a load or a step whose errors should name it).
void voxd_llama_clear_last_error();
// The last error line libllama or libmtmd logged on this thread, as "; <line>", or "" when there is none.
std::string voxd_llama_last_error();

// A string key of a GGUF file's header; "" when the key is absent. Throws voxd_error "model_load_failed" when the
// file is not a readable GGUF (`what` names the file's role in the message: "model", "mmproj").
std::string voxd_gguf_string(const std::string & path, const char * key, const char * what);

struct voxd_llama_model_deleter {
    void operator()(llama_model * model) const { llama_model_free(model); }
};
struct voxd_llama_context_deleter {
    void operator()(llama_context * ctx) const { llama_free(ctx); }
};
struct voxd_mtmd_context_deleter {
    void operator()(mtmd_context * ctx) const { mtmd_free(ctx); }
};
using voxd_llama_model_ptr   = std::unique_ptr<llama_model, voxd_llama_model_deleter>;
using voxd_llama_context_ptr = std::unique_ptr<llama_context, voxd_llama_context_deleter>;
using voxd_mtmd_context_ptr  = std::unique_ptr<mtmd_context, voxd_mtmd_context_deleter>;

// The text's tokens, without BOS/EOS; `parse_special` reads special-token texts as those tokens.
std::vector<llama_token> voxd_tokenize(const llama_vocab * vocab, const std::string & text, bool parse_special);

// Loads a model with plain weight buffers: repacked ones ("extra" buffer types) multiply 4 rows at a time with other
// kernels than the rest, so a row's result would depend on its batch. Throws voxd_error "model_load_failed" naming
// the file as `what` ("backbone", "model").
voxd_llama_model_ptr voxd_llama_load_model(const std::string & path, llama_model_params params, const char * what);

struct voxd_llama_batch_context_options {
    int n_ctx_seq   = 0; // KV cells per sequence
    int n_seq       = 1;
    int n_batch     = 512; // positions per llama_decode of a prompt
    int threads     = 1;
    bool embeddings = false; // outputs hidden states (a TTS generator reads them)
};

// A context for batches whose rows give the same result alone or together: one KV stream per sequence (a row's
// attention reads its own cells whatever runs beside it), attention as one flash-attention op (whose rows the
// reference mode keeps apart) rather than matrix products whose row count is the step's rows in one stream, and the
// CPU backend in reference mode (voxd_llama_use_row_kernels). Throws voxd_error "model_load_failed" naming `path`.
voxd_llama_context_ptr voxd_llama_batch_context(llama_model * model, const voxd_llama_batch_context_options & options, const std::string & path);

// Sets ggml's reference mode on the context's CPU backend (or, with `on` false, leaves it): flash attention then
// computes every query row in one pass over its own KV stream, never split over threads by KV cells (ggml's choice for
// a lone query row) or in query tiles, and no op is fused or swapped for a batch-size-dependent kernel (IQ panel GEMM).
void voxd_llama_use_row_kernels(llama_context * lctx, bool on = true);

// How a step's rows (one per sequence, `seq_ids[i]` the sequence of row i) are cut into llama_decode calls so that
// each row meets the same CPU kernels whatever else is decoded: `decode(rows, companion)` is called once per call,
// in sequence-id order. llama.cpp cuts a decode into one micro-batch per run of consecutive sequence ids (one view of
// the KV streams), so each run is its own call. On x86 a matrix product of 2 or more rows goes to llamafile's
// tinyBLAS and one of a lone row to ggml's vec_dot: a run of one row is called with `companion` (the caller adds a
// copy of the row one position further in its sequence, which causal attention keeps out of the row's result, and
// drops its KV cell after the decode). Elsewhere the fast kernels start at 4 or 8 rows or pair them, so every row is
// a call of its own.
void voxd_llama_decode_runs(const std::vector<llama_seq_id> & seq_ids, const std::function<void(const std::vector<int> & rows, bool companion)> & decode);
