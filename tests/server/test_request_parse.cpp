// The request parser alone: fields land where they belong, null means absent, and each bad field is an ApiError
// naming it.
#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/api_request.h"
#include "server/api_response.h"

namespace {

using server::ApiError;
using server::Route;

std::string param_of(const std::string& body, Route route = Route::Completion) {
  try {
    server::parse_completion_request(body, route);
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    return e.param().empty() ? "<none>" : e.param();
  }
  return "<accepted>";
}

TEST(RequestParse, ChatFields) {
  const auto r = server::parse_completion_request(
      R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
          "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}],
          "max_tokens": 5, "max_completion_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": 3, "min_p": 0.1,
          "seed": 42, "stop": "END", "presence_penalty": 0.5, "frequency_penalty": -0.5, "ignore_eos": true,
          "stream": true, "stream_options": {"include_usage": true}, "user": "ignored", "logprobs": false})",
      Route::Chat);
  ASSERT_EQ(r.messages.size(), 2u);
  EXPECT_EQ(r.messages[1].role, "user");
  EXPECT_TRUE(r.tools.is_array());
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.max_tokens, 7);  // max_completion_tokens wins
  EXPECT_FLOAT_EQ(r.sampling.temp, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.top_p, 0.9f);
  EXPECT_EQ(r.sampling.top_k, 3);
  EXPECT_FLOAT_EQ(r.sampling.min_p, 0.1f);
  EXPECT_TRUE(r.seed_given);
  EXPECT_EQ(r.sampling.seed, 42u);
  EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(r.sampling.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.sampling.frequency_penalty, -0.5f);
  EXPECT_TRUE(r.ignore_eos);
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
}

TEST(RequestParse, DefaultsAndNulls) {
  const auto r = server::parse_completion_request(
      R"({"prompt": ["one prompt"], "max_tokens": null, "temperature": null, "seed": -1, "stop": null})",
      Route::Completion);
  ASSERT_EQ(r.prompts.size(), 1u);
  EXPECT_EQ(r.prompts[0].text, "one prompt");
  EXPECT_EQ(r.n, 1);
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampling.temp, runtime::SamplerParams{}.temp);
  EXPECT_FALSE(r.seed_given);
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
  const auto ids = server::parse_completion_request(R"({"prompt": [1, 2, 3]})", Route::Completion);
  ASSERT_EQ(ids.prompts.size(), 1u);
  EXPECT_TRUE(ids.prompts[0].is_ids);
  EXPECT_EQ(ids.prompts[0].ids, (std::vector<int32_t>{1, 2, 3}));
}

// Several prompts (strings, or arrays of ids) and n choices each, within kMaxChoices in all.
TEST(RequestParse, SeveralPromptsAndChoices) {
  const auto texts = server::parse_completion_request(R"({"prompt": ["a", "b c"], "n": 3})", Route::Completion);
  ASSERT_EQ(texts.prompts.size(), 2u);
  EXPECT_EQ(texts.prompts[1].text, "b c");
  EXPECT_EQ(texts.n, 3);
  const auto ids = server::parse_completion_request(R"({"prompt": [[1, 2], [3]]})", Route::Completion);
  ASSERT_EQ(ids.prompts.size(), 2u);
  EXPECT_EQ(ids.prompts[1].ids, (std::vector<int32_t>{3}));
  EXPECT_EQ(server::parse_completion_request(R"({"messages": [{"role": "user", "content": "x"}], "n": 16})",
                                             Route::Chat)
                .n,
            16);
  EXPECT_EQ(param_of(R"({"prompt": "x", "n": 0})"), "n");
  EXPECT_EQ(param_of(R"({"prompt": "x", "n": 17})"), "n");
  EXPECT_EQ(param_of(R"({"prompt": ["a", "b", "c"], "n": 6})"), "n");
  EXPECT_EQ(param_of(R"({"prompt": ["a", [1]]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt": [[1], "a"]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt": [[1], []]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt": [[1], [-1]]})"), "prompt");
  std::string many = R"({"prompt": [)";
  for (int i = 0; i < 17; ++i) many += std::string(i ? "," : "") + "\"p\"";
  EXPECT_EQ(param_of(many + "]}"), "prompt");
}

// best_of (completions only): n by default, at least n, every candidate within the request's 16, never streamed
// above n.
TEST(RequestParse, BestOf) {
  EXPECT_EQ(server::parse_completion_request(R"({"prompt": "x", "n": 2})", Route::Completion).best_of, 2);
  const auto r =
      server::parse_completion_request(R"({"prompt": ["a", "b"], "n": 2, "best_of": 8})", Route::Completion);
  EXPECT_EQ(r.n, 2);
  EXPECT_EQ(r.best_of, 8);
  EXPECT_EQ(server::parse_completion_request(R"({"prompt": "x", "best_of": null})", Route::Completion).best_of, 1);
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 0})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": "x", "n": 3, "best_of": 2})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": ["a", "b", "c"], "best_of": 6})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 17})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 2.5})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": "x", "best_of": 3, "stream": true})"), "best_of");
  EXPECT_EQ(param_of(R"({"prompt": "x", "n": 3, "best_of": 3, "stream": true})"), "<accepted>");  // nothing to rank
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "best_of": 2})", Route::Chat), "best_of");
}

// echo: completions only.
TEST(RequestParse, Echo) {
  EXPECT_TRUE(server::parse_completion_request(R"({"prompt": "x", "echo": true})", Route::Completion).echo);
  EXPECT_FALSE(server::parse_completion_request(R"({"prompt": "x", "echo": null})", Route::Completion).echo);
  const auto scored = server::parse_completion_request(R"({"prompt": "x", "echo": true, "logprobs": 1})",
                                                       Route::Completion);
  EXPECT_TRUE(scored.echo);
  EXPECT_EQ(scored.top_logprobs, 1);
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": "x"}], "echo": true})", Route::Chat), "echo");
}

TEST(RequestParse, EachBadFieldIsNamed) {
  EXPECT_EQ(param_of("{"), "<none>");
  EXPECT_EQ(param_of("null"), "<none>");
  EXPECT_EQ(param_of(R"({"prompt": "x", "max_tokens": 1.5})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt": "x", "max_tokens": true})"), "max_tokens");
  EXPECT_EQ(param_of(R"({"prompt": "x", "temperature": true})"), "temperature");
  EXPECT_EQ(param_of(R"({"prompt": "x", "temperature": -1})"), "temperature");
  EXPECT_EQ(param_of(R"({"prompt": "x", "top_k": -2})"), "top_k");
  EXPECT_EQ(param_of(R"({"prompt": "x", "min_p": 2})"), "min_p");
  EXPECT_EQ(param_of(R"({"prompt": "x", "presence_penalty": 3})"), "presence_penalty");
  EXPECT_EQ(param_of(R"({"prompt": "x", "seed": -2})"), "seed");
  EXPECT_EQ(param_of(R"({"prompt": "x", "stop": ["a", 2]})"), "stop");
  EXPECT_EQ(param_of(R"({"prompt": "x", "stream_options": 1})"), "stream_options");
  EXPECT_EQ(param_of(R"({"prompt": "x", "stream_options": {"include_usage": 1}})"), "include_usage");
  EXPECT_EQ(param_of(R"({"prompt": "x", "model": 1})"), "model");
  EXPECT_EQ(param_of(R"({"prompt": [1, -1]})"), "prompt");
  EXPECT_EQ(param_of(R"({"prompt": []})"), "prompt");
  EXPECT_EQ(param_of(R"({"messages": []})", Route::Chat), "messages");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user", "content": 5}]})", Route::Chat), "messages[0].content");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user"}], "tools": 3})", Route::Chat), "tools");
  EXPECT_EQ(param_of(R"({"prompt": "x", "top_logprobs": 2})"), "top_logprobs");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": [1]})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": {"-1": 1}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": {"a": 1}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": {"99999999999": 1}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": {"5": "1"}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": {"5": 101}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logit_bias": {"5": 1, "05": 2}})"), "logit_bias");
  EXPECT_EQ(param_of(R"({"prompt": "x", "logprobs": 6})"), "logprobs");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user"}], "logprobs": true, "top_logprobs": 21})", Route::Chat),
            "top_logprobs");
  EXPECT_EQ(param_of(R"({"messages": [{"role": "user"}], "logprobs": false, "top_logprobs": 1})", Route::Chat),
            "top_logprobs");
}

// chat_template_kwargs' entries and reasoning_effort become template variables, in that order; the conversation's
// own names are refused, as are values of the wrong kind.
TEST(RequestParse, TemplateVariables) {
  const auto r = server::parse_completion_request(
      R"({"messages": [{"role": "user", "content": "x"}], "reasoning_effort": "low",
          "chat_template_kwargs": {"enable_thinking": false, "custom": [1, "two"]}})",
      Route::Chat);
  ASSERT_EQ(r.template_variables.size(), 3u);
  EXPECT_EQ(r.template_variables[0].first, "enable_thinking");
  EXPECT_TRUE(r.template_variables[0].second.is_bool());
  EXPECT_FALSE(r.template_variables[0].second.as_bool());
  EXPECT_EQ(r.template_variables[1].first, "custom");
  EXPECT_EQ(r.template_variables[1].second.items().size(), 2u);
  EXPECT_EQ(r.template_variables[2].first, "reasoning_effort");
  EXPECT_EQ(r.template_variables[2].second.as_string(), "low");
  const auto none = server::parse_completion_request(
      R"({"messages": [{"role": "user", "content": "x"}], "chat_template_kwargs": null})", Route::Chat);
  EXPECT_TRUE(none.template_variables.empty());
  const std::string msgs = R"({"messages": [{"role": "user", "content": "x"}], )";
  EXPECT_EQ(param_of(msgs + R"("chat_template_kwargs": [1]})", Route::Chat), "chat_template_kwargs");
  EXPECT_EQ(param_of(msgs + R"("chat_template_kwargs": "a"})", Route::Chat), "chat_template_kwargs");
  EXPECT_EQ(param_of(msgs + R"("chat_template_kwargs": {"messages": []}})", Route::Chat), "chat_template_kwargs");
  EXPECT_EQ(param_of(msgs + R"("chat_template_kwargs": {"tools": []}})", Route::Chat), "chat_template_kwargs");
  EXPECT_EQ(param_of(msgs + R"("reasoning_effort": "max"})", Route::Chat), "reasoning_effort");
  EXPECT_EQ(param_of(msgs + R"("reasoning_effort": 1})", Route::Chat), "reasoning_effort");
}

// response_format: text (or absent) is plain, json_object is JSON mode, json_schema (or json_object with a schema,
// as llama.cpp's server reads it) compiles the schema; a schema the grammar cannot hold is a 400 naming it, as is
// anything else that is not a response format.
TEST(RequestParse, ResponseFormat) {
  const std::string chat = R"({"messages": [{"role": "user", "content": "x"}], )";
  const auto parse = [&](const std::string& rf) {
    return server::parse_completion_request(chat + R"("response_format": )" + rf + "}", Route::Chat);
  };
  EXPECT_FALSE(parse(R"({"type": "text"})").json_object);
  EXPECT_FALSE(parse(R"({"type": "text"})").grammar);
  EXPECT_TRUE(parse(R"({"type": "json_object"})").json_object);
  EXPECT_FALSE(parse(R"({"type": "json_object"})").grammar);
  EXPECT_TRUE(server::parse_completion_request(R"({"prompt": "x", "response_format": {"type": "json_object"}})",
                                               Route::Completion)
                  .json_object);
  EXPECT_FALSE(parse("null").json_object);
  const auto schema = parse(R"({"type": "json_schema", "json_schema": {"name": "a", "strict": true,
      "schema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}})");
  ASSERT_TRUE(schema.grammar);
  EXPECT_FALSE(schema.json_object);
  EXPECT_TRUE(parse(R"({"type": "json_schema", "json_schema": {"name": "any"}})").grammar);  // any value
  EXPECT_TRUE(parse(R"({"type": "json_object", "schema": {"type": "array"}})").grammar);
  try {
    parse(R"x({"type": "json_schema", "json_schema": {"name": "a", "schema": {"type": "string", "pattern": "(?=a)"}}})x");
    ADD_FAILURE() << "a schema with a lookahead was accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.status(), 400);
    EXPECT_EQ(e.param(), "response_format.json_schema.schema");
    EXPECT_EQ(e.code(), "unsupported_schema");
    EXPECT_NE(std::string(e.what()).find("/pattern"), std::string::npos) << e.what();
  }
  EXPECT_EQ(param_of(chat + R"("response_format": {"type": "json_schema"}})", Route::Chat),
            "response_format.json_schema");
  EXPECT_EQ(param_of(chat + R"("response_format": {"type": "json_object", "schema": {"type": 1}}})", Route::Chat),
            "response_format.schema");
  EXPECT_EQ(param_of(chat + R"("response_format": "json"})", Route::Chat), "response_format");
  // llama.cpp's grammar field: GBNF, alone.
  EXPECT_TRUE(server::parse_completion_request(chat + R"("grammar": "root ::= \"a\""})", Route::Chat).grammar);
  EXPECT_EQ(param_of(chat + R"("grammar": "root ::= missing"})", Route::Chat), "grammar");
  EXPECT_EQ(param_of(chat + R"("grammar": 1})", Route::Chat), "grammar");
  EXPECT_EQ(param_of(chat + R"("grammar": "root ::= \"a\"", "response_format": {"type": "json_object"}})",
                     Route::Chat),
            "grammar");
  EXPECT_EQ(param_of(chat + R"("response_format": {}})", Route::Chat), "response_format.type");
  EXPECT_EQ(param_of(chat + R"("response_format": {"type": "xml"}})", Route::Chat), "response_format.type");
}

TEST(RequestParse, LogitBias) {
  const auto r = server::parse_completion_request(R"({"prompt": "x", "logit_bias": {"15": -100, "7": 2.5}})",
                                                  Route::Completion);
  EXPECT_EQ(r.sampling.logit_bias, (std::vector<std::pair<int32_t, float>>{{15, -100.0f}, {7, 2.5f}}));
  EXPECT_TRUE(server::parse_completion_request(R"({"prompt": "x", "logit_bias": null})", Route::Completion)
                  .sampling.logit_bias.empty());
}

TEST(RequestParse, LogprobsOfEachRoute) {
  const auto top = [](const std::string& body, Route route) {
    return server::parse_completion_request(body, route).top_logprobs;
  };
  const std::string msgs = R"({"messages": [{"role": "user", "content": "Hi"}])";
  EXPECT_EQ(top(msgs + "}", Route::Chat), -1);
  EXPECT_EQ(top(msgs + R"(, "logprobs": true})", Route::Chat), 0);
  EXPECT_EQ(top(msgs + R"(, "logprobs": true, "top_logprobs": 20})", Route::Chat), 20);
  EXPECT_EQ(top(msgs + R"(, "logprobs": false, "top_logprobs": 0})", Route::Chat), -1);
  EXPECT_EQ(top(R"({"prompt": "x"})", Route::Completion), -1);
  EXPECT_EQ(top(R"({"prompt": "x", "logprobs": 0})", Route::Completion), 0);
  EXPECT_EQ(top(R"({"prompt": "x", "logprobs": 5})", Route::Completion), 5);
  EXPECT_EQ(top(R"({"prompt": "x", "logprobs": false})", Route::Completion), -1);
}

TEST(RequestParse, ErrorBodyHasOpenAIsShape) {
  EXPECT_EQ(server::error_body(server::invalid_field("top_p", "bad \"x\"")),
            R"({"error":{"message":"bad \"x\"","type":"invalid_request_error","param":"top_p","code":"invalid_value"}})");
  EXPECT_EQ(server::error_body(ApiError(500, "server_error", "boom")),
            R"({"error":{"message":"boom","type":"server_error","param":null,"code":null}})");
}

}  // namespace
