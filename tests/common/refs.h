// Readers for the reference files in ../shared/models: refs/*.public.txt (llama.cpp logits) and
// stories260K-reference.txt (llama2.c greedy continuations). Formats: ../shared/models/README.md.
#pragma once
#include <cstdint>
#include <cstring>
#include <iterator>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace refs {

struct TopEntry {
  int32_t id;
  float logit;
};

struct LogitsRef {
  std::string model;
  int32_t n_vocab = 0;
  bool add_bos = false;
  std::string prompt;
  std::vector<int32_t> tokens;
  std::vector<std::vector<TopEntry>> top10;  // [n_tokens][10]
  std::vector<int32_t> greedy;
  std::vector<double> greedy_margin;
  std::string lastlogits_file;
};

inline std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) out.push_back(cur);
  return out;
}

inline std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  for (const std::string& p : split(s, ',')) ids.push_back(static_cast<int32_t>(std::stol(p)));
  return ids;
}

// A JSON string literal of the kind the refs use (escapes \" \\ \n \t \uXXXX for BMP code points).
inline std::string parse_json_string(const std::string& s) {
  if (s.size() < 2 || s.front() != '"' || s.back() != '"') throw std::runtime_error("not a JSON string: " + s);
  std::string out;
  for (size_t i = 1; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = s[++i];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case 'u': {
        unsigned cp = static_cast<unsigned>(std::stoul(s.substr(i + 1, 4), nullptr, 16));
        i += 4;
        if (cp < 0x80) {
          out += char(cp);
        } else if (cp < 0x800) {
          out += char(0xC0 | (cp >> 6));
          out += char(0x80 | (cp & 0x3F));
        } else {
          out += char(0xE0 | (cp >> 12));
          out += char(0x80 | ((cp >> 6) & 0x3F));
          out += char(0x80 | (cp & 0x3F));
        }
        break;
      }
      default: out += e;
    }
  }
  return out;
}

inline LogitsRef read_logits_ref(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open " + path);
  LogitsRef r;
  std::string line;
  while (std::getline(in, line)) {
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp);
    const std::string val = sp == std::string::npos ? "" : line.substr(sp + 1);
    if (key == "model") r.model = val;
    else if (key == "n_vocab") r.n_vocab = std::stoi(val);
    else if (key == "add_bos") r.add_bos = val == "1";
    else if (key == "prompt") r.prompt = parse_json_string(val);
    else if (key == "tokens") r.tokens = parse_ids(val);
    else if (key == "top10") {
      std::istringstream s(val);
      size_t p;
      s >> p;
      if (p != r.top10.size()) throw std::runtime_error(path + ": top10 lines out of order");
      std::vector<TopEntry> row;
      std::string item;
      while (s >> item) {
        const size_t colon = item.find(':');
        row.push_back({static_cast<int32_t>(std::stol(item.substr(0, colon))), std::stof(item.substr(colon + 1))});
      }
      r.top10.push_back(row);
    } else if (key == "greedy") r.greedy = parse_ids(val);
    else if (key == "greedy_margin") {
      for (const std::string& m : split(val, ',')) r.greedy_margin.push_back(std::stod(m));
    } else if (key == "lastlogits") r.lastlogits_file = val;
  }
  return r;
}

inline std::vector<float> read_f32(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / sizeof(float));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
  return v;
}

struct StoriesCase {
  std::string prompt;               // decoded from the Python literal (plain ASCII in the file)
  std::vector<int32_t> prompt_ids;  // BOS first
  std::vector<int32_t> generated;
  std::string text;                 // exactly text_bytes bytes, LF included
};

// The Python literals in the file are plain single-quoted ASCII without escapes.
inline std::vector<StoriesCase> read_stories_ref(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot open " + path);
  std::vector<StoriesCase> cases;
  std::string line;
  size_t text_bytes = 0;
  while (std::getline(in, line)) {
    if (line.rfind("=== prompt: ", 0) == 0) {
      StoriesCase c;
      const std::string lit = line.substr(12);
      c.prompt = lit.substr(1, lit.size() - 2);
      cases.push_back(c);
    } else if (line.rfind("prompt_ids: ", 0) == 0) {
      cases.back().prompt_ids = parse_ids(line.substr(12));
    } else if (line.rfind("generated_ids: ", 0) == 0) {
      cases.back().generated = parse_ids(line.substr(15));
    } else if (line.rfind("text_bytes: ", 0) == 0) {
      text_bytes = std::stoul(line.substr(12));
    } else if (line == "text:") {
      std::string t(text_bytes, '\0');
      in.read(t.data(), static_cast<std::streamsize>(text_bytes));
      cases.back().text = t;
    }
  }
  return cases;
}

}  // namespace refs
