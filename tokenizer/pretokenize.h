// Byte-level BPE pre-tokenizers: the regex chains selected by tokenizer.ggml.pre, run with PCRE2 (UTF + UCP, JIT).
// A chain applies its regexes in order; each one splits every current segment into its matches and the unmatched
// gaps between them (both kept), seeing only that segment (so `$` and look-arounds stop at segment ends).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tokenizer {

class PreTokenizer {
 public:
  // Throws TokenizerError naming `name` and the supported names when it is unknown.
  explicit PreTokenizer(std::string_view name);
  ~PreTokenizer();
  PreTokenizer(const PreTokenizer&) = delete;
  PreTokenizer& operator=(const PreTokenizer&) = delete;

  // Splits valid UTF-8 `text` into words; `out` receives their byte lengths in order (they sum to text.size()).
  void split(std::string_view text, std::vector<uint32_t>& out) const;

  // HF "ignore_merges": a word that is itself a vocabulary entry is emitted whole (Llama 3 family).
  bool ignore_merges() const { return ignore_merges_; }

  // Whether BOS is added when the vocabulary has no tokenizer.ggml.add_bos_token key (false for unknown names).
  static bool default_add_bos(std::string_view name);
  static std::vector<std::string> supported_names();
  // The regexes of a pre-tokenizer as written in the public tokenizer definitions (before the \s rewrite).
  static std::vector<std::string> regexes_for(std::string_view name);

 private:
  struct Regex;
  std::vector<std::unique_ptr<Regex>> regexes_;
  bool ignore_merges_ = false;
};

// Rewrites \s and \S to the Unicode White_Space set (which is what the reference tokenizers use; PCRE2's own \s
// differs, e.g. it includes U+180E). Exposed for tests.
std::string rewrite_whitespace_classes(std::string_view re);

}  // namespace tokenizer
