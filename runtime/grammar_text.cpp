#include "runtime/grammar_text.h"

#include <algorithm>

#include "runtime/json_schema_grammar.h"

namespace runtime {

std::optional<uint32_t> read_hex(std::string_view text, size_t& at, size_t digits) {
  uint32_t v = 0;
  for (size_t i = 0; i < digits; ++i, ++at) {
    if (at >= text.size()) return std::nullopt;
    const std::optional<uint32_t> h = hex_value(static_cast<unsigned char>(text[at]));
    if (!h) return std::nullopt;
    v = v * 16 + *h;
  }
  return v;
}

std::optional<uint32_t> read_count(std::string_view text, size_t& at) {
  const size_t from = at;
  uint64_t n = 0;
  while (at < text.size() && text[at] >= '0' && text[at] <= '9')
    n = std::min<uint64_t>(n * 10 + static_cast<uint64_t>(text[at++] - '0'), uint64_t{1} << 30);
  if (at == from) return std::nullopt;
  return static_cast<uint32_t>(n);
}

std::string count_error(uint32_t lo, std::optional<uint32_t> hi) {
  if (lo > kMaxSchemaRepeat || (hi && *hi > kMaxSchemaRepeat))
    return "a count above " + std::to_string(kMaxSchemaRepeat);
  if (hi && *hi < lo) return "a count {m,n} with n below m";
  return {};
}

}  // namespace runtime
