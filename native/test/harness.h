// A small test harness for the engine library: VOXD_TEST registers a test, the CHECK macros report a failure with
// its file and line and end the test. main.cpp runs one test by name (ctest runs each as its own process) or all.
#pragma once

#include "common/error.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

struct voxd_test_case {
    const char * name;
    std::function<void()> body;
};

std::vector<voxd_test_case> & voxd_test_registry();

struct voxd_test_registrar {
    voxd_test_registrar(const char * name, std::function<void()> body) { voxd_test_registry().push_back({ name, std::move(body) }); }
};

// A failed check: the test ends with this message.
struct voxd_test_failure : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// The path a test input comes from, named by an environment variable that scripts/test-native.mjs sets.
std::string voxd_test_input(const char * variable);

#define VOXD_TEST_CAT2(a, b) a##b
#define VOXD_TEST_CAT(a, b) VOXD_TEST_CAT2(a, b)
#define VOXD_TEST(name)                                                                                                                                        \
    static void VOXD_TEST_CAT(voxd_test_fn_, __LINE__)();                                                                                                      \
    static const voxd_test_registrar VOXD_TEST_CAT(voxd_test_reg_, __LINE__)(name, &VOXD_TEST_CAT(voxd_test_fn_, __LINE__));                                   \
    static void VOXD_TEST_CAT(voxd_test_fn_, __LINE__)()

#define VOXD_FAIL(what)                                                                                                                                        \
    do {                                                                                                                                                       \
        std::ostringstream voxd_out_;                                                                                                                          \
        voxd_out_ << __FILE__ << ":" << __LINE__ << ": " << what;                                                                                              \
        throw voxd_test_failure(voxd_out_.str());                                                                                                              \
    } while (0)

#define CHECK(cond)                                                                                                                                            \
    do {                                                                                                                                                       \
        if (!(cond)) {                                                                                                                                         \
            VOXD_FAIL("CHECK(" #cond ")");                                                                                                                     \
        }                                                                                                                                                      \
    } while (0)

#define CHECK_EQ(a, b)                                                                                                                                         \
    do {                                                                                                                                                       \
        const auto voxd_a_ = (a);                                                                                                                              \
        const auto voxd_b_ = (b);                                                                                                                              \
        if (!(voxd_a_ == voxd_b_)) {                                                                                                                           \
            VOXD_FAIL("CHECK_EQ(" #a ", " #b "): " << voxd_a_ << " != " << voxd_b_);                                                                           \
        }                                                                                                                                                      \
    } while (0)

#define CHECK_NEAR(a, b, tolerance)                                                                                                                            \
    do {                                                                                                                                                       \
        const double voxd_a_ = (double) (a);                                                                                                                   \
        const double voxd_b_ = (double) (b);                                                                                                                   \
        if (!(std::fabs(voxd_a_ - voxd_b_) <= (tolerance))) {                                                                                                  \
            VOXD_FAIL("CHECK_NEAR(" #a ", " #b "): " << voxd_a_ << " vs " << voxd_b_ << " (tolerance " << (tolerance) << ")");                                 \
        }                                                                                                                                                      \
    } while (0)

// `expr` throws voxd_error with `expected_code`.
#define CHECK_THROWS_CODE(expr, expected_code)                                                                                                                 \
    do {                                                                                                                                                       \
        std::string voxd_code_ = "(nothing thrown)";                                                                                                           \
        try {                                                                                                                                                  \
            (void) (expr);                                                                                                                                     \
        } catch (const voxd_error & voxd_e_) {                                                                                                                 \
            voxd_code_ = voxd_e_.code;                                                                                                                         \
        }                                                                                                                                                      \
        if (voxd_code_ != (expected_code)) {                                                                                                                   \
            VOXD_FAIL("CHECK_THROWS_CODE(" #expr "): expected " << (expected_code) << ", got " << voxd_code_);                                                 \
        }                                                                                                                                                      \
    } while (0)
