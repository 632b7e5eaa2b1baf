// Text helpers the reply splits share (reasoning_split.cpp, harmony_split.cpp): whitespace at either end, and the
// beginning of a marker cut off at the end of the text received so far.
#pragma once
#include <algorithm>
#include <cstddef>
#include <string_view>

namespace chat::reply_text {

inline bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

inline size_t first_non_space(std::string_view s) {
  size_t i = 0;
  while (i < s.size() && is_space(s[i])) ++i;
  return i;
}

// Where s[0, end) ends without its trailing whitespace.
inline size_t end_without_trailing_space(std::string_view s, size_t end) {
  while (end > 0 && is_space(s[end - 1])) --end;
  return end;
}

// The length of the longest end of s that is a proper beginning of tag ("</th" of "</think>"): text a stream holds
// until the next piece says whether the tag comes.
inline size_t partial_tag_at_end(std::string_view s, std::string_view tag) {
  for (size_t k = std::min(s.size(), tag.size() - 1); k > 0; --k)
    if (s.substr(s.size() - k) == tag.substr(0, k)) return k;
  return 0;
}

}  // namespace chat::reply_text
