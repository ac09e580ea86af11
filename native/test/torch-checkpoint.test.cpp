// The PyTorch checkpoint reader (common/torch-checkpoint.h) on files torch itself wrote (native/test/data/torch,
// made by its make-fixtures.py): names, shapes, strides and values as torch has them, and a clear error, never a
// crash, for every truncation or corrupted byte of one and for what a checkpoint must not hold.
#include "harness.h"

#include "common/torch-checkpoint.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace {

std::string fixture(const char * name) {
    return voxd_test_input("VOXD_TEST_TORCH_DIR") + "/" + name;
}

std::vector<char> bytes_of(const std::string & path) {
    std::ifstream in(path, std::ios::binary);
    return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A directory of its own for files a test writes, removed with everything in it.
struct scratch_dir {
    std::filesystem::path path;
    scratch_dir() {
        const auto tick = std::chrono::steady_clock::now().time_since_epoch().count();
        path            = std::filesystem::temp_directory_path() / ("voxd-torch-checkpoint-" + std::to_string(tick));
        std::filesystem::create_directories(path);
    }
    ~scratch_dir() {
        std::error_code ignored;
        std::filesystem::remove_all(path, ignored);
    }
    std::string write(const std::string & name, const char * data, size_t size) const {
        const std::string file = (path / name).string();
        std::ofstream(file, std::ios::binary).write(data, (std::streamsize) size);
        return file;
    }
};

// The message of the voxd_error that `make` throws, with its code checked.
template <typename F> std::string error_of(F make) {
    try {
        make();
    } catch (const voxd_error & e) {
        CHECK_EQ(e.code, std::string("model_load_failed"));
        return e.what();
    }
    VOXD_FAIL("no error");
}

bool contains(const std::string & text, const char * part) {
    return text.find(part) != std::string::npos;
}

// Opens `path` and reads every floating-point tensor: either all of it works or a voxd_error says why.
void open_and_read_all(const std::string & path) {
    try {
        voxd_torch_checkpoint c(path);
        for (const auto & [name, info] : c.tensors()) {
            if (info.dtype.rfind("float", 0) == 0 || info.dtype == "bfloat16") {
                (void) c.read_f32(name);
            }
        }
    } catch (const voxd_error & e) {
        CHECK_EQ(e.code, std::string("model_load_failed"));
    }
}

} // namespace

VOXD_TEST("torch-checkpoint: a state dict's tensors are named by their dict keys, DataParallel's module. prefix included") {
    voxd_torch_checkpoint c(fixture("state-dict.pt"));
    const voxd_torch_tensor_info & w = c.info("model.module.0.weight");
    CHECK_EQ(w.dtype, std::string("float32"));
    CHECK(w.shape == (std::vector<int64_t>{ 3, 2 }));
    CHECK(w.stride == (std::vector<int64_t>{ 2, 1 }));
    CHECK_EQ(w.storage_offset, 0);
    CHECK(c.read_f32("model.module.0.weight") == (std::vector<float>{ 0, 1, 2, 3, 4, 5 }));
    CHECK(c.read_f32("model.module.0.bias") == (std::vector<float>{ 100, 101, 102 }));
    CHECK(c.read_f32("model.module.1.weight") == (std::vector<float>{ 200, 201, 202 }));
    CHECK(c.read_f32("model.module.1.bias") == (std::vector<float>{ 300, 301, 302 }));
    CHECK(c.read_f32("param") == (std::vector<float>{ 3, 4 })); // a Parameter is its tensor
    CHECK(c.info("scalar").shape.empty());
    CHECK(c.read_f32("scalar") == (std::vector<float>{ 2.5f }));
    // only tensors are named: numbers, strings, lists of them and the state dict's _metadata are not
    CHECK_EQ(c.tensors().size(), (size_t) 14);
    CHECK(!c.has("step"));
    CHECK(!c.has("model._metadata"));
    CHECK(!c.has("model.module.0"));
}

VOXD_TEST("torch-checkpoint: float16, bfloat16 and float64 are read as float32; an integer tensor is not") {
    voxd_torch_checkpoint c(fixture("state-dict.pt"));
    CHECK_EQ(c.info("dtypes.f16").dtype, std::string("float16"));
    CHECK(c.read_f32("dtypes.f16") ==
          (std::vector<float>{ 1.5f, -2.0f, 65504.0f, 6.103515625e-05f, 5.9604644775390625e-08f, -std::numeric_limits<float>::infinity() }));
    CHECK_EQ(c.info("dtypes.bf16").dtype, std::string("bfloat16"));
    CHECK(c.read_f32("dtypes.bf16") == (std::vector<float>{ 1.5f, -2.0f, 1.2676506002282294e30f }));
    CHECK_EQ(c.info("dtypes.f64").dtype, std::string("float64"));
    CHECK(c.read_f32("dtypes.f64") == (std::vector<float>{ (float) 0.1, 0.25f, -7.0f, (float) 1e-3 }));
    CHECK_EQ(c.info("dtypes.i64").dtype, std::string("int64"));
    CHECK(contains(error_of([&] { c.read_f32("dtypes.i64"); }), "int64"));
    CHECK(contains(error_of([&] { c.read_f32("nope"); }), "'nope' is missing"));
    CHECK(contains(error_of([&] { c.info("nope"); }), "state-dict.pt"));
}

VOXD_TEST("torch-checkpoint: views are read through their strides and offsets, several sharing one storage") {
    voxd_torch_checkpoint c(fixture("state-dict.pt"));
    const voxd_torch_tensor_info & t = c.info("views.transposed");
    CHECK(t.shape == (std::vector<int64_t>{ 4, 3 }));
    CHECK(t.stride == (std::vector<int64_t>{ 1, 4 }));
    CHECK(c.read_f32("views.transposed") == (std::vector<float>{ 0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11 }));

    const voxd_torch_tensor_info & a = c.info("views.a");
    const voxd_torch_tensor_info & b = c.info("views.b");
    CHECK_EQ(a.storage_key, b.storage_key);
    CHECK_EQ(a.storage_offset, 2);
    CHECK_EQ(b.storage_offset, 10);
    CHECK(c.read_f32("views.a") == (std::vector<float>{ 2, 3, 4, 5, 6, 7 }));
    CHECK(c.read_f32("views.b") == (std::vector<float>{ 10, 11, 12, 13 }));

    CHECK(c.info("views.broadcast").stride == (std::vector<int64_t>{ 0, 1 }));
    CHECK(c.read_f32("views.broadcast") == (std::vector<float>{ 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3 }));
}

VOXD_TEST("torch-checkpoint: a file of one bare tensor (a voice pack) names it \"\"") {
    voxd_torch_checkpoint c(fixture("voice.pt"));
    CHECK_EQ(c.tensors().size(), (size_t) 1);
    CHECK(c.info("").shape == (std::vector<int64_t>{ 4, 1, 8 }));
    CHECK(c.info("").stride == (std::vector<int64_t>{ 8, 8, 1 }));
    const std::vector<float> v = c.read_f32("");
    CHECK_EQ(v.size(), (size_t) 32);
    for (size_t i = 0; i < v.size(); i++) {
        CHECK_EQ(v[i], 0.5f * (float) i);
    }
}

VOXD_TEST("torch-checkpoint: pickle protocol 4 (frames, short strings, MEMOIZE, STACK_GLOBAL) is read alike") {
    voxd_torch_checkpoint c(fixture("protocol4.pt"));
    CHECK(c.read_f32("w") == (std::vector<float>{ 1, 2, 3, 4 }));
    CHECK(c.read_f32("nested.x") == (std::vector<float>{ 5 }));
}

VOXD_TEST("torch-checkpoint: what is not a zip checkpoint is refused with a reason") {
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("legacy.pt")); }), "legacy format"));
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("compressed.pt")); }), "is compressed (method 8)"));
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("make-fixtures.py")); }), "not a zip archive"));
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("missing.pt")); }), "cannot open"));
}

VOXD_TEST("torch-checkpoint: a pickle that calls anything but a tensor or container constructor is refused, not run") {
    const std::string message = error_of([] { voxd_torch_checkpoint c(fixture("os-system.pt")); });
    CHECK(contains(message, "os-system.pt"));
    CHECK(contains(message, "posix.system")); // os.system, as CPython pickles it
}

VOXD_TEST("torch-checkpoint: two tensors of one name, and containers holding themselves or each other 2^40 ways, are refused") {
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("duplicate.pt")); }), "two tensors are named 'a.b'"));
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("cycle.pt")); }), "nests or repeats"));
    CHECK(contains(error_of([] { voxd_torch_checkpoint c(fixture("dag.pt")); }), "nests or repeats"));
}

VOXD_TEST("torch-checkpoint: every truncation of a checkpoint is an error, never a crash") {
    const scratch_dir dir;
    for (const char * name : { "state-dict.pt", "voice.pt", "protocol4.pt" }) {
        const std::vector<char> whole = bytes_of(fixture(name));
        CHECK(!whole.empty());
        // every cut in the last KB (the directory and its end records); before it, one in 64 (they all lose the end)
        for (size_t n = 0; n < whole.size(); n += n + 1024 < whole.size() ? 64 : 1) {
            const std::string file = dir.write("cut.pt", whole.data(), n);
            (void) error_of([&] { voxd_torch_checkpoint c(file); });
        }
    }
}

VOXD_TEST("torch-checkpoint: a corrupted byte anywhere gives an error or a checkpoint, never a crash") {
    const scratch_dir dir;
    for (const char * name : { "state-dict.pt", "protocol4.pt" }) {
        std::vector<char> bytes = bytes_of(fixture(name));
        for (size_t i = 0; i < bytes.size(); i++) {
            bytes[i] ^= '\xff';
            open_and_read_all(dir.write("bad.pt", bytes.data(), bytes.size()));
            bytes[i] ^= '\xff';
        }
    }
}
