// A chat reply when the request offers tools and the template's tool-call format is known: what to stream as content
// at once, and the tool calls at the end. The text is the generated ids decoded with control tokens shown, since the
// markers of Mistral ([TOOL_CALLS]) and Llama 3 (<|python_tag|>) are control tokens that the engine's text leaves
// out; it is cut at the request's stop strings as the engine cuts its own. Streamed and whole responses both go
// through this class, so they say the same thing.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "runtime/stop_text.h"
#include "server/tool_calls.h"
#include "tokenizer/tokenizer.h"

namespace server {

class ToolReply {
 public:
  // tok must outlive this.
  ToolReply(const tokenizer::Tokenizer& tok, ToolCallFormat format, std::vector<std::string> stop);

  // Newly generated ids; returns the content that can be sent now: text before anything that may open a tool call,
  // less trailing whitespace (held, so that a reply of only tool calls has no content at all).
  std::string push(std::span<const int32_t> ids);

  struct End {
    std::string content;          // content not sent yet
    std::vector<ToolCall> calls;  // empty: the reply is text
  };
  // The end of the reply. Held-back text that turns out not to be well-formed tool calls is content after all.
  End finish();

 private:
  tokenizer::StreamDecoder decoder_;
  runtime::StopText stop_;
  ToolCallFormat format_;
  std::string text_;  // the reply so far
  size_t sent_ = 0;   // text_[0, sent_) went out as content
};

}  // namespace server
