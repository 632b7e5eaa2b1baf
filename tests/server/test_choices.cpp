// Several choices in one request: completions with several prompts, and n choices a prompt (or a chat), whole and
// streamed. Each choice is its own engine request (choice i of prompt i / n, seed + i), so every choice's text is
// exactly what generate() gives for its prompt and seed alone; usage counts each prompt once and every choice's
// completion; a stream interleaves the choices, each chunk naming its index, one finish reason each. best_of ranks
// more candidates than it answers.
#include <algorithm>
#include <map>
#include <utility>
#include <vector>

#include "server_fixture.h"

namespace test_server {
namespace {

// What generate() gives for these prompt ids at temperature `temp` with `seed` (greedy when temp is 0).
class ChoicesTest : public ServerTest {
 protected:
  std::string generated(const std::vector<int32_t>& prompt, int32_t n, float temp, uint64_t seed) {
    runtime::CpuSession session(model_, 512, 1);
    runtime::GenerateOptions o;
    o.sampling.temp = temp;
    o.sampling.seed = seed;
    o.n_predict = n;
    o.echo_prompt = false;
    o.ignore_eos = true;
    std::string text;
    runtime::generate(session, *tok_, prompt, o, [&](std::string_view t) { text.append(t); });
    return text;
  }
};

struct StreamedChoice {
  std::string text;
  std::string finish;
  int finishes = 0;
  bool role_first = false;
  int chunks = 0;
};

// The stream's choices by index (text, finish reasons, whether the first chunk carried the role), and its usage.
std::map<int64_t, StreamedChoice> read_choices(const test_http::Response& r, bool chat, Value& usage) {
  std::map<int64_t, StreamedChoice> out;
  EXPECT_EQ(r.status, 200) << r.body;
  const std::vector<std::string> events = test_http::sse_data(r.body);
  EXPECT_FALSE(events.empty());
  if (events.empty()) return out;
  EXPECT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Value e = json(events[i]);
    const Value& choices = at(e, "choices");
    if (choices.is_array() && choices.items().empty()) {
      usage = at(e, "usage");
      continue;
    }
    EXPECT_EQ(choices.items().size(), 1u) << events[i];
    const Value& c = at(choices, 0);
    StreamedChoice& s = out[at(c, "index").as_int()];
    EXPECT_EQ(s.finishes, 0) << "a chunk after its choice's finish reason: " << events[i];
    if (at(c, "finish_reason").is_string()) s.finish = str(at(c, "finish_reason")), ++s.finishes;
    if (chat) {
      const Value& delta = at(c, "delta");
      if (s.chunks == 0) s.role_first = str(at(delta, "role")) == "assistant";
      if (at(delta, "content").is_string()) s.text += at(delta, "content").as_string();
    } else {
      s.text += str(at(c, "text"));
    }
    ++s.chunks;
  }
  return out;
}

TEST_F(ChoicesTest, SeveralPromptsWithTwoChoicesEach) {
  start();
  const std::vector<int32_t> p0 = completion_prompt("Once upon a time"), p1 = completion_prompt("The dog");
  const std::string want0 = generated(p0, 10, 0, 0), want1 = generated(p1, 10, 0, 0);
  const std::string body = R"({"prompt": ["Once upon a time", "The dog"], "n": 2, "max_tokens": 10,
      "temperature": 0, "ignore_eos": true)";
  const auto whole = post("/v1/completions", body + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Value b = json(whole.body);
  const Value& choices = at(b, "choices");
  ASSERT_EQ(choices.items().size(), 4u) << whole.body;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(at(at(choices, i), "index").as_int(), int64_t(i));
    EXPECT_EQ(str(at(at(choices, i), "text")), i < 2 ? want0 : want1) << i;
    EXPECT_EQ(str(at(at(choices, i), "finish_reason")), "length");
  }
  const Value& u = at(b, "usage");
  EXPECT_EQ(at(u, "prompt_tokens").as_int(), int64_t(p0.size() + p1.size()));  // each prompt once
  EXPECT_EQ(at(u, "completion_tokens").as_int(), 40);

  Value usage;
  const auto streamed =
      read_choices(post("/v1/completions", body + R"(, "stream": true, "stream_options": {"include_usage": true}})"),
                   false, usage);
  ASSERT_EQ(streamed.size(), 4u);
  for (const auto& [i, s] : streamed) {
    EXPECT_EQ(s.text, i < 2 ? want0 : want1) << i;
    EXPECT_EQ(s.finishes, 1) << i;
    EXPECT_EQ(s.finish, "length");
  }
  EXPECT_EQ(at(usage, "completion_tokens").as_int(), 40);
  EXPECT_EQ(at(usage, "prompt_tokens").as_int(), int64_t(p0.size() + p1.size()));
}

// Seeded sampling: choice i draws with seed + i, so the choices differ and each is reproducible alone.
TEST_F(ChoicesTest, ChatChoicesDrawWithTheirOwnSeeds) {
  start();
  const std::vector<int32_t> prompt = chat_prompt("Tell me a story");
  const std::string body = R"({"messages": [{"role": "user", "content": "Tell me a story"}], "n": 3,
      "max_tokens": 12, "temperature": 1.0, "seed": 5, "ignore_eos": true)";
  const auto whole = post("/v1/chat/completions", body + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Value b = json(whole.body);
  const Value& choices = at(b, "choices");
  ASSERT_EQ(choices.items().size(), 3u);
  std::vector<std::string> want;
  for (uint64_t i = 0; i < 3; ++i) want.push_back(generated(prompt, 12, 1.0f, 5 + i));
  EXPECT_TRUE(want[0] != want[1] || want[1] != want[2]) << "three seeds gave one text";
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(str(at(at(at(choices, i), "message"), "content")), want[i]) << i;
    EXPECT_EQ(str(at(at(at(choices, i), "message"), "role")), "assistant");
  }
  Value usage;
  const auto streamed = read_choices(post("/v1/chat/completions", body + R"(, "stream": true})"), true, usage);
  ASSERT_EQ(streamed.size(), 3u);
  for (const auto& [i, s] : streamed) {
    EXPECT_EQ(s.text, want[size_t(i)]) << i;
    EXPECT_TRUE(s.role_first) << i;
    EXPECT_EQ(s.finishes, 1) << i;
  }
}

// The mean logprob of each choice's generated tokens (completions' token_logprobs) and its text.
std::vector<std::pair<double, std::string>> scored_choices(const Value& body) {
  std::vector<std::pair<double, std::string>> out;
  for (const Value& c : at(body, "choices").items()) {
    double sum = 0.0;
    const auto& lps = at(at(c, "logprobs"), "token_logprobs").items();
    for (const Value& v : lps) sum += v.as_float();
    out.emplace_back(lps.empty() ? 0.0 : sum / double(lps.size()), str(at(c, "text")));
  }
  return out;
}

// best_of: the candidates are the choices n = best_of would give (seed + i each), and the answer is the n of them
// with the highest mean logprob a token, best first; usage counts every candidate's tokens.
TEST_F(ChoicesTest, BestOfAnswersTheCandidatesOfHighestMeanLogprob) {
  start();
  const std::vector<int32_t> prompt = completion_prompt("Once upon a time");
  const std::string common = R"({"prompt": "Once upon a time", "max_tokens": 8, "temperature": 1.0, "seed": 11,
      "ignore_eos": true)";
  const auto all = post("/v1/completions", common + R"(, "n": 4, "logprobs": 0})");
  ASSERT_EQ(all.status, 200) << all.body;
  auto scored = scored_choices(json(all.body));
  ASSERT_EQ(scored.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(scored[i].second, generated(prompt, 8, 1.0f, 11 + i)) << i;
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  ASSERT_GT(scored[0].first, scored[3].first) << "four candidates scored alike: nothing to rank";

  const auto best = post("/v1/completions", common + R"(, "best_of": 4})");
  ASSERT_EQ(best.status, 200) << best.body;
  const Value b = json(best.body);
  ASSERT_EQ(at(b, "choices").items().size(), 1u);
  EXPECT_EQ(at(at(at(b, "choices"), 0), "index").as_int(), 0);
  EXPECT_EQ(str(at(at(at(b, "choices"), 0), "text")), scored[0].second);
  EXPECT_TRUE(at(at(at(b, "choices"), 0), "logprobs").is_none());  // not asked for
  EXPECT_EQ(at(at(b, "usage"), "completion_tokens").as_int(), 32);   // all four candidates
  EXPECT_EQ(at(at(b, "usage"), "prompt_tokens").as_int(), int64_t(prompt.size()));  // the prompt once

  const auto two = post("/v1/completions", common + R"(, "n": 2, "best_of": 4, "logprobs": 0})");
  ASSERT_EQ(two.status, 200) << two.body;
  const auto got = scored_choices(json(two.body));
  ASSERT_EQ(got.size(), 2u);
  for (size_t k = 0; k < 2; ++k) {
    EXPECT_EQ(at(at(at(json(two.body), "choices"), k), "index").as_int(), int64_t(k));
    EXPECT_EQ(got[k].second, scored[k].second) << k;
    EXPECT_DOUBLE_EQ(got[k].first, scored[k].first) << k;  // the logprobs shown are the candidate's own
  }
}

// echo: each choice's text is its prompt (a text as given, ids decoded) and then what it generated, whole and
// streamed.
TEST_F(ChoicesTest, EchoPutsThePromptInFront) {
  start();
  const std::vector<int32_t> text_ids = completion_prompt("Once upon a time"), ids = completion_prompt("The dog");
  std::string id_list = "[";
  for (size_t i = 0; i < ids.size(); ++i) id_list += (i ? ", " : "") + std::to_string(ids[i]);
  id_list += "]";
  const std::pair<std::string, std::string> cases[] = {
      {R"("Once upon a time")", "Once upon a time" + generated(text_ids, 6, 0, 0)},
      {id_list, tok_->decode(ids) + generated(ids, 6, 0, 0)}};
  for (const auto& [prompt, want] : cases) {
    const std::string body =
        R"({"prompt": )" + prompt + R"(, "max_tokens": 6, "temperature": 0, "ignore_eos": true, "echo": true)";
    const auto whole = post("/v1/completions", body + "}");
    ASSERT_EQ(whole.status, 200) << whole.body;
    EXPECT_EQ(str(at(at(at(json(whole.body), "choices"), 0), "text")), want) << prompt;
    Value usage;
    const auto streamed = read_choices(post("/v1/completions", body + R"(, "stream": true})"), false, usage);
    ASSERT_EQ(streamed.size(), 1u);
    EXPECT_EQ(streamed.at(0).text, want) << prompt;
  }
}

// More choices than the queue takes: refused whole (429), and none of them runs.
TEST_F(ChoicesTest, ChoicesPastTheQueueAreRefusedWhole) {
  Config c;
  c.parallel = 1;
  c.max_queue = 2;
  start(c);
  const auto r = post("/v1/completions", R"({"prompt": "Once upon a time", "n": 6, "max_tokens": 4})");
  EXPECT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(str(at(at(json(r.body), "error"), "code")), "queue_full");
  ASSERT_TRUE(engine_->wait_idle(std::chrono::seconds(30)));
  EXPECT_EQ(post("/v1/completions", R"({"prompt": "x", "max_tokens": 2, "n": 2})").status, 200);
}

}  // namespace
}  // namespace test_server
