// Builds a sentencepiece ModelProto from a GGUF "llama" vocabulary and encodes through the library (see spm.h).
// Field numbers are those of the public sentencepiece_model.proto.
#include "tokenizer/spm.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <unordered_set>

#include "tokenizer/protobuf.h"

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

// "<0xAB>" -> 0xAB; -1 unless the text is exactly a byte piece as sentencepiece spells it (upper-case hex).
int parse_byte_piece(const std::string& s) {
  if (s.size() != 6 || s.compare(0, 3, "<0x") != 0 || s[5] != '>') return -1;
  int v = 0;
  for (int i = 3; i < 5; ++i) {
    const char c = s[i];
    if (c >= '0' && c <= '9') v = v * 16 + (c - '0');
    else if (c >= 'A' && c <= 'F') v = v * 16 + (c - 'A' + 10);
    else return -1;
  }
  return v;
}

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
      const int b = parse_byte_piece(text);
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

  // Identity normalization: no NFKC, whitespace kept as is (not collapsed), spaces escaped to U+2581.
  proto::Writer norm;
  norm.bytes(field::kNormName, "identity");
  norm.boolean(field::kNormAddDummyPrefix, vocab.add_space_prefix);
  norm.boolean(field::kNormRemoveExtraWs, false);
  norm.boolean(field::kNormEscapeWs, true);
  model.message(field::kModelNormalizerSpec, norm);
  return model.data();
}

SpmModel::SpmModel(const Vocab& vocab)
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()),
      n_vocab_(static_cast<int32_t>(vocab.tokens.size())),
      unk_(vocab.unk >= 0 && vocab.unk < static_cast<int32_t>(vocab.tokens.size()) ? vocab.unk : -1) {
  const std::string serialized = build_spm_model_proto(vocab);
  const auto status = sp_->LoadFromSerializedProto(serialized);
  if (!status.ok()) throw TokenizerError("sentencepiece rejected the vocabulary: " + status.ToString());
}

SpmModel::~SpmModel() = default;

void SpmModel::encode(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  if (!status.ok()) throw TokenizerError("sentencepiece encode failed: " + status.ToString());
  for (const int id : ids) {
    if (id < n_vocab_) {
      out.push_back(id);
    } else if (unk_ >= 0) {
      out.push_back(unk_);  // a byte the vocabulary has no piece for, or the appended unknown piece
    }
  }
}

}  // namespace tokenizer
