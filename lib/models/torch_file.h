// Files in the format of Python's torch.save (the zip archive of `data.pkl` plus one record per
// tensor storage), read and written without Python.
//
// Reading uses LibTorch's zip reader and our own unpickler: LibTorch 2.11's torch::pickle_load
// still rejects what Python writes for a state dict (an OrderedDict with `_metadata`). Ours takes
// the pickle opcodes of protocols 2–5 and only the globals a weights file needs
// (collections.OrderedDict, torch._utils._rebuild_tensor_v2 / _rebuild_parameter, typed storages,
// torch.Size, torch.device, dtypes); any other global is refused with its name, never run.
#pragma once

#include <ATen/core/ivalue.h>

#include <filesystem>

namespace libreyolo::models {

// Dicts (any pickled dict or OrderedDict) become GenericDict in insertion order, lists and
// sets GenericList, tuples Tuple, tensors CPU tensors (storages shared as in the file).
// Throws ModelError naming the file for anything unreadable or refused.
// With `tensor_data` false, tensors are shape-only (meta device) and no storage is read: a cheap
// look at a checkpoint's metadata.
c10::IValue read_torch_file(const std::filesystem::path& path, bool tensor_data = true);

// Written by our own protocol-2 pickler in torch.save's layout (LibTorch's pickle_save tags typed
// dicts with a global that torch.load(weights_only=True) refuses), atomically.
void write_torch_file(const std::filesystem::path& path, const c10::IValue& value);

}  // namespace libreyolo::models
