// Text from files (vocabulary pieces, GGUF keys and strings) shown on one terminal line: newlines, tabs, other
// control bytes and backslashes escaped, UTF-8 kept as is. One rule for every subcommand that prints such text.
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace app {

// \n \r \t \\ as such, other bytes below 0x20 and 0x7f as \xNN (lowercase hex), `quote` (when not 0) as \" or \';
// at most max_bytes of s are shown.
std::string escape_for_display(std::string_view s, char quote = 0, size_t max_bytes = std::string_view::npos);

}  // namespace app
