// Which split a template's replies take (see reply_split.h).
#include "chat/reply_split.h"

#include "chat/harmony_split.h"
#include "chat/reasoning_split.h"

namespace chat {

ReplyFormat detect_reply_format(std::string_view source) {
  if (source.find("<|channel|>") != std::string_view::npos && source.find("<|message|>") != std::string_view::npos)
    return ReplyFormat::Harmony;
  return template_thinks(source) ? ReplyFormat::Think : ReplyFormat::Plain;
}

std::unique_ptr<ReplySplit> make_reply_split(ReplyFormat format, std::string_view prompt, bool calls_wanted) {
  switch (format) {
    case ReplyFormat::Plain: return nullptr;
    case ReplyFormat::Think: return std::make_unique<ReasoningSplit>(prompt_opens_thinking(prompt));
    case ReplyFormat::Harmony: return std::make_unique<HarmonySplit>(calls_wanted);
  }
  return nullptr;
}

}  // namespace chat
