// Stop strings with OpenAI's semantics for streamed text: a client never sees a stop string nor anything after it,
// so text that might be the start of one is held back until the next piece decides it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace runtime {

// Whether text, whose last new_bytes bytes just arrived, now contains one of the stop strings. A new match must end
// in the new bytes, so only the tail that could hold one is searched. Empty stop strings never match.
bool contains_stop(const std::string& text, size_t new_bytes, const std::vector<std::string>& stops);

class StopText {
 public:
  explicit StopText(std::vector<std::string> stops);

  // Adds a piece of generated text; returns what can be shown now. After a match, stopped() is true and the
  // returned text ends just before it; later pieces return nothing.
  std::string push(std::string_view piece);
  // The held-back text at the end of a generation (nothing after a match).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;  // non-empty ones only
  std::string held_;                // not yet shown: a suffix that may begin a stop string
  bool stopped_ = false;
};

}  // namespace runtime
