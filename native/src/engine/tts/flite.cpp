#include "tts/flite.h"
#include "common/clib.h"

// Types and prototypes; the functions are linked in or resolved with dlsym (common/clib.h).
#include <flite/flite.h>

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <csetjmp>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace {

const char * const k_install_hint = "install Debian's libflite1 package (apt-get install libflite1)";

constexpr int k_sample_rate = voxd_flite_model::sample_rate;

// Audio reaches JS at least this often while an utterance is synthesised (and at the end of each utterance).
constexpr size_t k_chunk_samples = 4000; // 0.25 s
// flite calls the streaming callback once at least this many new samples are ready; the abort flag is checked
// there, so an abort lands within this much audio of the utterance being synthesised.
constexpr int k_stream_min_samples = 1024;
// flite_ts_to_speech's upper bound on the tokens of one utterance.
constexpr int k_max_utterance_tokens = 500;
// The seed of the excitation noise of every synthesis (see voxd_flite_rand).
constexpr uint64_t k_noise_seed = 0x766f7864666c6974ULL;

using register_voice_fn = cst_voice * (*) (const char * voxdir);
using lang_init_fn      = void (*)(cst_voice * vox);
using lex_init_fn       = cst_lexicon * (*) ();

} // namespace

#if defined(VOXD_STATIC_CLIBS)
// flite's language, lexicon and voices, linked in (no header of flite declares them)
extern "C" {
void usenglish_init(cst_voice * vox);
cst_lexicon * cmulex_init(void);
cst_voice * register_cmu_us_slt(const char * voxdir);
cst_voice * register_cmu_us_kal16(const char * voxdir);
cst_voice * register_cmu_us_awb(const char * voxdir);
cst_voice * register_cmu_us_rms(const char * voxdir);
}
#define VOXD_FLITE_VOICE(fn) &::fn
#else
#define VOXD_FLITE_VOICE(fn) nullptr
#endif

namespace {

// ---- the library, opened at run time ----

// The flite 2.2 functions voxd calls (libflite.so.1, libflite_usenglish.so.1, libflite_cmulex.so.1).
struct voxd_flite_api {
    decltype(&::flite_init) flite_init                             = nullptr;
    decltype(&::flite_add_lang) flite_add_lang                     = nullptr;
    decltype(&::flite_do_synth) flite_do_synth                     = nullptr;
    decltype(&::utt_synth_tokens) utt_synth_tokens                 = nullptr;
    decltype(&::new_utterance) new_utterance                       = nullptr;
    decltype(&::delete_utterance) delete_utterance                 = nullptr;
    decltype(&::utt_relation_create) utt_relation_create           = nullptr;
    decltype(&::utt_wave) utt_wave                                 = nullptr;
    decltype(&::relation_head) relation_head                       = nullptr;
    decltype(&::relation_append) relation_append                   = nullptr;
    decltype(&::item_set_string) item_set_string                   = nullptr;
    decltype(&::feat_set) feat_set                                 = nullptr;
    decltype(&::feat_set_float) feat_set_float                     = nullptr;
    decltype(&::feat_present) feat_present                         = nullptr;
    decltype(&::feat_val) feat_val                                 = nullptr;
    decltype(&::get_param_string) get_param_string                 = nullptr;
    decltype(&::val_breakfunc) val_breakfunc                       = nullptr;
    decltype(&::default_utt_break) default_utt_break               = nullptr;
    decltype(&::ts_open_string) ts_open_string                     = nullptr;
    decltype(&::ts_get) ts_get                                     = nullptr;
    decltype(&::ts_eof) ts_eof                                     = nullptr;
    decltype(&::ts_close) ts_close                                 = nullptr;
    decltype(&::new_audio_streaming_info) new_audio_streaming_info = nullptr;
    decltype(&::audio_streaming_info_val) audio_streaming_info_val = nullptr;
    lang_init_fn usenglish_init                                    = nullptr;
    lex_init_fn cmulex_init                                        = nullptr;
};

// The built-in voices: all 16 kHz (Debian's cmu_us_kal is 8 kHz; kal16 is the same diphone voice at 16 kHz).
struct voxd_flite_voice_def {
    const char * id;
    const char * library;
    const char * register_fn;
    register_voice_fn linked; // VOXD_STATIC_CLIBS: the voice's register function; else looked up in `library`
    const char * description;
};

const voxd_flite_voice_def k_voice_defs[] = {
    { "slt", "libflite_cmu_us_slt.so.1", "register_cmu_us_slt", VOXD_FLITE_VOICE(register_cmu_us_slt), "US English, female (clustergen, CMU ARCTIC slt)" },
    { "kal", "libflite_cmu_us_kal16.so.1", "register_cmu_us_kal16", VOXD_FLITE_VOICE(register_cmu_us_kal16), "US English, male (diphone, kal16)" },
    { "awb", "libflite_cmu_us_awb.so.1", "register_cmu_us_awb", VOXD_FLITE_VOICE(register_cmu_us_awb), "Scottish English, male (clustergen, CMU ARCTIC awb)" },
    { "rms", "libflite_cmu_us_rms.so.1", "register_cmu_us_rms", VOXD_FLITE_VOICE(register_cmu_us_rms), "US English, male (clustergen, CMU ARCTIC rms)" },
};
constexpr size_t k_n_voices = sizeof(k_voice_defs) / sizeof(k_voice_defs[0]);

// ---- what flite calls in the C library, redirected per thread ----
//
// flite's clustergen vocoder draws its noise excitation from rand(): one process-wide sequence, so the same text
// came out different on every call and depended on what ran beside it. flite stops the process with exit() on an
// internal error (cst_error), and prints its warnings to stderr. libflite's own calls of rand, exit and
// (__)vfprintf are pointed at the functions below (its GOT entries; nothing else in the process is affected):
// a per-thread noise generator reseeded for every synthesis, so the output depends only on the request; a
// longjmp back to the synthesis that failed; messages kept for the error instead of printed.

thread_local uint64_t t_noise_state      = k_noise_seed;
thread_local std::jmp_buf * t_fatal_jump = nullptr; // set while voxd_clib_guarded runs flite on this thread (its exit() jumps back)
thread_local char t_first_message[256];             // flite's first message in the current synthesis

int voxd_flite_rand() {
    t_noise_state = t_noise_state * 6364136223846793005ULL + 1442695040888963407ULL; // 64-bit LCG (Knuth's MMIX)
    return (int) ((t_noise_state >> 33) & (uint64_t) RAND_MAX);                      // its high 31 bits
}

[[noreturn]] void voxd_flite_exit(int status) {
    if (t_fatal_jump) {
        std::longjmp(*t_fatal_jump, 1);
    }
    std::exit(status); // flite called outside a synthesis: what it would have done
}

void voxd_flite_keep_message(const char * format, va_list ap) {
    if (t_first_message[0] != '\0') {
        return;
    }
    std::vsnprintf(t_first_message, sizeof(t_first_message), format, ap);
    for (char * c = t_first_message; *c; c++) {
        if ((unsigned char) *c < 0x20 || (unsigned char) *c >= 0x7f) {
            *c = ' '; // messages quote the input text
        }
    }
}

int voxd_flite_vfprintf(FILE * stream, const char * format, va_list ap) {
    if (stream != stderr) {
        return std::vfprintf(stream, format, ap);
    }
    va_list copy;
    va_copy(copy, ap);
    voxd_flite_keep_message(format, copy);
    va_end(copy);
    return std::vsnprintf(nullptr, 0, format, ap);
}

#if !defined(VOXD_STATIC_CLIBS)
int voxd_flite_vfprintf_chk(FILE * stream, int /*flag*/, const char * format, va_list ap) {
    return voxd_flite_vfprintf(stream, format, ap);
}

#if UINTPTR_MAX > 0xffffffffu
#define VOXD_R_TYPE(info) ELF64_R_TYPE(info)
#define VOXD_R_SYM(info) ELF64_R_SYM(info)
#else
#define VOXD_R_TYPE(info) ELF32_R_TYPE(info)
#define VOXD_R_SYM(info) ELF32_R_SYM(info)
#endif

#if defined(__x86_64__)
constexpr uint32_t k_reloc_jump_slot = R_X86_64_JUMP_SLOT;
constexpr uint32_t k_reloc_glob_dat  = R_X86_64_GLOB_DAT;
#define VOXD_FLITE_CAN_HOOK 1
#elif defined(__aarch64__)
constexpr uint32_t k_reloc_jump_slot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t k_reloc_glob_dat  = R_AARCH64_GLOB_DAT;
#define VOXD_FLITE_CAN_HOOK 1
#else
#define VOXD_FLITE_CAN_HOOK 0
#endif

#if VOXD_FLITE_CAN_HOOK
struct voxd_flite_relro_query {
    ElfW(Addr) base;
    ElfW(Addr) start = 0; // the pages the loader made read-only after relocation: [start, end)
    ElfW(Addr) end   = 0;
};

int voxd_flite_find_relro(struct dl_phdr_info * info, size_t /*size*/, void * data) {
    auto * q = static_cast<voxd_flite_relro_query *>(data);
    if (info->dlpi_addr != q->base) {
        return 0;
    }
    const ElfW(Addr) page = (ElfW(Addr)) sysconf(_SC_PAGESIZE);
    for (ElfW(Half) i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) & ph = info->dlpi_phdr[i];
        if (ph.p_type == PT_GNU_RELRO) {
            q->start = (q->base + ph.p_vaddr) & ~(page - 1);
            q->end   = (q->base + ph.p_vaddr + ph.p_memsz) & ~(page - 1);
        }
    }
    return 1;
}
#endif

// Points the GOT slots through which the shared object `handle` itself calls `symbol` at `replacement`.
// Returns how many slots were changed (0 where the object does not import the symbol, or on other CPUs).
int voxd_flite_hook_import(void * handle, const char * symbol, void * replacement) {
#if VOXD_FLITE_CAN_HOOK
    struct link_map * map = nullptr;
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || map->l_addr == 0) {
        return 0;
    }
    const ElfW(Addr) base = map->l_addr;
    // glibc relocates the pointers of the dynamic section in place; other loaders may leave them relative
    auto absolute                = [base](ElfW(Addr) p) { return p < base ? p + base : p; };
    const ElfW(Sym) * symtab     = nullptr;
    const char * strtab          = nullptr;
    const ElfW(Rela) * tables[2] = { nullptr, nullptr };
    size_t sizes[2]              = { 0, 0 };
    bool plt_rela                = true;
    for (const ElfW(Dyn) * d = map->l_ld; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
            case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym) *>(absolute(d->d_un.d_ptr)); break;
            case DT_STRTAB: strtab = reinterpret_cast<const char *>(absolute(d->d_un.d_ptr)); break;
            case DT_JMPREL: tables[0] = reinterpret_cast<const ElfW(Rela) *>(absolute(d->d_un.d_ptr)); break;
            case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
            case DT_PLTREL: plt_rela = d->d_un.d_val == DT_RELA; break;
            case DT_RELA: tables[1] = reinterpret_cast<const ElfW(Rela) *>(absolute(d->d_un.d_ptr)); break;
            case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
            default: break;
        }
    }
    if (!symtab || !strtab || !plt_rela) {
        return 0;
    }
    voxd_flite_relro_query relro{ base };
    dl_iterate_phdr(voxd_flite_find_relro, &relro);
    const ElfW(Addr) page = (ElfW(Addr)) sysconf(_SC_PAGESIZE);

    int patched = 0;
    for (int t = 0; t < 2; t++) {
        for (size_t i = 0; tables[t] && i < sizes[t] / sizeof(ElfW(Rela)); i++) {
            const ElfW(Rela) & r = tables[t][i];
            const uint32_t type  = (uint32_t) VOXD_R_TYPE(r.r_info);
            if ((type != k_reloc_jump_slot && type != k_reloc_glob_dat) || VOXD_R_SYM(r.r_info) == 0) {
                continue;
            }
            if (std::strcmp(strtab + symtab[VOXD_R_SYM(r.r_info)].st_name, symbol) != 0) {
                continue;
            }
            void ** slot        = reinterpret_cast<void **>(base + r.r_offset);
            const ElfW(Addr) at = reinterpret_cast<ElfW(Addr)>(slot) & ~(page - 1);
            if (mprotect(reinterpret_cast<void *>(at), page, PROT_READ | PROT_WRITE) != 0) {
                continue;
            }
            *slot = replacement;
            if (at >= relro.start && at < relro.end) {
                mprotect(reinterpret_cast<void *>(at), page, PROT_READ); // as the loader left it
            }
            patched++;
        }
    }
    return patched;
#else
    (void) handle;
    (void) symbol;
    (void) replacement;
    return 0;
#endif
}
#endif // !VOXD_STATIC_CLIBS

struct voxd_flite_library_state {
    voxd_flite_api api;
    cst_voice * voices[k_n_voices] = {};
    bool deterministic             = false; // rand is redirected: the same request always gives the same audio
    std::string failure;
};

// Opens the libraries and registers the voices once per process; throws engine_unavailable (every time) when
// that failed. The handles are never closed and the voices never unregistered: flite keeps them in globals.
const voxd_flite_library_state & voxd_flite_library() {
    static voxd_flite_library_state state;
    static std::once_flag once;
    std::call_once(once, [] {
        voxd_flite_api & api = state.api;
#if defined(VOXD_STATIC_CLIBS)
        void * flite = nullptr; // linked in
        void * lang  = nullptr;
        void * lex   = nullptr;
#else
        void * flite = dlopen("libflite.so.1", RTLD_NOW | RTLD_LOCAL);
        void * lang  = flite ? dlopen("libflite_usenglish.so.1", RTLD_NOW | RTLD_LOCAL) : nullptr;
        void * lex   = lang ? dlopen("libflite_cmulex.so.1", RTLD_NOW | RTLD_LOCAL) : nullptr;
        if (!lex) {
            const char * why = dlerror();
            state.failure    = std::string("flite is not installed (") + (why ? why : "cannot open libflite.so.1") + "): " + k_install_hint;
            return;
        }
#endif
        std::string missing;
        VOXD_CLIB_FN(flite, api, flite_init, missing);
        VOXD_CLIB_FN(flite, api, flite_add_lang, missing);
        VOXD_CLIB_FN(flite, api, flite_do_synth, missing);
        VOXD_CLIB_FN(flite, api, utt_synth_tokens, missing);
        VOXD_CLIB_FN(flite, api, new_utterance, missing);
        VOXD_CLIB_FN(flite, api, delete_utterance, missing);
        VOXD_CLIB_FN(flite, api, utt_relation_create, missing);
        VOXD_CLIB_FN(flite, api, utt_wave, missing);
        VOXD_CLIB_FN(flite, api, relation_head, missing);
        VOXD_CLIB_FN(flite, api, relation_append, missing);
        VOXD_CLIB_FN(flite, api, item_set_string, missing);
        VOXD_CLIB_FN(flite, api, feat_set, missing);
        VOXD_CLIB_FN(flite, api, feat_set_float, missing);
        VOXD_CLIB_FN(flite, api, feat_present, missing);
        VOXD_CLIB_FN(flite, api, feat_val, missing);
        VOXD_CLIB_FN(flite, api, get_param_string, missing);
        VOXD_CLIB_FN(flite, api, val_breakfunc, missing);
        VOXD_CLIB_FN(flite, api, default_utt_break, missing);
        VOXD_CLIB_FN(flite, api, ts_open_string, missing);
        VOXD_CLIB_FN(flite, api, ts_get, missing);
        VOXD_CLIB_FN(flite, api, ts_eof, missing);
        VOXD_CLIB_FN(flite, api, ts_close, missing);
        VOXD_CLIB_FN(flite, api, new_audio_streaming_info, missing);
        VOXD_CLIB_FN(flite, api, audio_streaming_info_val, missing);
        VOXD_CLIB_FN(lang, api, usenglish_init, missing);
        VOXD_CLIB_FN(lex, api, cmulex_init, missing);
        register_voice_fn registers[k_n_voices] = {};
        for (size_t i = 0; i < k_n_voices; i++) {
#if defined(VOXD_STATIC_CLIBS)
            registers[i] = k_voice_defs[i].linked;
#else
            void * lib = dlopen(k_voice_defs[i].library, RTLD_NOW | RTLD_LOCAL);
            if (!lib) {
                const char * why = dlerror();
                state.failure    = std::string("a flite voice is missing (") + (why ? why : k_voice_defs[i].library) + "): " + k_install_hint;
                return;
            }
            voxd_clib_resolve(lib, k_voice_defs[i].register_fn, registers[i], missing);
#endif
        }
        if (!missing.empty()) {
            state.failure = "the installed flite lacks " + missing + " (voxd needs flite 2.2): " + k_install_hint;
            return;
        }
        // before any flite code runs, and while nothing else calls into flite
#if defined(VOXD_STATIC_CLIBS)
        state.deterministic = true; // the static flite calls the voxd_flite_static_* functions below instead
#else
        state.deterministic = voxd_flite_hook_import(flite, "rand", reinterpret_cast<void *>(&voxd_flite_rand)) > 0;
        voxd_flite_hook_import(flite, "exit", reinterpret_cast<void *>(&voxd_flite_exit));
        voxd_flite_hook_import(flite, "vfprintf", reinterpret_cast<void *>(&voxd_flite_vfprintf));
        voxd_flite_hook_import(flite, "__vfprintf_chk", reinterpret_cast<void *>(&voxd_flite_vfprintf_chk));
#endif

        // what flite's own main does before it registers its voices; none of this is thread-safe
        api.flite_init();
        api.flite_add_lang("eng", api.usenglish_init, api.cmulex_init);
        api.flite_add_lang("usenglish", api.usenglish_init, api.cmulex_init);
        for (size_t i = 0; i < k_n_voices; i++) {
            state.voices[i] = registers[i](nullptr);
            if (!state.voices[i]) {
                state.failure = std::string("flite could not register its voice ") + k_voice_defs[i].id + ": " + k_install_hint;
                return;
            }
        }
    });
    if (!state.failure.empty()) {
        throw voxd_error("engine_unavailable", state.failure);
    }
    return state;
}

} // namespace

#if defined(VOXD_STATIC_CLIBS)
// The static flite is compiled with rand, exit and vfprintf renamed to these (scripts/bundled-deps.mjs): the same
// redirection as the GOT hooks of a shared libflite, made at compile time.
extern "C" {
int voxd_flite_static_rand(void) {
    return voxd_flite_rand();
}

[[noreturn]] void voxd_flite_static_exit(int status) {
    voxd_flite_exit(status);
}

int voxd_flite_static_vfprintf(FILE * stream, const char * format, va_list ap) {
    return voxd_flite_vfprintf(stream, format, ap);
}
}
#endif

// The registered voices, shared by every FliteModel and the workers in flight.
struct voxd_flite_voices {
    const voxd_flite_library_state * library;
};

namespace {

// ---- one synthesis ----

// The text is cut into utterances as flite's own file reader (flite_ts_to_speech) cuts it: at the voice's
// utterance breaks (sentence ends), at most 500 tokens each. Each utterance is synthesised with its own
// features (speed, streaming), so nothing shared is written and calls may overlap. Samples go to the sink as flite
// streams them.
class voxd_flite_job {
public:
    voxd_flite_job(const voxd_flite_library_state & library, const std::string & text, size_t voice, float speed, voxd_pcm_sink & sink, voxd_abort_ptr abort)
        : m_library(library), m_text(text), m_voice(voice), m_speed(speed), m_sink(sink), m_abort(std::move(abort)) {}

    void run() {
        voxd_check_abort(m_abort);
        const voxd_flite_library_state & lib = m_library;
        cst_voice * voice                    = lib.voices[m_voice];
        t_noise_state                        = k_noise_seed; // the same noise for the same request, whatever ran before on this thread
        t_first_message[0]                   = '\0';
        m_status                             = status::ok;
        const bool survived                  = voxd_clib_guarded(t_fatal_jump, [&] { speak(lib.api, voice); });
        if (!survived) {
            throw voxd_error("synthesis_failed", std::string("flite failed: ") + (t_first_message[0] ? t_first_message : "internal error"));
        }
        switch (m_status) {
            case status::ok: break;
            case status::aborted: throw voxd_error("aborted", "the operation was aborted");
            case status::out_of_memory: throw voxd_error("out_of_memory", "out of memory");
            case status::failed:
                throw voxd_error("synthesis_failed", std::string("flite failed to synthesise an utterance") +
                                                         (t_first_message[0] ? std::string(": ") + t_first_message : std::string()));
            case status::bad_rate:
                throw voxd_error("synthesis_failed", "flite produced audio at " + std::to_string(m_bad_rate) + " Hz, not " + std::to_string(k_sample_rate));
        }
    }

private:
    enum class status { ok, aborted, failed, out_of_memory, bad_rate };

    // Inside voxd_clib_guarded: plain pointers only, no exceptions (see common/clib.h).
    void speak(const voxd_flite_api & api, cst_voice * voice) {
        const cst_features * vf = voice->features;
        cst_tokenstream * ts    = api.ts_open_string(
               m_text.c_str(), api.get_param_string(vf, "text_whitespace", nullptr), api.get_param_string(vf, "text_singlecharsymbols", nullptr),
               api.get_param_string(vf, "text_prepunctuation", nullptr), api.get_param_string(vf, "text_postpunctuation", nullptr));
        if (!ts) {
            m_status = status::failed;
            return;
        }
        cst_breakfunc breakfunc = api.default_utt_break;
        if (api.feat_present(vf, "utt_break")) {
            breakfunc = api.val_breakfunc(api.feat_val(vf, "utt_break"));
        }
        cst_utterance * utt   = api.new_utterance();
        cst_relation * tokrel = api.utt_relation_create(utt, "Token");
        int num_tokens        = 0;
        while (!api.ts_eof(ts) || num_tokens > 0) {
            const char * token = api.ts_get(ts);
            if (token[0] == '\0' || num_tokens > k_max_utterance_tokens || (api.relation_head(tokrel) && breakfunc(ts, token, tokrel))) {
                // the end of an utterance: speak it (one without tokens has nothing to say)
                if (api.relation_head(tokrel)) {
                    utt = synthesize_utterance(api, voice, utt);
                }
                if (utt) {
                    api.delete_utterance(utt);
                    utt = nullptr;
                }
                if (m_status == status::ok && m_abort->load()) {
                    m_status = status::aborted;
                }
                if (m_status != status::ok || api.ts_eof(ts)) {
                    break;
                }
                utt        = api.new_utterance();
                tokrel     = api.utt_relation_create(utt, "Token");
                num_tokens = 0;
            }
            num_tokens++;
            cst_item * t = api.relation_append(tokrel, nullptr);
            api.item_set_string(t, "name", token);
            api.item_set_string(t, "whitespace", ts->whitespace);
            api.item_set_string(t, "prepunctuation", ts->prepunctuation);
            api.item_set_string(t, "punc", ts->postpunctuation);
        }
        if (utt) {
            api.delete_utterance(utt);
        }
        api.ts_close(ts);
    }

    // Synthesises one utterance of tokens, streaming its audio into the sink. Returns the utterance to delete
    // (null when flite already deleted it).
    cst_utterance * synthesize_utterance(const voxd_flite_api & api, cst_voice * voice, cst_utterance * utt) {
        // per-utterance features are looked up before the voice's: the shared voice is never written
        api.feat_set_float(utt->features, "duration_stretch", 1.0f / m_speed); // > 1 is slower: flite's rate control
        cst_audio_streaming_info * asi = api.new_audio_streaming_info();       // owned by the utterance from here
        asi->min_buffsize              = k_stream_min_samples;
        asi->asc                       = &voxd_flite_job::on_stream;
        asi->userdata                  = this;
        api.feat_set(utt->features, "streaming_info", api.audio_streaming_info_val(asi));
        m_streamed = 0;

        utt = api.flite_do_synth(utt, voice, api.utt_synth_tokens);
        if (!utt) {
            if (m_status == status::ok) {
                m_status = status::failed;
            }
            return nullptr;
        }
        if (m_status == status::ok) {
            // whatever the voice did not stream (nothing, for these voices)
            const cst_wave * w = api.utt_wave(utt);
            if (w && w->num_samples > m_streamed) {
                append(w, m_streamed, w->num_samples - m_streamed);
            }
            flush(true);
        }
        return utt;
    }

    // flite's streaming callback, inside the synthesis: appends the new samples; stops flite on an abort.
    static int on_stream(const cst_wave * w, int start, int size, int /*last*/, cst_audio_streaming_info * asi) {
        auto * job = static_cast<voxd_flite_job *>(asi->userdata);
        if (job->m_status == status::ok && job->m_abort->load()) {
            job->m_status = status::aborted;
        }
        if (job->m_status != status::ok) {
            return CST_AUDIO_STREAM_STOP;
        }
        job->append(w, start, size);
        job->m_streamed = std::max(job->m_streamed, start + size);
        job->flush(false);
        return job->m_status == status::ok ? CST_AUDIO_STREAM_CONT : CST_AUDIO_STREAM_STOP;
    }

    void append(const cst_wave * w, int start, int size) noexcept {
        if (w->sample_rate != k_sample_rate) {
            m_status   = status::bad_rate;
            m_bad_rate = w->sample_rate;
            return;
        }
        if (size <= 0 || start < 0 || start + size > w->num_samples) {
            return;
        }
        const short * from = w->samples + start;
        try {
            m_scratch.resize((size_t) size);
            for (int i = 0; i < size; i++) {
                m_scratch[(size_t) i] = (float) from[i] / 32768.0f;
            }
            m_sink.append(m_scratch.data(), m_scratch.size());
        } catch (...) {
            m_status = status::out_of_memory; // nothing may be thrown through flite's C frames
        }
    }

    // Makes the samples so far deliverable, and wakes JS when a chunk's worth (or, with `force`, any) is pending.
    // Called inside flite's frames: throws nothing.
    void flush(bool force) noexcept {
        try {
            m_sink.ready(force ? 1 : k_chunk_samples);
        } catch (...) {
            m_status = status::out_of_memory; // the result still carries every sample; this stops the synthesis
        }
    }

    const voxd_flite_library_state & m_library;
    const std::string & m_text;
    size_t m_voice;
    float m_speed;
    voxd_pcm_sink & m_sink;
    voxd_abort_ptr m_abort;
    std::vector<float> m_scratch; // one streamed piece, as float

    // worker thread only
    status m_status = status::ok;
    int m_streamed  = 0; // samples of the current utterance's wave streamed so far
    int m_bad_rate  = 0;
};

} // namespace

// ---- model ----

voxd_flite_model::voxd_flite_model(const voxd_flite_voices & voices) : m_voices(std::make_unique<voxd_flite_voices>(voices)) {}

voxd_flite_model::~voxd_flite_model() = default;

std::shared_ptr<const voxd_flite_model> voxd_flite_model::load() {
    auto model = std::shared_ptr<const voxd_flite_model>(new voxd_flite_model(voxd_flite_voices{ &voxd_flite_library() }));
    // every voice speaks once, so a broken installation fails here rather than in a request
    for (size_t i = 0; i < k_n_voices; i++) {
        voxd_pcm_collector probe;
        try {
            model->synthesize("Hello.", i, 1.0f, probe, voxd_never_aborted());
        } catch (const voxd_error & e) {
            throw voxd_error("model_load_failed", std::string("flite voice ") + k_voice_defs[i].id + " does not work: " + e.what());
        }
        if (probe.samples().empty()) {
            throw voxd_error("model_load_failed", std::string("flite voice ") + k_voice_defs[i].id + " produced no audio");
        }
    }
    return model;
}

std::vector<voxd_flite_voice> voxd_flite_model::voices(const voxd_flite_model * loaded) {
    std::vector<voxd_flite_voice> out;
    for (size_t i = 0; i < k_n_voices; i++) {
        const cst_voice * voice = loaded ? loaded->m_voices->library->voices[i] : nullptr;
        out.push_back({ k_voice_defs[i].id, voice ? voice->name : k_voice_defs[i].id, k_voice_defs[i].description });
    }
    return out;
}

bool voxd_flite_model::deterministic() const {
    return m_voices->library->deterministic;
}

void voxd_flite_model::synthesize(const std::string & text, size_t voice, float speed, voxd_pcm_sink & sink, const voxd_abort_ptr & abort) const {
    if (voice >= k_n_voices) {
        throw voxd_error("invalid_argument", "no flite voice " + std::to_string(voice));
    }
    voxd_flite_job(*m_voices->library, text, voice, speed, sink, abort).run();
}
