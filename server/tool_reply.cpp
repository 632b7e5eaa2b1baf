// A tool-mode chat reply (see tool_reply.h).
#include "server/tool_reply.h"

namespace server {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

tokenizer::DecodeOptions decode_options() {
  tokenizer::DecodeOptions o;
  o.render_special = true;
  // A continuation of the prompt: SentencePiece's first-piece rule does not apply (the engine's decoder has seen the
  // prompt, and keeps the reply's leading space too).
  o.strip_leading_space = false;
  return o;
}

}  // namespace

ToolReply::ToolReply(const tokenizer::Tokenizer& tok, ToolCallFormat format, std::vector<std::string> stop)
    : decoder_(tok, decode_options()), stop_(std::move(stop)), format_(format) {}

std::string ToolReply::push(std::span<const int32_t> ids) {
  for (int32_t id : ids) text_ += stop_.push(decoder_.push(id));
  const ToolCallStart start = find_tool_call_start(format_, text_);
  size_t end = start.kind == ToolCallStart::Kind::None ? text_.size() : start.pos;
  while (end > sent_ && is_space(text_[end - 1])) --end;
  if (end <= sent_) return "";
  std::string out = text_.substr(sent_, end - sent_);
  sent_ = end;
  return out;
}

ToolReply::End ToolReply::finish() {
  text_ += stop_.push(decoder_.flush());
  text_ += stop_.flush();
  End end;
  const ToolCallStart start = find_tool_call_start(format_, text_);
  if (start.kind == ToolCallStart::Kind::Found && start.pos >= sent_) {
    ToolCallsAt at = parse_tool_calls_at(format_, text_, start.pos);
    if (at.ok) {
      // What was held before the calls is whitespace or text that waited for a possible opening.
      std::string before = text_.substr(sent_, start.pos - sent_);
      while (!before.empty() && is_space(before.back())) before.pop_back();
      size_t lead = 0;
      while (sent_ == 0 && lead < before.size() && is_space(before[lead])) ++lead;
      before.erase(0, lead);
      if (!at.trailing.empty() && (sent_ > 0 || !before.empty())) before += '\n';
      end.content = before + at.trailing;
      end.calls = std::move(at.calls);
      sent_ = text_.size();
      return end;
    }
  }
  end.content = text_.substr(sent_);
  sent_ = text_.size();
  return end;
}

}  // namespace server
