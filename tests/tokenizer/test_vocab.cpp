// Reading tokenizer metadata from GGUF: defaults for absent keys, clear errors for unsupported or malformed
// vocabularies, model files as well as vocab-only files.
#include <gtest/gtest.h>

#include <fstream>
#include <functional>
#include <optional>
#include <sstream>

#include "vocab_cache.h"

namespace {

using tokenizer::TokenizerError;

// A vocab-only GGUF image in memory (the bytes must outlive the parsed File).
struct Image {
  std::vector<uint8_t> bytes;
  std::optional<gguf::File> file;
};

// A small llama (SPM) vocabulary: <unk> <s> </s>, 256 byte pieces, "▁", "▁h", "▁hi"; `edit` changes the metadata.
std::unique_ptr<Image> build(const std::function<void(gguf::Writer&)>& edit = {}) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    tokens.push_back(name);
  }
  tokens.push_back("\xE2\x96\x81");
  tokens.push_back("\xE2\x96\x81h");
  tokens.push_back("\xE2\x96\x81hi");
  std::vector<int32_t> types(tokens.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (int b = 0; b < 256; ++b) types[3 + b] = 6;
  std::vector<float> scores(tokens.size(), 0.0f);
  scores.back() = -1.0f;

  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_str("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::make_i32_array(types));
  w.set("tokenizer.ggml.scores", gguf::make_f32_array(scores));
  if (edit) edit(w);
  auto img = std::make_unique<Image>();
  img->bytes = w.to_bytes();
  img->file.emplace(gguf::File::parse(img->bytes.data(), img->bytes.size(), "mem.gguf"));
  return img;
}

std::string error_of(const std::function<void(gguf::Writer&)>& edit) {
  const auto img = build(edit);
  try {
    tokenizer::Tokenizer::from_gguf(*img->file);
  } catch (const TokenizerError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Vocab, SpmDefaults) {
  const auto img = build();
  const auto tok = tokenizer::Tokenizer::from_gguf(*img->file);
  EXPECT_EQ(tok.kind(), tokenizer::ModelKind::SPM);
  EXPECT_EQ(tok.n_vocab(), 262);
  EXPECT_EQ(tok.bos(), 1);
  EXPECT_EQ(tok.eos(), 2);
  EXPECT_EQ(tok.unk(), 0);
  EXPECT_EQ(tok.eot(), -1);
  EXPECT_EQ(tok.pad(), -1);
  EXPECT_TRUE(tok.add_bos());
  EXPECT_FALSE(tok.add_eos());
  EXPECT_EQ(tok.pre(), "default");
  EXPECT_EQ(tok.chat_template(), "");
  EXPECT_EQ(tok.encode("hi", true, false), (std::vector<int32_t>{1, 261}));  // add_space_prefix defaults on
  EXPECT_TRUE(tok.is_eog(2));
}

TEST(Vocab, KeysOverrideDefaults) {
  const auto img = build([](gguf::Writer& w) {
    w.set_bool("tokenizer.ggml.add_bos_token", false);
    w.set_bool("tokenizer.ggml.add_eos_token", true);
    w.set_bool("tokenizer.ggml.add_space_prefix", false);
    w.set_u32("tokenizer.ggml.eos_token_id", 1);
    w.set_u32("tokenizer.ggml.bos_token_id", 0xFFFFFFFFu);  // out of range: no BOS
    w.set_u32("tokenizer.ggml.padding_token_id", 2);
    w.set_str("tokenizer.chat_template", "{{ messages }}");
  });
  const auto tok = tokenizer::Tokenizer::from_gguf(*img->file);
  EXPECT_EQ(tok.bos(), -1);
  EXPECT_EQ(tok.eos(), 1);
  EXPECT_EQ(tok.pad(), 2);
  EXPECT_FALSE(tok.add_bos());
  EXPECT_TRUE(tok.add_eos());
  EXPECT_EQ(tok.chat_template(), "{{ messages }}");
  EXPECT_EQ(tok.encode("hi", true, false), (std::vector<int32_t>{3 + 'h', 3 + 'i', 1}));  // no "▁" prefix now
}

// The keys the special-token rules read (docs/tokenizer.md, "Special tokens"): the model's name and architecture,
// the end-of-message and fill-in-the-middle ids; the older prefix/suffix/middle keys win, as in the reference.
TEST(Vocab, SpecialRoleKeys) {
  const auto absent = build();
  const auto v0 = tokenizer::Vocab::from_gguf(*absent->file);
  EXPECT_EQ(v0.name, "");
  EXPECT_EQ(v0.architecture, "llama");
  for (const int32_t id : {v0.eom, v0.fim_pre, v0.fim_suf, v0.fim_mid, v0.fim_pad, v0.fim_rep, v0.fim_sep})
    EXPECT_EQ(id, -1);
  const auto img = build([](gguf::Writer& w) {
    w.set_str("general.name", "Phi-3 Mini");
    w.set_u32("tokenizer.ggml.eom_token_id", 10);
    w.set_u32("tokenizer.ggml.fim_pre_token_id", 11);
    w.set_u32("tokenizer.ggml.prefix_token_id", 12);
    w.set_u32("tokenizer.ggml.fim_suf_token_id", 13);
    w.set_u32("tokenizer.ggml.suffix_token_id", 0xFFFFFFFFu);  // out of range: the fim_suf key stands
    w.set_u32("tokenizer.ggml.middle_token_id", 14);
    w.set_u32("tokenizer.ggml.fim_pad_token_id", 15);
    w.set_u32("tokenizer.ggml.fim_rep_token_id", 16);
    w.set_u32("tokenizer.ggml.fim_sep_token_id", 17);
  });
  const auto v = tokenizer::Vocab::from_gguf(*img->file);
  EXPECT_EQ(v.name, "Phi-3 Mini");
  EXPECT_EQ(v.eom, 10);
  EXPECT_EQ(v.fim_pre, 12);
  EXPECT_EQ(v.fim_suf, 13);
  EXPECT_EQ(v.fim_mid, 14);
  EXPECT_EQ(v.fim_pad, 15);
  EXPECT_EQ(v.fim_rep, 16);
  EXPECT_EQ(v.fim_sep, 17);
  const auto tok = tokenizer::Tokenizer::from_gguf(*img->file);
  EXPECT_TRUE(tok.is_eog(10));  // end of message
  EXPECT_TRUE(tok.is_eog(15) && tok.is_eog(16) && tok.is_eog(17));
  EXPECT_FALSE(tok.is_eog(12));
}

TEST(Vocab, ClearErrors) {
  auto has = [](const std::string& msg, const std::string& part) { return msg.find(part) != std::string::npos; };
  std::string msg = error_of([](gguf::Writer& w) { w.set_str("tokenizer.ggml.model", "bert"); });
  EXPECT_TRUE(has(msg, "'bert'") && has(msg, "llama") && has(msg, "gpt2")) << msg;
  msg = error_of([](gguf::Writer& w) {
    w.set_str("tokenizer.ggml.model", "gpt2");
    w.set_str("tokenizer.ggml.pre", "klingon");
    w.set("tokenizer.ggml.merges", gguf::make_string_array({"a b"}));
  });
  EXPECT_TRUE(has(msg, "'klingon'") && has(msg, "llama-bpe") && has(msg, "mem.gguf")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set_str("tokenizer.ggml.model", "gpt2"); });
  EXPECT_TRUE(has(msg, "tokenizer.ggml.merges")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set("tokenizer.ggml.scores", gguf::make_f32_array({1.0f, 2.0f})); });
  EXPECT_TRUE(has(msg, "tokenizer.ggml.scores") && has(msg, "2 entries")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set("tokenizer.ggml.token_type", gguf::make_i32_array({9})); });
  EXPECT_TRUE(has(msg, "token_type")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set("tokenizer.ggml.tokens", gguf::make_i32_array({1, 2})); });
  EXPECT_TRUE(has(msg, "tokenizer.ggml.tokens") && has(msg, "strings")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set_u32("tokenizer.ggml.model", 3); });
  EXPECT_TRUE(has(msg, "tokenizer.ggml.model") && has(msg, "string")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set_str("tokenizer.ggml.bos_token_id", "one"); });
  EXPECT_TRUE(has(msg, "bos_token_id") && has(msg, "integer")) << msg;
  msg = error_of([](gguf::Writer& w) { w.set("tokenizer.ggml.tokens", gguf::make_string_array({})); });
  EXPECT_TRUE(has(msg, "empty")) << msg;
}

TEST(Vocab, MissingTokenizer) {
  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  const auto bytes = w.to_bytes();
  const auto file = gguf::File::parse(bytes.data(), bytes.size(), "bare.gguf");
  try {
    tokenizer::Tokenizer::from_gguf(file);
    FAIL() << "expected TokenizerError";
  } catch (const TokenizerError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.model"), std::string::npos) << e.what();
  }
}

// A model file carries the same tokenizer as the vocab-only file it was built from.
TEST(Vocab, ModelFileMatchesVocabFile) {
  REQUIRE_ASSET(model_path, "models/synth-llama-spm-Q4_K_M.gguf");
  REQUIRE_VOCAB(vocab_tok, "llama-spm");
  const auto file = gguf::File::open(model_path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const std::string text = "The quick brown fox jumps over the lazy dog.";
  EXPECT_EQ(tok.encode(text, true, false), vocab_tok->encode(text, true, false));
  EXPECT_EQ(tok.n_vocab(), vocab_tok->n_vocab());
}

// The tokens recorded in the reference logits files (llama.cpp's tokenization of the same prompt, BOS included).
TEST(Vocab, MatchesReferencePromptTokens) {
  for (const char* model : {"stories260K-f32", "synth-llama-bpe-Q4_K_M", "synth-qwen2-Q4_K_M"}) {
    REQUIRE_ASSET(model_path, std::string("models/") + model + ".gguf");
    REQUIRE_ASSET(ref_path, std::string("models/refs/") + model + ".public.txt");
    std::ifstream in(ref_path);
    std::string line, tokens_line;
    while (std::getline(in, line))
      if (line.rfind("tokens ", 0) == 0) tokens_line = line.substr(7);
    std::vector<int32_t> expected;
    std::stringstream ss(tokens_line);
    std::string item;
    while (std::getline(ss, item, ',')) expected.push_back(std::stoi(item));
    const auto file = gguf::File::open(model_path);
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    EXPECT_EQ(tok.encode("The quick brown fox jumps over the lazy dog.", true, false), expected) << model;
  }
}

}  // namespace
