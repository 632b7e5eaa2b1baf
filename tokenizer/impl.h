// Internal state of a Tokenizer, shared by tokenizer.cpp (encode/decode) and vocab.cpp (GGUF loading).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/special.h"
#include "tokenizer/spm.h"
#include "tokenizer/tokenizer.h"

namespace tokenizer {

struct Tokenizer::Impl {
  explicit Impl(Vocab vocab);

  Vocab v;
  StringIndex token_to_id;           // every token; later duplicates win
  std::unique_ptr<SpecialTokens> special;  // effective attributes, end-of-generation set, special-token split
  std::vector<std::string> piece;    // detokenized bytes of each token with render_special = false
  std::unique_ptr<SpmModel> spm;     // kind == SPM
  std::unique_ptr<PreTokenizer> pre; // kind == BPE
  std::unique_ptr<BpeModel> bpe;     // kind == BPE
  bool strip_space = false;          // SentencePiece leading-space rule applies when decoding

  void encode_raw(std::string_view text, std::vector<int32_t>& out) const;
  void check_id(int32_t id) const;
  // Control/unknown as the reference treats them: rendered only with render_special, never strips the space.
  bool hidden(int32_t id) const { return special->hidden(id); }
};

}  // namespace tokenizer
