// The corpus test: real models' chat templates (tests/chat/templates) rendered on hand-written conversations
// (tests/chat/conversations) must equal, byte for byte, what Python Jinja2 renders with transformers' conventions
// (tests/chat/expected, written by tests/chat/render_expected.py). Conversations go through messages_from_json and
// tools_from_json, as `llm-run template` reads them. A refusal (raise_exception) must be the same refusal with the
// same message; any other Python error must be a TemplateError(Render) here (Limit for Python's RecursionError).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "chat/json.h"
#include "chat/messages_json.h"

namespace {

namespace fs = std::filesystem;
using chat::jinja::Value;

const fs::path kDir = fs::path(LLM_SOURCE_DIR) / "tests" / "chat";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Value read_json(const fs::path& path) { return chat::parse_json(read_file(path)); }

const Value& get(const Value& object, const std::string& key) {
  static const Value missing;
  const Value* v = object.object().find(key);
  return v ? *v : missing;
}

// The clock render_expected.py pins: 2024-07-26 13:05:09, a Friday.
std::tm fixed_now() {
  std::tm t{};
  t.tm_year = 124, t.tm_mon = 6, t.tm_mday = 26, t.tm_hour = 13, t.tm_min = 5, t.tm_sec = 9;
  t.tm_wday = 5, t.tm_yday = 207;
  return t;
}

struct Conversation {
  std::vector<chat::ChatMessage> messages;
  Value tools = Value::none();  // transformers passes tools=None when none are offered
};

std::map<std::string, Conversation> load_conversations() {
  std::map<std::string, Conversation> out;
  for (const auto& entry : fs::directory_iterator(kDir / "conversations")) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() != ".json" || file.ends_with(".tools.json")) continue;
    const std::string name = entry.path().stem().string();
    Conversation c;
    c.messages = chat::messages_from_json(read_file(entry.path()));
    const fs::path tools = kDir / "conversations" / (name + ".tools.json");
    if (fs::exists(tools)) c.tools = chat::tools_from_json(read_file(tools));
    out.emplace(name, std::move(c));
  }
  return out;
}

// Where two texts first differ, with a few lines of context from each, for a failure message.
std::string describe_difference(const std::string& expected, const std::string& actual) {
  const auto [e, a] = std::mismatch(expected.begin(), expected.end(), actual.begin(), actual.end());
  const size_t at = static_cast<size_t>(e - expected.begin());
  const size_t line = 1 + std::count(expected.begin(), e, '\n');
  const size_t line_start = expected.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t column = at - (line_start == std::string::npos || at == 0 ? 0 : line_start + 1) + 1;
  auto excerpt = [&](const std::string& s) {
    const size_t from = at > 60 ? at - 60 : 0;
    std::string x = s.substr(from, 120);
    std::string shown;
    for (char c : x) shown += c == '\n' ? std::string("\\n") : std::string(1, c);
    return "..." + shown + "...";
  };
  std::ostringstream msg;
  msg << "first difference at byte " << at << " (line " << line << ", byte " << column << " of the line); expected "
      << expected.size() << " bytes, rendered " << actual.size() << "\n  expected: " << excerpt(expected)
      << "\n  rendered: " << excerpt(actual);
  (void)a;
  return msg.str();
}

// Checks one render against its expected result; returns an empty string when they agree.
std::string check_render(const chat::ChatTemplate& t, const Conversation& c, chat::ChatRenderOptions options,
                         bool generation_prompt, const Value& expected) {
  options.add_generation_prompt = generation_prompt;
  const Value& prompt = get(expected, "prompt");
  const Value& raised = get(expected, "raised");
  const Value& error = get(expected, "error");
  try {
    const std::string out = t.render(c.messages, options);
    if (prompt.is_string()) return out == prompt.as_string() ? "" : describe_difference(prompt.as_string(), out);
    return "rendered, but Jinja2 " + std::string(raised.is_string() ? "raised '" + raised.as_string() + "'"
                                                                    : "failed: " + chat::jinja::to_str(error)) +
           "\n  rendered: " + out.substr(0, 200);
  } catch (const chat::TemplateError& e) {
    if (raised.is_string()) {
      if (e.kind() == chat::TemplateError::Kind::Raised && e.message() == raised.as_string()) return "";
      return "expected raise_exception('" + raised.as_string() + "'), got: " + e.what();
    }
    if (error.is_string()) {
      if (e.kind() == chat::TemplateError::Kind::Render) return "";
      // Python runs out of stack where the interpreter's depth limit stops the same runaway recursion.
      if (e.kind() == chat::TemplateError::Kind::Limit && error.as_string().starts_with("RecursionError")) return "";
      return "expected an error like Jinja2's '" + error.as_string() + "', got: " + e.what();
    }
    return std::string("Jinja2 rendered it, but: ") + e.what();
  }
}

std::vector<std::string> corpus_templates() {
  const Value corpus = read_json(kDir / "corpus.json");
  std::vector<std::string> names;
  for (const auto& [name, spec] : get(corpus, "templates").object().items) names.push_back(name.as_string());
  return names;
}

class ChatCorpus : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatCorpus, RendersLikeJinja2) {
  const std::string name = GetParam();
  const Value spec = get(get(read_json(kDir / "corpus.json"), "templates"), name);
  const chat::ChatTemplate t = chat::ChatTemplate::parse(read_file(kDir / "templates" / (name + ".jinja")));
  const Value expected = read_json(kDir / "expected" / (name + ".json"));
  const std::map<std::string, Conversation> conversations = load_conversations();

  chat::ChatRenderOptions base;
  base.bos_token = get(spec, "bos_token").as_string();
  base.eos_token = get(spec, "eos_token").as_string();
  base.now = fixed_now();
  std::map<std::string, chat::jinja::Variables> variants = {{"", {}}};
  if (get(spec, "variants").is_object())
    for (const auto& [variant, vars] : get(spec, "variants").object().items)
      for (const auto& [name, value] : vars.object().items)
        variants[variant.as_string()].emplace_back(name.as_string(), value);

  // Every conversation x variant has an expected result, and nothing else does: a stale expected file fails.
  std::set<std::string> keys;
  for (const auto& [conv, c] : conversations)
    for (const auto& [variant, vars] : variants) keys.insert(conv + (variant.empty() ? "" : "@" + variant));
  std::set<std::string> expected_keys;
  for (const auto& [key, v] : expected.object().items) expected_keys.insert(key.as_string());
  EXPECT_EQ(keys, expected_keys) << "tests/chat/expected/" << name
                                 << ".json is stale: run python3 tests/chat/render_expected.py";

  int checked = 0;
  for (const auto& [key_value, results] : expected.object().items) {
    const std::string& key = key_value.as_string();
    const size_t at = key.find('@');
    const std::string conv = key.substr(0, at);
    const std::string variant = at == std::string::npos ? "" : key.substr(at + 1);
    if (!conversations.count(conv) || !variants.count(variant)) continue;  // reported above
    const Conversation& c = conversations.at(conv);
    chat::ChatRenderOptions options = base;
    options.tools = c.tools;
    options.variables = variants.at(variant);
    for (const auto& [mode, generation_prompt] : {std::pair{"gen", true}, std::pair{"nogen", false}}) {
      const std::string problem = check_render(t, c, options, generation_prompt, get(results, mode));
      if (!problem.empty()) ADD_FAILURE() << name << " / " << key << " / " << mode << ": " << problem;
      ++checked;
    }
  }
  EXPECT_GT(checked, 0);
}

INSTANTIATE_TEST_SUITE_P(Templates, ChatCorpus, ::testing::ValuesIn(corpus_templates()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string s = info.param;  // test names allow only letters, digits and '_'
                           auto other = [](char c) { return !std::isalnum(static_cast<unsigned char>(c)); };
                           std::replace_if(s.begin(), s.end(), other, '_');
                           return s;
                         });

// The corpus itself: every template file is listed in corpus.json (and the other way round), and it is big enough
// to mean something.
TEST(ChatCorpusFiles, TemplatesAndManifestAgree) {
  std::set<std::string> files;
  for (const auto& entry : fs::directory_iterator(kDir / "templates"))
    if (entry.path().extension() == ".jinja") files.insert(entry.path().stem().string());
  const std::vector<std::string> listed = corpus_templates();
  EXPECT_EQ(files, std::set<std::string>(listed.begin(), listed.end()));
  EXPECT_GE(listed.size(), 15u);
  EXPECT_GE(load_conversations().size(), 10u);
}

}  // namespace
