// Builds a sentencepiece ModelProto from a GGUF "llama" vocabulary and encodes through the library (see spm.h).
// Field numbers are those of the public sentencepiece_model.proto.
#include "tokenizer/spm.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <unordered_set>

#include "tokenizer/memo.h"
#include "tokenizer/protobuf.h"
#include "tokenizer/unicode.h"

namespace tokenizer {

namespace {

// sentencepiece_model.proto
namespace field {
constexpr int kModelPieces = 1, kModelTrainerSpec = 2, kModelNormalizerSpec = 3;
constexpr int kPiecePiece = 1, kPieceScore = 2, kPieceType = 3;
constexpr int kTrainerModelType = 3, kTrainerVocabSize = 4, kTrainerTreatWsAsSuffix = 24, kTrainerSplitDigits = 25,
              kTrainerAllowWsOnlyPieces = 26, kTrainerByteFallback = 35, kTrainerUnkId = 40, kTrainerBosId = 41,
              kTrainerEosId = 42, kTrainerPadId = 43;
constexpr int kNormName = 1, kNormAddDummyPrefix = 3, kNormRemoveExtraWs = 4, kNormEscapeWs = 5;
}  // namespace field

enum PieceType : int32_t { NORMAL = 1, UNKNOWN = 2, CONTROL = 3, USER_DEFINED = 4, UNUSED = 5, BYTE = 6 };
constexpr int32_t kModelTypeBpe = 2;
// The library rejects longer pieces; nothing in a real vocabulary comes close.
constexpr size_t kMaxPieceBytes = 8000;

void add_piece(proto::Writer& model, const std::string& name, float score, int32_t type) {
  proto::Writer p;
  p.bytes(field::kPiecePiece, name);
  p.float32(field::kPieceScore, score);
  p.int32(field::kPieceType, type);
  model.message(field::kModelPieces, p);
}

}  // namespace

std::string build_spm_model_proto(const Vocab& vocab) {
  const int32_t n = static_cast<int32_t>(vocab.tokens.size());
  const int32_t unk = (vocab.unk >= 0 && vocab.unk < n) ? vocab.unk : -1;
  proto::Writer model;
  std::unordered_set<std::string_view> normal_names;
  bool have_byte[256] = {};

  for (int32_t id = 0; id < n; ++id) {
    const std::string& text = vocab.tokens[id];
    const TokenType type = vocab.types[id];
    // Control and unknown pieces are never matched in text by sentencepiece, so their names do not matter; unique
    // placeholders keep odd vocabularies (empty or repeated control texts) loadable.
    const std::string placeholder = "<ctl:" + std::to_string(id) + ">";
    if (id == unk) {
      add_piece(model, placeholder, vocab.scores[id], UNKNOWN);
    } else if (type == TokenType::CONTROL || type == TokenType::UNKNOWN) {
      add_piece(model, placeholder, vocab.scores[id], CONTROL);
    } else if (type == TokenType::BYTE) {
      const int b = utf8::parse_byte_piece(text);
      if (b >= 0 && !have_byte[b]) {
        have_byte[b] = true;
        add_piece(model, text, vocab.scores[id], BYTE);
      } else {
        add_piece(model, placeholder, vocab.scores[id], CONTROL);
      }
    } else {
      // Normal, user-defined (already split out of the text by the caller), unused and undefined tokens are all
      // plain mergeable pieces, as in the reference implementation.
      const bool usable = !text.empty() && text.find('\0') == std::string::npos && text.size() < kMaxPieceBytes &&
                          normal_names.insert(text).second;
      add_piece(model, usable ? text : placeholder, vocab.scores[id], usable ? NORMAL : CONTROL);
    }
  }
  // With byte pieces, unknown characters fall back to bytes; the library then insists on all 256 byte pieces, so
  // missing ones are appended (they map to <unk>, as the reference does). Without any, an unknown character is
  // one <unk>, as in sentencepiece.
  const bool byte_fallback = std::find(std::begin(have_byte), std::end(have_byte), true) != std::end(have_byte);
  int32_t total = n;
  for (int b = 0; b < 256 && byte_fallback; ++b) {
    if (have_byte[b]) continue;
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    add_piece(model, name, 0.0f, BYTE);
    ++total;
  }
  int32_t unk_piece = unk;
  if (unk < 0) {
    add_piece(model, "<ctl:unk>", 0.0f, UNKNOWN);
    unk_piece = total++;
  }

  proto::Writer trainer;
  trainer.int32(field::kTrainerModelType, kModelTypeBpe);
  trainer.int32(field::kTrainerVocabSize, total);
  trainer.boolean(field::kTrainerTreatWsAsSuffix, false);
  trainer.boolean(field::kTrainerSplitDigits, true);
  trainer.boolean(field::kTrainerAllowWsOnlyPieces, true);
  trainer.boolean(field::kTrainerByteFallback, byte_fallback);
  trainer.int32(field::kTrainerUnkId, unk_piece);
  trainer.int32(field::kTrainerBosId, vocab.bos >= 0 && vocab.bos < n ? vocab.bos : -1);
  trainer.int32(field::kTrainerEosId, vocab.eos >= 0 && vocab.eos < n ? vocab.eos : -1);
  trainer.int32(field::kTrainerPadId, vocab.pad >= 0 && vocab.pad < n ? vocab.pad : -1);
  model.message(field::kModelTrainerSpec, trainer);

  // Identity normalization: no NFKC, whitespace kept as is (not collapsed), spaces escaped to U+2581. The dummy
  // prefix is prepended by SpmModel::encode instead (same result: the normalizer's prefix is one more space).
  proto::Writer norm;
  norm.bytes(field::kNormName, "identity");
  norm.boolean(field::kNormAddDummyPrefix, false);
  norm.boolean(field::kNormRemoveExtraWs, false);
  norm.boolean(field::kNormEscapeWs, true);
  model.message(field::kModelNormalizerSpec, norm);
  return model.data();
}

// Open-addressing set of 64-bit keys (codepoints or codepoint pairs); looked up once per input character.
struct SpmModel::CodepointSet {
  std::vector<uint64_t> keys;  // 0 = empty, so keys are stored + 1
  uint64_t mask = 0;
  explicit CodepointSet(size_t n) {
    size_t cap = 64;
    while (cap < 2 * n) cap <<= 1;
    keys.assign(cap, 0);
    mask = cap - 1;
  }
  static uint64_t slot(uint64_t k) { return (k * 0x9E3779B97F4A7C15ULL) >> 20; }
  void insert(uint64_t k) {
    for (uint64_t i = slot(k) & mask;; i = (i + 1) & mask) {
      if (keys[i] == k + 1) return;
      if (keys[i] == 0) {
        keys[i] = k + 1;
        return;
      }
    }
  }
  bool contains(uint64_t k) const {
    for (uint64_t i = slot(k) & mask;; i = (i + 1) & mask) {
      if (keys[i] == k + 1) return true;
      if (keys[i] == 0) return false;
    }
  }
};

namespace {
uint64_t pair_key(char32_t a, char32_t b) { return (static_cast<uint64_t>(a) << 21) | b; }
}  // namespace

SpmModel::SpmModel(const Vocab& vocab)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()),
      n_vocab_(static_cast<int32_t>(vocab.tokens.size())),
      unk_(vocab.unk >= 0 && vocab.unk < static_cast<int32_t>(vocab.tokens.size()) ? vocab.unk : -1),
      add_prefix_(vocab.add_space_prefix) {
  const std::string serialized = build_spm_model_proto(vocab);
  const auto status = sp_->LoadFromSerializedProto(serialized);
  if (!status.ok()) throw TokenizerError("sentencepiece rejected the vocabulary: " + status.ToString());

  // Characters and adjacent pairs of every piece that can take part in merges (all but control, unknown and
  // byte pieces, which sentencepiece never matches in text).
  size_t n_chars = 0;
  for (const auto& t : vocab.tokens) n_chars += t.size();
  chars_ = std::make_unique<CodepointSet>(4096);
  pairs_ = std::make_unique<CodepointSet>(n_chars);
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    const TokenType type = vocab.types[id];
    if (type == TokenType::CONTROL || type == TokenType::UNKNOWN || type == TokenType::BYTE) continue;
    const std::string& t = vocab.tokens[id];
    char32_t prev = 0;
    for (size_t i = 0; i < t.size();) {
      size_t len = 0;
      if (utf8::check_sequence(t, i, &len) != utf8::SeqStatus::VALID) {
        ++i;
        prev = 0;
        continue;
      }
      const char32_t cp = utf8::decode_at(t, i, &len);
      chars_->insert(cp);
      if (prev != 0) pairs_->insert(pair_key(prev, cp));
      prev = cp;
      i += len;
    }
  }
}

SpmModel::~SpmModel() = default;

bool SpmModel::separable(char32_t a, char32_t b) const {
  return chars_->contains(a) && chars_->contains(b) && !pairs_->contains(pair_key(a, b));
}

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::string prefixed;
  if (add_prefix_) {
    prefixed.reserve(text.size() + 1);
    prefixed.push_back(' ');
    prefixed.append(text);
    text = prefixed;
  }
  // Cut at separable character boundaries (never next to invalid UTF-8, which sentencepiece replaces).
  Memo memo;
  size_t start = 0;
  char32_t prev = 0;  // 0: no usable previous character
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    if (utf8::check_sequence(text, i, &len) != utf8::SeqStatus::VALID) {
      prev = 0;
      ++i;
      continue;
    }
    char32_t cp = utf8::decode_at(text, i, &len);
    if (cp == ' ') cp = 0x2581;
    if (prev != 0 && cp != 0 && i > start && separable(prev, cp)) {
      encode_chunk(text.substr(start, i - start), memo, out);
      start = i;
    }
    prev = cp;
    i += len;
  }
  if (start < text.size()) encode_chunk(text.substr(start), memo, out);
}

void SpmModel::encode_chunk(std::string_view chunk, Memo& memo, std::vector<int32_t>& out) const {
  if (memo.lookup(chunk, out)) return;
  const size_t from = out.size();
  std::vector<int> ids;
  const auto status = sp_->Encode(chunk, &ids);
  if (!status.ok()) throw TokenizerError("sentencepiece encode failed: " + status.ToString());
  for (const int id : ids) {
    if (id < n_vocab_) {
      out.push_back(id);
    } else if (unk_ >= 0) {
      out.push_back(unk_);  // a byte the vocabulary has no piece for, or the appended unknown piece
    }
  }
  memo.store(chunk, out, from);
}

}  // namespace tokenizer
