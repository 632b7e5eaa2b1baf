// The reply readers' fuzz target body: byte 0 picks the format, the rest is a model's reply. Reading a reply never
// fails, so any exception is a finding; and what it returns must hold.
// - Tool-call formats (byte 0 % 8 in 0..4): calls only where the format found an opening, each with a name and
//   arguments that are a JSON object; without calls, the reply back unchanged. The streaming view must agree with
//   the whole one: nothing a stream would send before the end may come from inside the calls.
// - Reply splits (5: think blocks, 6: think blocks the prompt opened, 7: harmony channels; chat/reply_split.h): the
//   reply pushed whole and pushed in pieces cut where the input's own bytes say give the same reasoning, content
//   and calls; calls have names and JSON-object arguments; no text appears that the reply did not hold.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/harmony_split.h"
#include "chat/json.h"
#include "chat/reasoning_split.h"
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

std::unique_ptr<chat::ReplySplit> make_split(int kind) {
  if (kind == 2) return std::make_unique<chat::HarmonySplit>(true);
  return std::make_unique<chat::ReasoningSplit>(kind == 1);
}

struct SplitResult {
  std::string reasoning, content;
  std::vector<chat::ReplyCall> calls;
};

SplitResult split_in(int kind, std::string_view text, const std::vector<size_t>& cuts) {
  const std::unique_ptr<chat::ReplySplit> split = make_split(kind);
  SplitResult r;
  size_t at = 0;
  for (size_t cut : cuts) {
    const chat::ReplyPiece p = split->push(text.substr(at, cut - at));
    r.reasoning += p.reasoning, r.content += p.content;
    at = cut;
  }
  const chat::ReplyPiece p = split->push(text.substr(at));
  const chat::ReplyPiece end = split->finish();
  r.reasoning += p.reasoning + end.reasoning, r.content += p.content + end.content;
  r.calls = split->calls();
  return r;
}

void exercise_reply_split(int kind, std::string_view text) {
  const SplitResult whole = split_in(kind, text, {});
  // Cuts where the reply's bytes say (a byte's low bits as a step), so the fuzzer steers them too.
  std::vector<size_t> cuts;
  for (size_t i = 0; i < text.size(); i += 1 + static_cast<unsigned char>(text[i]) % 7) cuts.push_back(i);
  const SplitResult pieces = split_in(kind, text, cuts);
  if (pieces.reasoning != whole.reasoning || pieces.content != whole.content)
    broken("a reply split differently in pieces than whole");
  if (pieces.calls.size() != whole.calls.size()) broken("a reply's calls differ in pieces and whole");
  if (whole.reasoning.size() + whole.content.size() > text.size()) broken("a split gave more text than the reply");
  for (const chat::ReplyCall& c : whole.calls) check_call(server::ToolCall{"", c.name, c.arguments});
  note(kind == 2 ? "harmony" : "think");
}

}  // namespace

void exercise_tool_calls(Bytes input) {
  if (input.empty()) return;
  const std::string_view text(reinterpret_cast<const char*>(input.data()) + 1, input.size() - 1);
  const size_t pick = input[0] % (std::size(kFormats) + 3);
  if (pick >= std::size(kFormats)) {
    exercise_reply_split(static_cast<int>(pick - std::size(kFormats)), text);
    return;
  }
  const server::ToolCallFormat format = kFormats[pick];
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
