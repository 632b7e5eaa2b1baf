// The reasoning of a chat reply split from its content (server/reasoning_split.h): whole replies of each shape, and
// the same reply pushed a character at a time or in two pieces at every cut gives the same two texts.
#include <gtest/gtest.h>

#include "server/reasoning_split.h"

namespace {

using server::ReasoningSplit;

struct Split {
  std::string reasoning, content;
};

Split run(bool inside, const std::vector<std::string_view>& pieces) {
  ReasoningSplit s(inside);
  Split out;
  for (const std::string_view p : pieces) {
    const ReasoningSplit::Piece got = s.push(p);
    out.reasoning += got.reasoning;
    out.content += got.content;
  }
  const ReasoningSplit::Piece end = s.finish();
  out.reasoning += end.reasoning, out.content += end.content;
  return out;
}

void expect_split(const std::string& reply, bool inside, const std::string& reasoning, const std::string& content) {
  const Split whole = run(inside, {reply});
  EXPECT_EQ(whole.reasoning, reasoning) << reply;
  EXPECT_EQ(whole.content, content) << reply;
  std::vector<std::string_view> chars;
  for (size_t i = 0; i < reply.size(); ++i) chars.push_back(std::string_view(reply).substr(i, 1));
  const Split streamed = run(inside, chars);
  EXPECT_EQ(streamed.reasoning, reasoning) << reply << " (a character at a time)";
  EXPECT_EQ(streamed.content, content) << reply << " (a character at a time)";
  for (size_t cut = 0; cut <= reply.size(); ++cut) {
    const Split two = run(inside, {std::string_view(reply).substr(0, cut), std::string_view(reply).substr(cut)});
    EXPECT_EQ(two.reasoning, reasoning) << reply << " (cut at " << cut << ")";
    EXPECT_EQ(two.content, content) << reply << " (cut at " << cut << ")";
  }
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
  EXPECT_TRUE(server::template_thinks("{{ '<think>\\n' }}"));
  EXPECT_TRUE(server::template_thinks("{% set c = content.split('</think>')[-1] %}"));
  EXPECT_FALSE(server::template_thinks("<|im_start|>assistant\n"));
  EXPECT_TRUE(server::prompt_opens_thinking("<|Assistant|><think>\n"));
  EXPECT_FALSE(server::prompt_opens_thinking("<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(server::prompt_opens_thinking("<|im_start|>assistant\n"));
}

}  // namespace
