// Special tokens: control tokens only with parse_special, user-defined ones always (and phi-3's user-defined </s>
// only as a control token), priority of overlapping matches, BOS/EOS flags and overrides, end-of-generation ids,
// lookup by text.
#include <gtest/gtest.h>

#include <algorithm>

#include "vocab_cache.h"

namespace {

using tokenizer::TokenType;
using Ids = std::vector<int32_t>;

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

TEST(Special, ControlTokensOnlyWithParseSpecial) {
  REQUIRE_VOCAB(tok, "llama-bpe");
  const std::string text = "<|begin_of_text|>Hi there<|eot_id|>";
  for (const int32_t id : tok->encode(text, false, false)) EXPECT_FALSE(tok->is_control(id)) << id;
  const auto eot = tok->find_token("<|eot_id|>");
  ASSERT_TRUE(eot.has_value());
  EXPECT_EQ(tok->encode(text, false, true), cat({{128000}, tok->encode("Hi there", false, false), {*eot}}));
  tokenizer::DecodeOptions render;
  render.render_special = true;
  EXPECT_EQ(tok->decode(tok->encode(text, false, true), render), text);
  EXPECT_EQ(tok->decode(tok->encode(text, false, true)), "Hi there");
}

TEST(Special, Qwen2ChatMarkers) {
  REQUIRE_VOCAB(tok, "qwen2");
  EXPECT_EQ(tok->find_token("<|im_start|>"), std::optional<int32_t>(151644));
  EXPECT_EQ(tok->find_token("<|no such token|>"), std::nullopt);
  const std::string text = "<|im_start|>user\nhello<|im_end|>\n";
  EXPECT_EQ(tok->encode(text, false, true),
            cat({{151644}, tok->encode("user\nhello", false, false), {151645}, tok->encode("\n", false, false)}));
  EXPECT_TRUE(tok->is_eog(151645));
  EXPECT_TRUE(tok->is_eog(151643));
  EXPECT_FALSE(tok->is_eog(151644));
  EXPECT_FALSE(tok->is_eog(-1));
  EXPECT_EQ(tok->eot(), 151645);  // no eot key: the first known end-of-turn text
}

// User-defined tokens (type 4) are matched even with parse_special = false; in SPM vocabularies every raw
// fragment then gets its own dummy-prefix space, as in the reference.
TEST(Special, UserDefinedAlwaysMatched) {
  REQUIRE_VOCAB(ds, "deepseek-llm");
  const auto oslash = ds->find_token("\xC3\xB8");  // ø is a user-defined token there
  ASSERT_TRUE(oslash.has_value());
  EXPECT_EQ(ds->token_type(*oslash), TokenType::USER_DEFINED);
  for (const bool parse_special : {false, true}) {
    EXPECT_EQ(ds->encode("\xC3\xB8", false, parse_special), Ids{*oslash});
    EXPECT_EQ(ds->encode("a\xC3\xB8" "b", false, parse_special),
              cat({ds->encode("a", false, false), {*oslash}, ds->encode("b", false, false)}));
  }
  REQUIRE_VOCAB(qwen, "qwen2");
  EXPECT_EQ(qwen->token_type(151646), TokenType::USER_DEFINED);  // [PAD151646]
  EXPECT_EQ(qwen->encode("x[PAD151646]", false, false), cat({qwen->encode("x", false, false), {151646}}));
}

// phi-3 stores "</s>" as user-defined, but the reference treats every "</s>" as an end-of-generation control
// token: typed by a user (parse_special off) it stays text.
TEST(Special, UserDefinedEndOfSequenceIsControl) {
  REQUIRE_VOCAB(phi3, "phi-3");
  ASSERT_EQ(phi3->token_type(2), TokenType::USER_DEFINED);  // as stored in the file
  EXPECT_TRUE(phi3->is_control(2));
  EXPECT_TRUE(phi3->is_eog(2));
  const auto plain = phi3->encode("a</s>b", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(phi3->decode(plain), "a</s>b");
  EXPECT_EQ(phi3->encode("a</s>b", false, true),
            cat({phi3->encode("a", false, false), {2}, phi3->encode("b", false, false)}));
  EXPECT_EQ(phi3->decode({2}), "");  // hidden like any control token
  tokenizer::DecodeOptions render;
  render.render_special = true;
  EXPECT_EQ(phi3->decode({2}, render), "</s>");
}

TEST(Special, SpmControlTextStaysText) {
  REQUIRE_VOCAB(tok, "llama-spm");
  for (const int32_t id : tok->encode("<s>Hello</s>", false, false)) {
    EXPECT_NE(id, 1);
    EXPECT_NE(id, 2);
  }
  EXPECT_EQ(tok->encode("<s>Hello</s>", false, true), (Ids{1, 15043, 2}));
  EXPECT_EQ(tok->encode("<unk>", false, true), (Ids{0}));
}

// Longer tokens are matched first; among equal lengths the lower id; an occurrence overlapping one already taken
// stays text.
TEST(Special, OverlapPriority) {
  tok_test::MiniBpe mini;
  mini.extra = {{"ab", TokenType::USER_DEFINED}, {"abc", TokenType::USER_DEFINED}, {"bcd", TokenType::USER_DEFINED},
                {"<x>", TokenType::CONTROL}};
  const auto tok = tokenizer::Tokenizer::from_vocab(mini.vocab());
  const int32_t ab = 256, abc = 257;
  EXPECT_EQ(tok.encode("xabcd", false, false), (Ids{'x', abc, 'd'}));
  EXPECT_EQ(tok.encode("abab", false, false), (Ids{ab, ab}));
  EXPECT_EQ(tok.encode("<x>ab", false, false), (Ids{'<', 'x', '>', ab}));
  EXPECT_EQ(tok.encode("<x>ab", false, true), (Ids{259, ab}));
}

TEST(Special, BosEosFlagsAndOverrides) {
  REQUIRE_VOCAB(spm, "llama-spm");
  EXPECT_TRUE(spm->add_bos());
  EXPECT_FALSE(spm->add_eos());
  EXPECT_EQ(spm->encode("Hi", true, false).front(), 1);
  tokenizer::EncodeOptions both;
  both.add_bos = both.add_eos = true;
  const auto ids = spm->encode("Hi", both);
  EXPECT_EQ(ids.front(), 1);
  EXPECT_EQ(ids.back(), 2);
  struct Case {
    const char* name;
    bool add_bos;
    int32_t bos;
  };
  // No add_bos_token key in llama-bpe: the llama-bpe pre-tokenizer family adds BOS; qwen2/gpt-2/falcon do not.
  for (const Case& c : {Case{"llama-bpe", true, 128000}, Case{"deepseek-llm", true, 100000}, Case{"qwen2", false, -2},
                        Case{"gpt-2", false, -2}, Case{"falcon", false, -2}, Case{"starcoder", false, -2}}) {
    REQUIRE_VOCAB(tok, c.name);
    EXPECT_EQ(tok->add_bos(), c.add_bos) << c.name;
    const auto with = tok->encode("Hi", true, false), without = tok->encode("Hi", false, false);
    if (c.add_bos) {
      EXPECT_EQ(with, cat({{c.bos}, without})) << c.name;
    } else {
      EXPECT_EQ(with, without) << c.name;
    }
  }
  REQUIRE_VOCAB(gpt2, "gpt-2");
  EXPECT_EQ(gpt2->encode("Hi", both), cat({{50256}, gpt2->encode("Hi", false, false), {50256}}));
}

TEST(Special, AddingAMissingBosIsAnError) {
  const auto tok = tokenizer::Tokenizer::from_vocab(tok_test::MiniBpe{}.vocab());
  EXPECT_EQ(tok.bos(), -1);
  EXPECT_FALSE(tok.add_bos());
  tokenizer::EncodeOptions opts;
  opts.add_bos = true;
  EXPECT_THROW(tok.encode("x", opts), tokenizer::TokenizerError);
}

}  // namespace
