#include "common/torch-checkpoint.h"

#include "common/error.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <unordered_map>

namespace {

// Bounds no state dict comes near: a hostile file is refused before it can make us spend memory or time.
constexpr uint64_t k_max_directory_bytes = 64ull << 20; // the zip's central directory, read whole
constexpr uint64_t k_max_pickle_bytes    = 64ull << 20; // data.pkl, read whole (Kokoro's is ~200 KB)
constexpr size_t k_max_objects           = 1u << 21;    // objects the pickle may build (Kokoro's builds ~20 k)
constexpr size_t k_max_stack             = 1u << 21;    // entries on the pickle's stack and marks
constexpr int k_max_depth                = 64;          // containers nested in containers
constexpr size_t k_max_dims              = 16;
constexpr uint64_t k_max_elements        = 1ull << 40; // of one tensor or storage: 4 TB of float32
constexpr uint64_t k_max_broadcast       = 1ull << 24; // elements of a tensor beyond its storage's (zero strides)

constexpr uint32_t k_local_header_sig   = 0x04034b50;
constexpr uint32_t k_central_header_sig = 0x02014b50;
constexpr uint32_t k_eocd_sig           = 0x06054b50;
constexpr uint32_t k_zip64_locator_sig  = 0x07064b50;
constexpr uint32_t k_zip64_eocd_sig     = 0x06064b50;
constexpr size_t k_eocd_size            = 22;
constexpr size_t k_zip64_locator_size   = 20;
constexpr size_t k_zip64_eocd_size      = 56;
constexpr size_t k_central_header_size  = 46;
constexpr size_t k_local_header_size    = 30;

uint16_t le16(const uint8_t * p) {
    return (uint16_t) (p[0] | (p[1] << 8));
}

uint32_t le32(const uint8_t * p) {
    return (uint32_t) p[0] | ((uint32_t) p[1] << 8) | ((uint32_t) p[2] << 16) | ((uint32_t) p[3] << 24);
}

uint64_t le64(const uint8_t * p) {
    return (uint64_t) le32(p) | ((uint64_t) le32(p + 4) << 32);
}

// The element types of the storage classes a checkpoint names ("torch FloatStorage"), by class name.
struct storage_type {
    const char * torch_class;
    const char * dtype;
    size_t bytes;
};
constexpr storage_type k_storage_types[] = {
    { "FloatStorage", "float32", 4 }, { "HalfStorage", "float16", 2 }, { "BFloat16Storage", "bfloat16", 2 }, { "DoubleStorage", "float64", 8 },
    { "LongStorage", "int64", 8 },    { "IntStorage", "int32", 4 },    { "ShortStorage", "int16", 2 },       { "CharStorage", "int8", 1 },
    { "ByteStorage", "uint8", 1 },    { "BoolStorage", "bool", 1 },
};

size_t dtype_bytes(const std::string & dtype) {
    for (const storage_type & t : k_storage_types) {
        if (dtype == t.dtype) {
            return t.bytes;
        }
    }
    return 0;
}

// The file, read at checked offsets: a range past its end is an error, never a short read.
class checked_file {
public:
    explicit checked_file(const std::string & path) : m_path(path), m_in(path, std::ios::binary | std::ios::ate) {
        if (!m_in) {
            fail("cannot open the file");
        }
        m_size = (uint64_t) m_in.tellg();
    }

    [[noreturn]] void fail(const std::string & why) const { throw voxd_error("model_load_failed", m_path + ": " + why); }

    uint64_t size() const { return m_size; }

    std::vector<uint8_t> read(uint64_t offset, uint64_t n, const char * what) {
        if (offset > m_size || n > m_size - offset) {
            fail(std::string("the file is truncated (") + what + " lies past its end)");
        }
        std::vector<uint8_t> out((size_t) n);
        m_in.clear();
        m_in.seekg((std::streamoff) offset);
        if (n > 0 && !m_in.read(reinterpret_cast<char *>(out.data()), (std::streamsize) n)) {
            fail(std::string("cannot read ") + what);
        }
        return out;
    }

private:
    std::string m_path;
    std::ifstream m_in;
    uint64_t m_size = 0;
};

struct zip_entry {
    uint64_t local_header = 0;
    uint64_t size         = 0; // uncompressed
    uint64_t packed_size  = 0;
    uint16_t method       = 0;
};

// The central directory's end: the classic record, or the ZIP64 one its locator points to (torch writes both).
struct zip_end {
    uint64_t entries = 0;
    uint64_t offset  = 0; // of the central directory
    uint64_t size    = 0;
};

zip_end read_zip_end(checked_file & file) {
    const uint64_t tail_size        = std::min<uint64_t>(file.size(), k_eocd_size + 0xffff); // the record plus the longest comment
    const std::vector<uint8_t> tail = file.read(file.size() - tail_size, tail_size, "the end of the zip directory");
    for (size_t at = tail.size() >= k_eocd_size ? tail.size() - k_eocd_size + 1 : 0; at-- > 0;) {
        const uint8_t * p = tail.data() + at;
        if (le32(p) != k_eocd_sig || at + k_eocd_size + le16(p + 20) > tail.size()) {
            continue;
        }
        zip_end end{ le16(p + 10), le32(p + 16), le32(p + 12) };
        const uint64_t eocd_at = file.size() - tail_size + at;
        if (eocd_at >= k_zip64_locator_size) {
            const std::vector<uint8_t> locator = file.read(eocd_at - k_zip64_locator_size, k_zip64_locator_size, "the ZIP64 locator");
            if (le32(locator.data()) == k_zip64_locator_sig) {
                const std::vector<uint8_t> record = file.read(le64(locator.data() + 8), k_zip64_eocd_size, "the ZIP64 directory end");
                if (le32(record.data()) != k_zip64_eocd_sig) {
                    file.fail("the ZIP64 directory end is damaged");
                }
                end = { le64(record.data() + 32), le64(record.data() + 48), le64(record.data() + 40) };
            }
        }
        return end;
    }
    std::vector<uint8_t> head = file.read(0, std::min<uint64_t>(file.size(), 2), "the header");
    if (head.size() == 2 && head[0] == 0x80 && head[1] <= 5) {
        file.fail("is in PyTorch's legacy format (before 1.6, or saved with _use_new_zipfile_serialization=False); save it again with torch.save's "
                  "default zip format");
    }
    file.fail("is not a zip archive (PyTorch's checkpoint format)");
}

// The central directory's entries by name. A ZIP64 entry keeps its large sizes and offset in an extra field.
std::map<std::string, zip_entry> read_zip_directory(checked_file & file) {
    const zip_end end = read_zip_end(file);
    if (end.size > k_max_directory_bytes) {
        file.fail("the zip directory is implausibly large");
    }
    const std::vector<uint8_t> dir = file.read(end.offset, end.size, "the zip directory");
    std::map<std::string, zip_entry> entries;
    size_t at = 0;
    for (uint64_t i = 0; i < end.entries; i++) {
        if (dir.size() - at < k_central_header_size || le32(dir.data() + at) != k_central_header_sig) {
            file.fail("the zip directory is damaged");
        }
        const uint8_t * h        = dir.data() + at;
        const size_t name_len    = le16(h + 28);
        const size_t extra_len   = le16(h + 30);
        const size_t comment_len = le16(h + 32);
        const size_t record_len  = k_central_header_size + name_len + extra_len + comment_len;
        if (dir.size() - at < record_len) {
            file.fail("the zip directory is damaged");
        }
        zip_entry e;
        e.method       = le16(h + 10);
        e.packed_size  = le32(h + 20);
        e.size         = le32(h + 24);
        e.local_header = le32(h + 42);
        // ZIP64 extended information: the 8-byte values of the fields set to 0xffffffff, in this order
        for (size_t x = 0; x + 4 <= extra_len;) {
            const uint8_t * f  = h + k_central_header_size + name_len + x;
            const size_t f_len = le16(f + 2);
            if (x + 4 + f_len > extra_len) {
                break;
            }
            if (le16(f) == 0x0001) {
                size_t v = 0;
                for (uint64_t * field : { &e.size, &e.packed_size, &e.local_header }) {
                    if (*field == 0xffffffff) {
                        if (v + 8 > f_len) {
                            file.fail("the zip directory is damaged");
                        }
                        *field = le64(f + 4 + v);
                        v += 8;
                    }
                }
            }
            x += 4 + f_len;
        }
        entries.emplace(std::string(reinterpret_cast<const char *>(h + k_central_header_size), name_len), e);
        at += record_len;
    }
    return entries;
}

// Where an entry's bytes start: after its local header, whose name and extra field (torch's padding to 64 bytes)
// may differ in length from the central directory's.
uint64_t entry_data_offset(checked_file & file, const std::string & name, const zip_entry & e) {
    if (e.method != 0) {
        file.fail("entry " + name + " is compressed (method " + std::to_string(e.method) + "); PyTorch stores a checkpoint's entries uncompressed");
    }
    if (e.packed_size != e.size) {
        file.fail("entry " + name + " is damaged (its stored and unpacked sizes differ)");
    }
    const std::vector<uint8_t> h = file.read(e.local_header, k_local_header_size, "a zip entry's header");
    if (le32(h.data()) != k_local_header_sig) {
        file.fail("entry " + name + " is damaged (no local header where the directory says)");
    }
    const uint64_t data = e.local_header + k_local_header_size + le16(h.data() + 26) + le16(h.data() + 28);
    if (data > file.size() || e.size > file.size() - data) {
        file.fail("the file is truncated (entry " + name + " lies past its end)");
    }
    return data;
}

// ---- the pickle ----

enum class pk_kind : uint8_t { none, boolean, integer, floating, string, tuple, list, dict, callable, storage_class, storage, tensor };

// What a checkpoint's pickle may call: nothing else is ever looked up.
enum class pk_callable : uint8_t { ordered_dict, rebuild_tensor, rebuild_parameter };

struct pk_value {
    pk_kind kind   = pk_kind::none;
    int64_t number = 0;          // integer: its value; callable: its pk_callable; storage_class: index in k_storage_types;
                                 // storage: element count; tensor: index in the machine's tensors
    std::string text;            // string; storage: its key
    std::vector<uint32_t> items; // tuple, list; dict: key, value, key, value, ...
    size_t storage_type = 0;     // storage: index in k_storage_types
};

// A pickle interpreter that builds values, never objects of arbitrary classes: a GLOBAL outside the few a state
// dict names is refused as soon as it is read. Values live in one arena, referred to by index, so a hostile
// pickle's cycles cannot leak or recurse.
class pickle_machine {
public:
    pickle_machine(checked_file & file, const std::vector<uint8_t> & bytes, const std::map<std::string, uint64_t> & storage_sizes)
        : m_file(file), m_bytes(bytes), m_storage_sizes(storage_sizes) {}

    // Runs the pickle to its STOP and returns the index of the value it built. (A reference into the arena is
    // good until the next value is made: the arena may move.)
    uint32_t run();

    const pk_value & value(uint32_t i) const { return m_values[i]; }
    const voxd_torch_tensor_info & tensor(const pk_value & v) const { return m_tensors[(size_t) v.number]; }
    size_t value_count() const { return m_values.size(); }

private:
    [[noreturn]] void fail(const std::string & why) const { m_file.fail("the pickle " + why); }

    uint32_t make(pk_kind kind) {
        if (m_values.size() >= k_max_objects) {
            fail("builds more objects than a checkpoint of tensors would");
        }
        m_values.emplace_back();
        m_values.back().kind = kind;
        return (uint32_t) (m_values.size() - 1);
    }
    uint32_t make_integer(int64_t v) {
        const uint32_t i   = make(pk_kind::integer);
        m_values[i].number = v;
        return i;
    }
    uint32_t make_string(std::string text) {
        const uint32_t i = make(pk_kind::string);
        m_values[i].text = std::move(text);
        return i;
    }

    void push(uint32_t v) {
        if (m_stack.size() >= k_max_stack) {
            fail("nests deeper than a checkpoint of tensors would");
        }
        m_stack.push_back(v);
    }
    // The stack above the innermost MARK is all an opcode may touch, as in Python's unpickler.
    size_t floor() const { return m_marks.empty() ? 0 : m_marks.back(); }
    uint32_t pop() {
        if (m_stack.size() <= floor()) {
            fail("is damaged (it pops an empty stack)");
        }
        const uint32_t v = m_stack.back();
        m_stack.pop_back();
        return v;
    }
    uint32_t top() const {
        if (m_stack.size() <= floor()) {
            fail("is damaged (it reads an empty stack)");
        }
        return m_stack.back();
    }
    // The values pushed since the innermost MARK, which is removed.
    std::vector<uint32_t> pop_mark() {
        if (m_marks.empty()) {
            fail("is damaged (no MARK)");
        }
        std::vector<uint32_t> items(m_stack.begin() + (std::ptrdiff_t) m_marks.back(), m_stack.end());
        m_stack.resize(m_marks.back());
        m_marks.pop_back();
        return items;
    }

    const uint8_t * take(size_t n) {
        if (m_bytes.size() - m_pos < n) {
            fail("is truncated");
        }
        const uint8_t * p = m_bytes.data() + m_pos;
        m_pos += n;
        return p;
    }
    std::string take_string(uint64_t n) {
        if (n > m_bytes.size() - m_pos) {
            fail("is truncated");
        }
        return std::string(reinterpret_cast<const char *>(take((size_t) n)), (size_t) n);
    }
    std::string take_line() {
        const size_t start = m_pos;
        while (m_pos < m_bytes.size() && m_bytes[m_pos] != '\n') {
            m_pos++;
        }
        if (m_pos == m_bytes.size() || m_pos - start > 256) {
            fail("is damaged (a GLOBAL's name is not one line)");
        }
        m_pos++;
        return std::string(reinterpret_cast<const char *>(m_bytes.data() + start), m_pos - start - 1);
    }

    pk_value & at(uint32_t i, pk_kind kind, const char * what) {
        if (m_values[i].kind != kind) {
            fail(std::string("is damaged (") + what + ")");
        }
        return m_values[i];
    }
    int64_t integer(uint32_t i, const char * what) { return at(i, pk_kind::integer, what).number; }

    uint32_t global(const std::string & module, const std::string & name);
    uint32_t reduce(uint32_t callable, uint32_t args);
    uint32_t rebuild_tensor(const std::vector<uint32_t> & args);
    uint32_t persistent_load(uint32_t pid);
    void set_items(uint32_t dict, const std::vector<uint32_t> & pairs);
    void append(uint32_t list, const std::vector<uint32_t> & items);

    checked_file & m_file;
    const std::vector<uint8_t> & m_bytes;
    const std::map<std::string, uint64_t> & m_storage_sizes; // storage key -> bytes
    size_t m_pos = 0;
    std::vector<pk_value> m_values;
    std::vector<voxd_torch_tensor_info> m_tensors;
    std::vector<uint32_t> m_stack;
    std::vector<size_t> m_marks; // stack sizes at each MARK
    std::unordered_map<uint32_t, uint32_t> m_memo;
};

uint32_t pickle_machine::global(const std::string & module, const std::string & name) {
    if (module == "collections" && name == "OrderedDict") {
        const uint32_t v   = make(pk_kind::callable);
        m_values[v].number = (int64_t) pk_callable::ordered_dict;
        return v;
    }
    if (module == "torch._utils" && (name == "_rebuild_tensor_v2" || name == "_rebuild_parameter" || name == "_rebuild_parameter_with_state")) {
        const uint32_t v   = make(pk_kind::callable);
        m_values[v].number = (int64_t) (name == "_rebuild_tensor_v2" ? pk_callable::rebuild_tensor : pk_callable::rebuild_parameter);
        return v;
    }
    if (module == "torch") {
        for (size_t t = 0; t < std::size(k_storage_types); t++) {
            if (name == k_storage_types[t].torch_class) {
                const uint32_t v   = make(pk_kind::storage_class);
                m_values[v].number = (int64_t) t;
                return v;
            }
        }
    }
    fail("refers to " + module + "." + name + ", which a checkpoint of tensors never needs (refused, not run)");
}

uint32_t pickle_machine::reduce(uint32_t callable, uint32_t args) {
    const pk_value & f            = at(callable, pk_kind::callable, "REDUCE of something that is not callable");
    const std::vector<uint32_t> a = at(args, pk_kind::tuple, "REDUCE's arguments are not a tuple").items;
    switch ((pk_callable) f.number) {
        case pk_callable::ordered_dict:
            if (!a.empty()) {
                fail("builds an OrderedDict from arguments (only empty ones are read)");
            }
            return make(pk_kind::dict);
        case pk_callable::rebuild_tensor: return rebuild_tensor(a);
        case pk_callable::rebuild_parameter:
            // (tensor, requires_grad, backward hooks[, state]): the parameter is its tensor
            if (a.size() < 3 || m_values[a[0]].kind != pk_kind::tensor) {
                fail("is damaged (_rebuild_parameter without a tensor)");
            }
            return a[0];
    }
    fail("is damaged (REDUCE)");
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks[, metadata]). Every
// element the tensor can address must lie in its storage, so that read_f32 never needs to check again.
uint32_t pickle_machine::rebuild_tensor(const std::vector<uint32_t> & a) {
    if (a.size() < 6 || a.size() > 7) {
        fail("is damaged (_rebuild_tensor_v2 takes 6 or 7 arguments)");
    }
    const pk_value & storage = at(a[0], pk_kind::storage, "a tensor without a storage");
    const int64_t offset     = integer(a[1], "a tensor's offset is not an integer");
    if (offset < 0 || (uint64_t) offset > k_max_elements) {
        fail("is damaged (a tensor's offset is out of range)");
    }
    const std::vector<uint32_t> & size   = at(a[2], pk_kind::tuple, "a tensor's size is not a tuple").items;
    const std::vector<uint32_t> & stride = at(a[3], pk_kind::tuple, "a tensor's stride is not a tuple").items;
    if (size.size() != stride.size() || size.size() > k_max_dims) {
        fail("is damaged (a tensor's size and stride do not match)");
    }
    voxd_torch_tensor_info t;
    t.dtype                         = k_storage_types[storage.storage_type].dtype;
    t.storage_key                   = storage.text;
    t.storage_offset                = offset;
    const uint64_t storage_elements = (uint64_t) storage.number;
    uint64_t elements               = 1;
    uint64_t last                   = (uint64_t) offset; // the highest element index the tensor addresses
    for (size_t d = 0; d < size.size(); d++) {
        const int64_t n = integer(size[d], "a tensor's size is not integers");
        const int64_t s = integer(stride[d], "a tensor's stride is not integers");
        if (n < 0 || s < 0 || (uint64_t) n > k_max_elements || (uint64_t) s > k_max_elements) {
            fail("is damaged (a tensor's size or stride is out of range)");
        }
        t.shape.push_back(n);
        t.stride.push_back(s);
        if (n > 0 && elements > k_max_elements / (uint64_t) n) {
            fail("is damaged (a tensor is implausibly large)");
        }
        elements *= (uint64_t) n;
        if (n > 0 && s > 0 && (uint64_t) (n - 1) > (k_max_elements - last) / (uint64_t) s) {
            fail("is damaged (a tensor reaches past its storage)");
        }
        last += n > 0 ? (uint64_t) (n - 1) * (uint64_t) s : 0;
    }
    if (elements > 0 && last >= storage_elements) {
        fail("is damaged (a tensor reaches past its storage)");
    }
    // zero strides repeat elements (a broadcast buffer): allowed, but not to sizes no checkpoint holds
    if (elements > std::max<uint64_t>(storage_elements, k_max_broadcast)) {
        fail("is damaged (a tensor repeats its storage implausibly often)");
    }
    const uint32_t v   = make(pk_kind::tensor);
    m_values[v].number = (int64_t) m_tensors.size();
    m_tensors.push_back(std::move(t));
    return v;
}

// torch's persistent id of a storage: ('storage', <storage class>, key, location, element count); its bytes are
// the zip entry `<root>/data/<key>`.
uint32_t pickle_machine::persistent_load(uint32_t pid) {
    const std::vector<uint32_t> & id = at(pid, pk_kind::tuple, "a persistent id is not a tuple").items;
    if (id.size() != 5 || at(id[0], pk_kind::string, "a persistent id is not a storage").text != "storage") {
        fail("is damaged (a persistent id is not a storage)");
    }
    const size_t type     = (size_t) at(id[1], pk_kind::storage_class, "a storage's class").number;
    const std::string key = at(id[2], pk_kind::string, "a storage's key is not a string").text;
    const int64_t count   = integer(id[4], "a storage's size is not an integer");
    auto entry            = m_storage_sizes.find(key);
    if (entry == m_storage_sizes.end()) {
        fail("names storage " + key + ", which the archive lacks");
    }
    if (count < 0 || (uint64_t) count > k_max_elements || (uint64_t) count * k_storage_types[type].bytes > entry->second) {
        fail("is damaged (storage " + key + " is larger than its entry)");
    }
    const uint32_t v         = make(pk_kind::storage);
    m_values[v].text         = key;
    m_values[v].number       = count;
    m_values[v].storage_type = type;
    return v;
}

// Keys and values of a dict are kept in order as they come; a repeated key is left for the walk to refuse.
void pickle_machine::set_items(uint32_t dict, const std::vector<uint32_t> & pairs) {
    if (pairs.size() % 2 != 0) {
        fail("is damaged (SETITEMS of an odd count)");
    }
    pk_value & d = at(dict, pk_kind::dict, "SETITEM on something that is not a dict");
    d.items.insert(d.items.end(), pairs.begin(), pairs.end());
}

void pickle_machine::append(uint32_t list, const std::vector<uint32_t> & items) {
    pk_value & l = at(list, pk_kind::list, "APPEND to something that is not a list");
    l.items.insert(l.items.end(), items.begin(), items.end());
}

uint32_t pickle_machine::run() {
    while (true) {
        const size_t opcode_at = m_pos;
        const uint8_t op       = *take(1);
        switch (op) {
            case 0x80: // PROTO
                if (*take(1) > 5) {
                    fail("is of an unknown protocol");
                }
                break;
            case 0x95: take(8); break; // FRAME: a hint for buffered readers; everything is in memory already
            case '.':                  // STOP
                return pop();
            case '(': // MARK
                if (m_marks.size() >= k_max_stack) {
                    fail("nests deeper than a checkpoint of tensors would");
                }
                m_marks.push_back(m_stack.size());
                break;
            case '0': // POP: with nothing above the mark, the mark itself
                if (m_stack.size() > floor()) {
                    m_stack.pop_back();
                } else {
                    pop_mark();
                }
                break;
            case '1': pop_mark(); break;  // POP_MARK
            case '2': push(top()); break; // DUP

            case 'N': push(make(pk_kind::none)); break;
            case 0x88:                        // NEWTRUE
            case 0x89:                        // NEWFALSE
                push(make(pk_kind::boolean)); // like a float's, its value names no tensor
                break;
            case 'K': push(make_integer(*take(1))); break;                // BININT1
            case 'M': push(make_integer(le16(take(2)))); break;           // BININT2
            case 'J': push(make_integer((int32_t) le32(take(4)))); break; // BININT
            case 0x8a:                                                    // LONG1: little-endian two's complement
            {
                const size_t n = *take(1);
                if (n > 8) {
                    fail("holds an integer too large for a checkpoint");
                }
                const uint8_t * p = take(n);
                uint64_t v        = 0;
                for (size_t i = 0; i < n; i++) {
                    v |= (uint64_t) p[i] << (8 * i);
                }
                if (n > 0 && n < 8 && (p[n - 1] & 0x80)) {
                    v |= ~uint64_t(0) << (8 * n); // sign extension
                }
                push(make_integer((int64_t) v));
                break;
            }
            case 'G': // BINFLOAT: a number no tensor needs (a learning rate, say), so its value is not kept
                take(8);
                push(make(pk_kind::floating));
                break;
            case 'X': push(make_string(take_string(le32(take(4))))); break;  // BINUNICODE
            case 0x8c: push(make_string(take_string(*take(1)))); break;      // SHORT_BINUNICODE
            case 0x8d: push(make_string(take_string(le64(take(8))))); break; // BINUNICODE8

            case ')': push(make(pk_kind::tuple)); break; // EMPTY_TUPLE
            case 't':                                    // TUPLE
            case 0x85:                                   // TUPLE1
            case 0x86:                                   // TUPLE2
            case 0x87:                                   // TUPLE3
            {
                std::vector<uint32_t> items;
                if (op == 't') {
                    items = pop_mark();
                } else {
                    items.resize((size_t) (op - 0x84));
                    for (size_t i = items.size(); i-- > 0;) {
                        items[i] = pop();
                    }
                }
                const uint32_t v  = make(pk_kind::tuple);
                m_values[v].items = std::move(items);
                push(v);
                break;
            }
            case ']': push(make(pk_kind::list)); break; // EMPTY_LIST
            case 'l':                                   // LIST
            {
                std::vector<uint32_t> items = pop_mark();
                const uint32_t v            = make(pk_kind::list);
                m_values[v].items           = std::move(items);
                push(v);
                break;
            }
            case 'a': // APPEND
            {
                const uint32_t item = pop();
                append(top(), { item });
                break;
            }
            case 'e': // APPENDS
            {
                std::vector<uint32_t> items = pop_mark();
                append(top(), items);
                break;
            }
            case '}': push(make(pk_kind::dict)); break; // EMPTY_DICT
            case 'd':                                   // DICT
            {
                std::vector<uint32_t> pairs = pop_mark();
                const uint32_t v            = make(pk_kind::dict);
                set_items(v, pairs);
                push(v);
                break;
            }
            case 's': // SETITEM
            {
                const uint32_t value = pop();
                const uint32_t key   = pop();
                set_items(top(), { key, value });
                break;
            }
            case 'u': // SETITEMS
            {
                std::vector<uint32_t> pairs = pop_mark();
                set_items(top(), pairs);
                break;
            }

            case 'c': // GLOBAL
            {
                const std::string module = take_line();
                const std::string name   = take_line();
                push(global(module, name));
                break;
            }
            case 0x93: // STACK_GLOBAL
            {
                const std::string name   = at(pop(), pk_kind::string, "STACK_GLOBAL of a name that is not a string").text;
                const std::string module = at(pop(), pk_kind::string, "STACK_GLOBAL of a module that is not a string").text;
                push(global(module, name));
                break;
            }
            case 'R': // REDUCE
            {
                const uint32_t args     = pop();
                const uint32_t callable = pop();
                push(reduce(callable, args));
                break;
            }
            case 'b': pop(); break;                        // BUILD: the state of an OrderedDict (its _metadata) or a tensor: nothing we keep
            case 'Q': push(persistent_load(pop())); break; // BINPERSID

            case 'q': m_memo[*take(1)] = top(); break;      // BINPUT
            case 'r': m_memo[le32(take(4))] = top(); break; // LONG_BINPUT
            case 0x94:                                      // MEMOIZE
                m_memo[(uint32_t) m_memo.size()] = top();
                break;
            case 'h': // BINGET
            case 'j': // LONG_BINGET
            {
                const uint32_t key = op == 'h' ? *take(1) : le32(take(4));
                auto it            = m_memo.find(key);
                if (it == m_memo.end()) {
                    fail("is damaged (it gets a memo entry it never put)");
                }
                push(it->second);
                break;
            }
            default: {
                char what[96];
                std::snprintf(what, sizeof(what), "uses opcode 0x%02x (at byte %zu), which a checkpoint of tensors does not", op, opcode_at);
                fail(what);
            }
        }
    }
}

// Names every tensor reachable from `v` through dicts (keys joined with '.'), lists and tuples (indices).
class tensor_namer {
public:
    tensor_namer(checked_file & file, const pickle_machine & pickle, std::map<std::string, voxd_torch_tensor_info> & out)
        : m_file(file), m_pickle(pickle), m_out(out) {}

    void walk(uint32_t v, const std::string & name, int depth) {
        // a pickle can share a container many times over (a DAG whose paths double at each level): bound the visits
        if (depth > k_max_depth || ++m_visits > m_pickle.value_count()) {
            m_file.fail("the pickle nests or repeats its containers more than a checkpoint would");
        }
        const pk_value & value = m_pickle.value(v);
        const std::string dot  = name.empty() ? "" : name + ".";
        switch (value.kind) {
            case pk_kind::tensor:
                if (!m_out.emplace(name, m_pickle.tensor(value)).second) {
                    m_file.fail("two tensors are named '" + name + "'");
                }
                break;
            case pk_kind::dict:
                for (size_t i = 0; i + 1 < value.items.size(); i += 2) {
                    const pk_value & key = m_pickle.value(value.items[i]);
                    if (key.kind == pk_kind::string) {
                        walk(value.items[i + 1], dot + key.text, depth + 1);
                    } else if (key.kind == pk_kind::integer) {
                        walk(value.items[i + 1], dot + std::to_string(key.number), depth + 1);
                    } // other keys (None, tuples) name nothing a state dict holds
                }
                break;
            case pk_kind::list:
            case pk_kind::tuple:
                for (size_t i = 0; i < value.items.size(); i++) {
                    walk(value.items[i], dot + std::to_string(i), depth + 1);
                }
                break;
            default: break; // numbers, strings, None: a checkpoint's other contents
        }
    }

private:
    checked_file & m_file;
    const pickle_machine & m_pickle;
    std::map<std::string, voxd_torch_tensor_info> & m_out;
    size_t m_visits = 0;
};

// IEEE binary16 to float32, subnormals, infinities and NaNs included.
float half_to_float(uint16_t h) {
    const uint32_t sign = (uint32_t) (h & 0x8000) << 16;
    uint32_t exponent   = (h >> 10) & 0x1f;
    uint32_t mantissa   = h & 0x3ff;
    uint32_t bits;
    if (exponent == 0x1f) {
        bits = sign | 0x7f800000 | (mantissa << 13);
    } else if (exponent != 0) {
        bits = sign | ((exponent + 112) << 23) | (mantissa << 13);
    } else if (mantissa == 0) {
        bits = sign;
    } else { // subnormal: normalise
        exponent = 113;
        while (!(mantissa & 0x400)) {
            mantissa <<= 1;
            exponent--;
        }
        bits = sign | (exponent << 23) | ((mantissa & 0x3ff) << 13);
    }
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
}

// Converters of one little-endian element to float32, chosen once per tensor.
using element_reader = float (*)(const uint8_t *);

float read_float32(const uint8_t * p) {
    float f;
    std::memcpy(&f, p, sizeof(f));
    return f;
}

float read_float16(const uint8_t * p) {
    return half_to_float(le16(p));
}

float read_bfloat16(const uint8_t * p) {
    const uint32_t bits = (uint32_t) le16(p) << 16; // bfloat16 is float32's upper half
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return f;
}

float read_float64(const uint8_t * p) {
    double d;
    std::memcpy(&d, p, sizeof(d));
    return (float) d;
}

// The converter of a floating-point dtype; null for the integer ones.
element_reader reader_of(const std::string & dtype) {
    if (dtype == "float32") {
        return read_float32;
    }
    if (dtype == "float16") {
        return read_float16;
    }
    if (dtype == "bfloat16") {
        return read_bfloat16;
    }
    if (dtype == "float64") {
        return read_float64;
    }
    return nullptr;
}

} // namespace

voxd_torch_checkpoint::voxd_torch_checkpoint(const std::string & path) : m_path(path) {
    checked_file file(path);
    const std::map<std::string, zip_entry> entries = read_zip_directory(file);

    // `<root>/data.pkl` names the archive's root, whatever the file was called when saved
    std::string root;
    const zip_entry * pickle_entry = nullptr;
    for (const auto & [name, e] : entries) {
        const size_t slash = name.find('/');
        if (slash != std::string::npos && name.compare(slash, std::string::npos, "/data.pkl") == 0) {
            root         = name.substr(0, slash + 1);
            pickle_entry = &e;
            break;
        }
    }
    if (!pickle_entry) {
        file.fail("is a zip archive without data.pkl, not a PyTorch checkpoint");
    }
    auto byteorder = entries.find(root + "byteorder");
    if (byteorder != entries.end()) {
        const uint64_t at                = entry_data_offset(file, byteorder->first, byteorder->second);
        const std::vector<uint8_t> order = file.read(at, std::min<uint64_t>(byteorder->second.size, 16), "the byte order");
        if (std::string(order.begin(), order.end()) != "little") {
            file.fail("was saved on a big-endian machine (byteorder is not \"little\"), which is not supported");
        }
    }
    const std::string data_dir = root + "data/";
    for (const auto & [name, e] : entries) {
        if (name.size() > data_dir.size() && name.compare(0, data_dir.size(), data_dir) == 0) {
            const std::string key  = name.substr(data_dir.size());
            m_storage_offsets[key] = entry_data_offset(file, name, e);
            m_storage_sizes[key]   = e.size;
        }
    }

    if (pickle_entry->size > k_max_pickle_bytes) {
        file.fail("data.pkl is implausibly large for a checkpoint of tensors");
    }
    const std::vector<uint8_t> pickle = file.read(entry_data_offset(file, root + "data.pkl", *pickle_entry), pickle_entry->size, "data.pkl");
    pickle_machine machine(file, pickle, m_storage_sizes);
    const uint32_t top = machine.run();
    tensor_namer(file, machine, m_tensors).walk(top, "", 0);
}

const voxd_torch_tensor_info & voxd_torch_checkpoint::info(const std::string & name) const {
    auto it = m_tensors.find(name);
    if (it == m_tensors.end()) {
        throw voxd_error("model_load_failed", m_path + ": tensor '" + name + "' is missing");
    }
    return it->second;
}

std::vector<float> voxd_torch_checkpoint::read_f32(const std::string & name) const {
    const voxd_torch_tensor_info & t = info(name);
    const element_reader convert     = reader_of(t.dtype);
    if (!convert) {
        throw voxd_error("model_load_failed", m_path + ": tensor '" + name + "' holds " + t.dtype + ", not floating-point numbers");
    }
    const size_t bytes = dtype_bytes(t.dtype);
    size_t elements    = 1;
    uint64_t last      = (uint64_t) t.storage_offset; // all checked against the storage when the pickle was read
    bool contiguous    = true;
    int64_t c_stride   = 1;
    for (size_t d = t.shape.size(); d-- > 0;) {
        elements *= (size_t) t.shape[d];
        last += t.shape[d] > 0 ? (uint64_t) (t.shape[d] - 1) * (uint64_t) t.stride[d] : 0;
        contiguous = contiguous && (t.shape[d] == 1 || t.stride[d] == c_stride);
        c_stride *= t.shape[d];
    }
    std::vector<float> out(elements);
    if (elements == 0) {
        return out;
    }
    // the span of the storage the tensor addresses, read at once (several tensors may share one storage)
    const uint64_t first = (uint64_t) t.storage_offset;
    checked_file file(m_path);
    const std::vector<uint8_t> span = file.read(m_storage_offsets.at(t.storage_key) + first * bytes, (last - first + 1) * bytes, "a tensor");
    if (contiguous) {
        for (size_t i = 0; i < elements; i++) {
            out[i] = convert(span.data() + i * bytes);
        }
        return out;
    }
    // C order, the last dimension fastest: `index` counts in each dimension, `at` is the element's storage index
    std::vector<int64_t> index(t.shape.size(), 0);
    uint64_t at = first;
    for (size_t i = 0; i < elements; i++) {
        out[i] = convert(span.data() + (at - first) * bytes);
        for (size_t d = t.shape.size(); d-- > 0;) {
            if (++index[d] < t.shape[d]) {
                at += (uint64_t) t.stride[d];
                break;
            }
            at -= (uint64_t) (t.shape[d] - 1) * (uint64_t) t.stride[d];
            index[d] = 0;
        }
    }
    return out;
}
