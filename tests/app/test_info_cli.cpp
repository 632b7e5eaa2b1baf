// `llm-run info` as a process: the summary fields on real files, --kv and --tensors, and the error contract
// (exit 1 with exactly one "llm-run: error:" line for a bad file, exit 2 for a missing one).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "assets.h"
#include "gguf/gguf.h"
#include "process.h"

namespace {

namespace fs = std::filesystem;

using testing_process::Result;
using testing_process::shell_quote;

class InfoCli : public ::testing::Test {
 protected:
  fs::path dir = fs::temp_directory_path() / ("info_cli_" + std::to_string(::getpid()));
  void SetUp() override { fs::create_directories(dir); }
  void TearDown() override { fs::remove_all(dir); }

  Result run(const std::string& args) { return testing_process::run_llm_run(args); }

  std::string write(const char* name, const std::vector<uint8_t>& bytes) {
    const std::string p = (dir / name).string();
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    return p;
  }
};

bool one_error_line(const std::string& err) {
  return err.rfind("llm-run: error: ", 0) == 0 && err.find('\n') == err.size() - 1;
}

// A small model written here, so the summary can be checked against values the test chose.
std::vector<uint8_t> small_model() {
  static const std::vector<uint8_t> data(4 * 64 * 16 + 34 * 2 * 16, 1);
  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_str("general.name", "tiny-test");
  w.set_u32("general.file_type", 7);
  w.set_u32("llama.context_length", 4096);
  w.set_u32("llama.embedding_length", 64);
  w.set_u32("llama.block_count", 3);
  w.set_u32("llama.attention.head_count", 8);
  w.set_f32("llama.rope.freq_base", 500000.f);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_str("tokenizer.ggml.model", "llama");
  std::vector<std::string> tokens;
  for (int i = 0; i < 300; ++i) tokens.push_back("tok" + std::to_string(i));
  tokens[1] = "line\nbreak";
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_tensor("token_embd.weight", quant::Type::F32, {64, 16}, data.data());
  w.add_tensor("blk.0.attn_q.weight", quant::Type::Q8_0, {64, 16}, data.data());
  return w.to_bytes();
}

TEST_F(InfoCli, SummaryOfAWrittenModel) {
  const std::string path = write("tiny.gguf", small_model());
  const Result r = run("info -m " + shell_quote(path));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const char* want : {"architecture:   llama", "name:           tiny-test", "file type:      7 (Q8_0)",
                           "context_length", "4096", "block_count", "attention.head_count", "rope.freq_base",
                           "500000", "layer_norm_rms_epsilon", "1e-05", "tokenizer:      llama, vocabulary 300 tokens, bos 1",
                           "tensors:        2", "F32         1 tensor", "Q8_0        1 tensor", "parameters:     2,048 (2.05 K)",
                           "GGUF v3"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << r.out;
  }
  EXPECT_EQ(r.out.find("metadata ("), std::string::npos);  // --kv not asked

  const Result kv = run("info --kv " + shell_quote(path));  // positional file form
  ASSERT_EQ(kv.code, 0) << kv.err;
  EXPECT_NE(kv.out.find("tokenizer.ggml.tokens"), std::string::npos);
  EXPECT_NE(kv.out.find("ARRAY<STRING>   [300 strings: \"tok0\", \"line\\nbreak\", \"tok2\", \"tok3\", ...]"),
            std::string::npos) << kv.out;
  EXPECT_NE(kv.out.find("llama.rope.freq_base"), std::string::npos);

  const Result t = run("info --tensors -m " + shell_quote(path));
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("blk.0.attn_q.weight"), std::string::npos);
  EXPECT_NE(t.out.find("[64, 16]"), std::string::npos);
  EXPECT_NE(t.out.find("4096         1088"), std::string::npos) << t.out;  // second tensor: offset, bytes
}

TEST_F(InfoCli, EverySharedFile) {
  auto root = testing_assets::root();
  if (!root) GTEST_SKIP() << "shared assets not found";
  int n = 0;
  for (const char* sub : {"models", "models/mxfp4", "tokenizer"}) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(*root / sub, ec)) {
      if (e.path().extension() != ".gguf") continue;
      SCOPED_TRACE(e.path().string());
      const auto f = gguf::File::open(e.path().string());
      const Result r = run("info --kv --tensors -m " + shell_quote(e.path().string()));
      ASSERT_EQ(r.code, 0) << r.err;
      EXPECT_EQ(r.err, "");
      const auto arch = f.get<std::string>("general.architecture");
      EXPECT_NE(r.out.find("architecture:   " + arch), std::string::npos);
      EXPECT_NE(r.out.find("tensors:        " + std::to_string(f.tensors().size())), std::string::npos);
      const auto vocab = f.get_array<std::string>("tokenizer.ggml.tokens").size();
      std::string grouped = std::to_string(vocab);
      for (int i = static_cast<int>(grouped.size()) - 3; i > 0; i -= 3) grouped.insert(static_cast<size_t>(i), ",");
      EXPECT_NE(r.out.find("vocabulary " + grouped + " tokens"), std::string::npos) << r.out.substr(0, 2000);
      if (auto ctx = f.get_opt<uint32_t>(arch + ".context_length")) {
        EXPECT_NE(r.out.find("context_length"), std::string::npos);
        EXPECT_NE(r.out.find(std::to_string(*ctx)), std::string::npos);
      }
      for (const auto& t : f.tensors()) EXPECT_NE(r.out.find(t.name), std::string::npos) << t.name;
      EXPECT_NE(r.out.find("[" + std::to_string(vocab) + " strings: "), std::string::npos);
      ++n;
    }
  }
  EXPECT_GT(n, 0);
}

// The resolved model: gemma3's layer pattern and per-kind rope, phi3's ignored window and LongRoPE; a file this
// runtime cannot run still gets its summary, with the reason.
TEST_F(InfoCli, LayerPatternAndRopeScaling) {
  REQUIRE_ASSET(gemma, "models/synth-gemma3-F16.gguf");
  const Result g = run("info " + shell_quote(gemma));
  ASSERT_EQ(g.code, 0) << g.err;
  for (const char* want : {"attention:      sliding window 8 on local layers 0-4 (5 of 6); global layers 5",
                           "rope:           neox, scaling linear x8; global layers: base 1e+06, positions x0.125; "
                           "local layers: base 10000"})
    EXPECT_NE(g.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << g.out;
  REQUIRE_ASSET(phi, "models/synth-phi3-F16.gguf");
  const Result p = run("info " + shell_quote(phi));
  ASSERT_EQ(p.code, 0) << p.err;
  for (const char* want : {"full causal attention in every layer (attention.sliding_window 262144 ignored",
                           "fused attn_qkv", "rope:           neox, scaling none, original context 64",
                           "cos/sin x1.41421", "rope_factors_long when the context rounded up to 256 exceeds 64"})
    EXPECT_NE(p.out.find(want), std::string::npos) << "missing '" << want << "' in:\n" << p.out;
  const std::string tiny = write("tiny.gguf", small_model());  // no feed_forward_length
  const Result t = run("info " + shell_quote(tiny));
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_NE(t.out.find("model:          not runnable here: "), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("llama.feed_forward_length"), std::string::npos) << t.out;
}

TEST_F(InfoCli, NotAGgufFileIsOneErrorLine) {
  const std::string path = write("notes.txt", {'h', 'e', 'l', 'l', 'o', '\n'});
  const Result r = run("info -m " + shell_quote(path));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_TRUE(one_error_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("not a GGUF file: bad magic"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("notes.txt"), std::string::npos) << r.err;
}

TEST_F(InfoCli, TruncatedGgufIsOneErrorLine) {
  auto bytes = small_model();
  for (size_t keep : {size_t{3}, size_t{20}, size_t{200}, bytes.size() / 2, bytes.size() - 1}) {
    SCOPED_TRACE(keep);
    const std::string path = write("cut.gguf", std::vector<uint8_t>(bytes.begin(), bytes.begin() + static_cast<long>(keep)));
    const Result r = run("info -m " + shell_quote(path));
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(one_error_line(r.err)) << r.err;
    EXPECT_NE(r.err.find("cut.gguf: at byte "), std::string::npos) << r.err;
  }
}

TEST_F(InfoCli, MissingFileIsAUsageError) {
  const Result r = run("info -m " + shell_quote((dir / "does-not-exist.gguf").string()));
  EXPECT_EQ(r.code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("llm-run: error: "), std::string::npos);
  EXPECT_NE(r.err.find("does-not-exist.gguf"), std::string::npos);
}

TEST_F(InfoCli, DirectoryIsARuntimeError) {
  const Result r = run("info -m " + shell_quote(dir.string()));
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(one_error_line(r.err)) << r.err;
  EXPECT_NE(r.err.find("not a regular file"), std::string::npos);
}

}  // namespace
