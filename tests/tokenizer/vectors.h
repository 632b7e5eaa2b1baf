// Loading the shared tokenizer reference vectors (.inp strings and .out id lines, format in ../shared/tokenizer).
#pragma once
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace tok_test {

inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Strings separated (and terminated) by "\n__ggml_vocab_test__\n".
inline std::vector<std::string> read_inputs(const std::string& path) {
  const std::string data = read_file(path);
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t at = data.find(sep, pos);
    if (at == std::string::npos) break;
    out.push_back(data.substr(pos, at - pos));
    pos = at + sep.size();
  }
  return out;
}

inline std::vector<std::vector<int32_t>> read_outputs(const std::string& path) {
  std::istringstream in(read_file(path));
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    long long id;
    while (ls >> id) ids.push_back(static_cast<int32_t>(id));
    out.push_back(std::move(ids));
  }
  return out;
}

inline std::string printable(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += static_cast<char>(c);
  }
  return out;
}

}  // namespace tok_test
