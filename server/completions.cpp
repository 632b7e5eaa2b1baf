// POST /v1/chat/completions and /v1/completions: the prompt ids from the request (the chat template for messages),
// one engine request, and its text either as one JSON body or as server-sent events while it is generated. A client
// that goes away cancels its request: mid-stream the failed write tells the engine at the next token; while a whole
// response is awaited, polling the connection does. A chat request that offers tools, to a template whose tool-call
// format is known, has its reply read for tool calls (tool_reply.h); one that asks for logprobs gets them
// (logprobs_reply.h). best_of (completions) generates more candidates than it answers and keeps the n best; echo
// puts the prompt in front of each choice's text.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <functional>
#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "chat/reasoning_split.h"
#include "chat/reply_split.h"
#include "runtime/chat_session.h"
#include "runtime/generate.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/lead_in.h"
#include "server/completion_channel.h"
#include "server/connection_probe.h"
#include "server/logprobs_reply.h"
#include "server/routes.h"
#include "server/tool_choice.h"
#include "server/tool_reply.h"
#include "tokenizer/tokenizer.h"

namespace server {
namespace {

// The ids of prompt p (chat: the conversation rendered by the template, whose text goes to *rendered).
std::vector<int32_t> prompt_ids(const RouteContext& ctx, const CompletionRequest& r, size_t p, std::string* rendered) {
  const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
  const char* param = r.route == Route::Chat ? "messages" : "prompt";
  try {
    if (r.route == Route::Chat) {
      *rendered = render_chat(ctx, r);
      return runtime::chat_prompt_ids(tok, *rendered);
    }
    const CompletionRequest::Prompt& prompt = r.prompts.at(p);
    if (prompt.is_ids) return prompt.ids;
    return runtime::tokenize_prompt(tok, prompt.text);
  } catch (const tokenizer::TokenizerError& e) {
    throw invalid_field(param, e.what());
  } catch (const runtime::SessionError& e) {  // an empty prompt and no BOS to start from
    throw invalid_field(param, e.what());
  }
}

ApiError request_error(const runtime::RequestError& e, Route route) {
  const char* prompt_param = route == Route::Chat ? "messages" : "prompt";
  using K = runtime::RequestError::Kind;
  switch (e.kind()) {
    case K::ContextLength: return invalid_field(prompt_param, e.what(), "context_length_exceeded");
    case K::EmptyPrompt:
    case K::BadToken: return invalid_field(prompt_param, e.what());
    case K::BadLimit: return invalid_field("max_tokens", e.what());
    case K::BadLogprobs: return invalid_field(route == Route::Chat ? "top_logprobs" : "logprobs", e.what());
    case K::BadLogitBias: return invalid_field("logit_bias", e.what());
    case K::BadSampling: return invalid_field("", e.what());
  }
  return invalid_field("", e.what());
}

ApiError shutting_down() {
  return ApiError(503, "server_error", "the server is shutting down", "", "shutting_down");
}

// Ids for the calls: the model's own where its format has valid ones (Mistral's, which its template checks when
// the client sends them back), else fresh ones.
void name_calls(RouteContext& ctx, std::vector<ToolCall>& calls) {
  for (ToolCall& c : calls) {
    const bool keep = ctx.tool_format == ToolCallFormat::Mistral && c.id.size() == 9 &&
                      c.id.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") ==
                          std::string::npos;
    if (!keep) c.id = make_tool_call_id(ctx.tool_format, ctx.random_seed());
  }
}

// The calls a reply made in its format's own way (harmony's), as tool calls to name.
std::vector<ToolCall> split_calls(const chat::ReplySplit& split) {
  std::vector<ToolCall> calls;
  for (chat::ReplyCall& c : split.calls()) calls.push_back(ToolCall{"", std::move(c.name), std::move(c.arguments)});
  return calls;
}

// One choice of a request: its engine request, the channel its text comes through, and what reads the text.
struct Choice {
  int index = 0;
  bool counts_prompt = false;  // the first choice of its prompt: its prompt (and cached) tokens go into the usage
  std::shared_ptr<CompletionChannel> channel;
  uint64_t id = 0;  // the engine's
  std::shared_ptr<ToolReply> tools;  // tool mode
  std::shared_ptr<LogprobsReply> logprobs;  // when asked
  std::shared_ptr<chat::ReplySplit> split;  // chat, where the template marks reasoning (RouteContext::reply_format)
  std::string echo;   // completions' echo: the prompt, in front of the text
  std::vector<int32_t> echo_ids;  // echo with logprobs: the prompt's ids, whose logprobs lead the reply's
  bool first = true;  // streaming: nothing sent yet (chat's first chunk carries the role; echo's the prompt)
  bool done = false;
  runtime::Usage usage;
};

void cancel_all(RouteContext& ctx, const std::vector<std::shared_ptr<Choice>>& choices) {
  for (const auto& c : choices) {
    c->channel->client_gone();
    ctx.engine.cancel(c->id);
  }
}

// The usage of a request: each prompt's tokens once, every choice's completion tokens.
runtime::Usage total_usage(const std::vector<std::shared_ptr<Choice>>& choices) {
  runtime::Usage u;
  for (const auto& c : choices) {
    if (c->counts_prompt) u.prompt_tokens += c->usage.prompt_tokens, u.cached_tokens += c->usage.cached_tokens;
    u.completion_tokens += c->usage.completion_tokens;
  }
  return u;
}

// The events of one take of choice c: its text (with its logprobs), and at its end the finish chunk — tools
// (tool mode): what it held back goes out first, as content or as the reply's calls (with the tool_calls finish
// reason); logprobs: what was not out yet goes with the finish reason. A cancelled or failed choice gives nothing
// here (the caller ends the stream with an error).
std::string choice_events(RouteContext& ctx, const ResponseHead& head, Choice& c, const CompletionChannel::Take& t) {
  std::string out;
  if (c.first && head.route == Route::Chat) out += sse_event(chunk_json(head, "", true, "", "null", c.index));
  if (c.first && c.logprobs && !c.echo_ids.empty()) c.logprobs->prompt(c.echo_ids, t.prompt_logprobs);
  if (c.first && !c.echo.empty())
    out += sse_event(chunk_json(head, c.echo, false, "", c.logprobs ? c.logprobs->take_json() : "null", c.index));
  c.first = false;
  // The reply's text as reasoning and content chunks (chat/reply_split.h): lp, when not null, goes with the first
  // chunk, or alone in an empty one when the split holds all of the text back.
  const auto send = [&](const std::string& text, std::string lp, bool last) {
    chat::ReplyPiece piece;
    if (c.split) {
      piece = c.split->push(text);
      if (last) {
        chat::ReplyPiece end = c.split->finish();
        piece.reasoning += end.reasoning, piece.content += end.content;
      }
    } else {
      piece.content = text;
    }
    if (!piece.reasoning.empty()) {
      out += sse_event(reasoning_chunk_json(head, piece.reasoning, lp, c.index));
      lp = "null";
    }
    if (!piece.content.empty() || lp != "null")
      out += sse_event(chunk_json(head, piece.content, false, "", lp, c.index));
  };
  const std::string text = c.tools ? c.tools->push(t.tokens) : t.text;
  std::string lp = "null";
  if (c.logprobs) {
    c.logprobs->push(t.logprobs);
    if (!c.tools) c.logprobs->show(text);
    if (!text.empty()) lp = c.logprobs->take_json();
  }
  const bool finished = t.done && t.finish != runtime::FinishReason::Cancelled &&
                        t.finish != runtime::FinishReason::Error;
  // The last text of a reply without tools; with tools, the held text comes after this at the end.
  send(text, lp, finished && !c.tools);
  if (!t.done) return out;
  c.done = true;
  c.usage = t.usage;
  if (!finished) return out;
  std::string finish = finish_reason_json(t.finish);
  std::vector<ToolCall> calls;
  if (c.tools) {
    ToolReply::End end = c.tools->finish();
    send(end.content, "null", true);
    calls = std::move(end.calls);
  } else if (c.split) {
    calls = split_calls(*c.split);  // harmony's messages to functions
  }
  if (!calls.empty()) {
    name_calls(ctx, calls);
    out += sse_event(tool_calls_chunk_json(head, calls, c.index));
    finish = "\"tool_calls\"";
  }
  lp = "null";
  if (c.logprobs) {
    c.logprobs->end(c.tools != nullptr);
    if (c.logprobs->has_ready()) lp = c.logprobs->take_json();
  }
  return out + sse_event(chunk_json(head, "", false, finish, lp, c.index));
}

// The stream of every choice, interleaved as their text comes: each chunk names its choice's index. The end: an
// error event if a choice was cancelled (the server stopping) or failed (the others are then cancelled), else the
// usage when asked, then [DONE].
void stream_response(RouteContext& ctx, httplib::Response& res, std::vector<std::shared_ptr<Choice>> choices,
                     std::shared_ptr<ChannelWakeup> wakeup, const ResponseHead& head, bool include_usage) {
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&ctx, choices, wakeup, head, include_usage](size_t, httplib::DataSink& sink) {
        const auto gone = [&] {
          cancel_all(ctx, choices);
          return false;
        };
        std::string out;
        std::optional<CompletionChannel::Take> failed;
        // While nothing comes (the requests wait in the queue), an SSE comment now and then finds out whether the
        // client is still there: clients ignore comments, and a write to a closed connection fails.
        const auto deadline = std::chrono::steady_clock::now() + ctx.options.stream_probe;
        for (;;) {
          uint64_t seen = 0;
          {
            std::lock_guard lock(wakeup->mutex);
            seen = wakeup->events;
          }
          bool news = false;
          for (const auto& c : choices) {
            if (c->done) continue;
            std::optional<CompletionChannel::Take> t = c->channel->take_now();
            if (!t) continue;
            news = true;
            out += choice_events(ctx, head, *c, *t);
            if (t->done && (t->finish == runtime::FinishReason::Cancelled ||
                            t->finish == runtime::FinishReason::Error) && !failed)
              failed = std::move(t);
          }
          if (news) break;
          bool quiet = false;
          {
            std::unique_lock lock(wakeup->mutex);
            quiet = !wakeup->cv.wait_until(lock, deadline, [&] { return wakeup->events != seen; });
          }  // released first: a cancel below delivers a queued request's Final, which takes the lock
          if (quiet) {
            static constexpr char kProbe[] = ": waiting\n\n";
            return sink.write(kProbe, sizeof kProbe - 1) ? true : gone();
          }
        }
        const bool all_done = std::all_of(choices.begin(), choices.end(), [](const auto& c) { return c->done; });
        if (failed) {
          cancel_all(ctx, choices);  // the request fails as a whole
          out += sse_event(error_body(failed->finish == runtime::FinishReason::Cancelled
                                          ? shutting_down()
                                          : ApiError(500, "server_error", failed->error)));
          out += "data: [DONE]\n\n";
        } else if (all_done) {
          if (include_usage) out += sse_event(usage_chunk_json(head, total_usage(choices)));
          out += "data: [DONE]\n\n";
        }
        if (out.empty()) return true;  // ids without text yet (held back): nothing to say
        // A failed write is the client gone: cancel now rather than at the engine's next callback.
        if (!sink.write(out.data(), out.size())) return gone();
        if (failed || all_done) sink.done();
        return true;
      },
      // Called once the response is over, whether it was written to the end or not.
      [&ctx, choices](bool success) {
        if (!success) cancel_all(ctx, choices);
        ctx.close_response();
      });
}

// Everything until the end, for a whole response; meanwhile the connection is polled, and a client that left
// cancels the request (its Final still comes, so this returns). gone: whether that happened.
CompletionChannel::Take wait_whole(RouteContext& ctx, const ConnectionProbe& probe, CompletionChannel& channel,
                                   const std::vector<std::shared_ptr<Choice>>& choices, bool& gone) {
  CompletionChannel::Take all;
  auto next_poll = std::chrono::steady_clock::now() + ctx.options.connection_poll;
  for (;;) {
    if (std::optional<CompletionChannel::Take> t = channel.take_for(ctx.options.connection_poll)) {
      all.text += t->text;
      all.tokens.insert(all.tokens.end(), t->tokens.begin(), t->tokens.end());
      all.logprobs.insert(all.logprobs.end(), t->logprobs.begin(), t->logprobs.end());
      all.prompt_logprobs.insert(all.prompt_logprobs.end(), t->prompt_logprobs.begin(), t->prompt_logprobs.end());
      if (t->done) {
        all.done = true, all.finish = t->finish, all.usage = t->usage, all.error = t->error;
        return all;
      }
    }
    // Text comes at every token; the connection is looked at no more often than connection_poll.
    const auto now = std::chrono::steady_clock::now();
    if (!gone && now >= next_poll) {
      next_poll = now + ctx.options.connection_poll;
      if (probe.closed()) {
        gone = true;
        cancel_all(ctx, choices);
      }
    }
  }
}

// Choice c's whole answer (tools: its calls when it makes some; logprobs: when asked).
std::string whole_choice(RouteContext& ctx, const CompletionRequest& r, Choice& c, const CompletionChannel::Take& t) {
  std::string lp = "null";
  if (c.logprobs) {
    if (!c.echo_ids.empty()) c.logprobs->prompt(c.echo_ids, t.prompt_logprobs);
    c.logprobs->push(t.logprobs);
    if (!c.tools) c.logprobs->show(t.text);
    c.logprobs->end(c.tools != nullptr);
    lp = c.logprobs->take_json();
  }
  std::string content = t.text;
  ToolReply::End end;
  if (c.tools) {
    content = c.tools->push(t.tokens);
    end = c.tools->finish();
    content += end.content;
  }
  std::string reasoning;
  if (c.split) {
    chat::ReplyPiece piece = c.split->push(content), rest = c.split->finish();
    reasoning = piece.reasoning + rest.reasoning;
    content = piece.content + rest.content;
    if (!c.tools) end.calls = split_calls(*c.split);  // harmony's messages to functions
  }
  if (!end.calls.empty()) {
    name_calls(ctx, end.calls);
    return tool_calls_choice_json(c.index, content, end.calls, lp, reasoning);
  }
  return choice_json(r.route, c.index, c.echo + content, t.finish, lp, reasoning);
}

// best_of: of each prompt's `candidates` takes (in order, prompt by prompt), the `keep` whose generated tokens have
// the highest mean logprob (OpenAI's "highest log probability per token"; no token: 0), best first, ties by order.
// Every token the engine generated counts, those a stop string cut from the text too.
std::vector<size_t> best_candidates(const std::vector<CompletionChannel::Take>& takes, size_t candidates, size_t keep) {
  std::vector<size_t> out;
  for (size_t first = 0; first < takes.size(); first += candidates) {
    std::vector<std::pair<double, size_t>> scored;
    for (size_t i = first; i < first + candidates; ++i) {
      double sum = 0.0;
      for (const runtime::TokenLogprobs& t : takes[i].logprobs) sum += t.sampled.logprob;
      const size_t n = takes[i].logprobs.size();
      scored.emplace_back(n ? sum / double(n) : 0.0, i);
    }
    std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    for (size_t k = 0; k < keep; ++k) out.push_back(scored[k].second);
  }
  return out;
}

using Grammar = std::shared_ptr<const runtime::ByteGrammar>;

// What holds each choice's reply, if anything: grammars (a forced call's, a schema's or a GBNF grammar), or JSON mode
// (runtime/json_constraint.h); with a lead-in, the same after what the lead-in writes (runtime/lead_in.h). Prepared
// once a request; the function gives a choice its own constraint (null: none).
std::function<std::shared_ptr<runtime::TokenConstraint>()> held_form(RouteContext& ctx, const CompletionRequest& r,
                                                                     const std::vector<Grammar>& grammars,
                                                                     const std::optional<runtime::Lead>& lead) {
  const Grammar first = grammars.empty() ? nullptr : grammars[0];
  if (!first && !r.json_object) return [] { return std::shared_ptr<runtime::TokenConstraint>(); };
  const std::shared_ptr<const runtime::ConstraintVocabulary> vocab = ctx.json_vocabulary();
  if (first) {
    if (lead) return [form = runtime::LeadInForm::grammars(vocab, grammars, *lead)] { return form.start(); };
    return [vocab, first]() -> std::shared_ptr<runtime::TokenConstraint> {
      return runtime::make_grammar_constraint(vocab, first);
    };
  }
  if (lead) return [form = runtime::LeadInForm::json(vocab, *lead)] { return form.start(); };
  return [vocab]() -> std::shared_ptr<runtime::TokenConstraint> {
    return std::make_shared<runtime::JsonConstraint>(vocab);
  };
}

// What a thinking model may write before a held reply, by its template's markup: a <think> block (or the rest of
// the one the prompt opened), or harmony's analysis messages and the final channel's header (a forced call brings
// its own lead-in). None for a GBNF grammar, which holds the reply from its first byte, or where replies are not
// split (--reasoning-format none).
std::optional<runtime::Lead> lead_in(chat::ReplyFormat format, const CompletionRequest& r,
                                     const std::string& chat_prompt) {
  if (r.grammar_is_gbnf) return std::nullopt;
  if (format == chat::ReplyFormat::Think) return runtime::Lead::think(chat::prompt_opens_thinking(chat_prompt));
  if (format == chat::ReplyFormat::Harmony) return runtime::Lead::harmony_final();
  return std::nullopt;
}

}  // namespace

std::string render_chat(const RouteContext& ctx, const CompletionRequest& r) {
  const runtime::TemplateTokens bound = runtime::template_tokens(ctx.engine.tokenizer());
  chat::ChatRenderOptions o;
  o.add_generation_prompt = true;
  o.bos_token = bound.bos;
  o.eos_token = bound.eos;
  o.tools = r.tools;
  o.reasoning_as_thinking = true;  // clients send reasoning back as reasoning_content
  o.variables = ctx.options.template_variables;  // the server's, then the request's, which replace them
  o.variables.insert(o.variables.end(), r.template_variables.begin(), r.template_variables.end());
  try {
    // Content given as a list of text parts reaches a template written for strings as one string.
    const auto is_list = [](const chat::ChatMessage& m) { return m.content.is_array(); };
    if (!ctx.text_parts_whole && std::any_of(r.messages.begin(), r.messages.end(), is_list)) {
      std::vector<chat::ChatMessage> messages = r.messages;
      for (chat::ChatMessage& m : messages) m.content = chat::join_text_parts(m.content);
      return ctx.tmpl.render(messages, o);
    }
    return ctx.tmpl.render(r.messages, o);
  } catch (const chat::TemplateError& e) {
    throw ApiError(400, "invalid_request_error", std::string("the chat template refused the messages: ") + e.what(),
                   "messages", "template_error");
  }
}

void handle_completion(RouteContext& ctx, const httplib::Request& req, httplib::Response& res, Route route) {
  if (ctx.stopping) throw shutting_down();
  const CompletionRequest r = parse_completion_request(req.body, route);
  // Tool mode: only where the request offers tools and the template's format for calls is known; otherwise the
  // reply is the engine's text, exactly as without tools.
  const bool offers_tools = r.tools.is_array() && !r.tools.items().empty() && !r.tool_choice_none;
  const bool tool_mode = route == Route::Chat && offers_tools && ctx.tool_format != ToolCallFormat::None;
  // Where the template marks reasoning, each chat reply's is split from its content (chat/reply_split.h); harmony's
  // split also reads its calls.
  const chat::ReplyFormat reply_format = route == Route::Chat ? ctx.reply_format : chat::ReplyFormat::Plain;
  const bool harmony_calls = route == Route::Chat && offers_tools && reply_format == chat::ReplyFormat::Harmony;
  // tool_choice "required" or a named function: one call, held where the format allows (server/tool_choice.h);
  // elsewhere the choice is read as "auto".
  std::optional<ForcedCall> forced;
  if ((tool_mode || harmony_calls) && (r.tool_choice_required || !r.tool_choice_name.empty())) {
    try {
      forced = forced_call(ctx.tool_format, reply_format, ctx.tmpl.source(), ctx.engine.tokenizer(), r.tools,
                           r.tool_choice_name, r.parallel_tool_calls);
    } catch (const runtime::JsonSchemaError& e) {
      throw invalid_field("tools", e.what(), "unsupported_schema");
    }
    if (forced && (r.json_object || r.grammar))
      throw invalid_field("tool_choice",
                          "a reply cannot be held both to a forced tool call and to a response_format or grammar",
                          "unsupported_parameter");
  }

  // Every prompt's ids first (a bad one refuses the request before anything runs), then n engine requests each
  // (best_of's candidates where more): choice i = prompt i / n, its seed the request's + i (so choices differ), or
  // a fresh one. Candidates to rank bring their tokens' logprobs, whether the answer shows them or not.
  const bool ranked = r.best_of > r.n;
  const size_t n_prompts = route == Route::Chat ? 1 : r.prompts.size();
  std::vector<std::vector<int32_t>> ids;
  std::string chat_prompt;
  for (size_t p = 0; p < n_prompts; ++p) ids.push_back(prompt_ids(ctx, r, p, &chat_prompt));
  const std::optional<runtime::Lead> lead =
      forced && forced->lead ? forced->lead : lead_in(reply_format, r, chat_prompt);
  const auto start_held = held_form(ctx, r, forced ? forced->grammars : std::vector<Grammar>{r.grammar}, lead);
  // echo: each prompt's text once (completions only: the parser refuses it on chat). With logprobs it is the
  // prompt's ids decoded, which their offsets count in. Ids outside the vocabulary are left to the engine's submit
  // below, which refuses them (the echo is then never used).
  std::vector<std::string> echoes;
  if (r.echo) {
    const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
    const auto in_vocab = [&](int32_t id) { return id >= 0 && id < tok.n_vocab(); };
    for (size_t p = 0; p < n_prompts; ++p) {
      const CompletionRequest::Prompt& given = r.prompts.at(p);
      const bool decoded = given.is_ids || r.top_logprobs >= 0;
      echoes.push_back(!decoded                                      ? given.text
                       : std::all_of(ids[p].begin(), ids[p].end(), in_vocab) ? tok.decode(ids[p])
                                                                     : std::string());
    }
  }
  auto wakeup = std::make_shared<ChannelWakeup>();
  std::vector<std::shared_ptr<Choice>> choices;
  for (size_t p = 0; p < n_prompts; ++p)
    for (int32_t j = 0; j < r.best_of; ++j) {
      auto c = std::make_shared<Choice>();
      c->index = static_cast<int>(choices.size());
      c->counts_prompt = j == 0;
      c->channel = std::make_shared<CompletionChannel>(wakeup);
      runtime::EngineRequest er;
      er.prompt = ids[p];
      er.sampling = r.sampling;
      er.sampling.seed = r.seed_given ? r.sampling.seed + uint64_t(c->index) : ctx.random_seed();
      er.max_tokens = r.max_tokens;
      er.stop = r.stop;
      er.ignore_eos = r.ignore_eos;
      er.top_logprobs = ranked ? std::max(r.top_logprobs, 0) : r.top_logprobs;
      er.prompt_logprobs = r.echo && r.top_logprobs >= 0;  // how evaluation harnesses score a text
      if (r.top_logprobs >= 0) c->logprobs = std::make_shared<LogprobsReply>(ctx.engine.tokenizer(), er.prompt, route);
      er.constraint = start_held();
      if (tool_mode) c->tools = std::make_shared<ToolReply>(ctx.engine.tokenizer(), ctx.tool_format, r.stop);
      c->split = chat::make_reply_split(reply_format, chat_prompt, offers_tools);
      runtime::SubmitResult sub;
      try {
        sub = ctx.engine.submit(std::move(er),
                                [channel = c->channel](const runtime::EngineEvent& e) { return channel->on_event(e); });
      } catch (const runtime::RequestError& e) {
        cancel_all(ctx, choices);
        throw request_error(e, route);
      }
      if (sub.status != runtime::SubmitStatus::Accepted) {
        cancel_all(ctx, choices);  // all or nothing
        if (sub.status == runtime::SubmitStatus::ShuttingDown) throw shutting_down();
        throw ApiError(429, "rate_limit_error", "the server is busy (its request queue is full); retry later", "",
                       "queue_full");
      }
      c->id = sub.id;
      if (r.echo) {
        c->echo = echoes[p];
        if (r.top_logprobs >= 0) c->echo_ids = ids[p];
      }
      choices.push_back(std::move(c));
    }

  const std::string prefix = route == Route::Chat ? "chatcmpl-" : "cmpl-";
  const ResponseHead head{route, prefix + std::to_string(ctx.next_id++), static_cast<int64_t>(std::time(nullptr)),
                          ctx.options.model_id};
  ctx.open_response();
  if (r.stream) {
    stream_response(ctx, res, choices, wakeup, head, r.include_usage);  // closes it when over
    return;
  }
  struct Close {
    RouteContext& ctx;
    ~Close() { ctx.close_response(); }
  } close{ctx};
  const ConnectionProbe probe(req);
  bool gone = false;
  std::vector<CompletionChannel::Take> takes;
  for (const auto& c : choices) {
    takes.push_back(wait_whole(ctx, probe, *c->channel, choices, gone));
    c->usage = takes.back().usage;
  }
  // Nobody reads this answer; it names what happened for the log and the counters.
  if (gone) throw ApiError(499, "invalid_request_error", "the client closed the connection", "", "client_closed");
  for (const auto& t : takes) {
    if (t.finish == runtime::FinishReason::Cancelled) throw shutting_down();
    if (t.finish == runtime::FinishReason::Error) throw ApiError(500, "server_error", t.error);
  }
  std::vector<size_t> answered(choices.size());
  std::iota(answered.begin(), answered.end(), size_t(0));
  if (ranked) answered = best_candidates(takes, size_t(r.best_of), size_t(r.n));
  std::vector<std::string> bodies;
  for (size_t k = 0; k < answered.size(); ++k) {
    Choice& c = *choices[answered[k]];
    c.index = static_cast<int>(k);
    bodies.push_back(whole_choice(ctx, r, c, takes[answered[k]]));
  }
  send_json(res, completion_body_json(head, bodies, total_usage(choices)));  // every candidate's tokens
}

}  // namespace server
