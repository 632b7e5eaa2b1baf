// Special tokens as the reference runtime (llama.cpp) treats them. A token's GGUF type is only where its role
// starts: the reference promotes tokens with end-of-generation or fill-in-the-middle texts to control tokens,
// demotes a few by name, and gives the special tokens of some models strip attributes (whitespace beside them
// is dropped when they are matched in text). This file derives those effective attributes once per vocabulary
// and splits texts at special tokens with them; docs/tokenizer.md lists the rules.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "tokenizer/string_index.h"
#include "tokenizer/tokenizer.h"

namespace tokenizer {

// Effective attributes of a token (bit flags). A token with none of the first three is never split out of text.
enum Attr : uint8_t {
  kAttrControl = 1 << 0,      // matched in text only with parse_special; hidden when decoding
  kAttrUserDefined = 1 << 1,  // matched in text in both modes (unless it is also a control token)
  kAttrUnknown = 1 << 2,      // like a control token
  kAttrLstrip = 1 << 3,       // a match drops the whitespace just before it
  kAttrRstrip = 1 << 4,       // a match drops the whitespace just after it
};

class SpecialTokens {
 public:
  // `index` maps every token text to its id (later duplicates win, as in the reference); both must outlive this.
  SpecialTokens(const Vocab& v, const StringIndex& index);

  uint8_t attr(int32_t id) const { return attr_[id]; }
  bool is_control(int32_t id) const { return (attr_[id] & kAttrControl) != 0; }
  // Rendered only with render_special (and never strips the SentencePiece leading space).
  bool hidden(int32_t id) const { return (attr_[id] & (kAttrControl | kAttrUnknown)) != 0; }
  bool is_eog(int32_t id) const { return eog_[id] != 0; }
  // The end-of-turn token: the vocabulary's, else the first known end-of-turn text it has; -1 when none.
  int32_t eot() const { return eot_; }

  struct Fragment {
    int32_t token;    // -1 for raw text
    size_t off, len;  // raw text range (for a token: the matched text)
  };
  // Splits text at special tokens (control and unknown ones only with parse_special), in the reference order:
  // longer tokens first (lower id among equal lengths), each taking its leftmost non-overlapping occurrences in
  // what is still raw text; a match with a strip attribute drops the whitespace run beside it in that raw text.
  // Raw fragments are never empty and never adjacent.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;

 private:
  const std::vector<std::string>& texts_;
  std::vector<uint8_t> attr_;
  std::vector<uint8_t> eog_;
  int32_t eot_ = -1;
  std::vector<int32_t> order_;        // special tokens, longest text first
  std::vector<uint32_t> rank_;        // [n_vocab] index in order_ (match priority)
  // Match candidates by first byte, in priority order: [0] without parse_special, [1] with it.
  std::array<std::vector<int32_t>, 256> by_first_[2];
  bool any_[2] = {false, false};
};

}  // namespace tokenizer
