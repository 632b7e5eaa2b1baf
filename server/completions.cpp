// POST /v1/chat/completions and /v1/completions: the prompt ids from the request (the chat template for messages),
// one engine request, and its text either as one JSON body or as server-sent events while it is generated. A client
// that goes away cancels its request: mid-stream the failed write tells the engine at the next token; while a whole
// response is awaited, polling the connection does. A chat request that offers tools, to a template whose tool-call
// format is known, has its reply read for tool calls (tool_reply.h); one that asks for logprobs gets them
// (logprobs_reply.h).
#include <chrono>
#include <ctime>
#include <memory>
#include <optional>

#include "runtime/chat_session.h"
#include "runtime/generate.h"
#include "server/completion_channel.h"
#include "server/connection_probe.h"
#include "server/logprobs_reply.h"
#include "server/routes.h"
#include "server/tool_reply.h"
#include "tokenizer/tokenizer.h"

namespace server {
namespace {

std::vector<int32_t> prompt_ids(const RouteContext& ctx, const CompletionRequest& r) {
  const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
  const char* param = r.route == Route::Chat ? "messages" : "prompt";
  try {
    if (r.route == Route::Chat) return runtime::chat_prompt_ids(tok, render_chat(ctx, r));
    if (r.prompt_is_ids) return r.prompt_ids;
    return runtime::tokenize_prompt(tok, r.prompt_text);
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

// The closing event of a stream: the finish reason (and usage when asked), or an error for a request the server
// had to cancel or that failed; then [DONE]. tools (tool mode): what it held back goes out first, as content or as
// the reply's calls (with the tool_calls finish reason). logprobs: what was not out yet goes with the finish reason.
std::string stream_end(RouteContext& ctx, const ResponseHead& head, const CompletionChannel::Take& t,
                       bool include_usage, ToolReply* tools, LogprobsReply* logprobs) {
  std::string out;
  if (t.finish == runtime::FinishReason::Cancelled) {
    out += sse_event(error_body(shutting_down()));
  } else if (t.finish == runtime::FinishReason::Error) {
    out += sse_event(error_body(ApiError(500, "server_error", t.error)));
  } else {
    std::string finish = finish_reason_json(t.finish);
    if (tools) {
      ToolReply::End end = tools->finish();
      if (!end.content.empty()) out += sse_event(chunk_json(head, end.content, false, ""));
      if (!end.calls.empty()) {
        name_calls(ctx, end.calls);
        out += sse_event(tool_calls_chunk_json(head, end.calls));
        finish = "\"tool_calls\"";
      }
    }
    std::string lp = "null";
    if (logprobs) {
      logprobs->end(tools != nullptr);
      if (logprobs->has_ready()) lp = logprobs->take_json();
    }
    out += sse_event(chunk_json(head, "", false, finish, lp));
    if (include_usage) out += sse_event(usage_chunk_json(head, t.usage));
  }
  return out + "data: [DONE]\n\n";
}

// tools: set in tool mode; the stream then sends what it says is content, and the calls at the end (with every
// token's logprobs, when asked: the content is not the engine's text). logprobs: set when the request asks; each
// chunk carries those of the tokens its text completes.
void stream_response(RouteContext& ctx, httplib::Response& res, std::shared_ptr<CompletionChannel> channel,
                     const ResponseHead& head, uint64_t id, bool include_usage, std::shared_ptr<ToolReply> tools,
                     std::shared_ptr<LogprobsReply> logprobs) {
  auto first = std::make_shared<bool>(true);
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider(
      "text/event-stream",
      [&ctx, channel, head, id, include_usage, first, tools, logprobs](size_t, httplib::DataSink& sink) {
        // While nothing comes (the request waits in the queue), an SSE comment now and then finds out whether the
        // client is still there: clients ignore comments, and a write to a closed connection fails.
        const std::optional<CompletionChannel::Take> got = channel->take_for(ctx.options.stream_probe);
        if (!got) {
          static constexpr char kProbe[] = ": waiting\n\n";
          if (sink.write(kProbe, sizeof kProbe - 1)) return true;
          channel->client_gone();
          ctx.engine.cancel(id);
          return false;
        }
        const CompletionChannel::Take& t = *got;
        std::string out;
        if (*first && head.route == Route::Chat) out += sse_event(chunk_json(head, "", true, ""));
        *first = false;
        const std::string text = tools ? tools->push(t.tokens) : t.text;
        std::string lp = "null";
        if (logprobs) {
          logprobs->push(t.logprobs);
          if (!tools) logprobs->show(text);
          if (!text.empty()) lp = logprobs->take_json();
        }
        if (!text.empty()) out += sse_event(chunk_json(head, text, false, "", lp));
        if (t.done) out += stream_end(ctx, head, t, include_usage, tools.get(), logprobs.get());
        if (out.empty()) return true;  // ids without text yet (held back): nothing to say
        // A failed write is the client gone: cancel now rather than at the engine's next callback.
        if (!sink.write(out.data(), out.size())) {
          channel->client_gone();
          ctx.engine.cancel(id);
          return false;
        }
        if (t.done) sink.done();
        return true;
      },
      // Called once the response is over, whether it was written to the end or not.
      [&ctx, channel, id](bool success) {
        if (!success) {
          channel->client_gone();
          ctx.engine.cancel(id);
        }
        ctx.close_response();
      });
}

// Everything until the end, for a whole response; meanwhile the connection is polled, and a client that left
// cancels the request (its Final still comes, so this returns). gone: whether that happened.
CompletionChannel::Take wait_whole(RouteContext& ctx, const httplib::Request& req, CompletionChannel& channel,
                                   uint64_t id, bool& gone) {
  const ConnectionProbe probe(req);
  CompletionChannel::Take all;
  auto next_poll = std::chrono::steady_clock::now() + ctx.options.connection_poll;
  for (;;) {
    if (std::optional<CompletionChannel::Take> t = channel.take_for(ctx.options.connection_poll)) {
      all.text += t->text;
      all.tokens.insert(all.tokens.end(), t->tokens.begin(), t->tokens.end());
      all.logprobs.insert(all.logprobs.end(), t->logprobs.begin(), t->logprobs.end());
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
        channel.client_gone();
        ctx.engine.cancel(id);
      }
    }
  }
}

}  // namespace

std::string render_chat(const RouteContext& ctx, const CompletionRequest& r) {
  const runtime::TemplateTokens bound = runtime::template_tokens(ctx.engine.tokenizer());
  chat::ChatRenderOptions o;
  o.add_generation_prompt = true;
  o.bos_token = bound.bos;
  o.eos_token = bound.eos;
  o.tools = r.tools;
  try {
    return ctx.tmpl.render(r.messages, o);
  } catch (const chat::TemplateError& e) {
    throw ApiError(400, "invalid_request_error", std::string("the chat template refused the messages: ") + e.what(),
                   "messages", "template_error");
  }
}

void handle_completion(RouteContext& ctx, const httplib::Request& req, httplib::Response& res, Route route) {
  if (ctx.stopping) throw shutting_down();
  const CompletionRequest r = parse_completion_request(req.body, route);
  runtime::EngineRequest er;
  er.prompt = prompt_ids(ctx, r);
  er.sampling = r.sampling;
  if (!r.seed_given) er.sampling.seed = ctx.random_seed();
  er.max_tokens = r.max_tokens;
  er.stop = r.stop;
  er.ignore_eos = r.ignore_eos;
  er.top_logprobs = r.top_logprobs;
  std::shared_ptr<LogprobsReply> logprobs;
  if (r.top_logprobs >= 0) logprobs = std::make_shared<LogprobsReply>(ctx.engine.tokenizer(), er.prompt, route);

  auto channel = std::make_shared<CompletionChannel>();
  runtime::SubmitResult sub;
  try {
    sub = ctx.engine.submit(std::move(er), [channel](const runtime::EngineEvent& e) { return channel->on_event(e); });
  } catch (const runtime::RequestError& e) {
    throw request_error(e, route);
  }
  if (sub.status == runtime::SubmitStatus::QueueFull)
    throw ApiError(429, "rate_limit_error", "the server is busy (its request queue is full); retry later", "",
                   "queue_full");
  if (sub.status == runtime::SubmitStatus::ShuttingDown) throw shutting_down();

  const std::string prefix = route == Route::Chat ? "chatcmpl-" : "cmpl-";
  const ResponseHead head{route, prefix + std::to_string(ctx.next_id++), static_cast<int64_t>(std::time(nullptr)),
                          ctx.options.model_id};
  // Tool mode: only where the request offers tools and the template's format for calls is known; otherwise the
  // reply is the engine's text, exactly as without tools.
  const bool offers_tools = r.tools.is_array() && !r.tools.items().empty() && !r.tool_choice_none;
  std::shared_ptr<ToolReply> tools;
  if (route == Route::Chat && offers_tools && ctx.tool_format != ToolCallFormat::None)
    tools = std::make_shared<ToolReply>(ctx.engine.tokenizer(), ctx.tool_format, r.stop);
  ctx.open_response();
  if (r.stream) {
    stream_response(ctx, res, channel, head, sub.id, r.include_usage, tools, logprobs);  // closes it when over
    return;
  }
  struct Close {
    RouteContext& ctx;
    ~Close() { ctx.close_response(); }
  } close{ctx};
  bool gone = false;
  const CompletionChannel::Take t = wait_whole(ctx, req, *channel, sub.id, gone);
  // Nobody reads this answer; it names what happened for the log and the counters.
  if (gone) throw ApiError(499, "invalid_request_error", "the client closed the connection", "", "client_closed");
  if (t.finish == runtime::FinishReason::Cancelled) throw shutting_down();
  if (t.finish == runtime::FinishReason::Error) throw ApiError(500, "server_error", t.error);
  std::string lp = "null";
  if (logprobs) {
    logprobs->push(t.logprobs);
    if (!tools) logprobs->show(t.text);
    logprobs->end(tools != nullptr);
    lp = logprobs->take_json();
  }
  if (tools) {
    std::string content = tools->push(t.tokens);
    ToolReply::End end = tools->finish();
    content += end.content;
    if (!end.calls.empty()) {
      name_calls(ctx, end.calls);
      send_json(res, tool_calls_completion_json(head, content, end.calls, t.usage, lp));
    } else {
      send_json(res, completion_json(head, content, t.finish, t.usage, lp));
    }
    return;
  }
  send_json(res, completion_json(head, t.text, t.finish, t.usage, lp));
}

}  // namespace server
