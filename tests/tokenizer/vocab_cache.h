// Shared test helpers: the reference vocabularies loaded once per test process (loading a 128k-token vocabulary
// takes ~0.5 s), and small in-memory vocabularies for unit tests.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "assets.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace tok_test {

inline const std::vector<std::string>& vocab_names() {
  static const std::vector<std::string> names = {"llama-spm", "phi-3",        "llama-bpe", "qwen2",
                                                 "gpt-2",     "deepseek-llm", "falcon",    "starcoder"};
  return names;
}

// nullptr when the shared assets are missing (callers GTEST_SKIP).
inline const tokenizer::Tokenizer* shared_vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<tokenizer::Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  auto path = testing_assets::path("tokenizer/ggml-vocab-" + name + ".gguf");
  if (!path) return nullptr;
  const auto file = gguf::File::open(*path);
  auto tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
  return cache.emplace(name, std::move(tok)).first->second.get();
}

#define REQUIRE_VOCAB(VAR, NAME)                                                          \
  const tokenizer::Tokenizer* VAR = ::tok_test::shared_vocab(NAME);                      \
  if (!VAR) GTEST_SKIP() << "tokenizer vocabulary " << (NAME) << " not found (set LLM_TEST_ASSETS)"

// GPT-2 byte-level text of raw bytes ("Hello world" -> "HelloĠworld").
inline std::string mapped(const std::string& raw) {
  std::string out;
  for (unsigned char c : raw) out += tokenizer::utf8::byte_to_mapped(c);
  return out;
}

// A byte-level BPE vocabulary: the 256 byte tokens, then one token per merge, then the extra tokens.
struct MiniBpe {
  std::vector<std::pair<std::string, std::string>> merges;  // raw (unmapped) parts
  std::vector<std::pair<std::string, tokenizer::TokenType>> extra;
  std::string pre = "gpt-2";

  tokenizer::Vocab vocab() const {
    tokenizer::Vocab v;
    v.kind = tokenizer::ModelKind::BPE;
    v.model_name = "gpt2";
    v.pre = pre;
    v.add_space_prefix = false;
    for (int b = 0; b < 256; ++b) {
      v.tokens.push_back(tokenizer::utf8::byte_to_mapped(static_cast<uint8_t>(b)));
      v.types.push_back(tokenizer::TokenType::NORMAL);
    }
    for (const auto& [l, r] : merges) {
      v.merges.push_back(mapped(l) + " " + mapped(r));
      v.tokens.push_back(mapped(l + r));
      v.types.push_back(tokenizer::TokenType::NORMAL);
    }
    for (const auto& [text, type] : extra) {
      v.tokens.push_back(text);
      v.types.push_back(type);
    }
    return v;
  }
};

}  // namespace tok_test
