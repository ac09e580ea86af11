// The tensor records of a ggml-format model file (whisper.cpp's and libparakeet's layout: dimensions, name length,
// type, shape, name, data), loaded into one backend buffer of our own graphs' (common/ggml-graph.h). The header before
// the records is the caller's to read; the file was checked beforehand (common/ggml-file-check.h).
#pragma once

#include "common/error.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>

class voxd_ggml_file_tensors {
public:
    using fail_fn = std::function<voxd_error(const std::string &)>; // makes the "model_load_failed" error

    // Reads every record's metadata from `in` (positioned at the first record) into `ctx` (no_alloc, room for every
    // tensor); the data stays in the file until load().
    voxd_ggml_file_tensors(std::ifstream & in, ggml_context * ctx, fail_fn fail);

    // The tensor `name`, which must have `shape` (dimensions left out are 1): a mismatch would trip a ggml assertion
    // in a graph later.
    ggml_tensor * get(const std::string & name, std::initializer_list<int64_t> shape) const;

    // Each tensor by name.
    std::map<std::string, ggml_tensor *> all() const;

    // Allocates every tensor on `backend` (one buffer, returned: the caller owns it) and reads its data.
    ggml_backend_buffer_t load(ggml_backend_t backend);

private:
    struct record {
        ggml_tensor * tensor;
        std::streamoff offset; // of its data in the file
    };
    std::ifstream & m_in;
    ggml_context * m_ctx; // borrowed: the caller's
    fail_fn m_fail;
    std::map<std::string, record> m_records;
};
