// llm-run as a process on the gemma3, phi3, qwen3moe and gpt-oss test models (CPU): `logits` against llama.cpp's
// reference file, greedy generation against llama.cpp's greedy tokens, a two-turn chat, and perplexity.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "assets.h"
#include "model/model.h"
#include "process.h"
#include "refs.h"
#include "tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using testing_process::Result;
std::string quote(const std::string& s) { return testing_process::shell_quote(s); }

struct ArchCase {
  const char* name;      // models/<name>.gguf
  double tol;            // as in tests/model/test_refs.cpp
  const char* template_; // the built-in chat template of the family, or a Jinja file in the source tree ("*.jinja")
  // Whether the reference's greedy continuation starts with clear steps (margin >= 2 tol) that a free-running
  // generation can be held to. qwen3moe's starts with a near-tie (margin 1.4e-3 in the F16 file, 1.3e-2 and 2.3e-2
  // in the quantized ones); test_refs.cpp checks its greedy steps with the reference's tokens fed back instead.
  bool greedy_cli = true;
};

const ArchCase kCases[] = {
    {"synth-gemma3-F16", 1.5e-3, "gemma"},
    {"synth-phi3-F16", 9e-4, "phi3"},
    {"synth-qwen3moe-F16", 9e-4, "chatml", false},
    // gpt-oss's own (harmony) template; the synthetic file's small vocabulary spells its special tokens as text.
    {"synth-gpt-oss-F16", 2.1e-3, "tests/chat/templates/gpt-oss-120b.jinja"},
};

std::string template_flag(const char* t) {
  const std::string s = t;
  if (s.size() > 6 && s.substr(s.size() - 6) == ".jinja")
    return " --chat-template-file " + quote(std::string(LLM_SOURCE_DIR) + "/" + s);
  return " --chat-template " + s;
}

class ArchCli : public ::testing::TestWithParam<ArchCase> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("llm_arch_cli_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_P(ArchCli, LogitsMatchTheReferenceFile) {
  const ArchCase& c = GetParam();
  REQUIRE_ASSET(model, std::string("models/") + c.name + ".gguf");
  REQUIRE_ASSET(ref_path, std::string("models/refs/") + c.name + ".public.txt");
  const refs::LogitsRef ref = refs::read_logits_ref(ref_path);
  const std::string out = (dir_ / "last.f32").string();
  const Result r = testing_process::run_llm_run("logits -m " + quote(model) + " -p " + quote(ref.prompt) +
                                                " --device cpu --out " + quote(out));
  ASSERT_EQ(r.code, 0) << r.err;
  std::string want = "tokens ";
  for (size_t i = 0; i < ref.tokens.size(); ++i) {
    if (i) want += ',';
    want += std::to_string(ref.tokens[i]);
  }
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), want);
  const std::vector<float> last = refs::read_f32(out);
  const std::string dir = ref_path.substr(0, ref_path.rfind('/') + 1);
  const std::vector<float> want_last = refs::read_f32(dir + ref.lastlogits_file);
  ASSERT_EQ(last.size(), want_last.size());
  for (size_t i = 0; i < last.size(); ++i) EXPECT_NEAR(last[i], want_last[i], c.tol) << i;
}

// Greedy generation after the reference prompt: the text llm-run prints is the prompt then the reference tokens,
// streamed through the detokenizer as llm-run streams them (invalid UTF-8 shown as U+FFFD), up to the first step
// whose reference margin is within 2 tol (where engines may differ).
TEST_P(ArchCli, GreedyGenerationFollowsTheReferenceTokens) {
  const ArchCase& c = GetParam();
  if (!c.greedy_cli) GTEST_SKIP() << c.name << ": the reference's first greedy step is a near-tie (see kCases)";
  REQUIRE_ASSET(model, std::string("models/") + c.name + ".gguf");
  REQUIRE_ASSET(ref_path, std::string("models/refs/") + c.name + ".public.txt");
  const refs::LogitsRef ref = refs::read_logits_ref(ref_path);
  size_t n = 0;
  while (n < ref.greedy.size() && ref.greedy_margin[n] >= 2 * c.tol) ++n;
  ASSERT_GT(n, 4u) << "too few clear greedy steps to compare";
  const Result r = testing_process::run_llm_run("-m " + quote(model) + " -p " + quote(ref.prompt) + " -n " +
                                                std::to_string(n) + " --temp 0 --ignore-eos --device cpu");
  ASSERT_EQ(r.code, 0) << r.err;
  auto m = model::Model::load(model);
  const auto tok = tokenizer::Tokenizer::from_gguf(m->file());
  tokenizer::StreamDecoder stream(tok);
  std::string want;
  for (int32_t id : ref.tokens) want += stream.push(id);
  for (size_t i = 0; i < n; ++i) want += stream.push(ref.greedy[i]);
  want += stream.flush();
  EXPECT_EQ(r.out, want + "\n");
}

TEST_P(ArchCli, ChatAndPerplexityRun) {
  const ArchCase& c = GetParam();
  REQUIRE_ASSET(model, std::string("models/") + c.name + ".gguf");
  const Result chat = testing_process::run_llm_run(
      "chat -m " + quote(model) + template_flag(c.template_) + " -n 6 --temp 0 --device cpu",
      std::string("Hello there\nTell me more\n"));
  ASSERT_EQ(chat.code, 0) << chat.err;
  EXPECT_FALSE(chat.out.empty());
  std::ofstream(dir_ / "text.txt") << "The quick brown fox jumps over the lazy dog. Once upon a time there was a "
                                      "little girl named Lily who loved to play in the park with her friends.\n";
  const Result ppl = testing_process::run_llm_run("perplexity -m " + quote(model) + " -f " +
                                                  quote((dir_ / "text.txt").string()) + " -c 16 --device cpu");
  ASSERT_EQ(ppl.code, 0) << ppl.err;
  const size_t at = ppl.out.find("Final estimate: PPL = ");
  ASSERT_NE(at, std::string::npos) << ppl.out;
  double value = 0;
  ASSERT_EQ(std::sscanf(ppl.out.c_str() + at, "Final estimate: PPL = %lf", &value), 1);
  // Random weights over a 512-token vocabulary: near-uniform predictions.
  EXPECT_GT(value, 100.0);
  EXPECT_LT(value, 5000.0);
}

INSTANTIATE_TEST_SUITE_P(Models, ArchCli, ::testing::ValuesIn(kCases), [](const auto& i) {
  std::string n = i.param.name;
  for (char& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
});

}  // namespace
