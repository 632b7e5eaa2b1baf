// The chat-template fuzz target's body: the input is a template text. It either fails to parse with TemplateError,
// or renders two fixed conversations: a plain one (with the generation prompt) and one with a tool call, a tool
// result and content parts (without); TemplateError is the only failure allowed. Limits are tighter
// than the defaults so that every input finishes in milliseconds; hitting one is TemplateError(Limit), not a finding.
#include <optional>
#include <string>
#include <vector>

#include "chat/chat_template.h"
#include "exercise.h"
#include "invariant.h"

namespace fuzz {
namespace {

using chat::jinja::Value;

// What every template should accept: system, user, assistant, user, all plain strings.
std::vector<chat::ChatMessage> plain_conversation() {
  return {{"system", Value("You are a helpful assistant."), {}},
          {"user", Value("Hello! What is 2 + 2?"), {}},
          {"assistant", Value("2 + 2 = 4."), {}},
          {"user", Value("Thanks. And <s> 3 + 3?"), {}}};
}

// Everything else templates meet: a tool call, a tool result, reasoning content, content given as a list of parts.
std::vector<chat::ChatMessage> rich_conversation() {
  std::vector<chat::ChatMessage> m;
  m.push_back({"user", Value("What is the weather in Paris?"), {}});
  chat::ChatMessage call{"assistant", Value(""), {}};
  call.extra.push_back({"tool_calls", Value::from_json(R"([{"id": "call_1", "type": "function",
      "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}])")});
  m.push_back(std::move(call));
  chat::ChatMessage tool{"tool", Value("{\"temp\": 21}"), {}};
  tool.extra.push_back({"tool_call_id", Value("call_1")});
  tool.extra.push_back({"name", Value("get_weather")});
  m.push_back(std::move(tool));
  m.push_back({"assistant", Value("It is 21 degrees."), {{"reasoning_content", Value("Looked it up.")}}});
  m.push_back({"user", Value::from_json(R"([{"type": "text", "text": "Thanks! And tomorrow?"}])"), {}});
  return m;
}

chat::ChatRenderOptions options(bool add_generation_prompt) {
  chat::ChatRenderOptions o;
  o.add_generation_prompt = add_generation_prompt;
  o.bos_token = "<s>";
  o.eos_token = "</s>";
  o.tools = Value::from_json(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Current weather", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}}}}])");
  o.variables.push_back({"enable_thinking", Value(false)});
  std::tm now{};
  now.tm_year = 124, now.tm_mon = 6, now.tm_mday = 26, now.tm_hour = 12;
  o.now = now;
  o.limits.max_output_bytes = size_t{1} << 18;
  o.limits.max_steps = 50'000;
  o.limits.max_items = 10'000;
  return o;
}

}  // namespace

void exercise_chat_template(Bytes input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()), input.size());
  (void)chat::ChatTemplate::detect_family(text);
  std::optional<chat::ChatTemplate> t;
  try {
    t.emplace(chat::ChatTemplate::parse(text));
  } catch (const chat::TemplateError& e) {
    note(std::string("parse: ") + e.what());  // Syntax, or Limit for nesting the parser refuses
    return;
  }
  static const std::vector<chat::ChatMessage> plain = plain_conversation();
  static const std::vector<chat::ChatMessage> rich = rich_conversation();
  for (const auto* messages : {&plain, &rich}) {
    const chat::ChatRenderOptions o = options(messages == &plain);
    try {
      const std::string out = t->render(*messages, o);
      if (out.size() > o.limits.max_output_bytes) broken("render output exceeds max_output_bytes");
      note("rendered " + std::to_string(out.size()) + " bytes");
    } catch (const chat::TemplateError& e) {
      note(std::string("render: ") + e.what());
    }
  }
}

}  // namespace fuzz
