// Conversation state and KV-cache reuse; see chat_session.h.
#include "runtime/chat_session.h"

#include <algorithm>
#include <memory>

#include "tokenizer/tokenizer.h"

namespace runtime {

ChatSession::ChatSession(Session& session, const tokenizer::Tokenizer& tok, chat::ChatTemplate tmpl, ChatOptions options)
    : session_(session),
      tok_(tok),
      tmpl_(std::move(tmpl)),
      options_(std::move(options)),
      reply_format_(chat::detect_reply_format(tmpl_.source())) {
  reset();
}

void ChatSession::reset() {
  messages_.clear();
  if (!options_.system.empty()) messages_.push_back(chat::ChatMessage{"system", chat::jinja::Value(options_.system), {}});
  // The cache content stays valid: the next turn's prompt shares its prefix (often just BOS and the system prompt).
}

TemplateTokens template_tokens(const tokenizer::Tokenizer& tok) {
  const auto text = [&](int32_t id) { return id >= 0 ? tok.token_to_piece(id, /*render_special=*/true) : ""; };
  return {text(tok.bos()), text(tok.eos())};
}

std::vector<int32_t> chat_prompt_ids(const tokenizer::Tokenizer& tok, std::string_view rendered) {
  const int32_t bos = tok.bos();
  std::vector<int32_t> ids = tok.encode(rendered, /*add_special=*/false, /*parse_special=*/true);
  if (tok.add_bos() && bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  return ids;
}

std::string ChatSession::rendered_prompt() const {
  const TemplateTokens bound = template_tokens(tok_);
  chat::ChatRenderOptions o;
  o.add_generation_prompt = true;
  o.bos_token = bound.bos;
  o.eos_token = bound.eos;
  o.variables = options_.template_variables;
  o.reasoning_as_thinking = true;  // earlier replies keep their reasoning as reasoning_content
  return tmpl_.render(messages_, o);
}

std::vector<int32_t> ChatSession::prompt_tokens() const { return chat_prompt_ids(tok_, rendered_prompt()); }

TurnResult ChatSession::turn(const std::string& user_text, const TextSink& sink, const NoteSink& note,
                             const TextSink& reasoning) {
  TurnResult result;
  messages_.push_back(chat::ChatMessage{"user", chat::jinja::Value(user_text), {}});
  const size_t first_turn = options_.system.empty() ? 0 : 1;
  const int32_t n_ctx = session_.n_ctx();
  const int32_t reserve = std::min(options_.reply_reserve, n_ctx / 4);

  // The rendered text is kept: the reply's split reads where it leaves off (a block the prompt opened).
  std::string rendered = rendered_prompt();
  std::vector<int32_t> prompt = chat_prompt_ids(tok_, rendered);
  // Drop the oldest user/assistant exchange until the prompt leaves room for a reply.
  while (static_cast<int32_t>(prompt.size()) + reserve > n_ctx && messages_.size() > first_turn + 1) {
    const size_t n_drop = messages_.size() > first_turn + 2 ? 2 : 1;
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first_turn),
                    messages_.begin() + static_cast<std::ptrdiff_t>(first_turn + n_drop));
    ++result.dropped_turns;
    rendered = rendered_prompt();
    prompt = chat_prompt_ids(tok_, rendered);
  }
  if (result.dropped_turns > 0)
    note("context full (" + std::to_string(n_ctx) + " tokens): dropped the " + std::to_string(result.dropped_turns) +
         " oldest turn(s)");
  if (static_cast<int32_t>(prompt.size()) >= n_ctx) {
    messages_.pop_back();
    throw SessionError("this message needs " + std::to_string(prompt.size()) + " tokens with the conversation "
                       "template but the context holds " + std::to_string(n_ctx) + " (raise -c)");
  }

  // Reuse the cached prefix; at least the last prompt token is evaluated so that there are logits to sample from.
  size_t common = 0;
  while (common < cached_.size() && common < prompt.size() && cached_[common] == prompt[common]) ++common;
  common = std::min(common, prompt.size() - 1);
  result.reused_tokens = static_cast<int32_t>(common);

  GenerateOptions g = options_.generation;
  g.n_past = static_cast<int32_t>(common);
  g.echo_prompt = false;
  g.warmup = g.warmup && !warmed_up_;
  const std::span<const int32_t> fresh(prompt.data() + common, prompt.size() - common);
  // The reply's reasoning and content apart, where the template marks them; else all of it is content.
  const std::unique_ptr<chat::ReplySplit> split = chat::make_reply_split(reply_format_, rendered, false);
  const auto deliver = [&](const chat::ReplyPiece& piece) {
    if (!piece.reasoning.empty()) {
      result.reasoning += piece.reasoning;
      if (reasoning) reasoning(piece.reasoning);
    }
    if (!piece.content.empty()) {
      result.reply += piece.content;
      sink(piece.content);
    }
  };
  result.generation = generate(session_, tok_, fresh, g, [&](std::string_view text) {
    deliver(split ? split->push(text) : chat::ReplyPiece{"", std::string(text)});
  });
  if (split) deliver(split->finish());
  warmed_up_ = true;
  cached_.assign(prompt.begin(), prompt.end());
  cached_.insert(cached_.end(), result.generation.generated.begin(), result.generation.generated.end());
  chat::ChatMessage reply{"assistant", chat::jinja::Value(result.reply), {}};
  if (!result.reasoning.empty()) reply.extra.emplace_back("reasoning_content", chat::jinja::Value(result.reasoning));
  messages_.push_back(std::move(reply));
  return result;
}

}  // namespace runtime
