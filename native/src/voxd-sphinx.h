// Offline US-English speech-to-text with CMU pocketsphinx 5prealpha (Debian's libpocketsphinx3). The library
// is opened with dlopen on first use, never linked, so the addon loads where pocketsphinx is not installed and
// only this engine fails, with an `engine_unavailable` error that names the packages to install.
#pragma once

#include "voxd-async.h"

#include <memory>
#include <mutex>
#include <string>
#include <vector>

// Debian's US English model (package pocketsphinx-en-us): acoustic model directory, language model, dictionary.
#define VOXD_SPHINX_DEFAULT_HMM "/usr/share/pocketsphinx/model/en-us/en-us"
#define VOXD_SPHINX_DEFAULT_LM "/usr/share/pocketsphinx/model/en-us/en-us.lm.bin"
#define VOXD_SPHINX_DEFAULT_DICT "/usr/share/pocketsphinx/model/en-us/cmudict-en-us.dict"

struct voxd_sphinx_paths {
    std::string hmm  = VOXD_SPHINX_DEFAULT_HMM;
    std::string lm   = VOXD_SPHINX_DEFAULT_LM;
    std::string dict = VOXD_SPHINX_DEFAULT_DICT;
};

struct voxd_sphinx_word {
    std::string word; // dictionary word, alternate-pronunciation suffix "(2)" removed
    double start;     // seconds from the start of the clip
    double end;
    double probability; // posterior probability of the word in the utterance lattice
};

// One utterance, as pocketsphinx_continuous segments the audio on silence.
struct voxd_sphinx_segment {
    double start;
    double end;
    std::string text; // the decoder's hypothesis (fillers excluded)
    std::vector<voxd_sphinx_word> words;
};

struct voxd_sphinx_decoder; // one ps_decoder_t and what it takes to reset it (voxd-sphinx.cpp)

// Frees the decoder, then gives the freed memory back to the kernel (malloc_trim; see voxd-sphinx.cpp).
struct voxd_sphinx_decoder_deleter {
    void operator()(voxd_sphinx_decoder * dec) const;
};
using voxd_sphinx_decoder_ptr = std::unique_ptr<voxd_sphinx_decoder, voxd_sphinx_decoder_deleter>;

// Extra pocketsphinx options of a pool's decoders, as on its command line ("-name", "value", ...).
using voxd_sphinx_args = std::vector<std::string>;

// ps_decoder_t is not thread-safe and holds its own copy of everything it loaded (97 MB in about 830,000
// allocations, nearly all of it resident once it decoded: the 25 MB language model is read into memory, not mapped,
// and its trie caches the last lookup, so not even that can be shared between decoders that run at once), so each
// transcription in flight takes a decoder of its own from this pool; it creates more on demand and keeps up to
// `max_idle`. The pool is shared (shared_ptr) by the JS SphinxModel and every worker in flight, so release() never
// frees a decoder in use.
class voxd_sphinx_pool {
public:
    voxd_sphinx_pool(voxd_sphinx_paths paths, size_t max_idle, voxd_sphinx_args args = {})
        : m_paths(std::move(paths)), m_args(std::move(args)), m_max_idle(max_idle) {}

    voxd_sphinx_decoder_ptr acquire();         // an idle decoder, or a newly initialised one
    void release(voxd_sphinx_decoder_ptr dec); // back to the pool, or freed beyond max_idle

    struct stats_t {
        size_t decoders; // alive: in use and idle
        size_t idle;
    };
    stats_t stats();

    const voxd_sphinx_paths & paths() const { return m_paths; }

    // Decodes a whole 16 kHz clip utterance by utterance, exactly as pocketsphinx_continuous -infile does.
    std::vector<voxd_sphinx_segment> transcribe(const std::vector<float> & samples, const voxd_abort_ptr & abort);

private:
    voxd_sphinx_paths m_paths;
    voxd_sphinx_args m_args;
    size_t m_max_idle;
    std::mutex m_mutex;
    std::vector<voxd_sphinx_decoder_ptr> m_idle;
    size_t m_alive = 0; // created by acquire() and not freed by release() yet
};

// JS: `SphinxModel.load({ hmm?, lm?, dict?, maxIdleDecoders? }) -> Promise<SphinxModel>`;
// `model.transcribe(samples16k, abort?) -> Promise<{ text, segments }>`; `model.openStream({ stableBlocks? }) ->
// Promise<SphinxStream>`; `model.stats() -> { transcribe: { decoders, idle }, live: { decoders, idle } }`;
// `model.release()`.
class voxd_sphinx_model : public Napi::ObjectWrap<voxd_sphinx_model> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_sphinx_model(const Napi::CallbackInfo & info);

private:
    static Napi::Value load(const Napi::CallbackInfo & info);
    Napi::Value transcribe(const Napi::CallbackInfo & info);
    Napi::Value open_stream(const Napi::CallbackInfo & info);
    Napi::Value stats(const Napi::CallbackInfo & info);
    Napi::Value release(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_sphinx_pool> m_pool;      // whole clips: pocketsphinx_continuous's defaults
    std::shared_ptr<voxd_sphinx_pool> m_live_pool; // live streams: the same, with tighter search limits
};

struct voxd_sphinx_stream_state; // the decoder a live transcription holds and its turn (voxd-sphinx.cpp)

// Live transcription on one pooled decoder, held from openStream to close (or collection). JS:
// `stream.feed(samples16k, abort?) -> Promise<string>` (the newly stable text), `stream.finish(abort?) ->
// Promise<{ delta, transcript }>`, `stream.reset() -> Promise<void>`, `stream.close() -> Promise<void>`.
// Calls queue on the stream's mutex; an aborted or failed feed or finish drops the open turn.
class voxd_sphinx_stream : public Napi::ObjectWrap<voxd_sphinx_stream> {
public:
    static Napi::Function define(Napi::Env env);
    explicit voxd_sphinx_stream(const Napi::CallbackInfo & info);

    std::shared_ptr<voxd_sphinx_stream_state> m_state;

private:
    Napi::Value feed(const Napi::CallbackInfo & info);
    Napi::Value finish(const Napi::CallbackInfo & info);
    Napi::Value reset(const Napi::CallbackInfo & info);
    Napi::Value close(const Napi::CallbackInfo & info);
    std::shared_ptr<voxd_sphinx_stream_state> state(Napi::Env env) const; // throws `closed`
};

// Exports SphinxModel (loading pocketsphinx itself waits for the first SphinxModel.load).
void voxd_sphinx_init(Napi::Env env, Napi::Object exports);
