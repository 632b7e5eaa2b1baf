// The reasoning of a chat reply split from its content (chat/reasoning_split.h): whole replies of each shape, and
// the same reply pushed a character at a time or in two pieces at every cut gives the same two texts.
#include <gtest/gtest.h>

#include "chat/reasoning_split.h"
#include "split_check.h"

namespace {

using chat::ReasoningSplit;

void expect_split(const std::string& reply, bool inside, const std::string& reasoning, const std::string& content) {
  const split_check::Split got = split_check::expect_same_cut_anyhow(
      [inside] { return std::make_unique<ReasoningSplit>(inside); }, reply);
  EXPECT_EQ(got.reasoning, reasoning) << reply;
  EXPECT_EQ(got.content, content) << reply;
}

TEST(ReasoningSplit, ABlockThatOpensTheReplyIsItsReasoning) {
  expect_split("<think>\nThe user greets me.\n</think>\n\nHello!", false, "The user greets me.", "Hello!");
  expect_split("\n<think>a \n b</think>c d\n", false, "a \n b", "c d\n");  // inner and final space kept
  expect_split("<think>\n\n</think>\n\nNo thoughts.", false, "", "No thoughts.");  // an empty block
  expect_split("<think>x</think>", false, "x", "");
}

TEST(ReasoningSplit, WithoutAnOpeningBlockEverythingIsContent) {
  expect_split("Hello <think>not this</think> world", false, "", "Hello <think>not this</think> world");
  expect_split("<thinking>no</thinking>", false, "", "<thinking>no</thinking>");
  expect_split("<b>bold</b>", false, "", "<b>bold</b>");
  expect_split("  ", false, "", "  ");
  expect_split("<thin", false, "", "<thin");  // cut before the tag was whole
  expect_split("", false, "", "");
}

TEST(ReasoningSplit, APromptThatOpenedTheBlockStartsInside) {
  expect_split("Let me see.\n</think>\n\n42", true, "Let me see.", "42");
  expect_split("</think>42", true, "", "42");
  // Never closed (max_tokens came first): reasoning to the end, no content.
  expect_split("Step 1.\nStep 2.</thi", true, "Step 1.\nStep 2.</thi", "");
  expect_split("<think>a</think>b", false, "a", "b");
}

TEST(ReasoningSplit, TemplatesAndPrompts) {
  EXPECT_TRUE(chat::template_thinks("{{ '<think>\\n' }}"));
  EXPECT_TRUE(chat::template_thinks("{% set c = content.split('</think>')[-1] %}"));
  EXPECT_FALSE(chat::template_thinks("<|im_start|>assistant\n"));
  EXPECT_TRUE(chat::prompt_opens_thinking("<|Assistant|><think>\n"));
  EXPECT_FALSE(chat::prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(chat::prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
