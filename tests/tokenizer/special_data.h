// Reading the special-token test data of this folder: special_vectors.txt (texts and the ids llama.cpp gives them)
// and rule_vocabs.txt (small vocabularies for the per-model rules, built here as in-memory GGUF files exactly as
// make_special_vectors.py writes them for llama.cpp).
#pragma once
#include <filesystem>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"
#include "vectors.h"

namespace tok_test {

inline std::string data_path(const std::string& file) {
  return (std::filesystem::path(LLM_SOURCE_DIR) / "tests" / "tokenizer" / file).string();
}

// Undoes make_special_vectors.py's escape(): \\ \n \t \r \v \f \xHH.
inline std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      out.push_back(s[i]);
      continue;
    }
    const char c = s[++i];
    switch (c) {
      case 'n': out.push_back('\n'); break;
      case 't': out.push_back('\t'); break;
      case 'r': out.push_back('\r'); break;
      case 'v': out.push_back('\v'); break;
      case 'f': out.push_back('\f'); break;
      case 'x':
        out.push_back(static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16)));
        i += 2;
        break;
      default: out.push_back(c); break;  // "\\"
    }
  }
  return out;
}

struct SpecialCase {
  bool parse_special;
  std::string text;
  std::vector<int32_t> ids;
  int line;  // in special_vectors.txt
};

// vocabulary name -> its cases, in file order.
inline const std::map<std::string, std::vector<SpecialCase>>& special_cases() {
  static const auto all = [] {
    std::map<std::string, std::vector<SpecialCase>> m;
    std::istringstream in(read_file(data_path("special_vectors.txt")));
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> f;
      size_t pos = 0;
      for (size_t tab; (tab = line.find('\t', pos)) != std::string::npos; pos = tab + 1)
        f.push_back(line.substr(pos, tab - pos));
      f.push_back(line.substr(pos));
      if (f.size() != 4) throw std::runtime_error("special_vectors.txt:" + std::to_string(n) + ": expected 4 fields");
      SpecialCase c{f[1] == "1", unescape(f[2]), {}, n};
      std::istringstream ids(f[3]);
      for (long long id; ids >> id;) c.ids.push_back(static_cast<int32_t>(id));
      m[f[0]].push_back(std::move(c));
    }
    return m;
  }();
  return all;
}

struct RuleVocabSpec {
  std::string name, arch = "gpt2";
  std::vector<std::pair<int32_t, std::string>> tokens;  // (type, text), ids from 256 on
  std::vector<std::pair<std::string, uint32_t>> keys;   // tokenizer.ggml.KEY = id
};

inline const std::map<std::string, RuleVocabSpec>& rule_vocab_specs() {
  static const auto all = [] {
    std::map<std::string, RuleVocabSpec> m;
    std::istringstream in(read_file(data_path("rule_vocabs.txt")));
    std::string line;
    RuleVocabSpec* cur = nullptr;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      const size_t sp = line.find(' ');
      const std::string word = line.substr(0, sp), rest = sp == std::string::npos ? "" : line.substr(sp + 1);
      const size_t sp2 = rest.find(' ');
      const std::string first = rest.substr(0, sp2), tail = sp2 == std::string::npos ? "" : rest.substr(sp2 + 1);
      if (word == "vocab") {
        cur = &m[rest];
      } else if (!cur) {
        throw std::runtime_error("rule_vocabs.txt: '" + line + "' before any vocab line");
      } else if (word == "name") {
        cur->name = rest;
      } else if (word == "arch") {
        cur->arch = rest;
      } else if (word == "token") {
        cur->tokens.emplace_back(std::stoi(first), unescape(tail));
      } else if (word == "key") {
        cur->keys.emplace_back(first, static_cast<uint32_t>(std::stoul(tail)));
      } else {
        throw std::runtime_error("rule_vocabs.txt: unknown line '" + line + "'");
      }
    }
    return m;
  }();
  return all;
}

// The rule vocabulary as a tokenizer, read from a GGUF image like the file llama.cpp was given (so general.name,
// general.architecture and the id keys go through Vocab::from_gguf). Cached; nullptr for an unknown name.
inline const tokenizer::Tokenizer* rule_vocab(const std::string& name) {
  static std::map<std::string, std::unique_ptr<tokenizer::Tokenizer>> cache;
  if (auto it = cache.find(name); it != cache.end()) return it->second.get();
  const auto spec = rule_vocab_specs().find(name);
  if (spec == rule_vocab_specs().end()) return nullptr;
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(tokenizer::utf8::byte_to_mapped(static_cast<uint8_t>(b)));
    types.push_back(1);
  }
  for (const auto& [type, text] : spec->second.tokens) {
    types.push_back(type);
    tokens.push_back(text);
  }
  gguf::Writer w;
  w.set_str("general.architecture", spec->second.arch);
  if (!spec->second.name.empty()) w.set_str("general.name", spec->second.name);
  w.set_str("tokenizer.ggml.model", "gpt2");
  w.set_str("tokenizer.ggml.pre", "gpt-2");
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::make_i32_array(types));
  w.set("tokenizer.ggml.merges", gguf::make_string_array({}));
  for (const auto& [key, id] : spec->second.keys) w.set_u32("tokenizer.ggml." + key, id);
  const std::vector<uint8_t> bytes = w.to_bytes();
  const auto file = gguf::File::parse(bytes.data(), bytes.size(), name + ".gguf");
  auto tok = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(file));
  return cache.emplace(name, std::move(tok)).first->second.get();
}

}  // namespace tok_test
