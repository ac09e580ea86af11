#include "common/ggml-file-check.h"

#include "common/error.h"

#include "ggml.h"

#include <unordered_set>

voxd_ggml_file_check::voxd_ggml_file_check(const std::string & path, std::string what)
    : m_path(path), m_what(std::move(what)), m_in(path, std::ios::binary | std::ios::ate) {
    if (!m_in) {
        throw voxd_error("model_load_failed", "cannot open " + path);
    }
    m_size = m_in.tellg();
    m_in.seekg(0);
}

void voxd_ggml_file_check::fail(const std::string & why) const {
    throw voxd_error("model_load_failed", m_path + " is not a usable " + m_what + ": " + why);
}

int32_t voxd_ggml_file_check::read_i32() {
    int32_t v = 0;
    if (!m_in.read(reinterpret_cast<char *>(&v), sizeof(v))) {
        fail("the file is truncated");
    }
    return v;
}

void voxd_ggml_file_check::read_bytes(char * out, int64_t n_bytes) {
    if (n_bytes < 0 || !m_in.read(out, n_bytes)) {
        fail("the file is truncated");
    }
}

void voxd_ggml_file_check::skip(int64_t n_bytes) {
    if (n_bytes < 0 || (int64_t) m_in.tellg() + n_bytes > m_size) {
        fail("the file is truncated");
    }
    m_in.seekg(n_bytes, std::ios::cur);
}

void voxd_ggml_file_check::read_magic() {
    if ((uint32_t) read_i32() != GGML_FILE_MAGIC) {
        fail("bad magic");
    }
}

bool voxd_ggml_ftype_known(int32_t ftype) {
    switch ((ggml_ftype) (ftype % GGML_QNT_VERSION_FACTOR)) {
        case GGML_FTYPE_ALL_F32:
        case GGML_FTYPE_MOSTLY_F16:
        case GGML_FTYPE_MOSTLY_BF16:
        case GGML_FTYPE_MOSTLY_Q4_0:
        case GGML_FTYPE_MOSTLY_Q4_1:
        case GGML_FTYPE_MOSTLY_Q5_0:
        case GGML_FTYPE_MOSTLY_Q5_1:
        case GGML_FTYPE_MOSTLY_Q8_0:
        case GGML_FTYPE_MOSTLY_Q2_K:
        case GGML_FTYPE_MOSTLY_Q3_K:
        case GGML_FTYPE_MOSTLY_Q4_K:
        case GGML_FTYPE_MOSTLY_Q5_K:
        case GGML_FTYPE_MOSTLY_Q6_K: return ftype >= 0;
        default: return false;
    }
}

int64_t voxd_ggml_file_check::check_tensors(int min_dims, int64_t expected) {
    std::unordered_set<std::string> names;
    int64_t total = 0;
    while ((int64_t) m_in.tellg() < m_size) {
        const int32_t n_dims   = read_i32();
        const int32_t name_len = read_i32();
        const int32_t ttype    = read_i32();
        if (n_dims < min_dims || n_dims > 4 || name_len < 1 || name_len > 256 || ttype < 0 || ttype >= GGML_TYPE_COUNT) {
            fail("bad tensor header");
        }
        const ggml_type type = (ggml_type) ttype;
        const int64_t blck   = ggml_blck_size(type); // 0 for removed types
        int64_t ne[4]        = { 1, 1, 1, 1 };
        int64_t n_elements   = 1;
        for (int i = 0; i < n_dims; i++) {
            ne[i] = read_i32();
            if (ne[i] <= 0 || ne[i] > (1 << 24)) {
                fail("bad tensor shape");
            }
            n_elements *= ne[i];
            if (n_elements > (int64_t(1) << 34)) { // checked per dimension: four of up to 2^24 would overflow
                fail("bad tensor shape");
            }
        }
        if (blck <= 0 || ne[0] % blck != 0) {
            fail("bad tensor type or shape");
        }
        std::string name(name_len, '\0');
        read_bytes(name.data(), name_len);
        if (!names.insert(name).second) {
            fail("tensor '" + name + "' appears twice");
        }
        skip(n_elements / blck * (int64_t) ggml_type_size(type));
        total += n_elements;
    }
    if ((int64_t) names.size() != expected) {
        fail(names.empty() ? "it has no tensors" : "it has " + std::to_string(names.size()) + " tensors, expected " + std::to_string(expected));
    }
    return total;
}
