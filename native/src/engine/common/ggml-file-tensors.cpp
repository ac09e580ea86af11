#include "common/ggml-file-tensors.h"

#include <vector>

voxd_ggml_file_reader::voxd_ggml_file_reader(const std::string & path) : m_path(path), m_in(path, std::ios::binary) {
    if (!m_in) {
        throw fail("cannot open the file");
    }
}

int32_t voxd_ggml_file_reader::read_i32() {
    int32_t v = 0;
    if (!m_in.read(reinterpret_cast<char *>(&v), sizeof(v))) {
        throw fail("the file is truncated");
    }
    return v;
}

std::vector<float> voxd_ggml_file_reader::read_floats(size_t n) {
    std::vector<float> out(n);
    if (!m_in.read(reinterpret_cast<char *>(out.data()), (std::streamsize)(n * sizeof(float)))) {
        throw fail("the file is truncated");
    }
    return out;
}

std::string voxd_ggml_file_reader::read_string(size_t n) {
    std::string out(n, '\0');
    if (!m_in.read(out.data(), (std::streamsize) n)) {
        throw fail("the file is truncated");
    }
    return out;
}

voxd_ggml_file_tensors::voxd_ggml_file_tensors(voxd_ggml_file_reader & file, ggml_context * ctx) : m_file(file), m_ctx(ctx) {
    std::ifstream & in = m_file.stream();
    while (true) {
        int32_t n_dims = 0;
        if (!in.read(reinterpret_cast<char *>(&n_dims), sizeof(n_dims)))
            break;
        const int32_t name_len = m_file.read_i32();
        const ggml_type type   = (ggml_type) m_file.read_i32();
        int64_t ne[4]          = { 1, 1, 1, 1 };
        for (int i = 0; i < n_dims; i++) {
            ne[i] = m_file.read_i32();
        }
        const std::string name = m_file.read_string((size_t) name_len);
        ggml_tensor * t        = ggml_new_tensor(m_ctx, type, 4, ne); // the file check counted the records: `ctx` has room
        ggml_set_name(t, name.c_str());
        m_records[name] = { t, (std::streamoff) in.tellg() };
        in.seekg((std::streamoff) ggml_nbytes(t), std::ios::cur);
    }
}

ggml_tensor * voxd_ggml_file_tensors::get(const std::string & name, std::initializer_list<int64_t> shape) const {
    auto it = m_records.find(name);
    if (it == m_records.end()) {
        throw m_file.fail("tensor '" + name + "' is missing");
    }
    ggml_tensor * t = it->second.tensor;
    int i           = 0;
    for (int64_t d : shape) {
        if (t->ne[i++] != d) {
            throw m_file.fail("tensor '" + name + "' has an unexpected shape");
        }
    }
    for (; i < 4; i++) {
        if (t->ne[i] != 1)
            throw m_file.fail("tensor '" + name + "' has an unexpected shape");
    }
    return t;
}

std::map<std::string, ggml_tensor *> voxd_ggml_file_tensors::all() const {
    std::map<std::string, ggml_tensor *> out;
    for (const auto & [name, r] : m_records) {
        out.emplace(name, r.tensor);
    }
    return out;
}

ggml_backend_buffer_t voxd_ggml_file_tensors::load(ggml_backend_t backend) {
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(m_ctx, backend);
    if (!buf) {
        throw m_file.fail("cannot allocate memory for the weights");
    }
    std::vector<char> data;
    for (auto & [name, r] : m_records) {
        data.resize(ggml_nbytes(r.tensor));
        std::ifstream & in = m_file.stream();
        in.clear();
        in.seekg(r.offset);
        if (!in.read(data.data(), (std::streamsize) data.size())) {
            ggml_backend_buffer_free(buf);
            throw m_file.fail("the file is truncated");
        }
        ggml_backend_tensor_set(r.tensor, data.data(), 0, data.size());
    }
    return buf;
}
