// gpt-oss's replies in OpenAI's harmony format, divided by channel. After the prompt's "<|start|>assistant" a reply
// is one or more messages, each a header up to <|message|> and a body up to <|end|> (or the end of generation:
// <|return|> and <|call|> end it and are not in the text), the next one after "<|start|>assistant":
//   <|channel|>analysis<|message|>The user asks ...<|end|><|start|>assistant<|channel|>final<|message|>Hello!
// analysis bodies are the reasoning, final (and commentary meant for the user) bodies the content, and a
// commentary message to "functions.NAME" (the recipient before or after the channel; " <|constrain|>json" or
// " json" after it) is a call of NAME with the body as its JSON arguments. The tokenizer shows these markers
// (o200k_harmony's <|start|>, <|channel|>, <|message|> and <|constrain|> are user-defined, and so is <|end|>, since
// <|return|> ends generation), so the engine's text carries them. A reply that does not open with a header is
// content as written.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "chat/reply_split.h"

namespace chat {

class HarmonySplit final : public ReplySplit {
 public:
  // calls_wanted: the request offers tools; otherwise a message to a function is content.
  explicit HarmonySplit(bool calls_wanted) : calls_wanted_(calls_wanted) {}
  ReplyPiece push(std::string_view text) override;
  ReplyPiece finish() override;
  std::vector<ReplyCall> calls() const override { return calls_; }

 private:
  enum class State { Header, Body, Between, Plain };
  void body(std::string_view text, ReplyPiece& out);  // a body's text, where its channel sends it
  void end_message(ReplyPiece& out);
  bool calls_wanted_;
  State state_ = State::Header;
  bool first_ = true;        // no header read yet
  std::string held_;         // the text not yet placed
  std::string channel_;      // the current message's
  std::string function_;     // its recipient's function name, when it is a call
  std::string arguments_;    // the call's body so far
  std::vector<ReplyCall> calls_;
};

}  // namespace chat
