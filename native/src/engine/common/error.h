// What every engine reports failure and cancellation with: coded errors and the abort flag. The addon turns a
// voxd_error into a rejected promise with `code` (addon/async.h); the flag is the one JS's AbortFlag sets.
#pragma once

#include <atomic>
#include <memory>
#include <stdexcept>
#include <string>

// An error with a stable code (e.g. "model_load_failed") besides its message.
struct voxd_error : std::runtime_error {
    std::string code;
    voxd_error(std::string code, const std::string & message) : std::runtime_error(message), code(std::move(code)) {}
};

// Shared between whoever may cancel (JS's AbortFlag) and every engine loop that observes it; outlives whichever
// ends first.
using voxd_abort_ptr = std::shared_ptr<std::atomic<bool>>;

// A flag that nobody will set, for work that cannot be cancelled.
inline voxd_abort_ptr voxd_never_aborted() {
    return std::make_shared<std::atomic<bool>>(false);
}

// Throws voxd_error("aborted") when the flag is set; engines call it between units of work.
inline void voxd_check_abort(const voxd_abort_ptr & flag) {
    if (flag && flag->load(std::memory_order_relaxed)) {
        throw voxd_error("aborted", "the operation was aborted");
    }
}
