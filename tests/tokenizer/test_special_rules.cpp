// The roles the reference gives special tokens beyond their GGUF type, seen through the public API: which tokens
// end generation, which count as control tokens (hidden when decoding, matched only with parse_special), and how
// the strip attributes read in simple cases. The rules come from llama.cpp's vocabulary loader (de3ff81); the
// tokenization side of each rule is also checked against llama.cpp's own output in test_special_vectors.cpp.
#include <gtest/gtest.h>

#include <algorithm>

#include "special_data.h"
#include "vocab_cache.h"

namespace {

using tokenizer::TokenType;
using Ids = std::vector<int32_t>;

Ids cat(std::initializer_list<Ids> parts) {
  Ids out;
  for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
  return out;
}

int32_t id_of(const tokenizer::Tokenizer& tok, std::string_view text) {
  const auto id = tok.find_token(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(-1);
}

std::string rendered(const tokenizer::Tokenizer& tok, const Ids& ids) {
  tokenizer::DecodeOptions render;
  render.render_special = true;
  return tok.decode(ids, render);
}

#define REQUIRE_RULE_VOCAB(VAR, NAME)                          \
  const tokenizer::Tokenizer* VAR = ::tok_test::rule_vocab(NAME); \
  ASSERT_NE(VAR, nullptr) << NAME << " missing from rule_vocabs.txt"

// Typed by a user (parse_special off), no text becomes an end-of-generation or control token, in any shared
// vocabulary: every end-of-generation token's own text, alone and between words, stays text.
TEST(SpecialRules, UserTextNeverEndsGeneration) {
  for (const auto& name : tok_test::vocab_names()) {
    REQUIRE_VOCAB(tok, name);
    int eog_tokens = 0;
    for (int32_t id = 0; id < tok->n_vocab(); ++id) {
      if (!tok->is_eog(id)) continue;
      ++eog_tokens;
      const std::string& text = tok->token_text(id);
      for (const std::string& s : {text, "a " + text + " b", "x" + text + "\n"}) {
        for (const int32_t got : tok->encode(s, false, false)) {
          EXPECT_FALSE(tok->is_eog(got)) << name << ": '" << s << "' gave end-of-generation token " << got;
          EXPECT_FALSE(tok->is_control(got)) << name << ": '" << s << "' gave control token " << got;
        }
      }
      EXPECT_EQ(tok->encode(text, false, true), Ids{id}) << name << " " << text;
    }
    EXPECT_GE(eog_tokens, 1) << name;
  }
}

// phi-3 stores </s> as user-defined; llama.cpp makes it an end-of-generation control token.
TEST(SpecialRules, Phi3EndOfSequence) {
  REQUIRE_VOCAB(tok, "phi-3");
  EXPECT_EQ(tok->token_type(2), TokenType::USER_DEFINED);
  EXPECT_TRUE(tok->is_control(2));
  EXPECT_TRUE(tok->is_eog(2));
  EXPECT_TRUE(tok->is_eog(32000));  // <|endoftext|>, the EOS
  EXPECT_TRUE(tok->is_eog(32007));  // <|end|>
  EXPECT_FALSE(tok->is_eog(32010));  // <|user|>
  EXPECT_EQ(tok->eot(), 32007);
}

// Phi-3 (named "Phi3" in its file): a special token drops the whitespace after it, so the text after it starts a
// fresh SentencePiece fragment with its dummy-prefix space; <s>, <unk> and <|endoftext|> keep the whitespace.
TEST(SpecialRules, Phi3StripsWhitespaceAfterSpecialTokens) {
  REQUIRE_VOCAB(tok, "phi-3");
  EXPECT_EQ(tok->encode("<|user|>\n  Hi<|end|>\n<|assistant|>\n", false, true),
            cat({{32010}, tok->encode("Hi", false, false), {32007, 32001}}));
  EXPECT_EQ(tok->encode("<s>\nHi", false, true), cat({{1}, tok->encode("\nHi", false, false)}));
  // Only the whitespace after: before a token it stays.
  EXPECT_EQ(tok->encode("Hi \n<|end|>", false, true), cat({tok->encode("Hi \n", false, false), {32007}}));
}

// qwen2 has a plain BPE token spelled "</s>": llama.cpp makes it an end-of-generation control token too.
TEST(SpecialRules, PlainTokenWithEndOfGenerationTextIsControl) {
  REQUIRE_VOCAB(tok, "qwen2");
  const int32_t s = id_of(*tok, "</s>");
  EXPECT_EQ(tok->token_type(s), TokenType::NORMAL);
  EXPECT_TRUE(tok->is_control(s));
  EXPECT_TRUE(tok->is_eog(s));
  EXPECT_EQ(tok->decode({s}), "");
  EXPECT_EQ(rendered(*tok, {s}), "</s>");
  EXPECT_EQ(tok->encode("a</s>", false, true), cat({tok->encode("a", false, false), {s}}));
}

// Without fill-in-the-middle keys, the reference finds those roles by text; its padding token ends generation.
TEST(SpecialRules, StarcoderFimPadEndsGeneration) {
  REQUIRE_VOCAB(tok, "starcoder");
  EXPECT_TRUE(tok->is_eog(id_of(*tok, "<fim_pad>")));
  EXPECT_FALSE(tok->is_eog(id_of(*tok, "<fim_prefix>")));
  EXPECT_FALSE(tok->is_eog(id_of(*tok, "<file_sep>")));  // only "<|file_sep|>" is known by text
  EXPECT_TRUE(tok->is_eog(0));                           // <|endoftext|>
}

TEST(SpecialRules, HarmonyEndIsNotEndOfGeneration) {
  REQUIRE_RULE_VOCAB(tok, "rules-harmony");
  const int32_t end = id_of(*tok, "<|end|>");
  EXPECT_FALSE(tok->is_eog(end));
  EXPECT_FALSE(tok->is_control(end));
  EXPECT_EQ(tok->decode({end}), "<|end|>");
  EXPECT_EQ(tok->encode("<|end|>", false, false), Ids{end});
  EXPECT_TRUE(tok->is_eog(id_of(*tok, "<|return|>")));
  EXPECT_TRUE(tok->is_eog(id_of(*tok, "<|call|>")));
  for (const char* text : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>"}) {
    const int32_t id = id_of(*tok, text);
    EXPECT_EQ(tok->token_type(id), TokenType::CONTROL) << text;
    EXPECT_FALSE(tok->is_control(id)) << text;
    EXPECT_EQ(tok->decode({id}), text);
    EXPECT_EQ(tok->encode(text, false, false), Ids{id}) << text;
  }
  REQUIRE_RULE_VOCAB(solar, "rules-solar");
  EXPECT_FALSE(solar->is_eog(id_of(*solar, "<|end|>")));
  REQUIRE_RULE_VOCAB(ret, "rules-end-only-return");  // <|return|> alone is not enough
  EXPECT_TRUE(ret->is_eog(id_of(*ret, "<|end|>")));
  EXPECT_TRUE(ret->is_control(id_of(*ret, "<|end|>")));
}

TEST(SpecialRules, Gemma4EndOfSequenceIsPlain) {
  REQUIRE_RULE_VOCAB(tok, "rules-gemma4");
  const int32_t s = id_of(*tok, "</s>");
  EXPECT_FALSE(tok->is_eog(s));
  EXPECT_FALSE(tok->is_control(s));
  EXPECT_EQ(tok->decode({s}), "</s>");
  const Ids ids = tok->encode("</s>", false, true);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), s), 0);
  EXPECT_TRUE(tok->is_eog(id_of(*tok, "<eos>")));
  const int32_t turn = id_of(*tok, "<turn|>");  // user-defined in the file, an end-of-generation text
  EXPECT_TRUE(tok->is_eog(turn));
  EXPECT_TRUE(tok->is_control(turn));
  EXPECT_EQ(tok->decode({turn}), "");
}

TEST(SpecialRules, RolesFoundByText) {
  REQUIRE_RULE_VOCAB(tok, "rules-promote");
  struct Expect {
    const char* text;
    bool control, eog;
  };
  for (const Expect& e : {Expect{"[EOS]", true, true}, Expect{"<|eom_id|>", true, true},
                          Expect{"<PRE>", true, false},       // prefix role by text: control
                          Expect{"<SUF>", false, false},      // the suffix role is set by key: keeps its type
                          Expect{"<my_suffix>", false, false},  // named by the key, not promoted
                          Expect{"<|file_sep|>", true, true}, Expect{"<fim_pad>", true, true},
                          Expect{"<tag>", false, false}}) {
    const int32_t id = id_of(*tok, e.text);
    EXPECT_EQ(tok->is_control(id), e.control) << e.text;
    EXPECT_EQ(tok->is_eog(id), e.eog) << e.text;
    EXPECT_EQ(tok->encode(e.text, false, false) == Ids{id}, !e.control) << e.text;  // user-defined: always matched
    if (e.control) {
      EXPECT_EQ(tok->encode(e.text, false, true), Ids{id}) << e.text;
    }
  }
}

// The strip attributes in isolation: RSTRIP after phi3-named special tokens, LSTRIP before [MASK] / <mask>.
TEST(SpecialRules, StripAttributes) {
  REQUIRE_RULE_VOCAB(phi3, "rules-phi3");
  const int32_t tag = id_of(*phi3, "<|tag|>"), s = id_of(*phi3, "<s>");
  EXPECT_EQ(phi3->encode("a <|tag|> \t\n b", false, false), cat({phi3->encode("a ", false, false), {tag},
                                                                 phi3->encode("b", false, false)}));
  EXPECT_EQ(phi3->encode("<s> b", false, true), cat({{s}, phi3->encode(" b", false, false)}));
  REQUIRE_RULE_VOCAB(bert, "rules-modern-bert");
  const int32_t mask = id_of(*bert, "[MASK]");
  EXPECT_EQ(bert->encode("a \n [MASK] b", false, false),
            cat({bert->encode("a", false, false), {mask}, bert->encode(" b", false, false)}));
  REQUIRE_RULE_VOCAB(nomic, "rules-nomic");
  const int32_t nmask = id_of(*nomic, "<mask>"), user = id_of(*nomic, "<|user|>");
  EXPECT_EQ(nomic->encode("a  <mask>", false, false), cat({nomic->encode("a", false, false), {nmask}}));
  // The architecture rule wins over the phi3 name: <|user|> keeps the whitespace after it.
  EXPECT_EQ(nomic->encode("<|user|> b", false, true), cat({{user}, nomic->encode(" b", false, false)}));
}

}  // namespace
