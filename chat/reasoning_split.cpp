// Reasoning split from content (see reasoning_split.h).
#include "chat/reasoning_split.h"

#include "chat/reply_text.h"

namespace chat {
namespace {

using reply_text::end_without_trailing_space;
using reply_text::first_non_space;
using reply_text::partial_tag_at_end;

constexpr std::string_view kOpen = kThinkOpen;
constexpr std::string_view kClose = kThinkClose;

}  // namespace

bool template_thinks(std::string_view source) {
  return source.find(kOpen) != std::string_view::npos || source.find(kClose) != std::string_view::npos;
}

bool prompt_opens_thinking(std::string_view prompt) {
  return prompt.substr(0, end_without_trailing_space(prompt, prompt.size())).ends_with(kOpen);
}

ReasoningSplit::ReasoningSplit(bool starts_inside) : state_(starts_inside ? State::Reasoning : State::Start) {}

ReasoningSplit::Piece ReasoningSplit::push(std::string_view text) {
  Piece out;
  held_ += text;
  const auto reason = [&](std::string_view s) {
    if (!reasoning_begun_) s.remove_prefix(first_non_space(s));
    if (s.empty()) return;
    reasoning_begun_ = true;
    out.reasoning += s;
  };
  for (;;) {
    if (state_ == State::Start) {
      const std::string_view rest = std::string_view(held_).substr(first_non_space(held_));
      if (rest.starts_with(kOpen)) {
        held_ = std::string(rest.substr(kOpen.size()));
        state_ = State::Reasoning;
        continue;
      }
      if (rest.empty() || kOpen.starts_with(rest)) return out;  // may still open a block
      state_ = State::Content;  // no block: everything is the answer, as written
      content_begun_ = true;
      out.content += held_;
      held_.clear();
      return out;
    }
    if (state_ == State::Reasoning) {
      const size_t close = held_.find(kClose);
      if (close != std::string::npos) {
        reason(std::string_view(held_).substr(0, end_without_trailing_space(held_, close)));
        held_.erase(0, close + kClose.size());
        state_ = State::Content;
        continue;
      }
      // Hold a possible beginning of </think>, and the space before it, which ends the reasoning if the tag comes.
      const size_t keep_from = end_without_trailing_space(held_, held_.size() - partial_tag_at_end(held_, kClose));
      reason(std::string_view(held_).substr(0, keep_from));
      held_.erase(0, keep_from);
      return out;
    }
    if (!content_begun_) {  // the answer after a block starts at its first non-space character
      const size_t i = first_non_space(held_);
      if (i == held_.size()) {
        held_.clear();
        return out;
      }
      held_.erase(0, i);
      content_begun_ = true;
    }
    out.content += held_;
    held_.clear();
    return out;
  }
}

ReasoningSplit::Piece ReasoningSplit::finish() {
  Piece out;
  if (state_ == State::Start) {
    out.content = std::move(held_);  // space, or a beginning of <think> that never became one: the reply as written
  } else if (state_ == State::Reasoning) {
    std::string_view s(held_);
    s = s.substr(0, end_without_trailing_space(s, s.size()));
    if (!reasoning_begun_) s.remove_prefix(first_non_space(s));
    out.reasoning = std::string(s);
  }  // Content: only space after a block can be held, and it is dropped
  held_.clear();
  return out;
}

}  // namespace chat
