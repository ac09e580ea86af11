// The size of a file, for the memory a model's weights take once read.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

// Size of a file in bytes; 0 when it cannot be read (a memory report is then only smaller).
inline int64_t voxd_file_bytes(const std::string & path) {
    std::error_code error;
    const auto size = std::filesystem::file_size(path, error);
    return error ? 0 : (int64_t) size;
}
