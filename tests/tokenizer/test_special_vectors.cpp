// Texts with special-token lookalikes beside spaces and newlines must tokenize as llama.cpp tokenizes them, with
// and without parse_special, in every shared vocabulary. The expected ids in special_vectors.txt were produced by
// llama.cpp's llama-tokenize (commands in make_special_vectors.py); they cover control tokens only with
// parse_special, user-defined tokens always, "</s>" as a control token wherever it exists, phi-3's stripping of the
// whitespace after its special tokens, and SentencePiece's dummy-prefix space on every fragment after a token.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "vectors.h"
#include "vocab_cache.h"

namespace {

struct Case {
  bool parse_special;
  std::string text;
  std::vector<int32_t> ids;
  int line;
};

// Undoes make_special_vectors.py's escape(): \\ \n \t \r \v \f \xHH.
std::string unescape(const std::string& s) {
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

// vocabulary name -> its cases, in file order.
const std::map<std::string, std::vector<Case>>& cases() {
  static const std::map<std::string, std::vector<Case>> all = [] {
    std::map<std::string, std::vector<Case>> m;
    const auto path = std::filesystem::path(LLM_SOURCE_DIR) / "tests" / "tokenizer" / "special_vectors.txt";
    std::istringstream in(tok_test::read_file(path.string()));
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string> f;
      size_t pos = 0;
      for (size_t tab; (tab = line.find('\t', pos)) != std::string::npos; pos = tab + 1) f.push_back(line.substr(pos, tab - pos));
      f.push_back(line.substr(pos));
      if (f.size() != 4) throw std::runtime_error("special_vectors.txt:" + std::to_string(n) + ": expected 4 fields");
      Case c{f[1] == "1", unescape(f[2]), {}, n};
      std::istringstream ids(f[3]);
      for (long long id; ids >> id;) c.ids.push_back(static_cast<int32_t>(id));
      m[f[0]].push_back(std::move(c));
    }
    return m;
  }();
  return all;
}

class SpecialVectors : public ::testing::TestWithParam<std::string> {};

TEST_P(SpecialVectors, EncodeMatchesReference) {
  const std::string name = GetParam();
  REQUIRE_VOCAB(tok, name);
  const auto it = cases().find(name);
  ASSERT_NE(it, cases().end()) << "no vectors for " << name;
  // Both modes and a fair number of texts, so a truncated file cannot pass quietly.
  int per_mode[2] = {0, 0};
  for (const Case& c : it->second) ++per_mode[c.parse_special];
  EXPECT_GE(per_mode[0], 30);
  EXPECT_EQ(per_mode[0], per_mode[1]);
  int failures = 0;
  for (const Case& c : it->second) {
    const auto ids = tok->encode(c.text, /*add_special=*/false, c.parse_special);
    EXPECT_EQ(ids, c.ids) << name << " line " << c.line << " parse_special=" << c.parse_special << ": '"
                          << tok_test::printable(c.text) << "'";
    failures += ids != c.ids;
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Tokenizer, SpecialVectors, ::testing::ValuesIn(tok_test::vocab_names()),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n)
                             if (c == '-') c = '_';
                           return n;
                         });

}  // namespace
