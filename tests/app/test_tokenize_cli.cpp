// Process test for `llm-run tokenize`: runs the built binary on the shared vocabularies and checks its output
// against the library, plus the exit codes for usage and load errors.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "assets.h"

namespace {

struct Result {
  int status = -1;
  std::string out;
};

Result run(const std::string& args) {
  const std::string cmd = std::string(LLM_BINARY_DIR) + "/app/llm-run " + args + " 2>/dev/null";
  Result r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

class TokenizeCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::filesystem::exists(std::string(LLM_BINARY_DIR) + "/app/llm-run")) GTEST_SKIP() << "llm-run not built";
  }
};

TEST_F(TokenizeCli, PrintsIdsAndPieces) {
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  auto r = run("tokenize -m " + vocab + " -p 'Hello world' --ids --no-bos");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "[15043, 3186]\n");
  r = run("tokenize -m " + vocab + " -p 'Hello world' --ids");
  EXPECT_EQ(r.out, "[1, 15043, 3186]\n");
  r = run("tokenize -m " + vocab + " -p 'Hello world'");
  EXPECT_EQ(r.status, 0);
  EXPECT_EQ(r.out, "      1 -> '<s>'\n  15043 -> '\xE2\x96\x81Hello'\n   3186 -> '\xE2\x96\x81world'\n");
}

TEST_F(TokenizeCli, SpecialFlagAndFileInput) {
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-qwen2.gguf");
  EXPECT_EQ(run("tokenize -m " + vocab + " -p '<|im_start|>' --ids --special").out, "[151644]\n");
  EXPECT_NE(run("tokenize -m " + vocab + " -p '<|im_start|>' --ids").out, "[151644]\n");
  const auto path = std::filesystem::temp_directory_path() / "llm_run_tokenize_cli.txt";
  std::ofstream(path, std::ios::binary) << "a\n\tb";
  const auto r = run("tokenize -m " + vocab + " -f " + path.string());
  std::filesystem::remove(path);
  EXPECT_EQ(r.status, 0);
  EXPECT_NE(r.out.find("\xC4\x8A"), std::string::npos) << r.out;  // the newline (Ċ) came through verbatim
}

TEST_F(TokenizeCli, Errors) {
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-gpt-2.gguf");
  EXPECT_EQ(run("tokenize -m /nonexistent/model.gguf -p hi").status, 2);
  EXPECT_EQ(run("tokenize -m " + vocab).status, 2);  // no text
  const auto bad = std::filesystem::temp_directory_path() / "llm_run_tokenize_bad.gguf";
  std::ofstream(bad, std::ios::binary) << "GGUF but not really";
  EXPECT_EQ(run("tokenize -m " + bad.string() + " -p hi").status, 1);
  std::filesystem::remove(bad);
}

}  // namespace
