#include "core/printable.h"

#include <fmt/format.h>

#include <cstdint>

namespace libreyolo {

namespace {

// The length of the valid UTF-8 sequence at `text[i]` (2-4), or 0 where there is none.
std::size_t utf8_sequence(std::string_view text, std::size_t i) {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  std::size_t length = 0;
  if (lead >= 0xC2 && lead <= 0xDF) length = 2;
  else if (lead >= 0xE0 && lead <= 0xEF) length = 3;
  else if (lead >= 0xF0 && lead <= 0xF4) length = 4;
  if (length == 0 || i + length > text.size()) return 0;
  for (std::size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
  }
  const unsigned char second = byte(i + 1);
  if ((lead == 0xE0 && second < 0xA0) || (lead == 0xED && second > 0x9F) || (lead == 0xF0 && second < 0x90) ||
      (lead == 0xF4 && second > 0x8F)) {
    return 0;  // overlong forms, UTF-16 surrogates, past U+10FFFF
  }
  return length;
}

// The code point of a valid sequence of `length` bytes at `text[i]`.
char32_t code_point(std::string_view text, std::size_t i, std::size_t length) {
  static constexpr unsigned char kLeadMask[5] = {0, 0, 0x1F, 0x0F, 0x07};
  char32_t point = static_cast<unsigned char>(text[i]) & kLeadMask[length];
  for (std::size_t k = 1; k < length; ++k) point = (point << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3F);
  return point;
}

// Valid UTF-8 that a terminal still obeys rather than shows: the C1 controls (U+0080-U+009F, CSI
// among them), the bidirectional marks, embeddings, overrides and isolates (which reorder what
// follows them on the line), the line and paragraph separators, and the byte order mark.
bool is_invisible_control(char32_t point) {
  return (point >= 0x80 && point <= 0x9F) || point == 0x061C || point == 0x200E || point == 0x200F ||
         (point >= 0x2028 && point <= 0x202E) || (point >= 0x2066 && point <= 0x2069) || point == 0xFEFF;
}

}  // namespace

std::string printable(std::string_view text, std::size_t max_characters) {
  std::string out;
  std::size_t shown = 0, i = 0;
  for (; i < text.size() && shown < max_characters; ++shown) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F) {
      out += static_cast<char>(c);
      ++i;
    } else if (const std::size_t length = c >= 0x80 ? utf8_sequence(text, i) : 0; length > 0) {
      const char32_t point = code_point(text, i, length);
      if (is_invisible_control(point)) out += fmt::format("\\u{{{:04x}}}", static_cast<std::uint32_t>(point));
      else out.append(text.substr(i, length));
      i += length;
    } else {
      out += fmt::format("\\x{:02x}", c);
      ++i;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

}  // namespace libreyolo
