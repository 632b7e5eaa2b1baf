// UTF-8 classification and sanitizing, and the GPT-2 byte <-> unicode mapping.
#include <gtest/gtest.h>

#include <set>

#include "tokenizer/unicode.h"

namespace {

using namespace tokenizer::utf8;

TEST(Utf8, Classifies) {
  size_t len = 0;
  EXPECT_EQ(check_sequence("a", 0, &len), SeqStatus::VALID);
  EXPECT_EQ(len, 1u);
  EXPECT_EQ(check_sequence("\xE2\x9C\x85", 0, &len), SeqStatus::VALID);
  EXPECT_EQ(len, 3u);
  EXPECT_EQ(check_sequence("\xF0\x9F\x98\x81", 0, &len), SeqStatus::VALID);
  EXPECT_EQ(len, 4u);
  EXPECT_EQ(check_sequence("\xE2\x9C", 0, &len), SeqStatus::INCOMPLETE);
  EXPECT_EQ(check_sequence("\xF0", 0, &len), SeqStatus::INCOMPLETE);
  EXPECT_EQ(check_sequence("\x80", 0, &len), SeqStatus::INVALID);         // lone continuation
  EXPECT_EQ(check_sequence("\xC0\x80", 0, &len), SeqStatus::INVALID);     // overlong
  EXPECT_EQ(check_sequence("\xED\xA0\x80", 0, &len), SeqStatus::INVALID); // surrogate
  EXPECT_EQ(check_sequence("\xF4\x90\x80\x80", 0, &len), SeqStatus::INVALID);  // above U+10FFFF
  EXPECT_EQ(check_sequence("\xE2\x41", 0, &len), SeqStatus::INVALID);
  EXPECT_EQ(check_sequence("\xFF", 0, &len), SeqStatus::INVALID);
}

TEST(Utf8, SanitizeReplacesEachBadByte) {
  EXPECT_EQ(sanitize("ok \xE2\x9C\x85"), "ok \xE2\x9C\x85");
  EXPECT_EQ(sanitize("a\xFF" "b"), "a\xEF\xBF\xBD" "b");
  EXPECT_EQ(sanitize("\xE2\x82" "A"), "\xEF\xBF\xBD\xEF\xBF\xBD" "A");
  EXPECT_TRUE(is_valid(sanitize("\xC0\x80\xED\xA0\x80\xF8")));
  EXPECT_FALSE(is_valid("\xC3"));
  EXPECT_TRUE(is_valid(""));
}

TEST(Utf8, EncodeDecodeRoundTrip) {
  for (char32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x1F600u, 0x10FFFFu}) {
    std::string s;
    append_codepoint(s, cp);
    size_t len = 0;
    ASSERT_EQ(check_sequence(s, 0, &len), SeqStatus::VALID) << std::hex << static_cast<uint32_t>(cp);
    EXPECT_EQ(len, s.size());
    EXPECT_EQ(static_cast<uint32_t>(decode_at(s, 0, &len)), static_cast<uint32_t>(cp));
  }
}

TEST(ByteMap, IsABijectionOntoPrintableCodepoints) {
  std::set<char32_t> seen;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = byte_to_codepoint(static_cast<uint8_t>(b));
    EXPECT_TRUE(seen.insert(cp).second);
    EXPECT_EQ(codepoint_to_byte(cp), b) << b;
    EXPECT_NE(cp, 0x20u);  // spaces become visible characters
  }
  EXPECT_EQ(byte_to_mapped(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_to_mapped('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_to_mapped('A'), "A");
  EXPECT_EQ(byte_to_mapped(0xAD), "\xC5\x83");  // soft hyphen is the last remapped byte: U+0143
  EXPECT_EQ(codepoint_to_byte(0x20), -1);
  EXPECT_EQ(codepoint_to_byte(0x144), -1);
}

}  // namespace
