// Tool mode's reply, from token ids as the engine produces them (stories260K's SentencePiece vocabulary spells the
// replies byte by byte): streamed one id at a time it never sends a byte of a tool call as content, its content and
// calls equal what the whole reply gives, stop strings cut it as the engine cuts text, and a malformed call comes back
// as the text it was. Then the response bodies that carry calls, in OpenAI's shape.
#include <gtest/gtest.h>

#include <memory>

#include "assets.h"
#include "chat/json.h"
#include "model/model.h"
#include "server/api_response.h"
#include "chat/reasoning_split.h"
#include "server/tool_reply.h"
#include "tokenizer/tokenizer.h"

namespace {

using chat::jinja::Value;
using server::ToolCallFormat;
using server::ToolReply;

class ToolReplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    REQUIRE_ASSET(p, "models/stories260K-f32.gguf");
    model_ = model::Model::load(p);
    tok_ = std::make_unique<tokenizer::Tokenizer>(tokenizer::Tokenizer::from_gguf(model_->file()));
  }

  std::vector<int32_t> ids(const std::string& text) { return tok_->encode(text, false, false); }

  // Streamed id by id: everything sent as content, and the end.
  struct Result {
    std::string streamed;
    ToolReply::End end;
  };
  Result stream(ToolCallFormat f, const std::string& text, std::vector<std::string> stop = {}) {
    ToolReply reply(*tok_, f, std::move(stop));
    Result r;
    for (int32_t id : ids(text)) r.streamed += reply.push(std::span<const int32_t>(&id, 1));
    r.end = reply.finish();
    return r;
  }
  Result whole(ToolCallFormat f, const std::string& text, std::vector<std::string> stop = {}) {
    ToolReply reply(*tok_, f, std::move(stop));
    Result r;
    r.streamed = reply.push(ids(text));
    r.end = reply.finish();
    return r;
  }

  std::shared_ptr<const model::Model> model_;
  std::unique_ptr<tokenizer::Tokenizer> tok_;
};

// Qwen 3 thinks, then calls: tool mode finds the call after the block, and the reasoning split (which the server
// applies to tool mode's content) gives the block as reasoning and no content, streamed id by id or whole.
TEST_F(ToolReplyTest, ACallAfterAThinkingBlock) {
  const std::string reply =
      "<think>\nThe user wants the weather; I call the tool.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";
  for (const bool streamed : {true, false}) {
    const Result r = streamed ? stream(ToolCallFormat::Hermes, reply) : whole(ToolCallFormat::Hermes, reply);
    ASSERT_EQ(r.end.calls.size(), 1u) << (streamed ? "streamed" : "whole");
    EXPECT_EQ(r.end.calls[0].name, "get_weather");
    chat::ReasoningSplit split(false);
    chat::ReasoningSplit::Piece a = split.push(r.streamed), b = split.push(r.end.content), c = split.finish();
    EXPECT_EQ(a.reasoning + b.reasoning + c.reasoning, "The user wants the weather; I call the tool.");
    EXPECT_EQ(a.content + b.content + c.content, "");
  }
}

TEST_F(ToolReplyTest, OnlyCallsSendNoContent) {
  const std::string reply =
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>";
  ASSERT_NE(tok_->decode(ids(reply)).find("<tool_call>"), std::string::npos) << "the vocabulary cannot spell it";
  for (const Result& r : {stream(ToolCallFormat::Hermes, reply), whole(ToolCallFormat::Hermes, reply)}) {
    EXPECT_EQ(r.streamed, "");
    EXPECT_EQ(r.end.content, "");
    ASSERT_EQ(r.end.calls.size(), 2u);
    EXPECT_EQ(r.end.calls[0].name, "get_weather");
    EXPECT_EQ(r.end.calls[0].arguments, R"({"city":"Paris"})");
    EXPECT_EQ(r.end.calls[1].name, "get_time");
  }
}

TEST_F(ToolReplyTest, TextBeforeACallStreamsAndTheMarkerDoesNot) {
  const std::string reply = "Let me check the weather.\n<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}}</tool_call>";
  const Result r = stream(ToolCallFormat::Hermes, reply);
  EXPECT_EQ(r.streamed.find('<'), std::string::npos) << r.streamed;
  EXPECT_NE(r.streamed.find("Let me check the weather."), std::string::npos) << r.streamed;
  ASSERT_EQ(r.end.calls.size(), 1u);
  EXPECT_EQ(r.end.calls[0].arguments, R"({"a":1})");
  const Result w = whole(ToolCallFormat::Hermes, reply);
  EXPECT_EQ(r.streamed + r.end.content, w.streamed + w.end.content);
}

TEST_F(ToolReplyTest, ProseIsStreamedWhole) {
  const std::string reply = "Once upon a time, there was a {little} cat named <Tom>.";
  const std::string expected = tok_->decode(ids(reply), {.render_special = true, .strip_leading_space = false});
  for (ToolCallFormat f : {ToolCallFormat::Hermes, ToolCallFormat::Llama3, ToolCallFormat::Mistral}) {
    const Result r = stream(f, reply);
    EXPECT_TRUE(r.end.calls.empty());
    EXPECT_EQ(r.streamed + r.end.content, expected);
    EXPECT_GE(r.streamed.size(), expected.size() - 1) << "text was held back for no reason";
  }
}

TEST_F(ToolReplyTest, MalformedCallIsTextAtTheEnd) {
  const std::string reply = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Par";
  const Result r = stream(ToolCallFormat::Llama3, reply);
  EXPECT_EQ(r.streamed, "");  // it looked like a call until the end
  EXPECT_TRUE(r.end.calls.empty());
  EXPECT_EQ(r.end.content, tok_->decode(ids(reply), {.render_special = true, .strip_leading_space = false}));
}

TEST_F(ToolReplyTest, StopStringsCutAsTheEngineDoes) {
  const Result r = stream(ToolCallFormat::Hermes, "The cat sat. END <tool_call>{\"name\": \"f\"}</tool_call>", {"END"});
  EXPECT_TRUE(r.end.calls.empty());
  EXPECT_EQ(r.streamed + r.end.content, " The cat sat. ");
  const Result call = stream(ToolCallFormat::Llama3, "{\"name\": \"f\", \"parameters\": {}} END and more", {"END"});
  ASSERT_EQ(call.end.calls.size(), 1u);
  EXPECT_EQ(call.end.calls[0].name, "f");
}

TEST(ToolCallResponses, WholeAndChunkHaveOpenAIsShape) {
  const server::ResponseHead head{server::Route::Chat, "chatcmpl-1", 0, "m"};
  const std::vector<server::ToolCall> calls = {{"call_abc", "get_weather", R"({"city":"Paris"})"},
                                                {"call_def", "get_time", "{}"}};
  const Value whole = chat::parse_json(server::tool_calls_completion_json(head, "", calls, {5, 7}));
  const Value& choice = whole.object().find("choices")->items()[0];
  EXPECT_EQ(choice.object().find("finish_reason")->as_string(), "tool_calls");
  const Value& message = *choice.object().find("message");
  EXPECT_TRUE(message.object().find("content")->is_none());
  const Value& first = message.object().find("tool_calls")->items()[0];
  EXPECT_EQ(first.object().find("id")->as_string(), "call_abc");
  EXPECT_EQ(first.object().find("type")->as_string(), "function");
  const Value& fn = *first.object().find("function");
  EXPECT_EQ(fn.object().find("name")->as_string(), "get_weather");
  // arguments is a string holding JSON, as OpenAI sends it.
  ASSERT_TRUE(fn.object().find("arguments")->is_string());
  EXPECT_EQ(chat::parse_json(fn.object().find("arguments")->as_string()).object().find("city")->as_string(), "Paris");
  EXPECT_EQ(chat::parse_json(server::tool_calls_completion_json(head, "Checking.", calls, {5, 7}))
                .object().find("choices")->items()[0].object().find("message")->object().find("content")->as_string(),
            "Checking.");

  const Value chunk = chat::parse_json(server::tool_calls_chunk_json(head, calls));
  EXPECT_EQ(chunk.object().find("object")->as_string(), "chat.completion.chunk");
  const Value& delta = *chunk.object().find("choices")->items()[0].object().find("delta");
  const Value& second = delta.object().find("tool_calls")->items()[1];
  EXPECT_EQ(second.object().find("index")->as_int(), 1);
  EXPECT_EQ(second.object().find("function")->object().find("name")->as_string(), "get_time");
}

}  // namespace
