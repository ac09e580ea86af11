// The tensor records of a ggml-format model file (whisper.cpp's and libparakeet's layout: dimensions, name length,
// type, shape, name, data), loaded into one backend buffer of our own graphs' (common/ggml-graph.h). The header before
// the records is the caller's to read; the file was checked beforehand (common/ggml-file-check.h).
#pragma once

#include "common/error.h"

#include "ggml-backend.h"
#include "ggml.h"

#include <cstdint>
#include <fstream>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

// The file, read from the start: the header's values, then the tensors. Every failure is a voxd_error
// "model_load_failed" naming the file.
class voxd_ggml_file_reader {
public:
    explicit voxd_ggml_file_reader(const std::string & path);

    voxd_error fail(const std::string & why) const { return voxd_error("model_load_failed", m_path + ": " + why); }
    int32_t read_i32();
    std::vector<float> read_floats(size_t n);
    std::string read_string(size_t n);
    std::ifstream & stream() { return m_in; }

private:
    std::string m_path;
    std::ifstream m_in;
};

class voxd_ggml_file_tensors {
public:
    // Reads every record's metadata from `file` (past its header) into `ctx` (no_alloc, room for every tensor); the
    // data stays in the file until load().
    voxd_ggml_file_tensors(voxd_ggml_file_reader & file, ggml_context * ctx);

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
    voxd_ggml_file_reader & m_file;
    ggml_context * m_ctx; // borrowed: the caller's
    std::map<std::string, record> m_records;
};
