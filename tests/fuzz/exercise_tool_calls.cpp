// The tool-call reader's fuzz target body: byte 0 picks the format, the rest is a model's reply. Reading a reply never
// fails, so any exception is a finding; and what it returns must hold: calls only where the format found an
// opening, each with a name and arguments that are a JSON object; without calls, the reply back unchanged. The
// streaming view must agree with the whole one: nothing a stream would send before the end may come from inside the
// calls.
#include <string>
#include <string_view>

#include "chat/json.h"
#include "exercise.h"
#include "invariant.h"
#include "server/tool_calls.h"

namespace fuzz {
namespace {

constexpr server::ToolCallFormat kFormats[] = {server::ToolCallFormat::None, server::ToolCallFormat::Llama3,
                                               server::ToolCallFormat::Hermes, server::ToolCallFormat::Mistral,
                                               server::ToolCallFormat::Granite};

void check_call(const server::ToolCall& c) {
  if (c.name.empty()) broken("a tool call without a name");
  chat::jinja::Value args;
  try {
    args = chat::parse_json(c.arguments);
  } catch (const chat::JsonError& e) {
    broken("tool-call arguments that are not JSON: " + c.arguments);
  }
  if (!args.is_object()) broken("tool-call arguments that are not an object: " + c.arguments);
}

}  // namespace

void exercise_tool_calls(Bytes input) {
  if (input.empty()) return;
  const server::ToolCallFormat format = kFormats[input[0] % std::size(kFormats)];
  const std::string_view text(reinterpret_cast<const char*>(input.data()) + 1, input.size() - 1);
  const server::ParsedReply r = server::parse_tool_calls(format, text);
  const server::ToolCallStart start = server::find_tool_call_start(format, text);
  if (start.pos > text.size()) broken("a tool-call start past the end of the reply");
  if (r.tool_calls.empty()) {
    if (r.content != text) broken("a reply without calls that did not come back unchanged");
    note("text");
    return;
  }
  if (start.kind != server::ToolCallStart::Kind::Found) broken("tool calls without an opening");
  for (const server::ToolCall& c : r.tool_calls) check_call(c);
  // Every prefix of the reply that a stream would have seen: where it says calls may begin never lies after the
  // opening the whole reply has (else the stream would have sent part of a call as content).
  for (size_t n = 0; n <= text.size(); n += 1 + text.size() / 64) {
    const server::ToolCallStart s = server::find_tool_call_start(format, text.substr(0, n));
    const size_t sendable = s.kind == server::ToolCallStart::Kind::None ? n : s.pos;
    if (sendable > start.pos) broken("a stream would send text from inside a tool call");
  }
  note(std::to_string(r.tool_calls.size()) + " call(s)");
}

}  // namespace fuzz
