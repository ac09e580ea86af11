# Builds one on-request target of the addon's build tree unless its binary is there, holding a lock on the tree
# meanwhile: test files run in parallel, and two builds in one tree at once would write the same objects
# (test/helpers/build-tree.ts runs it).
#   cmake -D BUILD_DIR=<dir> -D TARGET=<name> -D JOBS=<n> -P build-tree-target.cmake
file(LOCK "${BUILD_DIR}/.voxd-tool-build.lock" GUARD PROCESS TIMEOUT 1800)
if (EXISTS "${BUILD_DIR}/${TARGET}")
    return()
endif()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${BUILD_DIR}" --target "${TARGET}" --parallel "${JOBS}" RESULT_VARIABLE result)
if (NOT result EQUAL 0)
    message(FATAL_ERROR "building ${TARGET} failed (${result})")
endif()
