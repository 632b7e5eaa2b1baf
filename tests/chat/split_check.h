// Checking a ReplySplit (chat/reply_split.h) on one reply: pushed whole, a character at a time, and in two pieces
// at every cut, it must give the same reasoning and content (and calls).
#pragma once
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/reply_split.h"

namespace split_check {

struct Split {
  std::string reasoning, content;
  std::vector<chat::ReplyCall> calls;
};

inline Split run(chat::ReplySplit& s, const std::vector<std::string_view>& pieces) {
  Split out;
  for (const std::string_view p : pieces) {
    const chat::ReplyPiece got = s.push(p);
    out.reasoning += got.reasoning;
    out.content += got.content;
  }
  const chat::ReplyPiece end = s.finish();
  out.reasoning += end.reasoning, out.content += end.content;
  out.calls = s.calls();
  return out;
}

using Make = std::function<std::unique_ptr<chat::ReplySplit>()>;

// The whole reply's split, after checking that every way of cutting it gives the same.
inline Split expect_same_cut_anyhow(const Make& make, const std::string& reply) {
  auto whole_split = make();
  const Split whole = run(*whole_split, {reply});
  const auto same = [&](const Split& got, const std::string& how) {
    EXPECT_EQ(got.reasoning, whole.reasoning) << reply << " (" << how << ")";
    EXPECT_EQ(got.content, whole.content) << reply << " (" << how << ")";
    EXPECT_EQ(got.calls.size(), whole.calls.size()) << reply << " (" << how << ")";
  };
  std::vector<std::string_view> chars;
  for (size_t i = 0; i < reply.size(); ++i) chars.push_back(std::string_view(reply).substr(i, 1));
  auto by_char = make();
  same(run(*by_char, chars), "a character at a time");
  for (size_t cut = 0; cut <= reply.size(); ++cut) {
    auto two = make();
    same(run(*two, {std::string_view(reply).substr(0, cut), std::string_view(reply).substr(cut)}),
         "cut at " + std::to_string(cut));
  }
  return whole;
}

}  // namespace split_check
