// How a chat reply's text divides into reasoning, content and tool calls, for the template families that mark it
// in the text: <think> blocks (Qwen 3, DeepSeek-R1, ...: reasoning_split.h) and gpt-oss's harmony channels
// (harmony_split.h). Streamed and whole replies both go through one split, so they say the same thing.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>


namespace chat {

struct ReplyPiece {
  std::string reasoning, content;
};

// A tool call a reply made in its format's own way: the function's name and its arguments as compact JSON text.
struct ReplyCall {
  std::string name;
  std::string arguments;
};

class ReplySplit {
 public:
  virtual ~ReplySplit() = default;
  // The next text of the reply; returns what can be sent now (text that may be part of a marker is held until
  // the text after it decides).
  virtual ReplyPiece push(std::string_view text) = 0;
  // The end of the reply: what was held.
  virtual ReplyPiece finish() = 0;
  // After finish: the tool calls the reply made in the format's own way (harmony's messages to functions); the
  // server reads other formats' calls itself (server/tool_reply.h).
  virtual std::vector<ReplyCall> calls() const { return {}; }
};

enum class ReplyFormat {
  Plain,    // the reply is content as written
  Think,    // an opening <think> block is reasoning (reasoning_split.h)
  Harmony,  // gpt-oss: analysis is reasoning, final is content, messages to functions are calls (harmony_split.h)
};
// From the markers the template writes: <|channel|> and <|message|> (harmony), <think> or </think>.
ReplyFormat detect_reply_format(std::string_view template_source);

// The split of one reply to this rendered prompt; null for Plain. calls_wanted: the request offers tools (a
// harmony message to a function is then a call; otherwise its text is content).
std::unique_ptr<ReplySplit> make_reply_split(ReplyFormat format, std::string_view prompt, bool calls_wanted);

}  // namespace chat
