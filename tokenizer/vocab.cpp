// Reading the tokenizer.* metadata of a GGUF file (model or vocab-only) into a Vocab, with the documented
// defaults for absent optional keys. Kept apart from tokenizer.cpp so in-memory vocabularies need no GGUF code.
#include <limits>

#include "gguf/gguf.h"
#include "tokenizer/impl.h"

namespace tokenizer {

namespace {

using gguf::ValueType;

bool is_integer(ValueType t) {
  switch (t) {
    case ValueType::UINT8: case ValueType::INT8: case ValueType::UINT16: case ValueType::INT16:
    case ValueType::UINT32: case ValueType::INT32: case ValueType::UINT64: case ValueType::INT64:
      return true;
    default:
      return false;
  }
}

class Reader {
 public:
  explicit Reader(const gguf::File& f) : f_(f) {}

  [[noreturn]] void fail(std::string_view key, const std::string& what) const {
    throw TokenizerError(f_.path() + ": tokenizer metadata '" + std::string(key) + "': " + what);
  }

  const gguf::Value* find(std::string_view key) const { return f_.find(key); }

  std::optional<std::string> string(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::STRING) fail(key, std::string("has type ") + gguf::value_type_name(v->type) + ", expected string");
    return std::get<std::string>(v->v);
  }

  // Integers that do not fit an id (e.g. 0xFFFFFFFF written for "none") come back as nullopt-like -1.
  std::optional<int64_t> integer(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    if (!is_integer(v->type)) fail(key, std::string("has type ") + gguf::value_type_name(v->type) + ", expected an integer");
    if (const auto* u = std::get_if<uint64_t>(&v->v))
      return *u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? -1 : static_cast<int64_t>(*u);
    return std::get<int64_t>(v->v);
  }

  std::optional<bool> boolean(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return std::nullopt;
    if (v->type != ValueType::BOOL) fail(key, std::string("has type ") + gguf::value_type_name(v->type) + ", expected bool");
    return std::get<bool>(v->v);
  }

  const gguf::Array* array(std::string_view key) const {
    const gguf::Value* v = find(key);
    if (!v) return nullptr;
    if (v->type != ValueType::ARRAY) fail(key, std::string("has type ") + gguf::value_type_name(v->type) + ", expected an array");
    return &std::get<gguf::Array>(v->v);
  }

  std::vector<std::string> strings(std::string_view key, const gguf::Array& a) const {
    if (a.elem_type != ValueType::STRING) fail(key, "expected an array of strings");
    std::vector<std::string> out;
    out.reserve(a.items.size());
    for (const auto& item : a.items) out.push_back(std::get<std::string>(item.v));
    return out;
  }

  std::vector<double> numbers(std::string_view key, const gguf::Array& a) const {
    std::vector<double> out;
    out.reserve(a.items.size());
    for (const auto& item : a.items) {
      if (const auto* d = std::get_if<double>(&item.v)) out.push_back(*d);
      else if (const auto* u = std::get_if<uint64_t>(&item.v)) out.push_back(static_cast<double>(*u));
      else if (const auto* i = std::get_if<int64_t>(&item.v)) out.push_back(static_cast<double>(*i));
      else fail(key, "expected an array of numbers");
    }
    return out;
  }

 private:
  const gguf::File& f_;
};

}  // namespace

Vocab Vocab::from_gguf(const gguf::File& file) {
  const Reader r(file);
  Vocab v;
  const auto model = r.string("tokenizer.ggml.model");
  if (!model) r.fail("tokenizer.ggml.model", "missing (the file has no tokenizer)");
  v.model_name = *model;
  if (v.model_name == "llama") {
    v.kind = ModelKind::SPM;
  } else if (v.model_name == "gpt2") {
    v.kind = ModelKind::BPE;
  } else {
    throw TokenizerError(file.path() + ": unsupported tokenizer model '" + v.model_name +
                         "' (tokenizer.ggml.model); supported: llama (SentencePiece), gpt2 (byte-level BPE)");
  }
  const bool spm = v.kind == ModelKind::SPM;
  v.pre = r.string("tokenizer.ggml.pre").value_or("default");

  const gguf::Array* tokens = r.array("tokenizer.ggml.tokens");
  if (!tokens) r.fail("tokenizer.ggml.tokens", "missing");
  v.tokens = r.strings("tokenizer.ggml.tokens", *tokens);
  const size_t n = v.tokens.size();
  if (n == 0) r.fail("tokenizer.ggml.tokens", "is empty");
  if (n > static_cast<size_t>(std::numeric_limits<int32_t>::max() / 2)) r.fail("tokenizer.ggml.tokens", "too many tokens");

  if (const gguf::Array* a = r.array("tokenizer.ggml.scores")) {
    for (const double s : r.numbers("tokenizer.ggml.scores", *a)) v.scores.push_back(static_cast<float>(s));
    if (v.scores.size() != n)
      r.fail("tokenizer.ggml.scores", std::to_string(v.scores.size()) + " entries for " + std::to_string(n) + " tokens");
  }
  if (const gguf::Array* a = r.array("tokenizer.ggml.token_type")) {
    for (const double t : r.numbers("tokenizer.ggml.token_type", *a)) {
      if (t < 0 || t > 6 || t != static_cast<int>(t))
        r.fail("tokenizer.ggml.token_type", "invalid token type " + std::to_string(t) + " (expected 0..6)");
      v.types.push_back(static_cast<TokenType>(static_cast<int>(t)));
    }
    if (v.types.size() != n)
      r.fail("tokenizer.ggml.token_type", std::to_string(v.types.size()) + " entries for " + std::to_string(n) + " tokens");
  }
  if (!spm) {
    const gguf::Array* merges = r.array("tokenizer.ggml.merges");
    if (!merges) r.fail("tokenizer.ggml.merges", "missing (required for gpt2 vocabularies)");
    v.merges = r.strings("tokenizer.ggml.merges", *merges);
  }

  // Special ids: absent keys take the SentencePiece conventions (<unk>=0, <s>=1, </s>=2) for llama vocabularies
  // and "none" for gpt2 ones; an id outside the vocabulary means none.
  const auto id = [&](std::string_view key, int32_t fallback) -> int32_t {
    const auto value = r.integer(key);
    const int64_t x = value ? *value : fallback;
    return (x >= 0 && x < static_cast<int64_t>(n)) ? static_cast<int32_t>(x) : -1;
  };
  v.bos = id("tokenizer.ggml.bos_token_id", spm ? 1 : -1);
  v.eos = id("tokenizer.ggml.eos_token_id", spm ? 2 : -1);
  v.unk = id("tokenizer.ggml.unknown_token_id", spm ? 0 : -1);
  v.eot = id("tokenizer.ggml.eot_token_id", -1);
  v.pad = id("tokenizer.ggml.padding_token_id", -1);
  v.eom = id("tokenizer.ggml.eom_token_id", -1);
  // The older prefix/suffix/middle keys win over the fim_* ones when both are present, as in the reference.
  const auto fim = [&](std::string_view key, std::string_view old_key) {
    const int32_t old_id = id(old_key, -1);
    return old_id >= 0 ? old_id : id(key, -1);
  };
  v.fim_pre = fim("tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.prefix_token_id");
  v.fim_suf = fim("tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.suffix_token_id");
  v.fim_mid = fim("tokenizer.ggml.fim_mid_token_id", "tokenizer.ggml.middle_token_id");
  v.fim_pad = id("tokenizer.ggml.fim_pad_token_id", -1);
  v.fim_rep = id("tokenizer.ggml.fim_rep_token_id", -1);
  v.fim_sep = id("tokenizer.ggml.fim_sep_token_id", -1);

  v.add_bos = r.boolean("tokenizer.ggml.add_bos_token").value_or(spm || PreTokenizer::default_add_bos(v.pre));
  v.add_eos = r.boolean("tokenizer.ggml.add_eos_token").value_or(false);
  v.add_space_prefix = r.boolean("tokenizer.ggml.add_space_prefix").value_or(spm);
  v.chat_template = r.string("tokenizer.chat_template").value_or("");
  v.name = r.string("general.name").value_or("");
  v.architecture = r.string("general.architecture").value_or("");
  return v;
}

Tokenizer Tokenizer::from_gguf(const gguf::File& file) {
  Vocab v = Vocab::from_gguf(file);
  try {
    return Tokenizer::from_vocab(std::move(v));
  } catch (const TokenizerError& e) {
    throw TokenizerError(file.path() + ": " + e.what());
  }
}

}  // namespace tokenizer
