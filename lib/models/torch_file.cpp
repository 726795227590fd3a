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

// A global the pickle names (GLOBAL / STACK_GLOBAL); kept on the stack as a tagged string.
constexpr std::string_view kGlobalTag = "\x01libreyolo-global:";

c10::IValue global_value(const std::string& module, const std::string& name) {
  return c10::IValue(std::string(kGlobalTag) + module + "." + name);
}

std::optional<std::string> global_name(const c10::IValue& value) {
  if (!value.isString()) return std::nullopt;
  const std::string& s = value.toStringRef();
  if (s.rfind(kGlobalTag, 0) != 0) return std::nullopt;
  return s.substr(kGlobalTag.size());
}


const std::map<std::string, std::string>& dtype_globals() {
  static const std::map<std::string, std::string> dtypes = {
      {"torch.float32", "float32"}, {"torch.float", "float32"},     {"torch.float16", "float16"},
      {"torch.half", "float16"},    {"torch.bfloat16", "bfloat16"}, {"torch.float64", "float64"},
      {"torch.int64", "int64"},     {"torch.int32", "int32"},       {"torch.uint8", "uint8"},
      {"torch.bool", "bool"}};
  return dtypes;
}

class Unpickler {
 public:
  Unpickler(const std::filesystem::path& path, std::uint64_t file_size, std::string_view bytes,
            caffe2::serialize::PyTorchStreamReader& archive, bool tensor_data)
      : path_(path), file_size_(file_size), bytes_(bytes), archive_(archive), tensor_data_(tensor_data) {}

  c10::IValue run() {
    while (true) {
      const auto op = static_cast<unsigned char>(read(1)[0]);
      switch (op) {
        case 0x80: read(1); break;                      // PROTO
        case 0x95: read(8); break;                      // FRAME
        case '.': return pop();                         // STOP
        case '}': push(c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get())); break;
        case ']': case 0x8f: push(c10::impl::GenericList(c10::AnyType::get())); break;  // EMPTY_LIST / SET
        case ')': push(c10::ivalue::Tuple::create(std::vector<c10::IValue>{})); break;
        case '(': marks_.push_back(stack_.size()); break;
        case 't': push(c10::ivalue::Tuple::create(pop_to_mark())); break;
        case 0x85: case 0x86: case 0x87: {              // TUPLE1..3
          const std::size_t n = op - 0x84;
          need(n);
          std::vector<c10::IValue> items(stack_.end() - static_cast<std::ptrdiff_t>(n), stack_.end());
          stack_.resize(stack_.size() - n);
          push(c10::ivalue::Tuple::create(std::move(items)));
          break;
        }
        case 'l': {
          c10::impl::GenericList list(c10::AnyType::get());
          for (auto& item : pop_to_mark()) list.push_back(std::move(item));
          push(list);
          break;
        }
        case 'd': {
          auto items = pop_to_mark();
          c10::impl::GenericDict dict(c10::AnyType::get(), c10::AnyType::get());
          set_items(dict, items);
          push(dict);
          break;
        }
        case 'a': { c10::IValue item = pop(); list_at_top().push_back(std::move(item)); break; }  // APPEND
        case 'e': case 0x90: {                          // APPENDS / ADDITEMS
          auto items = pop_to_mark();
          auto list = list_at_top();
          for (auto& item : items) list.push_back(std::move(item));
          break;
        }
        case 's': {                                     // SETITEM
          c10::IValue value = pop(), key = pop();
          std::vector<c10::IValue> items{std::move(key), std::move(value)};
          set_items(dict_at_top(), items);
          break;
        }
        case 'u': { auto items = pop_to_mark(); set_items(dict_at_top(), items); break; }  // SETITEMS
        case 'q': memoize(u8()); break;                 // BINPUT
        case 'r': memoize(u32()); break;                // LONG_BINPUT
        case 0x94: memoize(memo_.size()); break;        // MEMOIZE
        case 'h': push(memo(u8())); break;              // BINGET
        case 'j': push(memo(u32())); break;             // LONG_BINGET
        case 'J': push(static_cast<std::int64_t>(static_cast<std::int32_t>(u32()))); break;  // BININT
        case 'K': push(static_cast<std::int64_t>(u8())); break;
        case 'M': push(static_cast<std::int64_t>(u16())); break;
        case 0x8a: push(long_int(u8())); break;         // LONG1
        case 0x8b: push(long_int(u32())); break;        // LONG4
        case 'G': push(binfloat()); break;
        case 'X': push(std::string(read(u32()))); break;      // BINUNICODE
        case 0x8c: push(std::string(read(u8()))); break;      // SHORT_BINUNICODE
        case 0x8d: push(std::string(read(u64()))); break;     // BINUNICODE8
        case 'T': case 'B': push(std::string(read(u32()))); break;  // BINSTRING / BINBYTES
        case 'U': case 'C': push(std::string(read(u8()))); break;   // SHORT_BINSTRING / SHORT_BINBYTES
        case 'N': push(c10::IValue()); break;
        case 0x88: push(true); break;
        case 0x89: push(false); break;
        case 'c': {                                     // GLOBAL "module\nname\n"
          const std::string module = line(), name = line();
          push(global_value(module, name));
          break;
        }
        case 0x93: {                                    // STACK_GLOBAL
          const c10::IValue name = pop(), module = pop();
          if (!name.isString() || !module.isString()) fail("STACK_GLOBAL without module and name strings");
          push(global_value(module.toStringRef(), name.toStringRef()));
          break;
        }
        case 'R': case 0x81: {                          // REDUCE / NEWOBJ
          c10::IValue args = pop(), callable = pop();
          push(call(callable, args));
          break;
        }
        case 'b': {                                     // BUILD: only dict state (an OrderedDict's _metadata)
          pop();
          if (stack_.empty() || !stack_.back().isGenericDict()) fail("BUILD on something other than a dict");
          break;
        }
        case 'Q': push(persistent_load(pop())); break;  // BINPERSID
        default:
          fail(fmt::format("unsupported pickle opcode 0x{:02x} at byte {}", op, position_ - 1));
      }
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw ModelError(fmt::format("{}: cannot read this torch.save file: {}", path_.string(), what));
  }

  std::string_view read(std::uint64_t n) {
    if (n > bytes_.size() - position_) fail("data.pkl ends early");
    const std::string_view out = bytes_.substr(position_, n);
    position_ += n;
    return out;
  }
  std::uint64_t little_endian(int n) {
    const std::string_view b = read(static_cast<std::uint64_t>(n));
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
    return v;
  }
  std::uint64_t u8() { return little_endian(1); }
  std::uint64_t u16() { return little_endian(2); }
  std::uint64_t u32() { return little_endian(4); }
  std::uint64_t u64() { return little_endian(8); }
  std::string line() {
    const std::size_t end = bytes_.find('\n', position_);
    if (end == std::string_view::npos) fail("GLOBAL without a newline");
    std::string out(bytes_.substr(position_, end - position_));
    position_ = end + 1;
    return out;
  }
  c10::IValue long_int(std::uint64_t n) {
    if (n > 8) fail("integer wider than 64 bits");
    if (n == 0) return static_cast<std::int64_t>(0);
    std::uint64_t v = little_endian(static_cast<int>(n));
    if (n < 8 && (v >> (8 * n - 1)) & 1) v |= ~std::uint64_t{0} << (8 * n);  // sign-extend
    return static_cast<std::int64_t>(v);
  }
  double binfloat() {
    const std::string_view b = read(8);
    std::uint64_t v = 0;
    for (char c : b) v = (v << 8) | static_cast<unsigned char>(c);  // big-endian
    return std::bit_cast<double>(v);
  }

  void push(c10::IValue value) { stack_.push_back(std::move(value)); }
  void need(std::size_t n) const {
    if (stack_.size() < n || (!marks_.empty() && stack_.size() - marks_.back() < n)) fail("stack underflow");
  }
  c10::IValue pop() {
    need(1);
    c10::IValue v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  std::vector<c10::IValue> pop_to_mark() {
    if (marks_.empty()) fail("no MARK on the stack");
    const std::size_t mark = marks_.back();
    marks_.pop_back();
    std::vector<c10::IValue> items(stack_.begin() + static_cast<std::ptrdiff_t>(mark), stack_.end());
    stack_.resize(mark);
    return items;
  }
  c10::impl::GenericList list_at_top() {
    if (stack_.empty() || !stack_.back().isList()) fail("APPEND to something other than a list");
    return stack_.back().toList();
  }
  c10::impl::GenericDict dict_at_top() {
    if (stack_.empty() || !stack_.back().isGenericDict()) fail("SETITEM on something other than a dict");
    return stack_.back().toGenericDict();
  }
  void set_items(c10::impl::GenericDict dict, std::vector<c10::IValue>& items) {
    if (items.size() % 2) fail("odd number of dict items");
    for (std::size_t i = 0; i < items.size(); i += 2) {
      const c10::IValue& key = items[i];
      if (!key.isString() && !key.isInt() && !key.isDouble() && !key.isBool()) {
        fail(fmt::format("dict key of type {}", key.tagKind()));
      }
      dict.insert_or_assign(key, std::move(items[i + 1]));
    }
  }
  void memoize(std::uint64_t index) {
    if (stack_.empty()) fail("memo put on an empty stack");
    // A pickle puts its memo slots in order, each with an opcode of its own: a slot beyond the
    // pickle's byte count is not from a real pickler and would only size the memo by the file.
    if (index > bytes_.size()) fail(fmt::format("memo index {} out of range for a {}-byte pickle", index, bytes_.size()));
    if (memo_.size() <= index) memo_.resize(index + 1);
    memo_[index] = stack_.back();
  }
  c10::IValue memo(std::uint64_t index) {
    if (index >= memo_.size()) fail("memo get of an unset slot");
    return memo_[index];
  }

  c10::IValue persistent_load(const c10::IValue& id) {
    // ('storage', <typed storage global>, key, location, numel)
    if (!id.isTuple() || id.toTupleRef().elements().size() != 5) fail("persistent id that is not a storage");
    const std::vector<c10::IValue> parts = id.toTupleRef().elements().vec();
    const auto type_name = global_name(parts[1]);
    if (!parts[0].isString() || parts[0].toStringRef() != "storage" || !type_name || !parts[2].isString() ||
        !parts[4].isInt()) {
      fail("persistent id that is not a storage");
    }
    const auto type = storage_types().find(*type_name);
    if (type == storage_types().end()) fail(fmt::format("storage type {} is not supported", *type_name));
    const std::string& key = parts[2].toStringRef();
    if (auto cached = storages_.find(key); cached != storages_.end()) return cached->second;
    const std::int64_t numel = parts[4].toInt();
    const std::string record = "data/" + key;
    if (!archive_.hasRecord(record)) fail(fmt::format("missing storage record {}", record));
    // The storage's byte count must match its record's, and the record must fit in the file,
    // before anything is allocated.
    const auto expected = checked_byte_count(std::array{numel}, c10::elementSize(type->second));
    const std::size_t size = archive_.getRecordSize(record);
    if (!expected || size != *expected || size > file_size_) {
      fail(fmt::format("storage {} of {} elements does not match its record of {} bytes", record, numel, size));
    }
    if ((storage_bytes_ += size) > file_size_) fail("its storages add up to more bytes than the file has");
    const auto options = at::TensorOptions().dtype(type->second);
    at::Tensor storage = at::empty({numel}, tensor_data_ ? options : options.device(at::kMeta));
    if (tensor_data_ && size && archive_.getRecord(record, storage.data_ptr(), size) != size) {
      fail(fmt::format("storage {} ends early", record));
    }
    storages_.emplace(key, storage);
    return storage;
  }

  std::vector<std::int64_t> int_list(const c10::IValue& v, const char* what) {
    std::vector<std::int64_t> out;
    if (!v.isTuple() && !v.isList()) fail(fmt::format("tensor {} is not a tuple", what));
    const auto items = v.isTuple() ? v.toTupleRef().elements().vec() : v.toList().vec();
    for (const auto& item : items) {
      if (!item.isInt()) fail(fmt::format("tensor {} holds a non-integer", what));
      out.push_back(item.toInt());
    }
    return out;
  }

  c10::IValue call(const c10::IValue& callable, const c10::IValue& args_value) {
    const auto name = global_name(callable);
    if (!name) fail("REDUCE on something that is not a global");
    if (!args_value.isTuple()) fail(fmt::format("arguments of {} are not a tuple", *name));
    const auto& args = args_value.toTupleRef().elements();
    if (*name == "collections.OrderedDict" && args.empty()) {
      return c10::impl::GenericDict(c10::AnyType::get(), c10::AnyType::get());
    }
    if (*name == "torch._utils._rebuild_tensor_v2" && args.size() >= 4 && args[0].isTensor() && args[1].isInt()) {
      const at::Tensor& storage = args[0].toTensor();
      const auto size = int_list(args[2], "size"), stride = int_list(args[3], "stride");
      if (size.size() != stride.size()) fail("tensor size and stride differ in length");
      // Bounds: the largest element reached must lie inside the storage.
      std::int64_t last = args[1].toInt();
      bool empty = false, overflow = false;
      for (std::size_t i = 0; i < size.size(); ++i) {
        if (size[i] < 0 || stride[i] < 0) fail("negative tensor size or stride");
        std::int64_t reach = 0;
        if (size[i] == 0) empty = true;
        else overflow |= __builtin_mul_overflow(size[i] - 1, stride[i], &reach) || __builtin_add_overflow(last, reach, &last);
      }
      if (args[1].toInt() < 0 || (!empty && (overflow || last >= storage.numel()))) fail("tensor reaches outside its storage");
      return storage.as_strided(size, stride, args[1].toInt());
    }
    if (*name == "torch._utils._rebuild_parameter" && !args.empty() && args[0].isTensor()) return args[0];
    if (*name == "torch.Size") {
      c10::impl::GenericList list(c10::AnyType::get());
      if (!args.empty()) for (auto v : int_list(args[0], "size")) list.push_back(v);
      return list;
    }
    if (*name == "torch.device" && !args.empty() && args[0].isString()) {
      return args.size() > 1 && args[1].isInt() ? c10::IValue(args[0].toStringRef() + ":" + std::to_string(args[1].toInt()))
                                                : args[0];
    }
    if (auto dtype = dtype_globals().find(*name); dtype != dtype_globals().end()) return c10::IValue(dtype->second);
    fail(fmt::format("it uses the Python global '{}', which libreyolo does not load (weights files hold only "
                     "tensors, numbers, strings, lists, tuples and dicts); re-save the checkpoint from a plain dict",
                     *name));
  }

  std::filesystem::path path_;
  std::uint64_t file_size_;
  std::uint64_t storage_bytes_ = 0;
  std::string_view bytes_;
  std::size_t position_ = 0;
  caffe2::serialize::PyTorchStreamReader& archive_;
  bool tensor_data_;
  std::vector<c10::IValue> stack_;
  std::vector<std::size_t> marks_;
  std::vector<c10::IValue> memo_;
  std::map<std::string, at::Tensor> storages_;
};

}  // namespace

namespace {

// A torch.save file is a zip archive: its first bytes are a local file header, its last ones (within
// the last 64 KiB, a comment's room) the end-of-central-directory record. Told apart here, so that a
// cut file gets its own message instead of miniz's.
void check_zip_frame(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  const std::uint64_t size = std::filesystem::file_size(path);
  std::string head(4, '\0');
  in.read(head.data(), 4);
  if (!in || head != std::string("PK\x03\x04", 4)) {
    throw ModelError(fmt::format("{}: not a readable torch.save file: not a zip archive (torch.save's format since torch "
                                 "1.6); an empty, legacy or foreign file", path.string()));
  }
  const std::uint64_t tail_size = std::min<std::uint64_t>(size, 65536 + 22);
  std::string tail(tail_size, '\0');
  in.seekg(static_cast<std::streamoff>(size - tail_size));
  in.read(tail.data(), static_cast<std::streamsize>(tail_size));
  // the record is 22 bytes and a comment its last two announce, the file's very end
  const std::size_t end_record = tail.rfind(std::string("PK\x05\x06", 4));
  const bool whole = in && end_record != std::string::npos && end_record + 22 <= tail.size() &&
                     end_record + 22 + (static_cast<unsigned char>(tail[end_record + 20]) |
                                        static_cast<std::size_t>(static_cast<unsigned char>(tail[end_record + 21])) << 8) ==
                         tail.size();
  if (!whole) {
    throw ModelError(fmt::format("{}: the file is cut short ({} bytes, no zip end record): an interrupted save or copy; "
                                 "copy it again or take another checkpoint (best.pt, epoch_N.pt)", path.string(), size));
  }
}

}  // namespace

c10::IValue read_torch_file(const std::filesystem::path& path, bool tensor_data) {
  std::error_code error;
  if (!std::filesystem::is_regular_file(path, error)) {
    throw ModelError(fmt::format("{}: no such weights file", path.string()));
  }
  check_zip_frame(path);
  try {
    caffe2::serialize::PyTorchStreamReader archive(path.string());
    if (archive.hasRecord("byteorder")) {
      const auto [order, size] = archive.getRecord("byteorder");
      if (std::string_view(static_cast<const char*>(order.get()), size) != "little") {
        throw ModelError(fmt::format("{}: written on a big-endian machine, which libreyolo does not read", path.string()));
      }
    }
    if (!archive.hasRecord("data.pkl")) {
      throw ModelError(fmt::format("{}: a zip archive without data.pkl; not a torch.save file", path.string()));
    }
    const std::uint64_t file_size = std::filesystem::file_size(path);
    if (archive.getRecordSize("data.pkl") > file_size) {
      throw ModelError(fmt::format("{}: data.pkl claims more bytes than the file has; the file is damaged", path.string()));
    }
    const auto [pickle, size] = archive.getRecord("data.pkl");
    Unpickler unpickler(path, file_size, std::string_view(static_cast<const char*>(pickle.get()), size), archive, tensor_data);
    return unpickler.run();
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    std::string what = e.what();
    if (const auto newline = what.find('\n'); newline != std::string::npos) what.resize(newline);
    if (const auto blurb = what.find(". This is an internal miniz error"); blurb != std::string::npos) what.resize(blurb);
    throw ModelError(fmt::format("{}: not a readable torch.save file (zip format, torch ≥ 1.6): {}", path.string(), what));
  }
}

}  // namespace libreyolo::models
