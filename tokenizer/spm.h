// SentencePiece-style ("llama") encoding through the sentencepiece library: the GGUF vocabulary is turned into a
// serialized ModelProto (BPE model, byte fallback, identity normalizer that keeps whitespace runs and escapes
// spaces as U+2581) and loaded from memory. The dummy-prefix space is added here, per fragment, as the reference
// does, which also lets long texts be cut into chunks the merges provably cannot cross (see encode()).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace tokenizer {

class Memo;

// Builds the serialized ModelProto for a vocabulary (exposed for tests). Pieces sentencepiece would reject or
// that must stay unreachable from text (empty, duplicate, NUL-containing, malformed byte pieces) get unique
// placeholder names with CONTROL type; missing byte pieces (when the vocabulary has some) and a missing unknown
// piece are appended after the vocabulary (ids >= n_vocab, mapped back to <unk> by SpmModel).
std::string build_spm_model_proto(const Vocab& vocab);

class SpmModel {
 public:
  explicit SpmModel(const Vocab& vocab);
  ~SpmModel();
  SpmModel(const SpmModel&) = delete;
  SpmModel& operator=(const SpmModel&) = delete;

  // Encodes one raw-text fragment (the dummy prefix is added when the vocabulary asks for it).
  void encode(std::string_view text, std::vector<int32_t>& out) const;

  // Whether the text may be cut between characters a and b (spaces given as U+2581): no piece contains "ab"
  // and both characters occur in pieces. Every BPE symbol is a piece, so no merge can then span the cut, and
  // both sides encode independently. Exposed for tests.
  bool separable(char32_t a, char32_t b) const;

 private:
  void encode_chunk(std::string_view chunk, Memo& memo, std::vector<int32_t>& out) const;

  struct CodepointSet;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t n_vocab_ = 0;
  int32_t unk_ = -1;  // where appended pieces (ids >= n_vocab) go; -1 drops them
  bool add_prefix_ = true;
  std::unique_ptr<CodepointSet> chars_;  // characters occurring in mergeable pieces
  std::unique_ptr<CodepointSet> pairs_;  // adjacent character pairs occurring in mergeable pieces
};

}  // namespace tokenizer
