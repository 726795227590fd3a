// Text from a user's file, made safe to show: a terminal or a JSON file gets no raw control bytes
// or invalid UTF-8 from a damaged label or data file.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace libreyolo {

// `text` with control bytes, DEL and bytes that are not valid UTF-8 written as \xNN, and the
// valid UTF-8 a terminal obeys unseen (C1 controls, bidirectional overrides and marks) as \u{XXXX},
// cut to `max_characters` (then "..."): a binary "line" can be megabytes long.
std::string printable(std::string_view text, std::size_t max_characters = 40);

}  // namespace libreyolo
