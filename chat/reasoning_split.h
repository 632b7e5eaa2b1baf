// A chat reply's reasoning split from its content. Qwen 3, QwQ, DeepSeek-R1 and its distills, SmolLM3 and others
// think first, between <think> and </think>; OpenAI-compatible clients read that as message.reasoning_content (and
// delta.reasoning_content when streaming) beside the answer in content, as the reference runtime's server returns
// it by default.
//
// Only a block that opens the reply counts (a <think> later on is content), or one the prompt opened: DeepSeek-R1's
// template ends the generation prompt with "<think>\n", so its replies start inside the block. Whitespace around
// the reasoning and between </think> and the answer is dropped. A block never closed (max_tokens came first) is
// reasoning to its end, with no content.
#pragma once
#include <string>
#include <string_view>

#include "chat/reply_split.h"

namespace chat {

// The tags of a reasoning block.
inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// Whether replies to prompts of this chat template may open with a <think> block (the template writes the tag:
// it opens the block itself, strips earlier blocks from the history, or renders reasoning_content in one).
bool template_thinks(std::string_view template_source);

// Whether a rendered prompt leaves the reply inside a block it opened (it ends with "<think>" and whitespace).
bool prompt_opens_thinking(std::string_view prompt);

class ReasoningSplit final : public ReplySplit {
 public:
  explicit ReasoningSplit(bool starts_inside);

  using Piece = ReplyPiece;
  // Text that may be the start of a tag, or whitespace that may end the reasoning, is held.
  Piece push(std::string_view text) override;
  Piece finish() override;

 private:
  enum class State { Start, Reasoning, Content };
  State state_;
  std::string held_;         // Start: the reply so far; Reasoning: a possible "</think>" prefix or trailing space
  bool reasoning_begun_ = false;  // Reasoning: a non-space character went out (leading space is dropped)
  bool content_begun_ = false;    // Content after a block: likewise
};

}  // namespace chat
