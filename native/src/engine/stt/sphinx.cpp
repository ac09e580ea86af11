#include "stt/sphinx.h"
#include "common/clib.h"

// Types and prototypes; the functions are linked in or resolved with dlsym (common/clib.h).
#include <pocketsphinx.h>
#include <sphinxbase/cmn.h>
#include <sphinxbase/err.h>
#include <sphinxbase/feat.h>

#include <dlfcn.h>
#include <sys/stat.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csetjmp>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <deque>
#include <sstream>

namespace {

const char * const k_install_hint = "install Debian's libpocketsphinx3 and pocketsphinx-en-us packages (apt-get install libpocketsphinx3 pocketsphinx-en-us)";

// Live streams must keep up with real time, several per core: at most 3000 active HMMs and 10 word exits per frame
// (defaults 30000 and unlimited) cut a stream's decoding time by about 28 % (4.0 s to 2.9 s for the three LibriVox
// clips back to back) and leave their transcripts as they were.
const voxd_sphinx_args k_live_search = { "-maxhmmpf", "5000", "-maxwpf", "10" };

// pocketsphinx_continuous -infile reads the audio in blocks of this many samples and checks the decoder's
// speech state after each; matching it makes the utterance boundaries (and so the transcript) match too.
constexpr size_t k_block_samples = voxd_sphinx_stream::block_samples;

// ---- the library, opened at run time ----

// The handful of pocketsphinx 5prealpha (soname .so.3) and sphinxbase functions voxd calls.
struct voxd_sphinx_api {
    decltype(&::cmd_ln_parse_r) cmd_ln_parse_r     = nullptr;
    decltype(&::cmd_ln_free_r) cmd_ln_free_r       = nullptr;
    decltype(&::cmd_ln_int_r) cmd_ln_int_r         = nullptr;
    decltype(&::cmd_ln_float_r) cmd_ln_float_r     = nullptr;
    decltype(&::err_set_callback) err_set_callback = nullptr;
    decltype(&::err_set_logfp) err_set_logfp       = nullptr;
    decltype(&::logmath_exp) logmath_exp           = nullptr;

    decltype(&::ps_args) ps_args                   = nullptr;
    decltype(&::ps_init) ps_init                   = nullptr;
    decltype(&::ps_free) ps_free                   = nullptr;
    decltype(&::ps_get_config) ps_get_config       = nullptr;
    decltype(&::ps_get_feat) ps_get_feat           = nullptr;
    decltype(&::ps_get_logmath) ps_get_logmath     = nullptr;
    decltype(&::ps_start_stream) ps_start_stream   = nullptr;
    decltype(&::ps_start_utt) ps_start_utt         = nullptr;
    decltype(&::ps_process_raw) ps_process_raw     = nullptr;
    decltype(&::ps_end_utt) ps_end_utt             = nullptr;
    decltype(&::ps_get_in_speech) ps_get_in_speech = nullptr;
    decltype(&::ps_get_hyp) ps_get_hyp             = nullptr;
    decltype(&::ps_seg_iter) ps_seg_iter           = nullptr;
    decltype(&::ps_seg_next) ps_seg_next           = nullptr;
    decltype(&::ps_seg_word) ps_seg_word           = nullptr;
    decltype(&::ps_seg_frames) ps_seg_frames       = nullptr;
    decltype(&::ps_seg_prob) ps_seg_prob           = nullptr;
    decltype(&::ps_seg_free) ps_seg_free           = nullptr;
};

// pocketsphinx logs through one process-wide callback. voxd drops every line below ERROR and keeps, per thread,
// the first error of the current call for the message of the voxd_error it throws.
thread_local std::string t_first_error;
thread_local std::jmp_buf * t_fatal_jump =
    nullptr; // set while voxd_clib_guarded runs pocketsphinx on this thread: its FATAL log jumps back (pocketsphinx exit()s right after), and that decoder is never used again

// `ERROR: "dict.c", line 195: Failed to open ...` -> `Failed to open ...`
std::string voxd_sphinx_strip_prefix(const char * line) {
    std::string s(line);
    const size_t at = s.find("\", line ");
    if (at != std::string::npos) {
        const size_t colon = s.find(": ", at);
        if (colon != std::string::npos) {
            s.erase(0, colon + 2);
        }
    }
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) {
        s.pop_back();
    }
    // messages quote bytes of the file that failed to parse: keep the error printable and short
    for (char & c : s) {
        if ((unsigned char) c < 0x20 || (unsigned char) c >= 0x7f) {
            c = '?';
        }
    }
    if (s.size() > 200) {
        s.resize(200);
    }
    return s;
}

void voxd_sphinx_log(void * /*user_data*/, err_lvl_t level, const char * fmt, ...) {
    if (level < ERR_ERROR) {
        return;
    }
    if (t_first_error.empty()) {
        char line[1024];
        va_list ap;
        va_start(ap, fmt);
        std::vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        try {
            t_first_error = voxd_sphinx_strip_prefix(line);
        } catch (...) {
            // out of memory inside a C callback: keep no message rather than throw through C frames
        }
    }
    if (level == ERR_FATAL && t_fatal_jump) {
        std::longjmp(*t_fatal_jump, 1);
    }
}

// Opens the libraries (when not linked in) once per process; throws engine_unavailable (every time) when that failed. The handles
// are never closed: the library keeps process-wide state, its log callback among it, pointing into this file.
const voxd_sphinx_api & voxd_sphinx_library() {
    static voxd_sphinx_api api;
    static std::string failure;
    static std::once_flag once;
    std::call_once(once, [] {
#if defined(VOXD_STATIC_CLIBS)
        void * base = nullptr; // linked in
        void * ps   = nullptr;
#else
        void * base = dlopen("libsphinxbase.so.3", RTLD_NOW | RTLD_LOCAL);
        void * ps   = base ? dlopen("libpocketsphinx.so.3", RTLD_NOW | RTLD_LOCAL) : nullptr;
        if (!ps) {
            const char * why = dlerror();
            failure          = std::string("pocketsphinx is not installed (") + (why ? why : "cannot open libpocketsphinx.so.3") + "): " + k_install_hint;
            return;
        }
#endif
        std::string missing;
        VOXD_CLIB_FN(base, api, cmd_ln_parse_r, missing);
        VOXD_CLIB_FN(base, api, cmd_ln_free_r, missing);
        VOXD_CLIB_FN(base, api, cmd_ln_int_r, missing);
        VOXD_CLIB_FN(base, api, cmd_ln_float_r, missing);
        VOXD_CLIB_FN(base, api, err_set_callback, missing);
        VOXD_CLIB_FN(base, api, err_set_logfp, missing);
        VOXD_CLIB_FN(base, api, logmath_exp, missing);
        VOXD_CLIB_FN(ps, api, ps_args, missing);
        VOXD_CLIB_FN(ps, api, ps_init, missing);
        VOXD_CLIB_FN(ps, api, ps_free, missing);
        VOXD_CLIB_FN(ps, api, ps_get_config, missing);
        VOXD_CLIB_FN(ps, api, ps_get_feat, missing);
        VOXD_CLIB_FN(ps, api, ps_get_logmath, missing);
        VOXD_CLIB_FN(ps, api, ps_start_stream, missing);
        VOXD_CLIB_FN(ps, api, ps_start_utt, missing);
        VOXD_CLIB_FN(ps, api, ps_process_raw, missing);
        VOXD_CLIB_FN(ps, api, ps_end_utt, missing);
        VOXD_CLIB_FN(ps, api, ps_get_in_speech, missing);
        VOXD_CLIB_FN(ps, api, ps_get_hyp, missing);
        VOXD_CLIB_FN(ps, api, ps_seg_iter, missing);
        VOXD_CLIB_FN(ps, api, ps_seg_next, missing);
        VOXD_CLIB_FN(ps, api, ps_seg_word, missing);
        VOXD_CLIB_FN(ps, api, ps_seg_frames, missing);
        VOXD_CLIB_FN(ps, api, ps_seg_prob, missing);
        VOXD_CLIB_FN(ps, api, ps_seg_free, missing);
        if (!missing.empty()) {
            failure = "the installed libpocketsphinx.so.3 lacks " + missing + " (voxd needs pocketsphinx 5prealpha): " + k_install_hint;
            return;
        }
        api.err_set_callback(voxd_sphinx_log, nullptr);
        api.err_set_logfp(nullptr); // the configuration dump is written to the log file directly, not through the callback
    });
    if (!failure.empty()) {
        throw voxd_error("engine_unavailable", failure);
    }
    return api;
}

// sphinxbase sets process-wide state (debug level, log file, warping parameters) while a decoder initialises.
std::mutex g_init_mutex;

// A decoder is 97 MB in about 830,000 allocations, made in the malloc arena of the worker thread that opened it.
// glibc gives freed arena memory back to the kernel only from the top of a heap, so without a trim every arena kept
// the peak of the decoders it ever held and the process grew round after round of sessions (40 closed sessions:
// 2.7, 4.2, 4.9 GB; docs/architecture.md). Frees that arrive during a trim make it run once more, not beside it.
void voxd_sphinx_return_memory() {
#if defined(__GLIBC__)
    static std::atomic<int> s_requests{ 0 };
    if (s_requests.fetch_add(1) > 0) {
        return; // the thread trimming now trims again for this request
    }
    for (int served = 1;;) {
        malloc_trim(0);
        const int left = s_requests.fetch_sub(served) - served;
        if (left == 0) {
            break;
        }
        served = left;
    }
#endif
}

bool voxd_sphinx_is_filler(const std::string & w) {
    auto wrapped = [&](const char * open, const char * close) {
        const size_t o = std::strlen(open), c = std::strlen(close);
        return w.size() >= o + c && w.compare(0, o, open) == 0 && w.compare(w.size() - c, c, close) == 0;
    };
    // <s>, </s>, <sil>, [NOISE], [SPEECH] in Debian's model; ++NOISE++ in older ones
    return wrapped("<", ">") || wrapped("[", "]") || wrapped("++", "++");
}

// "read(2)" -> "read": the dictionary's alternate pronunciations of one word
std::string voxd_sphinx_base_word(const std::string & w) {
    const size_t open = w.rfind('(');
    if (open == std::string::npos || open == 0 || w.back() != ')' || open + 2 >= w.size()) {
        return w;
    }
    for (size_t i = open + 1; i + 1 < w.size(); i++) {
        if (w[i] < '0' || w[i] > '9') {
            return w;
        }
    }
    return w.substr(0, open);
}

bool voxd_sphinx_file_exists(const std::string & path, bool directory) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 && (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

// pocketsphinx reads 16-bit PCM: x * 32768 gives back exactly the integers a 16-bit WAV file held.
std::vector<int16> voxd_sphinx_pcm16(const std::vector<float> & samples) {
    std::vector<int16> pcm(samples.size());
    std::transform(samples.begin(), samples.end(), pcm.begin(), [](float x) {
        const float v = std::nearbyint(x * 32768.0f);
        return (int16) std::clamp(std::isnan(v) ? 0.0f : v, -32768.0f, 32767.0f);
    });
    return pcm;
}

} // namespace

// ---- decoder ----

struct voxd_sphinx_decoder {
    explicit voxd_sphinx_decoder(const voxd_sphinx_api & api) : api(api) {}
    ~voxd_sphinx_decoder() {
        if (ps && !broken) {
            api.ps_free(ps);
        }
    }

    const voxd_sphinx_api & api;
    ps_decoder_t * ps = nullptr; // owned: ps_free in the destructor
    int sample_rate   = 0;
    int frame_rate    = 0;
    bool in_utt       = false;
    bool broken       = false; // a FATAL error left the library mid-call: leaked, never reused

    // Live cepstral mean normalisation adapts across utterances and is not reset by ps_start_stream; restoring
    // it as initialised makes a pooled decoder give what a fresh one (and pocketsphinx_continuous) gives.
    std::vector<mfcc_t> cmn_mean;
    std::vector<mfcc_t> cmn_sum;
    int32 cmn_nframe = 0;

    void init(const voxd_sphinx_paths & paths, const voxd_sphinx_args & args);
    std::vector<voxd_sphinx_segment> decode(const std::vector<int16> & pcm, const voxd_abort_ptr & abort);
    void finish(); // ends an utterance left open by an abort or an error, so the decoder can be reused

    // the steps of decode(), also taken one block at a time by a live transcription
    void begin_clip();                               // restores the cepstral mean, new stream, first utterance
    bool process_block(const int16 * pcm, size_t n); // true while the decoder's VAD hears speech
    void end_utterance();
    void start_utterance();
    std::string partial_hyp();                                             // the open utterance's best hypothesis so far
    void collect(std::vector<voxd_sphinx_segment> & out, double duration); // the ended utterance, if any words

private:
    template <typename F> void call(const char * what, F fn) {
        t_first_error.clear();
        if (!voxd_clib_guarded(t_fatal_jump, fn)) {
            broken = true;
            throw voxd_error("transcription_failed",
                             std::string("pocketsphinx failed in ") + what + ": " + (t_first_error.empty() ? "fatal error" : t_first_error));
        }
    }
};

void voxd_sphinx_decoder_deleter::operator()(voxd_sphinx_decoder * dec) const {
    const bool frees = dec->ps && !dec->broken; // a broken decoder is leaked: nothing to give back
    delete dec;
    if (frees) {
        voxd_sphinx_return_memory();
    }
}

void voxd_sphinx_decoder::init(const voxd_sphinx_paths & paths, const voxd_sphinx_args & args) {
    // the same options pocketsphinx_continuous parses from its command line
    std::vector<std::string> words = { "voxd", "-hmm", paths.hmm, "-lm", paths.lm, "-dict", paths.dict };
    words.insert(words.end(), args.begin(), args.end());
    std::vector<char *> argv; // borrowed from `words`, which outlives the parse
    for (std::string & word : words) {
        argv.push_back(word.data());
    }
    cmd_ln_t * config = nullptr; // ours; ps_init takes a reference of its own
    std::lock_guard<std::mutex> lock(g_init_mutex);
    t_first_error.clear();
    const bool survived = voxd_clib_guarded(t_fatal_jump, [&] {
        config = api.cmd_ln_parse_r(nullptr, api.ps_args(), (int32) argv.size(), argv.data(), TRUE);
        if (config) {
            ps = api.ps_init(config);
        }
    });
    if (!survived) {
        broken = true; // config and the half-built decoder are leaked: freeing them could crash
        ps     = nullptr;
        throw voxd_error("model_load_failed", "pocketsphinx cannot load the model: " + (t_first_error.empty() ? std::string("fatal error") : t_first_error));
    }
    if (config) {
        api.cmd_ln_free_r(config);
    }
    if (!ps) {
        throw voxd_error("model_load_failed", "pocketsphinx cannot load the model (hmm " + paths.hmm + ", lm " + paths.lm + ", dict " + paths.dict + ")" +
                                                  (t_first_error.empty() ? "" : ": " + t_first_error));
    }
    cmd_ln_t * ps_config = api.ps_get_config(ps); // borrowed from the decoder
    sample_rate          = (int) api.cmd_ln_float_r(ps_config, "-samprate");
    frame_rate           = (int) api.cmd_ln_int_r(ps_config, "-frate");
    if (frame_rate <= 0) {
        throw voxd_error("model_load_failed", "pocketsphinx reports a frame rate of " + std::to_string(frame_rate));
    }
    feat_t * feat = api.ps_get_feat(ps); // borrowed from the decoder
    if (feat && feat->cmn_struct) {
        const cmn_t * cmn = feat->cmn_struct;
        cmn_mean.assign(cmn->cmn_mean, cmn->cmn_mean + cmn->veclen);
        cmn_sum.assign(cmn->sum, cmn->sum + cmn->veclen);
        cmn_nframe = cmn->nframe;
    }
}

void voxd_sphinx_decoder::finish() {
    if (!in_utt || broken) {
        return;
    }
    try {
        call("ps_end_utt", [&] { api.ps_end_utt(ps); });
        in_utt = false;
    } catch (const voxd_error &) {
        // broken now: the pool drops it
    }
}

void voxd_sphinx_decoder::begin_clip() {
    feat_t * feat = api.ps_get_feat(ps); // borrowed from the decoder
    if (feat && feat->cmn_struct && (size_t) feat->cmn_struct->veclen == cmn_mean.size()) {
        std::copy(cmn_mean.begin(), cmn_mean.end(), feat->cmn_struct->cmn_mean);
        std::copy(cmn_sum.begin(), cmn_sum.end(), feat->cmn_struct->sum);
        feat->cmn_struct->nframe = cmn_nframe;
    }
    int rc = 0;
    // a new stream restarts the frame count (word times are from the start of the clip) and the noise estimate
    call("ps_start_utt", [&] {
        api.ps_start_stream(ps);
        rc = api.ps_start_utt(ps);
    });
    if (rc < 0) {
        throw voxd_error("transcription_failed", "pocketsphinx cannot start an utterance: " + t_first_error);
    }
    in_utt = true;
}

bool voxd_sphinx_decoder::process_block(const int16 * pcm, size_t n) {
    int rc          = 0;
    uint8 in_speech = 0;
    call("ps_process_raw", [&] {
        rc        = api.ps_process_raw(ps, pcm, n, FALSE, FALSE);
        in_speech = api.ps_get_in_speech(ps);
    });
    if (rc < 0) {
        throw voxd_error("transcription_failed", "pocketsphinx cannot process the audio: " + t_first_error);
    }
    return in_speech != 0;
}

void voxd_sphinx_decoder::end_utterance() {
    call("ps_end_utt", [&] { api.ps_end_utt(ps); });
    in_utt = false;
}

void voxd_sphinx_decoder::start_utterance() {
    int rc = 0;
    call("ps_start_utt", [&] { rc = api.ps_start_utt(ps); });
    if (rc < 0) {
        throw voxd_error("transcription_failed", "pocketsphinx cannot start an utterance: " + t_first_error);
    }
    in_utt = true;
}

std::string voxd_sphinx_decoder::partial_hyp() {
    const char * hyp = nullptr; // owned by the decoder, valid until the next call
    call("ps_get_hyp", [&] { hyp = api.ps_get_hyp(ps, nullptr); });
    return hyp ? hyp : "";
}

std::vector<voxd_sphinx_segment> voxd_sphinx_decoder::decode(const std::vector<int16> & pcm, const voxd_abort_ptr & abort) {
    std::vector<voxd_sphinx_segment> out;
    const double duration = (double) pcm.size() / sample_rate;
    begin_clip();

    // pocketsphinx_continuous's loop: one utterance from the first block in speech to the first block after it
    // that the decoder's voice activity detector calls silence
    bool utt_started = false;
    for (size_t at = 0; at < pcm.size(); at += k_block_samples) {
        voxd_check_abort(abort);
        const size_t n       = std::min(k_block_samples, pcm.size() - at);
        const bool in_speech = process_block(pcm.data() + at, n);
        if (in_speech && !utt_started) {
            utt_started = true;
        }
        if (!in_speech && utt_started) {
            end_utterance();
            collect(out, duration);
            start_utterance();
            utt_started = false;
        }
    }
    end_utterance();
    if (utt_started) {
        collect(out, duration);
    }
    return out;
}

void voxd_sphinx_decoder::collect(std::vector<voxd_sphinx_segment> & out, double duration) {
    const char * hyp = nullptr; // owned by the decoder, valid until the next utterance
    call("ps_get_hyp", [&] { hyp = api.ps_get_hyp(ps, nullptr); });
    voxd_sphinx_segment seg{ 0.0, 0.0, hyp ? hyp : "", {} };

    // frees an iterator left unfinished by an exception (not after a FATAL error: then nothing is touched again);
    // ps_seg_next frees it at the end
    struct seg_iter_guard {
        voxd_sphinx_decoder & dec;
        ps_seg_t * it; // owned
        ~seg_iter_guard() {
            if (it && !dec.broken)
                dec.api.ps_seg_free(it);
        }
    } iter{ *this, nullptr };
    logmath_t * lmath = nullptr; // borrowed from the decoder
    call("ps_seg_iter", [&] {
        iter.it = api.ps_seg_iter(ps);
        lmath   = api.ps_get_logmath(ps);
    });
    const double frame = 1.0 / frame_rate;
    while (iter.it) {
        const char * word = nullptr; // points into the dictionary
        int sf = 0, ef = 0;
        int32 prob = 0;
        call("ps_seg_word", [&] {
            word = api.ps_seg_word(iter.it);
            api.ps_seg_frames(iter.it, &sf, &ef);
            prob = api.ps_seg_prob(iter.it, nullptr, nullptr, nullptr);
        });
        const std::string w = word ? word : "";
        if (!w.empty() && !voxd_sphinx_is_filler(w)) {
            // frames are 10 ms from the start of the stream; a word ends where its last frame ends
            const double start = std::clamp(sf * frame, 0.0, duration);
            const double end   = std::clamp((ef + 1) * frame, start, duration);
            seg.words.push_back({ voxd_sphinx_base_word(w), start, end, std::clamp(api.logmath_exp(lmath, prob), 0.0, 1.0) });
        }
        call("ps_seg_next", [&] { iter.it = api.ps_seg_next(iter.it); });
    }
    if (seg.words.empty() && seg.text.empty()) {
        return; // an utterance of noise and silence only
    }
    if (seg.text.empty()) {
        for (const voxd_sphinx_word & w : seg.words) {
            seg.text += (seg.text.empty() ? "" : " ") + w.word;
        }
    }
    if (!seg.words.empty()) {
        seg.start = seg.words.front().start;
        seg.end   = seg.words.back().end;
    }
    out.push_back(std::move(seg));
}

// ---- pool ----

voxd_sphinx_decoder_ptr voxd_sphinx_pool::acquire() {
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!m_idle.empty()) {
            voxd_sphinx_decoder_ptr dec = std::move(m_idle.back());
            m_idle.pop_back();
            return dec;
        }
    }
    voxd_sphinx_decoder_ptr dec(new voxd_sphinx_decoder(voxd_sphinx_library()));
    dec->init(m_paths, m_args);
    if (dec->sample_rate != 16000) {
        throw voxd_error("model_load_failed",
                         "the acoustic model " + m_paths.hmm + " expects " + std::to_string(dec->sample_rate) + " Hz audio; voxd feeds pocketsphinx 16 kHz");
    }
    std::lock_guard<std::mutex> lock(m_mutex);
    m_alive++;
    return dec;
}

void voxd_sphinx_pool::release(voxd_sphinx_decoder_ptr dec) {
    dec->finish();
    {
        std::lock_guard<std::mutex> lock(m_mutex);
        if (!dec->broken && m_idle.size() < m_max_idle) {
            m_idle.push_back(std::move(dec));
            return;
        }
        m_alive--;
    }
    dec.reset(); // outside the lock: freeing a decoder takes milliseconds; a broken one is leaked by the deleter
}

voxd_sphinx_pool::stats_t voxd_sphinx_pool::stats() {
    std::lock_guard<std::mutex> lock(m_mutex);
    return { m_alive, m_idle.size() };
}

std::vector<voxd_sphinx_segment> voxd_sphinx_pool::transcribe(const std::vector<float> & samples, const voxd_abort_ptr & abort) {
    voxd_check_abort(abort);
    if (samples.empty()) {
        return {};
    }
    const std::vector<int16> pcm = voxd_sphinx_pcm16(samples);
    voxd_sphinx_decoder_ptr dec  = acquire();
    std::vector<voxd_sphinx_segment> out;
    try {
        out = dec->decode(pcm, abort);
    } catch (...) {
        release(std::move(dec));
        throw;
    }
    release(std::move(dec));
    return out;
}

// ---- model ----

voxd_sphinx_model voxd_sphinx_model::load(const voxd_sphinx_paths & paths, size_t max_idle) {
    voxd_sphinx_library(); // engine_unavailable first: a missing library explains missing files too
    const voxd_sphinx_paths defaults;
    const struct {
        std::string path;
        bool is_default;
        bool directory;
    } files[] = {
        { paths.hmm, paths.hmm == defaults.hmm, true },
        { paths.hmm + "/mdef", paths.hmm == defaults.hmm, false },
        { paths.lm, paths.lm == defaults.lm, false },
        { paths.dict, paths.dict == defaults.dict, false },
    };
    for (const auto & f : files) {
        if (voxd_sphinx_file_exists(f.path, f.directory)) {
            continue;
        }
        if (f.is_default) {
            throw voxd_error("engine_unavailable", "the pocketsphinx US English model is not installed (no " + f.path + "): " + k_install_hint);
        }
        throw voxd_error("model_load_failed", std::string("pocketsphinx model ") + (f.directory ? "directory" : "file") + " not found: " + f.path);
    }
    voxd_sphinx_model model{ std::make_shared<voxd_sphinx_pool>(paths, max_idle), std::make_shared<voxd_sphinx_pool>(paths, max_idle, k_live_search) };
    model.clips->release(model.clips->acquire()); // loads once to validate the files, then keeps the decoder warm
    return model;
}

// ---- live transcription ----

namespace {

std::vector<std::string> voxd_sphinx_split(const std::string & text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string w; in >> w;) {
        out.push_back(w);
    }
    return out;
}

} // namespace

size_t voxd_sphinx_align(const std::vector<std::string> & said, const std::vector<std::string> & words) {
    std::vector<size_t> row(words.size() + 1);
    for (size_t j = 0; j <= words.size(); j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= said.size(); i++) {
        std::vector<size_t> next(words.size() + 1);
        next[0] = i;
        for (size_t j = 1; j <= words.size(); j++) {
            next[j] = std::min({ row[j] + 1, next[j - 1] + 1, row[j - 1] + (said[i - 1] == words[j - 1] ? 0 : 1) });
        }
        row = std::move(next);
    }
    size_t best = 0;
    for (size_t j = 1; j <= words.size(); j++) {
        if (row[j] <= row[best]) {
            best = j;
        }
    }
    return best;
}

// One decoder for the stream's lifetime and the open turn, which replays decode() incrementally: the same
// 2048-sample blocks from the start of the turn, the same utterance cuts, the same final hypotheses. Text is sent
// once stable and never taken back: every word of an ended utterance, and, when `stable_blocks` > 0, of the open
// one the leading words on which the last `stable_blocks` partial hypotheses agree, less the newest hypothesis's
// last word (still being spoken). Partial hypotheses come from the first (forward tree) pass only, and the
// fwdflat and bestpath passes at the utterance's end often revise them: a final hypothesis that differs from the
// sent words is aligned to them and only its rest is sent, so early words cost accuracy (opt-in, not the default).
struct voxd_sphinx_stream::state {
    state(std::shared_ptr<voxd_sphinx_pool> pool, size_t stable_blocks) : pool(std::move(pool)), stable_blocks(stable_blocks) {}
    ~state() {
        if (dec) {
            pool->release(std::move(dec)); // ends an open utterance; a broken decoder is dropped
        }
    }

    std::shared_ptr<voxd_sphinx_pool> pool;
    voxd_sphinx_decoder_ptr dec; // held from construction until close
    const size_t stable_blocks;
    std::mutex mutex; // one call at a time on the decoder
    bool closed = false;

    // the open turn
    bool active = false;        // begin_clip() done
    std::vector<int16> pending; // less than a block, waiting for more audio
    bool utt_started = false;
    std::string text;                             // everything sent in this turn
    std::vector<std::string> said;                // the words sent of the open utterance
    std::deque<std::vector<std::string>> history; // the open utterance's latest partial hypotheses

    void check_open() const {
        if (closed) {
            throw voxd_error("closed", "the pocketsphinx stream was closed");
        }
    }

    void send(const std::vector<std::string> & words, std::string & delta) {
        for (size_t j = voxd_sphinx_align(said, words); j < words.size(); j++) {
            const std::string piece = (text.empty() ? "" : " ") + words[j];
            text += piece;
            delta += piece;
            said.push_back(words[j]);
        }
    }

    void block(const int16 * pcm, size_t n, std::string & delta) {
        const bool in_speech = dec->process_block(pcm, n);
        if (in_speech && !utt_started) {
            utt_started = true;
        }
        if (!in_speech && utt_started) {
            end_utterance(delta);
            dec->start_utterance();
            return;
        }
        if (!utt_started || stable_blocks == 0) {
            return;
        }
        history.push_back(voxd_sphinx_split(dec->partial_hyp()));
        while (history.size() > stable_blocks) {
            history.pop_front();
        }
        if (history.size() < stable_blocks) {
            return;
        }
        const std::vector<std::string> & newest = history.back();
        size_t agreed                           = newest.size();
        for (const std::vector<std::string> & h : history) {
            size_t k = 0;
            while (k < agreed && k < h.size() && h[k] == newest[k]) {
                k++;
            }
            agreed = k;
        }
        if (agreed == newest.size() && agreed > 0) {
            agreed--;
        }
        send(std::vector<std::string>(newest.begin(), newest.begin() + (std::ptrdiff_t) agreed), delta);
    }

    void end_utterance(std::string & delta) {
        dec->end_utterance();
        std::vector<voxd_sphinx_segment> segs;
        dec->collect(segs, 1e9); // text only: the times are not reported
        if (!segs.empty()) {
            send(voxd_sphinx_split(segs.front().text), delta);
        }
        utt_started = false;
        said.clear();
        history.clear();
    }

    void begin_turn() {
        if (!dec) {
            dec = pool->acquire(); // the last one broke
        }
        dec->begin_clip();
        active = true;
    }

    void drop_turn() {
        if (dec) {
            dec->finish();
            if (dec->broken) {
                pool->release(std::move(dec)); // drops it; the next turn takes another
            }
        }
        active      = false;
        utt_started = false;
        pending.clear();
        text.clear();
        said.clear();
        history.clear();
    }

    // runs `fn` on the open turn; an abort or error drops the turn, so what was sent stays all that was said
    template <typename F> auto guarded(F fn) -> decltype(fn()) {
        try {
            return fn();
        } catch (...) {
            drop_turn();
            throw;
        }
    }

    std::string feed(const std::vector<int16> & pcm, const voxd_abort_ptr & abort) {
        std::lock_guard<std::mutex> lock(mutex);
        check_open();
        return guarded([&] {
            voxd_check_abort(abort);
            if (!active) {
                begin_turn();
            }
            std::string delta;
            pending.insert(pending.end(), pcm.begin(), pcm.end());
            size_t at = 0;
            for (; pending.size() - at >= k_block_samples; at += k_block_samples) {
                voxd_check_abort(abort);
                block(pending.data() + at, k_block_samples, delta);
            }
            pending.erase(pending.begin(), pending.begin() + (std::ptrdiff_t) at);
            return delta;
        });
    }

    voxd_sphinx_stream_result finish(const voxd_abort_ptr & abort) {
        std::lock_guard<std::mutex> lock(mutex);
        check_open();
        voxd_sphinx_stream_result out = guarded([&] {
            voxd_check_abort(abort);
            voxd_sphinx_stream_result r;
            if (!active) {
                return r; // no audio in this turn
            }
            if (!pending.empty()) {
                block(pending.data(), pending.size(), r.delta); // the clip's last, short block
            }
            if (utt_started) {
                end_utterance(r.delta);
            } else {
                dec->end_utterance();
            }
            r.transcript = text;
            return r;
        });
        drop_turn(); // nothing open now: only clears the turn
        return out;
    }

    void reset() {
        std::lock_guard<std::mutex> lock(mutex);
        check_open();
        drop_turn();
    }

    void close() {
        std::lock_guard<std::mutex> lock(mutex);
        if (closed) {
            return;
        }
        drop_turn();
        closed = true;
        if (dec) {
            pool->release(std::move(dec));
        }
    }
};

voxd_sphinx_stream::voxd_sphinx_stream(std::shared_ptr<voxd_sphinx_pool> pool, size_t stable_blocks)
    : m_state(std::make_unique<state>(std::move(pool), stable_blocks)) {
    m_state->dec = m_state->pool->acquire();
}

voxd_sphinx_stream::~voxd_sphinx_stream() = default;

std::string voxd_sphinx_stream::feed(const std::vector<float> & samples, const voxd_abort_ptr & abort) {
    return m_state->feed(voxd_sphinx_pcm16(samples), abort);
}

voxd_sphinx_stream_result voxd_sphinx_stream::finish(const voxd_abort_ptr & abort) {
    return m_state->finish(abort);
}

void voxd_sphinx_stream::reset() {
    m_state->reset();
}

void voxd_sphinx_stream::close() {
    m_state->close();
}
