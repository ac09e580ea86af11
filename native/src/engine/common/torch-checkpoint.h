// PyTorch checkpoints (`torch.save`'s zip format: a pickle naming the tensors and one raw storage file per tensor)
// read without Python: Kokoro's released weights (`kokoro-v1_0.pth`) and its voice packs (`voices/*.pt`). Only
// what a state dict needs is understood: nested dicts (OrderedDict included) of tensors, strings, numbers, tuples
// and lists; anything else in the pickle (a class that is not a tensor or a storage) is refused, never run.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

struct voxd_torch_tensor_info {
    std::string dtype;           // the storage's element type: "float32", "float16", "bfloat16", "float64", "int64", ...
    std::vector<int64_t> shape;  // PyTorch's order, outermost first
    std::vector<int64_t> stride; // in elements
    int64_t storage_offset = 0;  // in elements
    std::string storage_key;     // the storage's file name under `<root>/data/`
};

class voxd_torch_checkpoint {
public:
    // Reads the zip directory and the pickle (not the tensors' data). Every tensor reachable from the top-level
    // object is named by its path of dict keys joined with '.' ("bert.module.embeddings.word_embeddings.weight");
    // a file holding one bare tensor (a voice pack) names it "". Throws voxd_error("model_load_failed") naming the
    // file and what is wrong with it.
    explicit voxd_torch_checkpoint(const std::string & path);

    const std::map<std::string, voxd_torch_tensor_info> & tensors() const { return m_tensors; }
    bool has(const std::string & name) const { return m_tensors.count(name) != 0; }
    // Throws voxd_error("model_load_failed") when the checkpoint has no tensor `name`.
    const voxd_torch_tensor_info & info(const std::string & name) const;

    // The tensor's elements in C order (contiguous, whatever its strides), as float32 (float16, bfloat16 and float64
    // storages converted). Reads the file. Throws voxd_error("model_load_failed").
    std::vector<float> read_f32(const std::string & name) const;

private:
    std::string m_path;
    std::map<std::string, voxd_torch_tensor_info> m_tensors;
    std::map<std::string, uint64_t> m_storage_offsets; // storage key -> where its bytes start in the file
    std::map<std::string, uint64_t> m_storage_sizes;   // storage key -> its size in bytes
};
