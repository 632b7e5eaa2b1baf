// gpt-oss's harmony replies divided by channel (see harmony_split.h).
#include "chat/harmony_split.h"

#include <algorithm>
#include <optional>

#include "chat/json.h"
#include "chat/reply_text.h"

namespace chat {
namespace {

constexpr std::string_view kStart = "<|start|>";
constexpr std::string_view kChannel = "<|channel|>";
constexpr std::string_view kMessage = "<|message|>";
constexpr std::string_view kEnd = "<|end|>";
constexpr std::string_view kTo = "to=";
// A header longer than this without <|message|> is not one: the reply is plain text from there.
constexpr size_t kMaxHeader = 256;

std::string_view trim_front(std::string_view s) { return s.substr(reply_text::first_non_space(s)); }

// The word after `key` in a header ("final" after <|channel|>, "functions.get" after "to="): up to a space or a
// marker. "to=" counts at the header's start or after a space or a marker, not inside another word.
std::string word_after(std::string_view header, std::string_view key) {
  size_t at = header.find(key);
  while (key == kTo && at != std::string_view::npos && at > 0 && header[at - 1] != ' ' && header[at - 1] != '>')
    at = header.find(key, at + 1);
  if (at == std::string_view::npos) return {};
  std::string_view rest = header.substr(at + key.size());
  const size_t end = std::min(rest.find(' '), rest.find('<'));
  return std::string(rest.substr(0, end));
}

}  // namespace

void HarmonySplit::body(std::string_view text, ReplyPiece& out) {
  if (text.empty()) return;
  if (!function_.empty()) {
    arguments_ += text;
  } else if (channel_ == "analysis") {
    out.reasoning += text;
  } else {
    out.content += text;  // final; commentary meant for the user (a preamble); an unknown channel
  }
}

void HarmonySplit::end_message(ReplyPiece& out) {
  if (!function_.empty()) {
    // The body must be a JSON object; anything else goes back to the user as it was written.
    if (const std::optional<std::string> args = compact_json_text(arguments_))
      calls_.push_back(ReplyCall{function_, *args});
    else
      out.content += arguments_;
  }
  channel_.clear(), function_.clear(), arguments_.clear();
}

ReplyPiece HarmonySplit::push(std::string_view text) {
  ReplyPiece out;
  held_ += text;
  for (;;) {
    switch (state_) {
      case State::Plain:
        out.content += held_;
        held_.clear();
        return out;
      case State::Header: {
        if (first_) {  // a reply that does not open with a header is plain text
          const std::string_view rest = trim_front(held_);
          const bool opens = rest.starts_with(kChannel) || rest.starts_with(kTo);
          if (!opens && !kChannel.starts_with(rest) && !kTo.starts_with(rest)) {
            state_ = State::Plain;
            continue;
          }
        }
        // However the text came in pieces: a header is what precedes a first <|message|> that starts within
        // kMaxHeader bytes. Without one yet, only a text too long for one to start there still settles it.
        const size_t m = held_.find(kMessage);
        if (m == std::string::npos ? held_.size() >= kMaxHeader + kMessage.size() : m > kMaxHeader) {
          state_ = State::Plain;
          continue;
        }
        if (m == std::string::npos) return out;
        const std::string_view header = std::string_view(held_).substr(0, m);
        channel_ = word_after(header, kChannel);
        const std::string recipient = word_after(header, kTo);
        if (calls_wanted_ && recipient.starts_with("functions.") && recipient.size() > 10)
          function_ = recipient.substr(10);
        held_.erase(0, m + kMessage.size());
        first_ = false;
        state_ = State::Body;
        continue;
      }
      case State::Body: {
        const size_t e = held_.find(kEnd);
        if (e != std::string::npos) {
          body(std::string_view(held_).substr(0, e), out);
          end_message(out);
          held_.erase(0, e + kEnd.size());
          state_ = State::Between;
          continue;
        }
        const size_t keep = reply_text::partial_tag_at_end(held_, kEnd);
        body(std::string_view(held_).substr(0, held_.size() - keep), out);
        held_.erase(0, held_.size() - keep);
        return out;
      }
      case State::Between: {
        const std::string_view rest = trim_front(held_);
        if (rest.starts_with(kStart)) {
          held_ = std::string(rest.substr(kStart.size()));  // the next header: "assistant<|channel|>..."
          state_ = State::Header;
          continue;
        }
        if (rest.empty() || kStart.starts_with(rest)) return out;
        state_ = State::Plain;  // text after a message that opens none: the user's
        held_ = std::string(rest);
        continue;
      }
    }
  }
}

ReplyPiece HarmonySplit::finish() {
  ReplyPiece out;
  switch (state_) {
    case State::Plain:
      out.content = std::move(held_);
      break;
    case State::Header:
      if (first_) out.content = std::move(held_);  // never a header: the reply as written
      break;                                       // else a header cut short: nothing to show
    case State::Body:  // ended by <|return|>, <|call|> or the token limit
      body(held_, out);
      end_message(out);
      break;
    case State::Between:
      break;
  }
  held_.clear();
  return out;
}

}  // namespace chat
