// A conversation with a model: the messages so far, the model's chat template, and the tokens already in the KV
// cache, so that each turn evaluates only what is new. When the context would overflow, the oldest turns are
// dropped (the system prompt stays) and the conversation is re-evaluated.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "chat/reply_split.h"
#include "runtime/generate.h"
#include "runtime/session.h"

namespace tokenizer {
class Tokenizer;
}

namespace runtime {

struct ChatOptions {
  std::string system;          // --system; empty = none
  GenerateOptions generation;  // sampling and -n per reply (n_past and echo are managed here; warmup applies to the
                               // first turn only, whose prompt and decode shapes it prepares)
  // Tokens kept free for the reply when deciding whether to drop old turns.
  int32_t reply_reserve = 256;
  // Further template variables (--chat-template-kwargs: Qwen 3's enable_thinking, ...).
  std::vector<std::pair<std::string, chat::jinja::Value>> template_variables;
};

struct TurnResult {
  std::string reply;           // the assistant's text as stored in the conversation: its content
  // Where the template marks reasoning (a <think> block, gpt-oss's analysis channel: chat/reply_split.h), the
  // reply's reasoning, kept apart from its content; empty otherwise.
  std::string reasoning;
  GenerateResult generation;
  int32_t reused_tokens = 0;   // prompt tokens already in the KV cache
  int32_t dropped_turns = 0;   // user/assistant pairs removed to make room
};

// The texts a chat template binds as bos_token and eos_token, as transformers passes them: the vocabulary's BOS and
// EOS token texts, "" when it has none.
struct TemplateTokens {
  std::string bos, eos;
};
TemplateTokens template_tokens(const tokenizer::Tokenizer& tok);

// The prompt ids of a rendered chat template: templates write their own control tokens, BOS included where the
// model wants it, so, like transformers' apply_chat_template, the text is tokenized without adding specials, with
// special tokens recognised; BOS is prepended only when the vocabulary asks for one and the text did not start
// with it.
std::vector<int32_t> chat_prompt_ids(const tokenizer::Tokenizer& tok, std::string_view rendered);

// Called with notes for the user ("context full: dropped the oldest turn").
using NoteSink = std::function<void(const std::string& note)>;

class ChatSession {
 public:
  ChatSession(Session& session, const tokenizer::Tokenizer& tok, chat::ChatTemplate tmpl, ChatOptions options);

  // Adds the user's message, generates the reply (streamed to sink), adds it to the conversation. Where the
  // template marks reasoning, the reply's reasoning streams to `reasoning` instead (dropped when it is empty), and
  // the conversation keeps it apart from the content (as reasoning_content), as the template expects replies back.
  // Throws SessionError when even the newest message alone does not fit the context.
  TurnResult turn(const std::string& user_text, const TextSink& sink, const NoteSink& note,
                  const TextSink& reasoning = {});
  void reset();                 // forgets every turn but the system prompt
  const std::vector<chat::ChatMessage>& messages() const { return messages_; }
  // The token ids the template gives the current conversation with the assistant header appended.
  std::vector<int32_t> prompt_tokens() const;

 private:
  Session& session_;
  const tokenizer::Tokenizer& tok_;
  chat::ChatTemplate tmpl_;
  ChatOptions options_;
  std::string rendered_prompt() const;  // the conversation through the template, with the generation prompt
  std::vector<chat::ChatMessage> messages_;
  chat::ReplyFormat reply_format_;       // how this template's replies mark reasoning (chat/reply_split.h)
  std::vector<int32_t> cached_;  // ids whose K/V occupy cache slots [0, cached_.size())
  bool warmed_up_ = false;       // the first turn ran (with its warm-up, when asked for)
};

}  // namespace runtime
