// SentencePiece-style ("llama") encoding through the sentencepiece library: the GGUF vocabulary is turned into a
// serialized ModelProto (BPE model, byte fallback, identity normalizer that only adds the dummy prefix and escapes
// spaces as U+2581) and loaded from memory.
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

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t n_vocab_ = 0;
  int32_t unk_ = -1;  // where appended pieces (ids >= n_vocab) go; -1 drops them
};

}  // namespace tokenizer
