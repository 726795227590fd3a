#include "models/torch_file.h"

#include "models/torch_storage_types.h"

#include "core/atomic_file.h"
#include "core/checked_size.h"
#include "core/error.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace libreyolo::models {

namespace {

// Protocol-2 pickle of dicts, lists, tuples, strings, numbers, None and tensors, in the layout
// Python's torch.save uses, so that torch.load(weights_only=True) accepts it.
class Pickler {
 public:
  std::string bytes;
  std::vector<at::Tensor> storages;  // record data/<index>

  void dump(const c10::IValue& value) {
    op(0x80);
    op(2);
    write(value);
    op('.');
  }

 private:
  void op(unsigned char c) { bytes.push_back(static_cast<char>(c)); }
  void little(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) op(static_cast<unsigned char>(v >> (8 * i)));
  }
  void text(std::string_view s) {
    op('X');
    little(s.size(), 4);
    bytes.append(s);
  }
  void global(std::string_view module, std::string_view name) {
    op('c');
    bytes.append(module);
    op('\n');
    bytes.append(name);
    op('\n');
  }
  void integer(std::int64_t v) {
    if (v >= 0 && v < 256) {
      op('K');
      little(static_cast<std::uint64_t>(v), 1);
    } else if (v >= 0 && v < 65536) {
      op('M');
      little(static_cast<std::uint64_t>(v), 2);
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
      op('J');
      little(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
    } else {
      op(0x8a);
      op(8);
      little(static_cast<std::uint64_t>(v), 8);
    }
  }
  void tensor(const at::Tensor& t_in) {
    const at::Tensor t = t_in.detach().cpu().contiguous();
    std::string storage_type;
    for (const auto& [name, type] : storage_types()) {
      if (type == t.scalar_type() && (storage_type.empty() || name.size() < storage_type.size())) storage_type = name;
    }
    if (storage_type.empty()) throw ModelError(fmt::format("cannot save a {} tensor", c10::toString(t.scalar_type())));
    const std::string key = std::to_string(storages.size());
    storages.push_back(t);
    global("torch._utils", "_rebuild_tensor_v2");
    op('(');
    op('(');                                // persistent id
    text("storage");
    global("torch", storage_type.substr(6));  // after "torch."
    text(key);
    text("cpu");
    integer(t.numel());
    op('t');
    op('Q');
    integer(0);                             // storage offset
    op('(');
    for (const auto size : t.sizes()) integer(size);
    op('t');
    op('(');
    for (const auto stride : t.strides()) integer(stride);
    op('t');
    op(0x89);                               // requires_grad False
    global("collections", "OrderedDict");   // backward hooks
    op(')');
    op('R');
    op('t');
    op('R');
  }
  void write(const c10::IValue& v) {
    if (v.isNone()) {
      op('N');
    } else if (v.isBool()) {
      op(v.toBool() ? 0x88 : 0x89);
    } else if (v.isInt()) {
      integer(v.toInt());
    } else if (v.isDouble()) {
      op('G');
      const auto bits = std::bit_cast<std::uint64_t>(v.toDouble());
      for (int i = 7; i >= 0; --i) op(static_cast<unsigned char>(bits >> (8 * i)));
    } else if (v.isString()) {
      text(v.toStringRef());
    } else if (v.isTensor()) {
      tensor(v.toTensor());
    } else if (v.isTuple()) {
      op('(');
      for (const auto& item : v.toTupleRef().elements()) write(item);
      op('t');
    } else if (v.isList()) {
      op(']');
      const auto list = v.toList();
      if (list.size()) {
        op('(');
        for (const auto& item : list.vec()) write(item);
        op('e');
      }
    } else if (v.isGenericDict()) {
      op('}');
      const auto dict = v.toGenericDict();
      if (dict.size()) {
        op('(');
        for (const auto& entry : dict) {
          write(entry.key());
          write(entry.value());
        }
        op('u');
      }
    } else if (v.isIntList() || v.isDoubleList() || v.isBoolList() || v.isTensorList()) {
      write(c10::IValue(c10::impl::toList(v.toList())));
    } else {
      throw ModelError(fmt::format("cannot save a value of type {} in a checkpoint", v.tagKind()));
    }
  }
};

}  // namespace

void write_torch_file(const std::filesystem::path& path, const c10::IValue& value) {
  Pickler pickler;
  pickler.dump(value);
  write_atomically(path, [&](const std::filesystem::path& temporary) {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeError(fmt::format("cannot write {}: {}", path.string(), std::strerror(errno)));
    // The writer is never told of a failed write: it would throw, and throw again from its
    // destructor while unwinding (std::terminate). The first error is kept and raised below.
    int write_error = 0;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, std::size_t size) -> std::size_t {
      if (!write_error) {
        out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
        if (!out) write_error = errno ? errno : EIO;
      }
      return size;
    });
    writer.writeRecord("data.pkl", pickler.bytes.data(), pickler.bytes.size());
    writer.writeRecord(".format_version", "1", 1);
    writer.writeRecord(".storage_alignment", "64", 2);
    writer.writeRecord("byteorder", "little", 6);
    for (std::size_t i = 0; i < pickler.storages.size(); ++i) {
      const at::Tensor& t = pickler.storages[i];
      writer.writeRecord("data/" + std::to_string(i), t.data_ptr(), static_cast<std::size_t>(t.nbytes()));
    }
    writer.writeEndOfFile();
    out.close();
    if (!write_error && !out) write_error = errno ? errno : EIO;
    if (write_error) {
      // what to do depends on why: a full disk, a quota, or the shell's file-size limit (ulimit -f)
      const char* advice = write_error == EFBIG  ? "The file is larger than this process may write (ulimit -f): raise or lift "
                                                   "that limit"
                           : write_error == EDQUOT ? "Your disk quota is used up: free some of it, or point project= at "
                                                     "another disk"
                           : write_error == ENOSPC ? "Free some space, or point project= at a disk with room"
                                                   : "Check the folder and the disk";
      throw RuntimeError(fmt::format("cannot write {}: {}; the previous file, if any, is unchanged. {}", path.string(),
                                     std::strerror(write_error), advice));
    }
  });
}

}  // namespace libreyolo::models
