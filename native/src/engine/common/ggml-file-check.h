// Walks a file in ggml's old model format (magic, hparams, then tensor records to the end) before an engine library
// loads it. whisper.cpp's and libparakeet's loaders accept files they cannot use: a file without tensors loads as an
// "empty model for testing" (uninitialised weights), a tensor cut short by the end of the file is half-read without
// an error, and some broken hparams reach GGML_ASSERTs (a process abort) later. Each engine reads its header
// through this walker and checks it; the walker turns every such file into a clean voxd_error "model_load_failed".
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

// True for the file types (ftype, after GGML_QNT_VERSION_FACTOR) ggml maps to a weight type: ggml asserts on the
// others, and the engine libraries ask it without checking.
bool voxd_ggml_ftype_known(int32_t ftype);

class voxd_ggml_file_check {
public:
    // Opens `path` for `what` (the format's name in messages: "whisper.cpp model").
    voxd_ggml_file_check(const std::string & path, std::string what);

    [[noreturn]] void fail(const std::string & why) const;
    int32_t read_i32();
    void read_bytes(char * out, int64_t n_bytes);
    void skip(int64_t n_bytes);
    // Checks the ggml magic; the first read.
    void read_magic();
    // Walks the tensor records to the end of the file: each complete, with `min_dims`..4 dimensions, each name
    // once, and `expected` of them in all. Returns their elements, summed.
    int64_t check_tensors(int min_dims, int64_t expected);

private:
    std::string m_path;
    std::string m_what;
    std::ifstream m_in;
    int64_t m_size = 0;
};
