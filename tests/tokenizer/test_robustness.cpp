// Random bytes and random Unicode through every reference vocabulary: no crash, no hang, ids in range, and
// decode(encode(s)) == s for valid UTF-8. Documented exceptions: invalid UTF-8 is replaced by U+FFFD; bytes a
// byte-level vocabulary has no token for are dropped (falcon lacks 14 control bytes and 0xF2, starcoder 0xF1),
// as in the reference; SPM text after parsed special tokens gets its own dummy-prefix space.
#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "tokenizer/unicode.h"
#include "vocab_cache.h"

namespace {

void expect_in_range(const tokenizer::Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& what) {
  for (const int32_t id : ids) ASSERT_TRUE(id >= 0 && id < tok.n_vocab()) << what << ": id " << id;
}

// The input without the bytes the vocabulary cannot represent (see above).
std::string representable(const tokenizer::Tokenizer& tok, const std::string& s) {
  if (tok.kind() == tokenizer::ModelKind::SPM) return s;
  std::string out;
  for (unsigned char c : s)
    if (tok.find_token(tokenizer::utf8::byte_to_mapped(c))) out.push_back(static_cast<char>(c));
  return out;
}

std::string random_bytes(std::mt19937& rng, size_t len) {
  std::string s;
  for (size_t i = 0; i < len; ++i) {
    const uint32_t r = rng() % 10;
    // Mix ASCII (letters, spaces, newlines) with arbitrary high bytes so that some sequences are valid UTF-8.
    s.push_back(static_cast<char>(r < 4 ? 'a' + rng() % 26 : r < 5 ? " \n\t0"[rng() % 4] : rng() % 256));
  }
  return s;
}

std::string random_unicode(std::mt19937& rng, size_t n_chars) {
  static const std::vector<std::pair<char32_t, char32_t>> kRanges = {
      {0x20, 0x7E},     {0x09, 0x0D},     {0x00, 0x1F},     {0x80, 0xFF},     {0x100, 0x24F},  {0x370, 0x3FF},
      {0x400, 0x4FF},   {0x300, 0x36F},   {0x1780, 0x17FF}, {0x2000, 0x206F}, {0x3000, 0x303F}, {0x4E00, 0x9FFF},
      {0xAC00, 0xD7A3}, {0xE000, 0xE0FF}, {0xFF00, 0xFFEF}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
  std::string s;
  for (size_t i = 0; i < n_chars; ++i) {
    const auto& [lo, hi] = kRanges[rng() % kRanges.size()];
    char32_t cp = lo + rng() % (hi - lo + 1);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xFFFD;
    tokenizer::utf8::append_codepoint(s, cp);
  }
  return s;
}

TEST(Robustness, RandomBytes) {
  for (const auto& name : tok_test::vocab_names()) {
    REQUIRE_VOCAB(tok, name);
    std::mt19937 rng(1234);
    for (int k = 0; k < 150; ++k) {
      const std::string s = random_bytes(rng, rng() % 200);
      for (bool parse_special : {false, true}) {
        const auto ids = tok->encode(s, true, parse_special);
        expect_in_range(*tok, ids, name);
        const std::string text = tok->decode(ids);
        if (tokenizer::utf8::is_valid(s) && !parse_special) {
          EXPECT_EQ(text, representable(*tok, s)) << name;
        }
        tokenizer::StreamDecoder sd(*tok);
        for (const int32_t id : ids) EXPECT_TRUE(tokenizer::utf8::is_valid(sd.push(id)));
      }
    }
  }
}

TEST(Robustness, RandomUnicodeRoundTrips) {
  for (const auto& name : tok_test::vocab_names()) {
    REQUIRE_VOCAB(tok, name);
    std::mt19937 rng(99);
    for (int k = 0; k < 150; ++k) {
      const std::string s = random_unicode(rng, rng() % 60);
      const auto ids = tok->encode(s, true, false);
      expect_in_range(*tok, ids, name);
      EXPECT_EQ(tok->decode(ids), representable(*tok, s)) << name << " case " << k;
    }
  }
}

// Byte-level BPE keeps every byte, so special-token texts mixed into random text come back exactly when
// rendered. (SPM vocabularies add a dummy-prefix space to each fragment after a special token.)
TEST(Robustness, ParseSpecialRoundTripsForBpe) {
  for (const char* name : {"llama-bpe", "qwen2", "gpt-2", "starcoder"}) {
    REQUIRE_VOCAB(tok, name);
    std::vector<std::string> specials;
    for (int32_t id = 0; id < tok->n_vocab(); ++id)
      if (tok->is_control(id)) specials.push_back(tok->token_text(id));
    std::mt19937 rng(7);
    tokenizer::DecodeOptions render;
    render.render_special = true;
    for (int k = 0; k < 100; ++k) {
      std::string s;
      for (int part = 0; part < 6; ++part)
        s += rng() % 2 ? specials[rng() % specials.size()] : random_unicode(rng, rng() % 8);
      const auto ids = tok->encode(s, false, true);
      expect_in_range(*tok, ids, name);
      EXPECT_EQ(tok->decode(ids, render), representable(*tok, s)) << name;
    }
  }
}

TEST(Robustness, ConcurrentEncodeIsConsistent) {
  for (const char* name : {"llama-spm", "llama-bpe"}) {
    REQUIRE_VOCAB(tok, name);
    std::mt19937 rng(5);
    std::vector<std::string> texts;
    for (int k = 0; k < 40; ++k) texts.push_back(random_unicode(rng, 200));
    std::vector<std::vector<int32_t>> expected;
    for (const auto& t : texts) expected.push_back(tok->encode(t, true, false));
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (size_t k = 0; k < texts.size(); ++k) mismatches[t] += tok->encode(texts[k], true, false) != expected[k];
      });
    }
    for (auto& th : threads) th.join();
    for (int t = 0; t < 4; ++t) EXPECT_EQ(mismatches[t], 0) << name;
  }
}

}  // namespace
