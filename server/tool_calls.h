// Tool calls in what a model writes: which format a chat template's family uses (judged from the template text, the
// way other engines judge it), where tool calls begin in a reply, and the calls parsed into OpenAI's shape. Pure: text
// in, values out. A reply that does not hold well-formed tool calls is plain content, never an error: a model that
// half-writes a call, or writes a marker in prose, still gets its words back.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace server {

enum class ToolCallFormat {
  None,     // no format known for the template: replies are text
  Llama3,   // Llama 3.1-3.3: the reply is {"name": ..., "parameters": {...}}, after <|python_tag|> or not
  Hermes,   // Hermes 2/3, Qwen 2.5/3: <tool_call>{"name": ..., "arguments": {...}}</tool_call>, one or more
  Mistral,  // v0.3, Nemo: [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]; Small 3.2 and later:
            // [TOOL_CALLS]name[ARGS]{...}, one per marker
  Granite,  // Granite 3.x: <|tool_call|>[{"name": ..., "arguments": {...}}, ...]
};

// The format a template's model writes tool calls in, from the markers the template itself writes when it renders
// an assistant's earlier calls (<tool_call>, [TOOL_CALLS], the ipython role of Llama 3.1, ...). None when unsure.
ToolCallFormat detect_tool_call_format(std::string_view template_source);
std::string_view tool_call_format_name(ToolCallFormat format);  // "llama3", "hermes", ...

struct ToolCall {
  std::string id;         // the model's own id where its format has one (Mistral's JSON form may); else empty
  std::string name;
  std::string arguments;  // a JSON object as compact text: OpenAI sends arguments as a string
};

// Where tool calls begin in a reply so far. Found: the opening is at pos. Partial: text from pos on may still become
// an opening (a marker cut short, a Llama 3 reply that so far is "{\"na"), so a stream holds it back. None: nothing
// from here on can (for Llama 3, whose calls are the whole reply: the reply has started otherwise).
struct ToolCallStart {
  enum class Kind { None, Partial, Found };
  Kind kind = Kind::None;
  size_t pos = 0;
};
ToolCallStart find_tool_call_start(ToolCallFormat format, std::string_view text);

// The calls that start at text[pos] (a Found position) and the text after them (trimmed); ok false when what
// follows the opening is not well-formed tool calls of the format.
struct ToolCallsAt {
  bool ok = false;
  std::vector<ToolCall> calls;
  std::string trailing;
};
ToolCallsAt parse_tool_calls_at(ToolCallFormat format, std::string_view text, size_t pos);

struct ParsedReply {
  // With tool calls: the text before and after them, trimmed (often empty). Without: the whole text, unchanged.
  std::string content;
  std::vector<ToolCall> tool_calls;
};
// A whole reply.
ParsedReply parse_tool_calls(ToolCallFormat format, std::string_view text);

// An id for a call the model did not name: "call_" and 24 letters or digits; for Mistral, 9 letters or digits,
// since its templates refuse any other id when the client sends the call back in the next turn.
std::string make_tool_call_id(ToolCallFormat format, uint64_t random);

}  // namespace server
