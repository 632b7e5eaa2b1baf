// Code point sets and their characters as grammar rules (see code_point_sets.h). Non-ASCII ranges are split into
// UTF-8 byte ranges; the pieces share their leading ranges as a trie.
#include "runtime/code_point_sets.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "chat/jinja_text.h"

namespace runtime {

CodePointRanges normalized(CodePointRanges r) {
  std::sort(r.begin(), r.end());
  CodePointRanges out;
  for (const auto& [lo, hi] : r) {
    if (!out.empty() && lo <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, hi);
    } else {
      out.emplace_back(lo, hi);
    }
  }
  return out;
}

CodePointRanges complement(const CodePointRanges& r) {
  CodePointRanges out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : normalized(r)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return out;
}

namespace {

using Rule = ByteGrammar::Rule;

CodePointRanges without_surrogates(const CodePointRanges& r) {
  CodePointRanges out;
  for (const auto& [lo, hi] : r) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) out.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
  }
  return out;
}

size_t utf8_length(uint32_t c) { return c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4; }

// Code points lo..hi (not surrogates, lo >= 0x80) as sequences of byte ranges: split until every byte position of
// the encodings of a piece's ends spans a plain range.
void utf8_pieces(uint32_t lo, uint32_t hi, std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& out) {
  if (lo > hi) return;
  for (const uint32_t edge : {0x7FFu, 0xFFFFu}) {
    if (lo <= edge && edge < hi) {
      utf8_pieces(lo, edge, out);
      utf8_pieces(edge + 1, hi, out);
      return;
    }
  }
  const size_t n = utf8_length(lo);
  for (size_t i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_pieces(lo, lo | m, out);
        utf8_pieces((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_pieces(lo, (hi & ~m) - 1, out);
        utf8_pieces(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;  // the ends' encodings (not surrogates: each n bytes)
  chat::jinja::text::append_utf8(a, lo);
  chat::jinja::text::append_utf8(b, hi);
  std::vector<std::pair<uint8_t, uint8_t>> piece;
  for (size_t i = 0; i < n; ++i) piece.emplace_back(static_cast<uint8_t>(a[i]), static_cast<uint8_t>(b[i]));
  out.push_back(std::move(piece));
}

// Alternatives of `r` for `pieces` (sequences of byte ranges) from position `at` on, those with the same range at
// `at` sharing one alternative and a rule for the rest (the splitting gives ranges that are equal or apart).
void add_byte_trie(ByteGrammar& g, Rule r, const std::vector<std::vector<std::pair<uint8_t, uint8_t>>>& pieces,
                   size_t at) {
  std::vector<std::pair<uint8_t, uint8_t>> firsts;
  for (const auto& piece : pieces)
    if (piece.size() > at && std::find(firsts.begin(), firsts.end(), piece[at]) == firsts.end())
      firsts.push_back(piece[at]);
  for (const auto& range : firsts) {
    ByteGrammar::ByteSet set;
    for (uint32_t v = range.first; v <= range.second; ++v) set.set(v);
    std::vector<std::vector<std::pair<uint8_t, uint8_t>>> rest;
    bool ends = false;
    for (const auto& piece : pieces) {
      if (piece.size() <= at || piece[at] != range) continue;
      if (piece.size() == at + 1) ends = true;
      else rest.push_back(piece);
    }
    if (rest.empty()) {
      g.add_alternative(r, {g.bytes(set)});
      continue;
    }
    const Rule next = g.add_rule();
    if (ends) g.add_alternative(next, {});
    add_byte_trie(g, next, rest, at + 1);
    g.add_alternative(r, {g.bytes(set), ByteGrammar::rule(next)});
  }
}

}  // namespace

ByteGrammar::Rule code_point_rule(ByteGrammar& g, CodePointRanges set, CharWriting writing) {
  set = without_surrogates(normalized(set));
  const auto has = [&](uint32_t c) {
    return std::any_of(set.begin(), set.end(), [c](const auto& rg) { return rg.first <= c && c <= rg.second; });
  };
  // Alternatives by first byte, so that a state inside a class has few stacks: the characters written as one
  // byte, a backslash and the escapes, and the UTF-8 sequences as a trie of byte ranges.
  const Rule r = g.add_rule();
  ByteGrammar::ByteSet raw, simple;       // one-byte characters; escape letters after a backslash
  ByteGrammar::ByteSet low[2];            // \u00XX for XX = 0Y and 1Y: the Y digits (either case)
  for (uint32_t c = 0; c < 0x80; ++c) {
    if (!has(c)) continue;
    if (writing == CharWriting::Raw || (c >= 0x20 && c != '"' && c != '\\')) {
      raw.set(c);
      continue;
    }
    const char letter = c == '"' ? '"' : c == '\\' ? '\\' : c == '\b' ? 'b' : c == '\f' ? 'f' : c == '\n' ? 'n'
                        : c == '\r' ? 'r' : c == '\t' ? 't' : 0;
    if (letter) {
      simple.set(static_cast<unsigned char>(letter));
    } else {
      const uint32_t y = c & 15;
      low[c >> 4].set(y < 10 ? '0' + y : 'a' + y - 10);
      low[c >> 4].set(y < 10 ? '0' + y : 'A' + y - 10);
    }
  }
  if (raw.any()) g.add_alternative(r, {g.bytes(raw)});
  if (simple.any() || low[0].any() || low[1].any()) {
    const Rule esc = g.add_rule();
    if (simple.any()) g.add_alternative(esc, {g.bytes(simple)});
    for (int x = 0; x < 2; ++x)
      if (low[x].any()) g.add_alternative(esc, {g.byte('u'), g.byte('0'), g.byte('0'), g.byte('0' + x),
                                                 g.bytes(low[x])});
    g.add_alternative(r, {g.byte('\\'), ByteGrammar::rule(esc)});
  }
  std::vector<std::vector<std::pair<uint8_t, uint8_t>>> pieces;
  for (const auto& [lo, hi] : set)
    if (hi >= 0x80) utf8_pieces(std::max<uint32_t>(lo, 0x80), hi, pieces);
  add_byte_trie(g, r, pieces, 0);
  if (!raw.any() && !simple.any() && !low[0].any() && !low[1].any() && pieces.empty())
    throw std::invalid_argument("no character is in the set");
  return r;
}

}  // namespace runtime
