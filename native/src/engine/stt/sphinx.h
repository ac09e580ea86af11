// Offline US-English speech-to-text with CMU pocketsphinx 5prealpha. A source build opens Debian's libpocketsphinx3
// with dlopen on first use, so the addon loads where pocketsphinx is not installed and only this engine fails, with
// an `engine_unavailable` error that names the packages to install; a platform package links it in (common/clib.h).
#pragma once

#include "common/error.h"

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

struct voxd_sphinx_decoder; // one ps_decoder_t and what it takes to reset it (stt/sphinx.cpp)

// Frees the decoder, then gives the freed memory back to the kernel (malloc_trim; see stt/sphinx.cpp).
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

// The built-in model: two pools of decoders on the same files, for whole clips (pocketsphinx_continuous's defaults)
// and for live streams (the same, with tighter search limits).
struct voxd_sphinx_model {
    std::shared_ptr<voxd_sphinx_pool> clips;
    std::shared_ptr<voxd_sphinx_pool> live;

    // Checks the library and the files and loads one decoder. Throws voxd_error "engine_unavailable" (pocketsphinx
    // or Debian's default model is not installed) or "model_load_failed".
    static voxd_sphinx_model load(const voxd_sphinx_paths & paths, size_t max_idle);
};

// Where `said` (words already sent) ends in `words`: the prefix length of `words` with the fewest word edits from
// `said`, the longest on a tie, so a revised word counts as a substitution rather than a new word.
size_t voxd_sphinx_align(const std::vector<std::string> & said, const std::vector<std::string> & words);

struct voxd_sphinx_stream_result {
    std::string delta;      // text made stable by this call
    std::string transcript; // everything sent in the turn
};

// Live transcription on one pooled decoder, held from construction to close() (or destruction). feed() returns the
// newly stable text; finish() ends the turn. Calls queue on the stream's lock; an aborted or failed feed or finish
// drops the open turn. Calls after close() throw voxd_error "closed".
class voxd_sphinx_stream {
public:
    static constexpr size_t block_samples = 2048; // pocketsphinx_continuous's read size: utterances are cut per block

    voxd_sphinx_stream(std::shared_ptr<voxd_sphinx_pool> pool, size_t stable_blocks); // takes a decoder: may load one
    ~voxd_sphinx_stream();
    voxd_sphinx_stream(const voxd_sphinx_stream &)             = delete;
    voxd_sphinx_stream & operator=(const voxd_sphinx_stream &) = delete;

    std::string feed(const std::vector<float> & samples16k, const voxd_abort_ptr & abort);
    voxd_sphinx_stream_result finish(const voxd_abort_ptr & abort);
    void reset();
    void close();

private:
    struct state; // the decoder and the open turn (stt/sphinx.cpp)
    std::unique_ptr<state> m_state;
};
