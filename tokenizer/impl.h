// Internal state of a Tokenizer, shared by tokenizer.cpp (encode/decode) and vocab.cpp (GGUF loading).
#pragma once
#include <array>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace tokenizer {

struct Tokenizer::Impl {
  explicit Impl(Vocab vocab);

  Vocab v;
  StringIndex token_to_id;           // every token; later duplicates win
  std::vector<int32_t> specials;     // control / user-defined / unknown tokens, longest text first
  std::vector<uint32_t> special_rank; // [n_vocab] index in `specials` (partition priority)
  // Partition candidates by first byte, in priority order: [0] user-defined only, [1] with parse_special.
  std::array<std::vector<int32_t>, 256> by_first[2];
  bool has_specials[2] = {false, false};
  std::vector<std::string> piece;    // detokenized bytes of each token with render_special = false
  std::vector<uint8_t> eog;          // [n_vocab] end-of-generation flags
  std::unique_ptr<SpmModel> spm;     // kind == SPM
  std::unique_ptr<PreTokenizer> pre; // kind == BPE
  std::unique_ptr<BpeModel> bpe;     // kind == BPE
  bool strip_space = false;          // SentencePiece leading-space rule applies when decoding

  struct Fragment {
    int32_t token;      // -1 for raw text
    size_t off, len;    // raw text range
  };
  // Splits text at special tokens (control/unknown ones only when parse_special), in the reference order:
  // longer tokens first, each one taking its leftmost non-overlapping occurrences in what is still raw text.
  std::vector<Fragment> partition(std::string_view text, bool parse_special) const;
  void encode_raw(std::string_view text, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;
  bool hidden(int32_t id) const;  // control/unknown: rendered only with render_special, never strips the space
};

}  // namespace tokenizer
