#include "models/safetensors.h"

#include "core/atomic_file.h"
#include "core/checked_size.h"
#include "core/error.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <array>
#include <cstring>
#include <fstream>
#include <set>

namespace libreyolo::models {

namespace fs = std::filesystem;

namespace {

struct DtypeName {
  const char* name;
  at::ScalarType type;
};

constexpr std::array<DtypeName, 10> kDtypes{{
    {"F64", at::kDouble}, {"F32", at::kFloat}, {"F16", at::kHalf}, {"BF16", at::kBFloat16}, {"I64", at::kLong},
    {"I32", at::kInt}, {"I16", at::kShort}, {"I8", at::kChar}, {"U8", at::kByte}, {"BOOL", at::kBool},
}};

at::ScalarType dtype_from_name(const std::string& name, const fs::path& path, const std::string& tensor) {
  for (const auto& entry : kDtypes) {
    if (name == entry.name) return entry.type;
  }
  throw ModelError(fmt::format("{}: tensor '{}' has dtype {} that libreyolo does not read", path.string(), tensor, name));
}

const char* name_of_dtype(at::ScalarType type) {
  for (const auto& entry : kDtypes) {
    if (type == entry.type) return entry.name;
  }
  throw ModelError(fmt::format("cannot write dtype {} to safetensors", c10::toString(type)));
}

}  // namespace

namespace {

struct OpenedFile {
  std::ifstream stream;
  nlohmann::json header;
  std::uint64_t data_start = 0, data_size = 0;
};

// Opens a safetensors file and parses its JSON header; the stream stays open for the data.
OpenedFile open_safetensors(const fs::path& path) {
  OpenedFile file;
  file.stream.open(path, std::ios::binary | std::ios::ate);
  if (!file.stream) throw ModelError(fmt::format("{}: cannot open weights file", path.string()));
  const auto file_size = static_cast<std::uint64_t>(file.stream.tellg());
  file.stream.seekg(0);
  std::uint64_t header_size = 0;
  file.stream.read(reinterpret_cast<char*>(&header_size), 8);
  if (!file.stream || file_size < 8 || header_size > file_size - 8) {
    throw ModelError(fmt::format("{}: not a safetensors file (bad header length)", path.string()));
  }
  std::string header(header_size, '\0');
  file.stream.read(header.data(), static_cast<std::streamsize>(header_size));
  try {
    file.header = nlohmann::json::parse(header);
  } catch (const nlohmann::json::exception& error) {
    throw ModelError(fmt::format("{}: not a safetensors file (header: {})", path.string(), error.what()));
  }
  if (!file.header.is_object()) throw ModelError(fmt::format("{}: not a safetensors file (its header is not a JSON object)", path.string()));
  file.data_start = 8 + header_size;
  file.data_size = file_size - file.data_start;
  return file;
}

}  // namespace

std::map<std::string, at::Tensor> read_safetensors(const fs::path& path) {
  OpenedFile file = open_safetensors(path);
  std::ifstream& stream = file.stream;
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, entry] : file.header.items()) {
    if (name == "__metadata__") continue;
    try {
      const auto type = dtype_from_name(entry.at("dtype").get<std::string>(), path, name);
      const auto shape = entry.at("shape").get<std::vector<std::int64_t>>();
      const auto offsets = entry.at("data_offsets").get<std::vector<std::uint64_t>>();
      // Shape and byte range are checked against the file's size before anything is allocated.
      const auto bytes = checked_byte_count(shape, c10::elementSize(type));
      if (!bytes || offsets.size() != 2 || offsets[1] < offsets[0] || offsets[1] > file.data_size ||
          offsets[1] - offsets[0] != *bytes) {
        throw ModelError(fmt::format("{}: tensor '{}' has shape [{}] and byte range [{}] that do not fit each other or the "
                                     "file's {} data bytes; the file is damaged or not a safetensors file",
                                     path.string(), name, fmt::join(shape, ", "), fmt::join(offsets, ", "), file.data_size));
      }
      at::Tensor tensor = at::empty(shape, at::TensorOptions().dtype(type));
      stream.seekg(static_cast<std::streamoff>(file.data_start + offsets[0]));
      stream.read(static_cast<char*>(tensor.data_ptr()), static_cast<std::streamsize>(*bytes));
      if (!stream) throw ModelError(fmt::format("{}: truncated data for tensor '{}'", path.string(), name));
      tensors.emplace(name, tensor);
    } catch (const nlohmann::json::exception& error) {
      throw ModelError(fmt::format("{}: bad header entry '{}': {}", path.string(), name, error.what()));
    }
  }
  return tensors;
}

std::map<std::string, std::string> read_safetensors_metadata(const fs::path& path) {
  const OpenedFile file = open_safetensors(path);
  std::map<std::string, std::string> metadata;
  if (file.header.contains("__metadata__") && file.header.at("__metadata__").is_object()) {
    for (const auto& [key, value] : file.header.at("__metadata__").items()) {
      if (value.is_string()) metadata.emplace(key, value.get<std::string>());
    }
  }
  return metadata;
}

void write_safetensors(const fs::path& path, const NamedTensors& tensors, const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::vector<at::Tensor> contiguous;
  std::uint64_t offset = 0;
  for (const auto& [name, tensor] : tensors) {
    at::Tensor cpu = tensor.detach().to(at::kCPU).contiguous();
    const std::uint64_t bytes = static_cast<std::uint64_t>(cpu.numel()) * cpu.element_size();
    header[name] = {{"dtype", name_of_dtype(cpu.scalar_type())}, {"shape", cpu.sizes().vec()}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
    contiguous.push_back(cpu);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keep the data 8-byte aligned, as the reference writer does
  write_atomically(path, [&](const fs::path& temporary) {
    std::ofstream out(temporary, std::ios::binary);
    const std::uint64_t size = text.size();
    out.write(reinterpret_cast<const char*>(&size), 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto& tensor : contiguous) {
      out.write(static_cast<const char*>(tensor.data_ptr()), static_cast<std::streamsize>(tensor.numel() * tensor.element_size()));
    }
    if (!out) throw RuntimeError(fmt::format("cannot write {}", path.string()));
  });
}

NamedTensors state_dict(const torch::nn::Module& module) {
  NamedTensors out;
  for (const auto& item : module.named_parameters(true)) out.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(true)) out.emplace_back(item.key(), item.value());
  return out;
}

void load_state_dict(torch::nn::Module& module, const std::map<std::string, at::Tensor>& tensors, bool strict) {
  torch::NoGradGuard no_grad;
  std::vector<std::string> missing;
  std::vector<std::string> mismatched;
  std::set<std::string> used;
  for (auto& [name, target] : state_dict(module)) {
    const auto found = tensors.find(name);
    if (found == tensors.end()) {
      // as PyTorch's BatchNorm loads a state dict without it (FrozenBatchNorm2d's, older files'):
      // the counter keeps its value
      if (!name.ends_with(".num_batches_tracked")) missing.push_back(name);
      continue;
    }
    if (found->second.sizes() != target.sizes()) {
      mismatched.push_back(fmt::format("{} (file {}, model {})", name, found->second.sizes(), target.sizes()));
      continue;
    }
    target.copy_(found->second);
    used.insert(name);
  }
  std::vector<std::string> unexpected;
  for (const auto& [name, tensor] : tensors) {
    if (!used.count(name) && std::find(missing.begin(), missing.end(), name) == missing.end()) unexpected.push_back(name);
  }
  const auto first = [](const std::vector<std::string>& names) {
    std::vector<std::string> shown(names.begin(), names.begin() + static_cast<long>(std::min<std::size_t>(names.size(), 5)));
    return fmt::format("{}{}", fmt::join(shown, ", "), names.size() > 5 ? fmt::format(" and {} more", names.size() - 5) : "");
  };
  if (!mismatched.empty()) throw ModelError(fmt::format("weights do not fit the model: shape mismatch for {}", first(mismatched)));
  if (strict && (!missing.empty() || !unexpected.empty())) {
    throw ModelError(fmt::format("weights do not fit the model: {} missing ({}), {} unexpected ({})", missing.size(),
                                 first(missing), unexpected.size(), first(unexpected)));
  }
}

}  // namespace libreyolo::models
