// Sizes computed from untrusted files (tensor shapes, element counts): overflow-checked, so that no
// allocation is ever sized by a product that wrapped around. The caller still compares the result
// with the bytes the file really holds before allocating.
#pragma once

#include <cstdint>
#include <optional>
#include <span>

namespace libreyolo {

// The most classes a dataset YAML or a checkpoint may declare (nc= has the same maximum): beyond
// it a file is refused before names or a model head are sized by it.
inline constexpr int kMaxClasses = 100000;
// Input sizes a checkpoint may record (imgsz= accepts the same range).
inline constexpr int kMinImageSize = 32, kMaxImageSize = 8192;

// elements × element_size over all dims; nullopt for a negative dim or an overflow of 64 bits.
inline std::optional<std::uint64_t> checked_byte_count(std::span<const std::int64_t> dims, std::uint64_t element_size) {
  std::uint64_t bytes = element_size;
  for (const std::int64_t dim : dims) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(dim), &bytes)) return std::nullopt;
  }
  return bytes;
}

}  // namespace libreyolo
