// The engine library's test runner: `voxd_engine_tests PREFIX` runs the tests whose names start with PREFIX (ctest
// runs each file's, "<file>:", as one test: CMakeLists.txt), `voxd_engine_tests` runs them all, `--list` names them.
#include "harness.h"

#include "common/engine-log.h"

#include <cstdio>
#include <cstring>
#include <exception>

std::vector<voxd_test_case> & voxd_test_registry() {
    static std::vector<voxd_test_case> registry;
    return registry;
}

std::string voxd_test_input(const char * variable) {
    const char * value = std::getenv(variable);
    if (!value || !*value) {
        throw voxd_test_failure(std::string(variable) + " is not set: run the tests with `npm run test:native`");
    }
    return value;
}

static bool voxd_run_test(const voxd_test_case & test) {
    try {
        test.body();
        std::printf("ok   %s\n", test.name);
        return true;
    } catch (const voxd_test_failure & e) {
        std::printf("FAIL %s\n  %s\n", test.name, e.what());
    } catch (const voxd_error & e) {
        std::printf("FAIL %s\n  voxd_error %s: %s\n", test.name, e.code.c_str(), e.what());
    } catch (const std::exception & e) {
        std::printf("FAIL %s\n  exception: %s\n", test.name, e.what());
    }
    return false;
}

int main(int argc, char ** argv) {
    voxd_engine_log_init(); // the engine libraries' chatter below warnings stays out of the test output
    if (argc > 1 && std::strcmp(argv[1], "--list") == 0) {
        for (const voxd_test_case & test : voxd_test_registry()) {
            std::printf("%s\n", test.name);
        }
        return 0;
    }
    int failed = 0, ran = 0;
    for (const voxd_test_case & test : voxd_test_registry()) {
        if (argc > 1 && std::strncmp(test.name, argv[1], std::strlen(argv[1])) != 0) {
            continue;
        }
        ran++;
        failed += voxd_run_test(test) ? 0 : 1;
    }
    if (ran == 0) {
        std::printf("no test named %s...\n", argc > 1 ? argv[1] : "");
        return 1;
    }
    return failed == 0 ? 0 : 1;
}
