#include "core/text.h"

#include <algorithm>
#include <cctype>

namespace libreyolo {

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

}  // namespace libreyolo
