// gpt-oss's harmony replies divided by channel (chat/harmony_split.h): analysis is reasoning, final and preambles
// are content, a message to a function is a call when tools are offered; each reply gives the same however it is
// cut into pieces (split_check.h).
#include <gtest/gtest.h>

#include "chat/harmony_split.h"
#include "chat/reply_split.h"
#include "split_check.h"

namespace {

using chat::HarmonySplit;

split_check::Split split(const std::string& reply, bool calls_wanted = true) {
  return split_check::expect_same_cut_anyhow([calls_wanted] { return std::make_unique<HarmonySplit>(calls_wanted); },
                                             reply);
}

TEST(HarmonySplit, AnalysisThenFinal) {
  const auto s = split("<|channel|>analysis<|message|>User greets. Respond.<|end|>"
                       "<|start|>assistant<|channel|>final<|message|>Hello! How can I help?");
  EXPECT_EQ(s.reasoning, "User greets. Respond.");
  EXPECT_EQ(s.content, "Hello! How can I help?");
  EXPECT_TRUE(s.calls.empty());
  const auto direct = split("<|channel|>final<|message|>Just the answer.");
  EXPECT_EQ(direct.reasoning, "");
  EXPECT_EQ(direct.content, "Just the answer.");
}

TEST(HarmonySplit, ACallAfterAPreamble) {
  const auto s = split(
      "<|channel|>analysis<|message|>Need weather.<|end|>"
      "<|start|>assistant<|channel|>commentary<|message|>Checking the weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>"
      "{\"city\": \"Paris\"}");
  EXPECT_EQ(s.reasoning, "Need weather.");
  EXPECT_EQ(s.content, "Checking the weather.");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments, "{\"city\":\"Paris\"}");
  // The recipient before the channel, as the template renders earlier calls, and a call straight away.
  const auto before = split(" to=functions.lookup<|channel|>commentary json<|message|>{\"q\": 1}");
  ASSERT_EQ(before.calls.size(), 1u);
  EXPECT_EQ(before.calls[0].name, "lookup");
  EXPECT_EQ(before.calls[0].arguments, "{\"q\":1}");
  EXPECT_EQ(before.content, "");
}

TEST(HarmonySplit, WhatIsNotACall) {
  // Without tools offered, and with a body that is not a JSON object, the text goes to the user.
  const std::string call = "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": 2}";
  const auto no_tools = split(call, false);
  EXPECT_TRUE(no_tools.calls.empty());
  EXPECT_EQ(no_tools.content, "{\"a\": 2}");
  const auto cut = split("<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\": ");
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "{\"a\": ");
}

TEST(HarmonySplit, RepliesThatAreNotHarmonyAreContent) {
  EXPECT_EQ(split("Hello there").content, "Hello there");
  EXPECT_EQ(split("<|chan").content, "<|chan");  // cut before a header was whole
  EXPECT_EQ(split("").content, "");
  // A header that never reaches <|message|> within its bound is text too.
  const std::string long_header = "<|channel|>" + std::string(300, 'x');
  EXPECT_EQ(split(long_header).content, long_header);
  // Never closed analysis (the token limit): reasoning, no content.
  const auto open = split("<|channel|>analysis<|message|>Thinking still");
  EXPECT_EQ(open.reasoning, "Thinking still");
  EXPECT_EQ(open.content, "");
  // Text after a message that opens no other one is the user's.
  EXPECT_EQ(split("<|channel|>final<|message|>A<|end|>B").content, "AB");
}

TEST(HarmonySplit, FormatsFromTemplates) {
  using chat::ReplyFormat;
  EXPECT_EQ(chat::detect_reply_format("{{ '<|start|>assistant<|channel|>final<|message|>' }}"), ReplyFormat::Harmony);
  EXPECT_EQ(chat::detect_reply_format("{{ '<think>' }}"), ReplyFormat::Think);
  EXPECT_EQ(chat::detect_reply_format("<|im_start|>"), ReplyFormat::Plain);
  EXPECT_EQ(chat::make_reply_split(ReplyFormat::Plain, "", false), nullptr);
}

}  // namespace
