// `llm-run template` as a process: it prints exactly what the template renders (compared with the Python Jinja2
// renders of tests/chat/expected/, made by tests/chat/render_expected.py), binds the model's BOS/EOS texts, reads
// stdin, and turns a refusing template or bad input into one error line with nothing on stdout.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "assets.h"
#include "chat/json.h"
#include "process.h"

namespace {

namespace fs = std::filesystem;
using testing_process::Result;
std::string quote(const std::string& s) { return testing_process::shell_quote(s); }

const fs::path kChat = fs::path(LLM_SOURCE_DIR) / "tests" / "chat";

// expected/<template>.json: conversation -> {"gen" | "nogen" -> {"prompt": text} or {"raised": message}}.
std::string expected(const std::string& tmpl, const std::string& conversation, const char* mode, const char* what) {
  const chat::jinja::Value all = chat::parse_json(testing_process::slurp(kChat / "expected" / (tmpl + ".json")));
  const chat::jinja::Value* v = &all;
  for (const std::string_view key : {std::string_view(conversation), std::string_view(mode), std::string_view(what)})
    v = v && v->is_object() ? v->object().find(key) : nullptr;
  return v ? v->as_string() : "(no expected " + tmpl + " / " + conversation + " / " + mode + " / " + what + ")";
}

std::string args(const std::string& model, const std::string& tmpl, const std::string& conversation, bool tools) {
  const fs::path c = kChat / "conversations";
  std::string a = "template -m " + quote(model) + " --chat-template-file " +
                  quote((kChat / "templates" / (tmpl + ".jinja")).string()) + " --messages " +
                  quote((c / (conversation + ".json")).string());
  if (tools) a += " --tools " + quote((c / (conversation + ".tools.json")).string());
  return a;
}

TEST(TemplateCli, PrintsExactlyWhatJinja2Renders) {
  // Qwen3's template with tool calls and tools (it binds neither BOS nor EOS).
  REQUIRE_ASSET(qwen, "models/synth-qwen3-Q4_K_M.gguf");
  Result r = testing_process::run_llm_run(args(qwen, "qwen3-0.6b", "parallel-tool-calls", true));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected("qwen3-0.6b", "parallel-tool-calls", "gen", "prompt"));
  r = testing_process::run_llm_run(args(qwen, "qwen3-0.6b", "parallel-tool-calls", true) + " --no-generation-prompt");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected("qwen3-0.6b", "parallel-tool-calls", "nogen", "prompt"));
  // Mistral v0.3's writes the BOS text: <s> from the llama-spm vocabulary, as the corpus binds it.
  REQUIRE_ASSET(spm, "models/synth-llama-spm-Q4_K_M.gguf");
  r = testing_process::run_llm_run(args(spm, "mistral-7b-instruct-v0.3", "multi-turn", false));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, expected("mistral-7b-instruct-v0.3", "multi-turn", "gen", "prompt"));
  EXPECT_EQ(r.out.rfind("<s>", 0), 0u) << r.out;
}

TEST(TemplateCli, UsesTheModelsOwnTemplateAndReadsStdin) {
  REQUIRE_ASSET(qwen, "models/synth-qwen2-Q4_K_M.gguf");
  const Result r = testing_process::run_llm_run("template -m " + quote(qwen) + " --messages -",
                                                std::string(R"([{"role": "user", "content": "Hi"}])"));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("<|im_start|>user\nHi<|im_end|>\n"), std::string::npos) << r.out;
  EXPECT_TRUE(r.out.ends_with("<|im_start|>assistant\n")) << r.out;
  EXPECT_EQ(r.err, "");
}

// --chat-template-kwargs: Qwen 3's template with enable_thinking false writes an empty thinking block after the
// generation prompt; a value that is not a JSON object, or names the conversation's own fields, is a usage error.
TEST(TemplateCli, TemplateKwargsReachTheTemplate) {
  REQUIRE_ASSET(qwen, "models/synth-qwen3-Q4_K_M.gguf");
  const std::string base = "template -m " + quote(qwen) + " --chat-template-file " +
                           quote((kChat / "templates" / "qwen3-0.6b.jinja").string()) + " --messages -";
  const std::string hi = R"([{"role": "user", "content": "Hi"}])";
  Result r = testing_process::run_llm_run(base, hi);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.ends_with("<|im_start|>assistant\n")) << r.out;
  r = testing_process::run_llm_run(base + " --chat-template-kwargs " + quote(R"({"enable_thinking": false})"), hi);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(r.out.ends_with("<|im_start|>assistant\n<think>\n\n</think>\n\n")) << r.out;
  for (const char* bad : {"not-json", "[1]", R"({"messages": []})"}) {
    r = testing_process::run_llm_run(base + " --chat-template-kwargs " + quote(bad), hi);
    EXPECT_EQ(r.code, 2) << bad << ": " << r.err;
    EXPECT_NE(r.err.find("--chat-template-kwargs"), std::string::npos) << r.err;
  }
}

TEST(TemplateCli, RefusalsAndBadInputAreOneErrorLine) {
  REQUIRE_ASSET(spm, "models/synth-llama-spm-Q4_K_M.gguf");
  // raise_exception: the template's own message.
  Result r = testing_process::run_llm_run(args(spm, "mistral-7b-instruct-v0.3", "refused-order", false));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_EQ(r.err, "llm-run: error: the template refused: " +
                       expected("mistral-7b-instruct-v0.3", "refused-order", "gen", "raised") + "\n");
  // Not JSON: where, in lines and columns.
  r = testing_process::run_llm_run("template -m " + quote(spm) + " --messages -", std::string("[{\"role\": \"user\""));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("llm-run: error: stdin: messages: invalid JSON at line 1"), std::string::npos) << r.err;
  // A message without a role.
  r = testing_process::run_llm_run("template -m " + quote(spm) + " --messages -", std::string(R"([{"content": "x"}])"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("messages[0]"), std::string::npos) << r.err;
  // Usage errors: a missing file, stdin twice, no --messages.
  EXPECT_EQ(testing_process::run_llm_run("template -m " + quote(spm) + " --messages /nonexistent.json").code, 2);
  EXPECT_EQ(testing_process::run_llm_run("template -m " + quote(spm) + " --messages - --tools -").code, 2);
  EXPECT_EQ(testing_process::run_llm_run("template -m " + quote(spm)).code, 2);
  // A template file that does not parse names the file.
  const fs::path bad = fs::temp_directory_path() / "llm-run-test-bad-template.jinja";
  std::ofstream(bad) << "{% for m in messages %}{{ m.content }";
  r = testing_process::run_llm_run("template -m " + quote(spm) + " --chat-template-file " + quote(bad.string()) +
                                   " --messages -", std::string(R"([{"role": "user", "content": "x"}])"));
  fs::remove(bad);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("llm-run-test-bad-template.jinja"), std::string::npos) << r.err;
}

}  // namespace
