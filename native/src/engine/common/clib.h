// For the classic C engines (pocketsphinx, flite): resolving their functions, and calling them so that a library
// that exit()s on an internal error fails one call instead of ending the server. A source build opens the system's
// shared libraries at run time, so the addon loads without them; a platform package links them statically
// (VOXD_STATIC_CLIBS, scripts/bundled-deps.mjs), so it needs nothing of the system.
#pragma once

#include <dlfcn.h>

#include <csetjmp>
#include <string>

// Sets `fn` to the library's `name`; a missing symbol is appended to `missing` (", "-separated) for the error.
template <typename F> void voxd_clib_resolve(void * lib, const char * name, F & fn, std::string & missing) {
    fn = reinterpret_cast<F>(dlsym(lib, name));
    if (!fn) {
        missing += missing.empty() ? name : std::string(", ") + name;
    }
}

// VOXD_CLIB_FN(lib, api, fn, missing): sets api.fn to the library's `fn`, linked in or looked up in `lib`.
#if defined(VOXD_STATIC_CLIBS)
#define VOXD_CLIB_FN(lib, api, fn, missing) ((void) (lib), (api).fn = &::fn)
#else
#define VOXD_CLIB_FN(lib, api, fn, missing) voxd_clib_resolve((lib), #fn, (api).fn, (missing))
#endif

// Runs `fn` with `jump` (the engine's thread_local) pointing at this frame, so the engine's fatal-error path can
// longjmp back: then it returns false. Only the library's C frames and `fn` lie in between, so `fn` must own
// nothing with a destructor across its library calls and must not throw. What the library allocated is leaked.
template <typename F> bool voxd_clib_guarded(std::jmp_buf *& jump, F fn) {
    std::jmp_buf env;
    if (setjmp(env) != 0) {
        jump = nullptr;
        return false;
    }
    jump = &env;
    fn();
    jump = nullptr;
    return true;
}
