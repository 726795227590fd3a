// Small text helpers shared by the layers.
#pragma once

#include <string>
#include <string_view>

namespace libreyolo {

// `text` with its ASCII letters lower-cased (other bytes as they are): keys, choices, extensions.
std::string ascii_lower(std::string_view text);

}  // namespace libreyolo
