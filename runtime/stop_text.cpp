// Holding back possible stop strings (see stop_text.h).
#include "runtime/stop_text.h"

#include <algorithm>

namespace runtime {

bool contains_stop(const std::string& text, size_t new_bytes, const std::vector<std::string>& stops) {
  for (const auto& s : stops) {
    if (s.empty()) continue;
    const size_t span = s.size() - 1 + new_bytes;
    const size_t from = text.size() > span ? text.size() - span : 0;
    if (text.find(s, from) != std::string::npos) return true;
  }
  return false;
}

StopText::StopText(std::vector<std::string> stops) {
  for (auto& s : stops)
    if (!s.empty()) stops_.push_back(std::move(s));
}

std::string StopText::push(std::string_view piece) {
  if (stopped_) return {};
  held_.append(piece);
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string shown = held_.substr(0, first);
    held_.clear();
    return shown;
  }
  // Keep the longest suffix that is a proper prefix of some stop string; since stop strings are whole UTF-8 text,
  // such a suffix starts on a character boundary and the shown part never ends inside a character.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t k = std::min(held_.size(), s.size() - 1); k > keep; --k) {
      if (std::string_view(held_).substr(held_.size() - k) == std::string_view(s).substr(0, k)) {
        keep = k;
        break;
      }
    }
  }
  std::string shown = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return shown;
}

std::string StopText::flush() {
  std::string rest;
  rest.swap(held_);
  return stopped_ ? std::string() : rest;
}

}  // namespace runtime
