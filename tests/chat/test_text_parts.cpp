// Content as a list of text parts: which real templates render such a list themselves (chat::renders_text_parts,
// judged by rendering one part), and join_text_parts, which gives the others one string.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>

#include "chat/chat_template.h"

namespace {

namespace fs = std::filesystem;
using chat::ChatTemplate;
using chat::jinja::Value;

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Value text_part(const std::string& text) {
  return Value::object({{"type", Value("text")}, {"text", Value(text)}});
}

// Every template of the corpus, classified: those that iterate a list content's parts (typed content) and those
// written for strings alone (they fail on a list, or print it as a Python list).
TEST(TextParts, RealTemplatesAreClassifiedByWhatTheyRender) {
  const fs::path dir = fs::path(LLM_SOURCE_DIR) / "tests" / "chat" / "templates";
  const std::map<std::string, bool> takes_parts = {
      {"gemma-3-4b-it", true},  {"mistral-small-3.2-24b-instruct-2506", true}, {"llama-3-8b-instruct", false},
      {"qwen2.5-7b-instruct", false}, {"qwen3-0.6b", false}, {"phi-4", false}, {"mistral-7b-instruct-v0.3", false},
  };
  size_t seen = 0;
  for (const auto& [name, want] : takes_parts) {
    const fs::path p = dir / (name + ".jinja");
    ASSERT_TRUE(fs::exists(p)) << p;
    const ChatTemplate t = ChatTemplate::parse(read(p));
    EXPECT_EQ(chat::renders_text_parts(t), want) << name;
    ++seen;
  }
  EXPECT_EQ(seen, takes_parts.size());
  EXPECT_FALSE(chat::renders_text_parts(ChatTemplate::builtin("chatml")));  // prints the list as a list
}

// A template that takes parts renders the list's text; one written for strings renders the joined string as it
// renders a string content.
TEST(TextParts, JoinedPartsRenderAsTheStringWould) {
  const ChatTemplate chatml = ChatTemplate::builtin("chatml");
  const Value parts = Value::array({text_part("first"), text_part("second")});
  const std::string joined = chatml.render({{"user", chat::join_text_parts(parts), {}}}, true, "", "");
  const std::string as_string = chatml.render({{"user", Value("first\nsecond"), {}}}, true, "", "");
  EXPECT_EQ(joined, as_string);
  EXPECT_NE(as_string.find("first\nsecond"), std::string::npos);
}

TEST(TextParts, JoinKeepsOtherContentAndRefusesOtherParts) {
  EXPECT_EQ(chat::join_text_parts(Value("plain")).as_string(), "plain");
  EXPECT_TRUE(chat::join_text_parts(Value::none()).is_none());
  EXPECT_EQ(chat::join_text_parts(Value::array({})).as_string(), "");
  // A newline between parts once there is text: an empty first part adds none.
  EXPECT_EQ(chat::join_text_parts(Value::array({text_part(""), text_part("a"), text_part("b")})).as_string(), "a\nb");
  const Value image = Value::object({{"type", Value("image_url")}, {"image_url", Value::object({})}});
  try {
    (void)chat::join_text_parts(Value::array({text_part("look:"), image}));
    FAIL() << "an image part was taken";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("'image_url'"), std::string::npos) << e.what();
  }
}

}  // namespace
