// Detokenization: pieces, the SentencePiece leading-space rule, and the streaming decoder's UTF-8 handling.
#include <gtest/gtest.h>

#include "tokenizer/unicode.h"
#include "vectors.h"
#include "vocab_cache.h"

namespace {

int32_t id_of(const tokenizer::Tokenizer& tok, const std::string& text) {
  const auto id = tok.find_token(text);
  EXPECT_TRUE(id.has_value()) << text;
  return id.value_or(0);
}

TEST(Decode, Pieces) {
  REQUIRE_VOCAB(spm, "llama-spm");
  EXPECT_EQ(spm->token_to_piece(15043), " Hello");
  EXPECT_EQ(spm->token_text(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(spm->token_to_piece(id_of(*spm, "<0x0A>")), "\n");
  EXPECT_EQ(spm->token_to_piece(1), "");
  EXPECT_EQ(spm->token_to_piece(1, /*render_special=*/true), "<s>");
  EXPECT_THROW(spm->token_to_piece(32000), tokenizer::TokenizerError);
  EXPECT_THROW(spm->token_to_piece(-1), tokenizer::TokenizerError);
  EXPECT_THROW(spm->decode({15043, 99999}), tokenizer::TokenizerError);
  REQUIRE_VOCAB(bpe, "llama-bpe");
  EXPECT_EQ(bpe->token_to_piece(id_of(*bpe, "\xC4\xA0world")), " world");  // Ġworld
  EXPECT_EQ(bpe->token_to_piece(id_of(*bpe, "\xC4\x8A")), "\n");            // Ċ
}

TEST(Decode, LeadingSpaceRule) {
  REQUIRE_VOCAB(spm, "llama-spm");
  EXPECT_EQ(spm->decode({1, 15043, 3186}), "Hello world");
  EXPECT_EQ(spm->decode({15043, 3186}), "Hello world");
  tokenizer::DecodeOptions keep;
  keep.strip_leading_space = false;
  EXPECT_EQ(spm->decode({1, 15043, 3186}, keep), " Hello world");
  tokenizer::DecodeOptions render;
  render.render_special = true;
  EXPECT_EQ(spm->decode({1, 15043, 3186, 2}, render), "<s>Hello world</s>");
  REQUIRE_VOCAB(bpe, "llama-bpe");
  EXPECT_EQ(bpe->decode(bpe->encode(" Hello", true, false)), " Hello");  // byte-level BPE never strips
}

TEST(StreamDecoder, HoldsIncompleteSequences) {
  REQUIRE_VOCAB(spm, "llama-spm");
  const int32_t e2 = id_of(*spm, "<0xE2>"), x9c = id_of(*spm, "<0x9C>"), x85 = id_of(*spm, "<0x85>");
  tokenizer::StreamDecoder sd(*spm);
  EXPECT_EQ(sd.push(1), "");
  EXPECT_EQ(sd.push(15043), "Hello");
  EXPECT_EQ(sd.push(e2), "");
  EXPECT_EQ(sd.push(x9c), "");
  EXPECT_EQ(sd.push(x85), "\xE2\x9C\x85");
  EXPECT_EQ(sd.push(id_of(*spm, "<0xFF>")), "\xEF\xBF\xBD");  // can never become valid
  EXPECT_EQ(sd.push(e2), "");
  EXPECT_EQ(sd.push(3186), "\xEF\xBF\xBD world");             // interrupted sequence, then the next piece
  EXPECT_EQ(sd.push(e2), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");
  EXPECT_EQ(sd.flush(), "");
  EXPECT_THROW(sd.push(-5), tokenizer::TokenizerError);
  sd.reset();
  EXPECT_EQ(sd.push(3186), "world");  // the leading-space rule applies again after reset
}

TEST(StreamDecoder, ContinuationKeepsSpace) {
  REQUIRE_VOCAB(spm, "llama-spm");
  tokenizer::DecodeOptions opts;
  opts.strip_leading_space = false;
  tokenizer::StreamDecoder sd(*spm, opts);
  EXPECT_EQ(sd.push(3186), " world");
}

// For every vocabulary and reference string: the streamed chunks are valid UTF-8 and concatenate to decode().
TEST(StreamDecoder, AgreesWithDecode) {
  for (const auto& name : tok_test::vocab_names()) {
    REQUIRE_VOCAB(tok, name);
    const auto inputs = tok_test::read_inputs(*testing_assets::path("tokenizer/ggml-vocab-" + name + ".gguf.inp"));
    for (const auto& text : inputs) {
      const auto ids = tok->encode(text, true, false);
      tokenizer::StreamDecoder sd(*tok);
      std::string streamed;
      for (const int32_t id : ids) {
        const std::string chunk = sd.push(id);
        EXPECT_TRUE(tokenizer::utf8::is_valid(chunk)) << name;
        streamed += chunk;
      }
      streamed += sd.flush();
      EXPECT_EQ(streamed, tok->decode(ids)) << name << ": " << tok_test::printable(text);
    }
  }
}

}  // namespace
