// UTF-8 validation and the GPT-2 byte map (see unicode.h).
#include "tokenizer/unicode.h"

#include <array>

namespace tokenizer::utf8 {

namespace {

bool is_cont(uint8_t c) { return (c & 0xC0) == 0x80; }

// The allowed range of the second byte depends on the lead byte (this is what rules out overlongs, surrogates and
// codepoints above U+10FFFF); the remaining continuation bytes are plain 0x80..0xBF.
struct LeadInfo {
  uint8_t len;
  uint8_t lo, hi;  // range of the second byte
};

LeadInfo lead_info(uint8_t c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

SeqStatus check_sequence(std::string_view s, size_t i, size_t* len) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  const LeadInfo info = lead_info(c);
  if (info.len == 0) return SeqStatus::INVALID;
  if (info.len == 1) {
    *len = 1;
    return SeqStatus::VALID;
  }
  for (size_t k = 1; k < info.len; ++k) {
    if (i + k >= s.size()) return SeqStatus::INCOMPLETE;
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    const bool ok = k == 1 ? (b >= info.lo && b <= info.hi) : is_cont(b);
    if (!ok) return SeqStatus::INVALID;
  }
  *len = info.len;
  return SeqStatus::VALID;
}

bool is_valid(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<uint8_t>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    if (check_sequence(s, i, &len) != SeqStatus::VALID) return false;
    i += len;
  }
  return true;
}

std::string sanitize(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    if (check_sequence(s, i, &len) == SeqStatus::VALID) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

void append_codepoint(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t decode_at(std::string_view s, size_t i, size_t* len) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  if (c < 0x80) {
    *len = 1;
    return c;
  }
  const size_t n = lead_info(c).len;
  char32_t cp = c & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[i + k]) & 0x3F);
  *len = n;
  return cp;
}

int parse_byte_piece(std::string_view s) {
  if (s.size() != 6 || s.substr(0, 3) != "<0x" || s[5] != '>') return -1;
  int v = 0;
  for (const char c : s.substr(3, 2)) {
    if (c >= '0' && c <= '9') v = v * 16 + (c - '0');
    else if (c >= 'A' && c <= 'F') v = v * 16 + (c - 'A' + 10);
    else return -1;
  }
  return v;
}

namespace {

struct ByteMap {
  std::array<char32_t, 256> to_cp{};
  std::array<std::string, 256> to_utf8;
  ByteMap() {
    char32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      to_cp[b] = printable ? static_cast<char32_t>(b) : next++;
      append_codepoint(to_utf8[b], to_cp[b]);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap m;
  return m;
}

}  // namespace

char32_t byte_to_codepoint(uint8_t b) { return byte_map().to_cp[b]; }

int codepoint_to_byte(char32_t cp) {
  if (cp < 256) {
    const bool printable = (cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF);
    return printable ? static_cast<int>(cp) : -1;
  }
  if (cp < 256 + 68) {
    // The non-printable bytes, in increasing order, took U+0100.. consecutively.
    static const std::array<uint8_t, 68> kOrder = [] {
      std::array<uint8_t, 68> order{};
      int k = 0;
      for (int b = 0; b < 256; ++b)
        if (byte_map().to_cp[b] >= 256) order[k++] = static_cast<uint8_t>(b);
      return order;
    }();
    return kOrder[cp - 256];
  }
  return -1;
}

const std::string& byte_to_mapped(uint8_t b) { return byte_map().to_utf8[b]; }

}  // namespace tokenizer::utf8
