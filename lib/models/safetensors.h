// .safetensors weights (the Hugging Face format: 8-byte header length, JSON header of name ->
// dtype, shape and byte range, then raw little-endian data), and loading a name -> tensor map
// into a module with every name and shape checked.
#pragma once

#include <ATen/Tensor.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace libreyolo::models {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Throws ModelError naming the file for anything that is not a valid safetensors file.
std::map<std::string, at::Tensor> read_safetensors(const std::filesystem::path& path);

// The header's __metadata__ string map (empty when absent).
std::map<std::string, std::string> read_safetensors_metadata(const std::filesystem::path& path);

// Written atomically; tensors are stored contiguous, on the CPU, in their own dtype.
void write_safetensors(const std::filesystem::path& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// Parameters then buffers, by their dotted names (num_batches_tracked included).
NamedTensors state_dict(const torch::nn::Module& module);

// Copies `tensors` into the module's parameters and buffers. Throws ModelError listing missing
// or unexpected names (when `strict`) and any shape mismatch. A BatchNorm's num_batches_tracked may
// be absent, as PyTorch allows (a frozen norm's state dict has none).
void load_state_dict(torch::nn::Module& module, const std::map<std::string, at::Tensor>& tensors, bool strict = true);

}  // namespace libreyolo::models
