// The generation routes end to end on stories260K: both routes, streaming and not, give exactly the greedy text
// generate() gives for the same prompt ids; usage, finish reasons, stop strings, concurrent requests; and the
// helper routes (/v1/models, /v1/models/{id}, /health, /tokenize, /detokenize, /apply-template).
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>

#include "gguf/gguf.h"
#include "runtime/json_prefix.h"
#include "server_fixture.h"

namespace test_server {
namespace {

// The concatenated text of a stream's chunks, with its finish reason and usage chunk, checked for the framing:
// data events only, [DONE] last, one finish reason on the last choice chunk.
struct Streamed {
  std::string text;
  std::string reasoning;  // chat: delta.reasoning_content, concatenated
  std::string finish;
  Value usage;
  bool role_first = false;
};

Streamed read_stream(const test_http::Response& r, bool chat) {
  Streamed s;
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.headers.count("content-type") ? r.headers.at("content-type") : "", "text/event-stream");
  const std::vector<std::string> events = test_http::sse_data(r.body);
  EXPECT_GE(events.size(), 2u) << r.body;
  if (events.empty()) return s;
  EXPECT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Value e = json(events[i]);
    EXPECT_EQ(str(at(e, "object")), chat ? "chat.completion.chunk" : "text_completion");
    const Value& choices = at(e, "choices");
    if (choices.is_array() && choices.items().empty()) {
      s.usage = at(e, "usage");
      continue;
    }
    const Value& c = at(choices, 0);
    EXPECT_TRUE(s.finish.empty()) << "a chunk after the finish reason: " << events[i];
    if (at(c, "finish_reason").is_string()) s.finish = str(at(c, "finish_reason"));
    if (chat) {
      const Value& delta = at(c, "delta");
      if (i == 0) s.role_first = str(at(delta, "role")) == "assistant";
      if (at(delta, "content").is_string()) s.text += at(delta, "content").as_string();
      if (at(delta, "reasoning_content").is_string()) s.reasoning += at(delta, "reasoning_content").as_string();
    } else {
      s.text += str(at(c, "text"));
    }
  }
  return s;
}

TEST_F(ServerTest, CompletionNotStreamed) {
  start();
  const std::string expected = greedy(completion_prompt("Once upon a time"), 24);
  const auto r = post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 24, "temperature": 0})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Value b = json(r.body);
  EXPECT_EQ(str(at(b, "object")), "text_completion");
  EXPECT_EQ(str(at(b, "model")), "stories260K");
  EXPECT_EQ(str(at(at(at(b, "choices"), 0), "text")), expected);
  EXPECT_EQ(str(at(at(at(b, "choices"), 0), "finish_reason")), "length");
  const Value& u = at(b, "usage");
  EXPECT_EQ(at(u, "prompt_tokens").as_int(), int64_t(completion_prompt("Once upon a time").size()));
  EXPECT_EQ(at(u, "completion_tokens").as_int(), 24);
  EXPECT_EQ(at(u, "total_tokens").as_int(), at(u, "prompt_tokens").as_int() + 24);
}

TEST_F(ServerTest, CompletionStreamedIsTheSameText) {
  start();
  const std::string expected = greedy(completion_prompt("Lily went"), 30);
  const auto r = post("/v1/completions", R"({"prompt": "Lily went", "max_tokens": 30, "temperature": 0,
      "stream": true, "stream_options": {"include_usage": true}})");
  const Streamed s = read_stream(r, false);
  EXPECT_EQ(s.text, expected);
  EXPECT_EQ(s.finish, "length");
  EXPECT_EQ(at(s.usage, "completion_tokens").as_int(), 30);
}

// logit_bias: -100 on the first greedy token takes the text elsewhere, exactly where the CPU sampler with that bias
// goes; a token id past the vocabulary is a 400 naming the field.
TEST_F(ServerTest, LogitBiasTakesTheGreedyTextElsewhere) {
  start();
  const std::vector<int32_t> prompt = completion_prompt("Once upon a time");
  runtime::CpuSession session(model_, 512, 1);
  runtime::GenerateOptions o;
  o.sampling.temp = 0, o.n_predict = 1, o.echo_prompt = false;
  const int32_t first = runtime::generate(session, *tok_, prompt, o, [](std::string_view) {}).generated.at(0);
  const std::string biased = greedy(prompt, 12, {{first, -100.0f}});
  EXPECT_NE(biased, greedy(prompt, 12));
  const auto r = post("/v1/completions", R"({"prompt": "Once upon a time", "max_tokens": 12, "temperature": 0,
      "logit_bias": {")" + std::to_string(first) + R"(": -100}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(at(at(json(r.body), "choices"), 0), "text")), biased);
  const auto bad = post("/v1/completions", R"({"prompt": "x", "logit_bias": {"999999": 1}})");
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(str(at(at(json(bad.body), "error"), "param")), "logit_bias");
}

TEST_F(ServerTest, PromptAsTokenIds) {
  start();
  const std::vector<int32_t> ids = completion_prompt("The cat");
  const auto r = post("/v1/completions", R"({"prompt": [)" + id_list(ids) + R"(], "max_tokens": 10, "temperature": 0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(at(at(json(r.body), "choices"), 0), "text")), greedy(ids, 10));
}

TEST_F(ServerTest, ChatNotStreamedAndStreamedAgree) {
  start();
  const std::string expected = greedy(chat_prompt("Tell me a story."), 20);
  const std::string body = R"({"model": "x", "messages": [{"role": "user", "content": "Tell me a story."}],
      "max_completion_tokens": 20, "temperature": 0)";
  const auto whole = post("/v1/chat/completions", body + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Value b = json(whole.body);
  EXPECT_EQ(str(at(b, "object")), "chat.completion");
  const Value& choice = at(at(b, "choices"), 0);
  EXPECT_EQ(str(at(at(choice, "message"), "role")), "assistant");
  EXPECT_EQ(str(at(at(choice, "message"), "content")), expected);
  EXPECT_EQ(str(at(choice, "finish_reason")), "length");
  EXPECT_EQ(at(at(b, "usage"), "prompt_tokens").as_int(), int64_t(chat_prompt("Tell me a story.").size()));

  const Streamed s = read_stream(post("/v1/chat/completions", body + R"(, "stream": true})"), true);
  EXPECT_TRUE(s.role_first);
  EXPECT_EQ(s.text, expected);
  EXPECT_EQ(s.finish, "length");
  EXPECT_TRUE(s.usage.is_undefined()) << "usage chunk without include_usage";
}

// Content as a list of text parts (as many OpenAI clients send it) reaches the string-only ChatML template as the
// parts' text joined by newlines: the same reply as that string; a part of another kind is a 400 naming the content.
TEST_F(ServerTest, ChatTextPartsAreTheJoinedString) {
  start();
  const std::string expected = greedy(chat_prompt("Tell me\na story."), 12);
  const auto r = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "Tell me"}, {"type": "text", "text": "a story."}]}], "max_tokens": 12, "temperature": 0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(at(at(at(json(r.body), "choices"), 0), "message"), "content")), expected);
  const auto image = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": [
      {"type": "text", "text": "What is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]}]})");
  EXPECT_EQ(image.status, 400) << image.body;
  EXPECT_EQ(str(at(error_of(image), "param")), "messages[0].content") << image.body;
  EXPECT_EQ(str(at(error_of(image), "code")), "unsupported_content") << image.body;
}

TEST_F(ServerTest, StopStringEndsTheTextBeforeIt) {
  start();
  const std::vector<int32_t> prompt = completion_prompt("Once upon a time");
  const std::string full = greedy(prompt, 40);
  ASSERT_GT(full.size(), 20u);
  // A stop string from the middle of the greedy text: the answer is the text before its first occurrence.
  const std::string stop = full.substr(12, 5);
  const std::string expected = full.substr(0, full.find(stop));
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "stop": [)" +
                           chat::json_quote(stop) + "]";
  const auto r = post("/v1/completions", body + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(at(at(json(r.body), "choices"), 0), "text")), expected);
  EXPECT_EQ(str(at(at(at(json(r.body), "choices"), 0), "finish_reason")), "stop");
  const Streamed s = read_stream(post("/v1/completions", body + R"(, "stream": true})"), false);
  EXPECT_EQ(s.text, expected);
  EXPECT_EQ(s.finish, "stop");
}

// Eight at once on the batching engine (four sequences per step, the rest queued), then on the one-at-a-time
// engine: each answer is the request's greedy text alone.
TEST_F(ServerTest, ConcurrentRequestsGetTheirGreedyTextAsAlone) {
  const std::vector<std::string> prompts = {"Once upon a time", "The dog",  "Tom and Sue", "One day, a little",
                                            "Lily wanted",      "The sun", "Mom said",    "A big red ball"};
  for (int32_t parallel : {4, 0}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    Config c;
    c.parallel = parallel;
    start(c);
    std::vector<std::future<test_http::Response>> answers;
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::string body = R"({"prompt": )" + chat::json_quote(prompts[i]) +
                               R"(, "max_tokens": 25, "temperature": 0, "stream": )" + (i % 2 ? "true" : "false") +
                               "}";
      answers.push_back(std::async(std::launch::async, [this, body] { return post("/v1/completions", body); }));
    }
    for (size_t i = 0; i < prompts.size(); ++i) {
      SCOPED_TRACE(prompts[i]);
      const test_http::Response r = answers[i].get();
      const std::string expected = greedy(completion_prompt(prompts[i]), 25);
      if (i % 2) {
        EXPECT_EQ(read_stream(r, false).text, expected);
      } else {
        ASSERT_EQ(r.status, 200) << r.body;
        EXPECT_EQ(str(at(at(at(json(r.body), "choices"), 0), "text")), expected);
      }
    }
    const runtime::EngineStats st = engine_->stats();
    EXPECT_EQ(st.requests_accepted, prompts.size());
    EXPECT_EQ(st.finished_length, prompts.size());
    stop();
  }
}

// A repeated prompt is served from the prefix cache: usage says how many prompt tokens were, /metrics counts them,
// and the text does not change.
TEST_F(ServerTest, PrefixCacheHitsShowInUsageAndMetrics) {
  start();
  const std::string body = R"({"prompt": "Once upon a time, there was a little girl named Lily. She loved to play",
      "max_tokens": 12, "temperature": 0})";
  const auto a = post("/v1/completions", body), b = post("/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  const Value ja = json(a.body), jb = json(b.body);
  EXPECT_EQ(str(at(at(at(ja, "choices"), 0), "text")), str(at(at(at(jb, "choices"), 0), "text")));
  const int64_t n_prompt = at(at(ja, "usage"), "prompt_tokens").as_int();
  ASSERT_GT(n_prompt, 16);
  EXPECT_EQ(at(at(at(ja, "usage"), "prompt_tokens_details"), "cached_tokens").as_int(), 0);
  const int64_t cached = at(at(at(jb, "usage"), "prompt_tokens_details"), "cached_tokens").as_int();
  EXPECT_EQ(cached, (n_prompt - 1) / 16 * 16);  // whole blocks of 16, the last prompt token recomputed
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(10)));  // the answer goes out before the blocks are freed
  const std::string metrics = get("/metrics").body;
  EXPECT_NE(metrics.find("llmrun_prompt_tokens_cached_total " + std::to_string(cached)), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("llmrun_kv_cache_blocks{state=\"total\"} 32"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("llmrun_kv_cache_blocks{state=\"used\"} 0"), std::string::npos) << metrics;
  // The worker's busy time, split: it ran steps, so it waited for the device (the CPU session's steps) a while.
  const std::string wait_name = "llmrun_engine_seconds_total{part=\"device_wait\"} ";
  const size_t wait_at = metrics.find(wait_name);
  ASSERT_NE(wait_at, std::string::npos) << metrics;
  EXPECT_GT(std::stod(metrics.substr(wait_at + wait_name.size())), 0.0) << metrics;
  EXPECT_NE(metrics.find("llmrun_engine_seconds_total{part=\"host\"} "), std::string::npos) << metrics;
}

TEST_F(ServerTest, SeededSamplingIsReproducible) {
  start();
  const std::string body = R"({"prompt": "Once", "max_tokens": 20, "temperature": 1.0, "top_k": 0, "top_p": 1,
      "min_p": 0, "seed": 1234, "presence_penalty": 0.5, "frequency_penalty": 0.25})";
  const auto a = post("/v1/completions", body), b = post("/v1/completions", body);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_EQ(str(at(at(at(json(a.body), "choices"), 0), "text")), str(at(at(at(json(b.body), "choices"), 0), "text")));
}

TEST_F(ServerTest, HelperRoutes) {
  start();
  const auto models = get("/v1/models");
  ASSERT_EQ(models.status, 200);
  EXPECT_EQ(str(at(at(at(json(models.body), "data"), 0), "id")), "stories260K");
  const auto model = get("/v1/models/stories260K");
  ASSERT_EQ(model.status, 200) << model.body;
  EXPECT_EQ(str(at(json(model.body), "id")), "stories260K");
  EXPECT_EQ(str(at(json(model.body), "object")), "model");
  const auto other = get("/v1/models/gpt-4o");
  EXPECT_EQ(other.status, 404) << other.body;
  EXPECT_EQ(str(at(error_of(other), "code")), "model_not_found");
  const auto health = get("/health");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(str(at(json(health.body), "status")), "ok");

  const auto tokens = post("/tokenize", R"({"content": "Once upon a time", "add_special": true})");
  ASSERT_EQ(tokens.status, 200) << tokens.body;
  const std::vector<int32_t> ids = completion_prompt("Once upon a time");
  const Value tokens_body = json(tokens.body);
  const Value& arr = at(tokens_body, "tokens");
  ASSERT_EQ(arr.items().size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(arr.items()[i].as_int(), ids[i]);
  const auto pieces = post("/tokenize", R"({"content": "Once", "with_pieces": true})");
  EXPECT_TRUE(at(at(at(json(pieces.body), "tokens"), 0), "piece").is_string()) << pieces.body;

  const auto text = post("/detokenize", R"({"tokens": [)" + id_list(ids) + "]}");
  ASSERT_EQ(text.status, 200) << text.body;
  EXPECT_EQ(str(at(json(text.body), "content")), tok_->decode(ids));

  const auto prompt = post("/apply-template", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  ASSERT_EQ(prompt.status, 200) << prompt.body;
  EXPECT_EQ(str(at(json(prompt.body), "prompt")), "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

// tools reach the template as the list it iterates, tool-call arguments sent as JSON text arrive as objects, and a
// template that raises is a 400 naming the messages.
TEST_F(ServerTest, ToolsAndTemplateErrors) {
  Config c;
  c.template_text =
      "{% if messages[0].role != 'user' %}{{ raise_exception('first message must be user') }}{% endif %}"
      "{% for t in tools %}[{{ t.function.name }}]{% endfor %}"
      "{% for m in messages %}{{ m.role }}:{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.city }}"
      "{% else %}{{ m.content }}{% endif %}|{% endfor %}";
  start(c);
  const auto r = post("/apply-template", R"({"messages": [{"role": "user", "content": "Weather?"},
      {"role": "assistant", "tool_calls": [{"id": "1", "type": "function",
        "function": {"name": "get", "arguments": "{\"city\": \"Paris\"}"}}]}],
      "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(json(r.body), "prompt")), "[get_weather]user:Weather?|assistant:Paris|");
  const auto chat = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}],
      "tools": [{"type": "function", "function": {"name": "f"}}], "max_tokens": 3})");
  EXPECT_EQ(chat.status, 200) << chat.body;
  const auto refused = post("/v1/chat/completions", R"({"messages": [{"role": "system", "content": "x"}]})");
  EXPECT_EQ(refused.status, 400) << refused.body;
  const Value e = at(json(refused.body), "error");
  EXPECT_EQ(str(at(e, "code")), "template_error");
  EXPECT_EQ(str(at(e, "param")), "messages");
  EXPECT_NE(str(at(e, "message")).find("first message must be user"), std::string::npos) << refused.body;
}

// chat_template_kwargs and reasoning_effort reach the template as variables (Qwen 3's enable_thinking, gpt-oss's
// reasoning_effort), on /apply-template and on the chat route alike; a bad one is a 400 naming it.
TEST_F(ServerTest, TemplateVariablesFromTheRequest) {
  Config c;
  c.template_text =
      "{% for m in messages %}{{ m.content }}{% endfor %}"
      "{% if enable_thinking is defined and not enable_thinking %}[no think]{% endif %}"
      "{% if reasoning_effort is defined %}[effort {{ reasoning_effort }}]{% endif %}";
  start(c);
  const std::string msgs = R"({"messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_EQ(str(at(json(post("/apply-template", msgs + "}").body), "prompt")), "Hi");
  const auto off = post("/apply-template", msgs + R"(, "chat_template_kwargs": {"enable_thinking": false}})");
  ASSERT_EQ(off.status, 200) << off.body;
  EXPECT_EQ(str(at(json(off.body), "prompt")), "Hi[no think]");
  const auto effort = post("/apply-template", msgs + R"(, "reasoning_effort": "high"})");
  EXPECT_EQ(str(at(json(effort.body), "prompt")), "Hi[effort high]");
  const auto chat = post("/v1/chat/completions",
                         msgs + R"(, "chat_template_kwargs": {"enable_thinking": false}, "max_tokens": 2})");
  EXPECT_EQ(chat.status, 200) << chat.body;
  const auto bad = post("/v1/chat/completions", msgs + R"(, "chat_template_kwargs": true})");
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(str(at(at(json(bad.body), "error"), "param")), "chat_template_kwargs");
  stop();
  // The server's own (--chat-template-kwargs) apply to every request; a request's replace them.
  c.template_variables = {{"enable_thinking", Value(false)}};
  start(c);
  EXPECT_EQ(str(at(json(post("/apply-template", msgs + "}").body), "prompt")), "Hi[no think]");
  const auto on = post("/apply-template", msgs + R"(, "chat_template_kwargs": {"enable_thinking": true}})");
  EXPECT_EQ(str(at(json(on.body), "prompt")), "Hi");
}

// A template whose generation prompt opens a <think> block (DeepSeek-R1's way): the reply starts inside it, so
// stories260K's text, which never closes it, is all reasoning_content (trimmed) and content is empty, whole and
// streamed alike; the completions route and --reasoning-format none keep the text as it is.
TEST_F(ServerTest, ReasoningOfAThinkingTemplate) {
  const std::string tmpl =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "<|im_start|>assistant\n<think>\n";
  const std::string text = greedy(chat_prompt("Tell me a story.", tmpl), 20);
  const size_t b = text.find_first_not_of(" \n"), e = text.find_last_not_of(" \n");
  ASSERT_NE(b, std::string::npos) << text;
  const std::string trimmed = text.substr(b, e + 1 - b);
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 20, "temperature": 0)";
  for (const bool split : {true, false}) {
    Config c;
    c.template_text = tmpl;
    c.split_reasoning = split;
    start(c);
    const auto whole = post("/v1/chat/completions", body + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Value parsed = json(whole.body);
    const Value& message = at(at(at(parsed, "choices"), 0), "message");
    const Streamed s = read_stream(post("/v1/chat/completions", body + R"(, "stream": true})"), true);
    if (split) {
      EXPECT_EQ(str(at(message, "content")), "") << whole.body;
      EXPECT_EQ(str(at(message, "reasoning_content")), trimmed) << whole.body;
      EXPECT_EQ(s.text, "");
      EXPECT_EQ(s.reasoning, trimmed);
    } else {
      EXPECT_EQ(str(at(message, "content")), text) << whole.body;
      EXPECT_TRUE(at(message, "reasoning_content").is_undefined()) << whole.body;
      EXPECT_EQ(s.text, text);
      EXPECT_EQ(s.reasoning, "");
    }
    EXPECT_EQ(s.finish, "length");
    // Logprobs are not lost with the text the split holds back: every token's entry comes in some chunk.
    const auto lp = post("/v1/chat/completions", body + R"(, "stream": true, "logprobs": true})");
    size_t entries = 0;
    for (const std::string& ev : test_http::sse_data(lp.body)) {
      if (ev == "[DONE]") continue;
      const Value chunk = json(ev);
      const Value& choices = at(chunk, "choices");
      if (!choices.is_array() || choices.items().empty()) continue;
      const Value& content = at(at(at(choices, 0), "logprobs"), "content");
      if (content.is_array()) entries += content.items().size();
    }
    EXPECT_EQ(entries, 20u) << lp.body;
    stop();
  }
}

// Structured output, on the batching engine and on the one-request-at-a-time one, whole and streamed the same, each
// reply ended by the model ("stop") once whole:
// - JSON mode: the request leans (by logit bias) towards '"', '}' and the end of text so that stories260K closes
//   its object;
// - a JSON schema whose values are all enumerated or bounded: the reply is an object of exactly that form, which
//   ends as soon as it closes (stories260K never writes such a thing unheld); a schema that cannot be held is a 400;
// - a GBNF grammar (llama.cpp's `grammar` field): the reply is one of its texts.
TEST_F(ServerTest, StructuredRepliesKeepToTheirFormat) {
  std::string bias;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    const std::string piece = tok_->is_control(id) ? "" : tok_->token_to_piece(id);
    if (piece == "\"" || piece == "}" || tok_->is_eog(id))
      bias += (bias.empty() ? "\"" : ", \"") + std::to_string(id) + "\": 30";
  }
  const std::string ask = R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 64,
      "temperature": 0, )";
  const std::string json_mode = ask + R"("response_format": {"type": "json_object"}, "logit_bias": {)" + bias + "}";
  const std::string schema = ask + R"("response_format": {"type": "json_schema", "json_schema": {"name": "mood",
      "schema": {"type": "object", "properties": {"mood": {"enum": ["happy", "sad"]}, "n": {"type": "integer",
      "minimum": 0, "maximum": 9}}, "required": ["mood", "n"], "additionalProperties": false}}})";
  const auto check_schema = [](const std::string& content) {
    const Value reply = chat::parse_json(content);
    ASSERT_TRUE(reply.is_object()) << content;
    ASSERT_EQ(reply.object().items.size(), 2u) << content;
    const Value* mood = reply.object().find("mood");
    const Value* n = reply.object().find("n");
    ASSERT_TRUE(mood && n) << content;
    EXPECT_TRUE(mood->as_string() == "happy" || mood->as_string() == "sad") << content;
    EXPECT_TRUE(n->is_int() && n->as_int() >= 0 && n->as_int() <= 9) << content;
  };
  const auto check_object = [](const std::string& content) {
    EXPECT_TRUE(chat::parse_json(content).is_object()) << content;
  };
  // llama.cpp's GBNF grammar field: the reply is one of its texts.
  const std::string gbnf = ask + R"("grammar": "root ::= (\"yes\" | \"no\") \", \" [a-z]{1,8} \".\"")";
  const auto check_gbnf = [](const std::string& content) {
    EXPECT_TRUE(content.starts_with("yes, ") || content.starts_with("no, ")) << content;
    EXPECT_TRUE(content.ends_with(".")) << content;
  };
  for (const int32_t parallel : {4, 0}) {
    Config c;
    c.parallel = parallel;
    start(c);
    for (const auto& [body, check] :
         {std::pair{json_mode, +check_object}, std::pair{schema, +check_schema}, std::pair{gbnf, +check_gbnf}}) {
      const auto whole = post("/v1/chat/completions", body + "}");
      ASSERT_EQ(whole.status, 200) << whole.body;
      const Value parsed = json(whole.body);
      const Value& choice = at(at(parsed, "choices"), 0);
      const std::string content = str(at(at(choice, "message"), "content"));
      EXPECT_EQ(str(at(choice, "finish_reason")), "stop") << whole.body;
      check(content);
      const Streamed s = read_stream(post("/v1/chat/completions", body + R"(, "stream": true})"), true);
      EXPECT_EQ(s.text, content) << "parallel " << parallel;
    }
    const auto refused = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}],
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": {"not": {}}}}})");
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_NE(refused.body.find("unsupported_schema"), std::string::npos) << refused.body;
    stop();
  }
}

// A held reply from a thinking template whose generation prompt opens the block (DeepSeek-R1's way): under JSON
// mode or a schema the model reasons first, so stories260K's free text, which never closes the block, comes back
// as reasoning_content exactly as unheld (the held text would begin after </think>); before, the held text itself
// was read as never-closed reasoning and content was empty either way. A GBNF grammar holds the reply from its first
// byte, so its text is what the block holds.
TEST_F(ServerTest, HeldRepliesLetAThinkingModelReasonFirst) {
  Config c;
  c.template_text =
      "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
      "<|im_start|>assistant\n<think>\n";
  const std::string text = greedy(chat_prompt("Tell me a story.", c.template_text), 20);
  const size_t b = text.find_first_not_of(" \n"), e = text.find_last_not_of(" \n");
  ASSERT_NE(b, std::string::npos) << text;
  const std::string trimmed = text.substr(b, e + 1 - b);
  const std::string ask =
      R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 20, "temperature": 0, )";
  start(c);
  for (const std::string& form :
       {std::string(R"("response_format": {"type": "json_object"})"),
        std::string(R"("response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema":
            {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}})")}) {
    const auto whole = post("/v1/chat/completions", ask + form + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Value parsed = json(whole.body);
    const Value& choice = at(at(parsed, "choices"), 0);
    EXPECT_EQ(str(at(at(choice, "message"), "reasoning_content")), trimmed) << whole.body;
    EXPECT_EQ(str(at(at(choice, "message"), "content")), "") << whole.body;
    EXPECT_EQ(str(at(choice, "finish_reason")), "length") << whole.body;
    const Streamed s = read_stream(post("/v1/chat/completions", ask + form + R"(, "stream": true})"), true);
    EXPECT_EQ(s.reasoning, trimmed) << form;
  }
  const auto gbnf = post("/v1/chat/completions", ask + R"("grammar": "root ::= \"yes\" | \"no\""})");
  ASSERT_EQ(gbnf.status, 200) << gbnf.body;
  const Value parsed = json(gbnf.body);
  const Value& message = at(at(at(parsed, "choices"), 0), "message");
  const std::string held = str(at(message, "reasoning_content"));
  EXPECT_TRUE(held == "yes" || held == "no") << gbnf.body;
}

// An assistant's reasoning sent back as reasoning_content reaches a template that reads message.thinking
// (gpt-oss's) under that name; a thinking the client sent itself is kept.
TEST_F(ServerTest, ReasoningContentIsThinkingForTemplatesThatReadIt) {
  Config c;
  c.template_text =
      "{% for m in messages %}{% if m.thinking %}[{{ m.thinking }}]{% endif %}{{ m.content }}|{% endfor %}";
  start(c);
  const auto r = post("/apply-template", R"({"messages": [{"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello", "reasoning_content": "greet back"},
      {"role": "assistant", "content": "Again", "reasoning_content": "x", "thinking": "own"}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(str(at(json(r.body), "prompt")), "Hi|[greet back]Hello|[own]Again|");
}

// A harmony template (gpt-oss's markers): a reply that opens no channel (stories260K writes stories) is content as
// written, whole and streamed, with or without tools, and no reasoning or calls are made up.
TEST_F(ServerTest, HarmonyTemplateKeepsAPlainReply) {
  Config c;
  c.template_text =
      "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
      "{# analysis and final go in <|channel|> #}<|start|>assistant";
  start(c);
  const std::string text = greedy(chat_prompt("Tell me a story.", c.template_text), 16);
  const std::string body =
      R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 16, "temperature": 0)";
  for (const std::string tools : {"", R"(, "tools": [{"type": "function", "function": {"name": "f"}}])"}) {
    const auto whole = post("/v1/chat/completions", body + tools + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Value parsed = json(whole.body);
    const Value& choice = at(at(parsed, "choices"), 0);
    EXPECT_EQ(str(at(at(choice, "message"), "content")), text) << whole.body;
    EXPECT_TRUE(at(at(choice, "message"), "reasoning_content").is_undefined()) << whole.body;
    EXPECT_EQ(str(at(choice, "finish_reason")), "length");
    const Streamed s = read_stream(post("/v1/chat/completions", body + tools + R"(, "stream": true})"), true);
    EXPECT_EQ(s.text, text);
    EXPECT_EQ(s.reasoning, "");
  }
}

// Forced calls of set_mood (an enum-only parameter, so that stories260K's call ends): whole, it comes back as that one
// call with finish_reason tool_calls and an allowed mood; streamed, with the same finish reason.
class ForcedCallTest : public ServerTest {
 protected:
  void expect_set_mood_call(const std::string& body) {
    const auto whole = post("/v1/chat/completions", body + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Value parsed = json(whole.body);
    const Value& choice = at(at(parsed, "choices"), 0);
    EXPECT_EQ(str(at(choice, "finish_reason")), "tool_calls") << whole.body;
    const Value& calls = at(at(choice, "message"), "tool_calls");
    ASSERT_TRUE(calls.is_array() && calls.items().size() == 1) << whole.body;
    EXPECT_EQ(str(at(at(calls.items()[0], "function"), "name")), "set_mood");
    const Value args = chat::parse_json(str(at(at(calls.items()[0], "function"), "arguments")));
    const std::string mood = str(at(args, "mood"));
    EXPECT_TRUE(mood == "calm" || mood == "bright") << whole.body;
    const Streamed s = read_stream(post("/v1/chat/completions", body + R"(, "stream": true})"), true);
    EXPECT_EQ(s.finish, "tool_calls") << whole.body;
  }
};

// A forced call to a harmony template (gpt-oss's): the reply is held to "<|channel|>", analysis messages or not,
// then a commentary message to an offered function with its arguments (stories260K spells the markers byte by
// byte; a bias on "c" makes it take commentary over analysis at the fork), ends there, and comes back as the call
// with finish_reason tool_calls, whole and streamed. Before, a forced call was read as "auto" for harmony.
TEST_F(ForcedCallTest, HarmonyForcedCall) {
  Config c;
  c.template_text =
      "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
      "{# analysis and final go in <|channel|> #}<|start|>assistant";
  start(c);
  int32_t c_token = -1;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id)
    if (!tok_->is_control(id) && tok_->token_to_piece(id) == "c") c_token = id;
  ASSERT_GE(c_token, 0);
  const std::string body = R"({"messages": [{"role": "user", "content": "Set the mood."}], "max_tokens": 96,
      "temperature": 0, "logit_bias": {")" + std::to_string(c_token) + R"(": 30}, "tool_choice": "required",
      "tools": [{"type": "function", "function": {"name": "set_mood", "parameters": {"type": "object",
      "properties": {"mood": {"enum": ["calm", "bright"]}}, "required": ["mood"], "additionalProperties": false}}}])";
  expect_set_mood_call(body);
}

// JSON mode under a harmony template (gpt-oss's): whatever way the reply goes (analysis messages and the final
// channel, or the object alone), its content is a beginning of one JSON object (whole when the model ended it) and
// no marker leaks into content or reasoning.
TEST_F(ServerTest, HarmonyJsonModeContentIsTheObject) {
  Config c;
  c.template_text =
      "{% for m in messages %}<|start|>{{ m.role }}<|message|>{{ m.content }}<|end|>{% endfor %}"
      "{# analysis and final go in <|channel|> #}<|start|>assistant";
  start(c);
  const std::string body = R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 48,
      "temperature": 0, "response_format": {"type": "json_object"}})";
  const auto whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Value parsed = json(whole.body);
  const Value& choice = at(at(parsed, "choices"), 0);
  const std::string content = str(at(at(choice, "message"), "content"));
  runtime::JsonPrefix prefix;
  for (const char ch : content) ASSERT_TRUE(prefix.feed(static_cast<unsigned char>(ch))) << whole.body;
  if (str(at(choice, "finish_reason")) == "stop") {
    EXPECT_TRUE(prefix.complete()) << whole.body;
  }
  EXPECT_EQ(whole.body.find("<|"), std::string::npos) << whole.body;
}

// stories260K with its last token made Mistral's [TOOL_CALLS] (a control token, as in Mistral's vocabularies),
// written to `path`.
void write_stories_with_tool_marker(const std::string& src_path, const std::string& path) {
  const gguf::File src = gguf::File::open(src_path);
  auto tokens = src.get_array<std::string>("tokenizer.ggml.tokens");
  auto types = src.get_array<int32_t>("tokenizer.ggml.token_type");
  tokens.back() = "[TOOL_CALLS]";
  types.back() = 3;  // control
  gguf::Writer w;
  w.copy_metadata(src);
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::make_i32_array(types));
  for (const gguf::TensorInfo& t : src.tensors()) w.add_tensor(t.name, t.type, {t.ne, t.ne + t.n_dims}, t.data);
  w.write(path);
}

// A forced call to a Mistral template (v0.3's, from the corpus): [TOOL_CALLS] is a control token no byte grammar can
// write, so the reply begins with it as a token, then the JSON list holds one call of the named function (one:
// parallel_tool_calls false), and it comes back as that call with finish_reason tool_calls, whole and streamed.
// Before, the choice was read as "auto".
TEST_F(ForcedCallTest, MistralForcedCallBeginsWithItsMarkerToken) {
  const auto src = testing_assets::path("models/stories260K-f32.gguf");
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("llm-run-mistral-marker-" + std::to_string(::getpid()) + ".gguf")).string();
  write_stories_with_tool_marker(*src, path);
  model_ = model::Model::load(path);
  tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
  std::filesystem::remove(path);  // the model keeps its mapping
  std::ifstream in(std::string(LLM_SOURCE_DIR) + "/tests/chat/templates/mistral-7b-instruct-v0.3.jinja");
  Config c;
  c.template_text.assign(std::istreambuf_iterator<char>(in), {});
  ASSERT_FALSE(c.template_text.empty());
  start(c);
  const std::string body = R"({"messages": [{"role": "user", "content": "Set the mood."}], "max_tokens": 64,
      "temperature": 0, "tool_choice": {"type": "function", "function": {"name": "set_mood"}},
      "parallel_tool_calls": false,
      "tools": [{"type": "function", "function": {"name": "set_mood", "parameters": {"type": "object",
      "properties": {"mood": {"enum": ["calm", "bright"]}}, "required": ["mood"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "other"}}])";
  expect_set_mood_call(body);
}

// A request with tools, to a template with a known tool-call format (here ChatML that names Hermes' marker in a
// comment, so the prompt is unchanged), reads the reply for calls; a reply without any (stories260K writes stories)
// is the same text as without tools, streamed or not, with its usual finish reason and no tool_calls.
TEST_F(ServerTest, ToolModeKeepsAReplyWithoutCallsAsItIs) {
  Config c;
  c.template_text = chat::ChatTemplate::builtin("chatml").source() + "{# the model writes <tool_call> JSON #}";
  start(c);
  const std::string expected = greedy(chat_prompt("Tell me a story."), 20);
  const std::string body = R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 20,
      "temperature": 0, "tools": [{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])";
  const auto whole = post("/v1/chat/completions", body + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Value b = json(whole.body);
  const Value& choice = at(at(b, "choices"), 0);
  EXPECT_EQ(str(at(at(choice, "message"), "content")), expected);
  EXPECT_TRUE(at(at(choice, "message"), "tool_calls").is_undefined()) << whole.body;
  EXPECT_EQ(str(at(choice, "finish_reason")), "length");
  const Streamed s = read_stream(post("/v1/chat/completions", body + R"(, "stream": true})"), true);
  EXPECT_EQ(s.text, expected);
  EXPECT_EQ(s.finish, "length");
  const auto none = post("/v1/chat/completions", body + R"(, "tool_choice": "none"})");
  const Value none_body = json(none.body);
  EXPECT_EQ(str(at(at(at(at(none_body, "choices"), 0), "message"), "content")), expected);
  const auto bad = post("/v1/chat/completions", body + R"(, "tool_choice": "sometimes"})");
  EXPECT_EQ(bad.status, 400);
  const Value bad_body = json(bad.body);
  EXPECT_EQ(str(at(at(bad_body, "error"), "param")), "tool_choice");
}

// tool_choice "required" and a named function force one call in the template family's syntax: stories260K, which
// never writes a call by itself, returns one of the offered functions with arguments its schema allows (finish
// reason tool_calls), whole and streamed alike. A name that tools lack, "required" without tools, a strict function
// whose schema cannot be held and a forced call beside a response_format are 400s.
TEST_F(ServerTest, ToolChoiceForcesACall) {
  Config c;
  c.template_text = chat::ChatTemplate::builtin("chatml").source() + "{# the model writes <tool_call> JSON #}";
  start(c);
  const std::string body = R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 160,
      "temperature": 0, "tools": [
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
       "properties": {"city": {"type": "string", "maxLength": 12}, "days": {"type": "integer", "minimum": 1,
       "maximum": 7}}, "required": ["city", "days"], "additionalProperties": false}}},
      {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
       "properties": {"zone": {"enum": ["UTC", "CET"]}}, "required": ["zone"]}}}])";
  for (const std::string choice : {R"("required")", R"({"type": "function", "function": {"name": "get_time"}})"}) {
    const std::string request = body + R"(, "parallel_tool_calls": false, "tool_choice": )" + choice;
    const auto whole = post("/v1/chat/completions", request + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    const Value b = json(whole.body);
    const Value& first = at(at(b, "choices"), 0);
    EXPECT_EQ(str(at(first, "finish_reason")), "tool_calls") << whole.body;
    const Value& call = at(at(at(first, "message"), "tool_calls"), 0);
    const std::string name = str(at(at(call, "function"), "name"));
    const Value args = chat::parse_json(str(at(at(call, "function"), "arguments")));
    if (name == "get_weather") {
      EXPECT_TRUE(choice == R"("required")") << whole.body;
      ASSERT_TRUE(args.object().find("city") && args.object().find("days")) << whole.body;
      EXPECT_LE(args.object().find("city")->as_string().size(), 12u * 4);
      const int64_t days = args.object().find("days")->as_int();
      EXPECT_TRUE(days >= 1 && days <= 7) << whole.body;
    } else {
      ASSERT_EQ(name, "get_time") << whole.body;
      const std::string zone = args.object().find("zone")->as_string();
      EXPECT_TRUE(zone == "UTC" || zone == "CET") << whole.body;
    }
    const Streamed s = read_stream(post("/v1/chat/completions", request + R"(, "stream": true})"), true);
    EXPECT_EQ(s.finish, "tool_calls");
  }
  const auto param_of_post = [&](const std::string& tail) {
    const auto r = post("/v1/chat/completions", body + tail + "}");
    EXPECT_EQ(r.status, 400) << tail << ": " << r.body;
    return str(at(at(json(r.body), "error"), "param"));
  };
  EXPECT_EQ(param_of_post(R"(, "tool_choice": {"type": "function", "function": {"name": "nope"}})"), "tool_choice");
  EXPECT_EQ(param_of_post(R"(, "tool_choice": {"type": "function"})"), "tool_choice");
  EXPECT_EQ(param_of_post(R"(, "tool_choice": "required", "parallel_tool_calls": "yes")"), "parallel_tool_calls");
  EXPECT_EQ(param_of_post(R"(, "tool_choice": "required", "response_format": {"type": "json_object"})"),
            "tool_choice");
  EXPECT_EQ(param_of_post(R"(, "tool_choice": "required", "grammar": "root ::= \"x\"")"), "tool_choice");
  const auto no_tools = post("/v1/chat/completions",
                             R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})");
  EXPECT_EQ(no_tools.status, 400) << no_tools.body;
  const auto strict = post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "x"}],
      "tool_choice": "required", "tools": [{"type": "function", "function": {"name": "s", "strict": true,
      "parameters": {"type": "object", "properties": {"q": {"not": {"type": "null"}}}}}}]})");
  EXPECT_EQ(strict.status, 400) << strict.body;
  EXPECT_EQ(str(at(at(json(strict.body), "error"), "param")), "tools") << strict.body;
}

}  // namespace
}  // namespace test_server
