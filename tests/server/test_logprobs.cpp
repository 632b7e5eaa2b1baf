// logprobs / top_logprobs end to end on stories260K: chat's and completions' shapes, streamed and whole (the same
// tokens and numbers either way), on both engine workers; the tokens spell the reply's text, a stop string takes
// the tokens it cut with it, out-of-range values are 400s naming the field; echo scores the prompt.
#include <optional>
#include <span>

#include "runtime/logprobs.h"
#include "runtime/session_cpu.h"
#include "server_fixture.h"

namespace test_server {
namespace {

// One token of either shape, read back from the JSON.
struct Entry {
  std::string token;
  double logprob = 0;
  std::vector<std::pair<std::string, double>> top;  // in the order given
  int64_t offset = -1;                              // completions' text_offset
};

// Chat's {"content": [...], "refusal": null}, checking each entry's bytes against its token.
std::vector<Entry> chat_entries(const Value& logprobs) {
  std::vector<Entry> out;
  EXPECT_TRUE(at(logprobs, "content").is_array());
  EXPECT_TRUE(at(logprobs, "refusal").is_none());
  const auto bytes_of = [](const Value& v) {
    std::string b;
    for (const Value& x : v.items()) b += static_cast<char>(x.as_int());
    return b;
  };
  for (const Value& e : at(logprobs, "content").items()) {
    Entry en{str(at(e, "token")), at(e, "logprob").as_float(), {}, -1};
    EXPECT_EQ(bytes_of(at(e, "bytes")), en.token);  // stories260K's pieces are whole characters
    for (const Value& t : at(e, "top_logprobs").items()) {
      EXPECT_EQ(bytes_of(at(t, "bytes")), str(at(t, "token")));
      en.top.emplace_back(str(at(t, "token")), at(t, "logprob").as_float());
    }
    out.push_back(std::move(en));
  }
  return out;
}

// Completions' {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, parallel arrays.
std::vector<Entry> completion_entries(const Value& logprobs) {
  std::vector<Entry> out;
  const auto& tokens = at(logprobs, "tokens").items();
  EXPECT_EQ(at(logprobs, "token_logprobs").items().size(), tokens.size());
  EXPECT_EQ(at(logprobs, "top_logprobs").items().size(), tokens.size());
  EXPECT_EQ(at(logprobs, "text_offset").items().size(), tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    Entry en{str(tokens[i]), at(at(logprobs, "token_logprobs"), i).as_float(), {},
             at(at(logprobs, "text_offset"), i).as_int()};
    for (const auto& [k, v] : at(at(logprobs, "top_logprobs"), i).object().items)
      en.top.emplace_back(str(k), v.as_float());
    out.push_back(std::move(en));
  }
  return out;
}

struct Reply {
  std::string text;
  std::vector<Entry> entries;
};

Reply whole(const test_http::Response& r, bool chat) {
  Reply out;
  EXPECT_EQ(r.status, 200) << r.body;
  const Value body = json(r.body);
  const Value& c = at(at(body, "choices"), 0);
  out.text = chat ? str(at(at(c, "message"), "content")) : str(at(c, "text"));
  out.entries = chat ? chat_entries(at(c, "logprobs")) : completion_entries(at(c, "logprobs"));
  return out;
}

Reply streamed(const test_http::Response& r, bool chat) {
  Reply out;
  EXPECT_EQ(r.status, 200) << r.body;
  for (const std::string& ev : test_http::sse_data(r.body)) {
    if (ev == "[DONE]") break;
    const Value chunk = json(ev);
    const Value& c = at(at(chunk, "choices"), 0);
    const std::string text = chat ? (at(at(c, "delta"), "content").is_string() ? str(at(at(c, "delta"), "content"))
                                                                               : "")
                                  : str(at(c, "text"));
    out.text += text;
    if (at(c, "logprobs").is_none()) continue;
    EXPECT_FALSE(text.empty() && at(c, "finish_reason").is_none()) << "logprobs without text: " << ev;
    for (Entry& e : chat ? chat_entries(at(c, "logprobs")) : completion_entries(at(c, "logprobs")))
      out.entries.push_back(std::move(e));
  }
  return out;
}

std::string spelled(const std::vector<Entry>& es) {
  std::string s;
  for (const Entry& e : es) s += e.token;
  return s;
}

void expect_same(const Reply& a, const Reply& b) {
  EXPECT_EQ(a.text, b.text);
  ASSERT_EQ(a.entries.size(), b.entries.size());
  for (size_t i = 0; i < a.entries.size(); ++i) {
    EXPECT_EQ(a.entries[i].token, b.entries[i].token) << i;
    EXPECT_EQ(a.entries[i].logprob, b.entries[i].logprob) << i;
    EXPECT_EQ(a.entries[i].top, b.entries[i].top) << i;
    EXPECT_EQ(a.entries[i].offset, b.entries[i].offset) << i;
  }
}

TEST_F(ServerTest, ChatLogprobsStreamedAndWhole) {
  for (int32_t parallel : {4, 0}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    Config c;
    c.parallel = parallel;
    start(c);
    const std::string body = R"({"messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 12,
        "temperature": 0, "ignore_eos": true, "logprobs": true, "top_logprobs": 3)";
    const Reply w = whole(post("/v1/chat/completions", body + "}"), true);
    EXPECT_EQ(w.text, greedy(chat_prompt("Tell me a story."), 12));
    ASSERT_EQ(w.entries.size(), 12u);
    EXPECT_EQ(spelled(w.entries), w.text);
    for (const Entry& e : w.entries) {
      EXPECT_LE(e.logprob, 0.0);
      ASSERT_EQ(e.top.size(), 3u);
      // Greedy: the token is the most likely one; the list runs down from it.
      EXPECT_EQ(e.top[0], std::make_pair(e.token, e.logprob));
      EXPECT_GE(e.top[1].second, e.top[2].second);
    }
    expect_same(streamed(post("/v1/chat/completions", body + R"(, "stream": true})"), true), w);
    // logprobs alone: the tokens' own, no alternatives.
    const Reply bare = whole(post("/v1/chat/completions", R"({"messages": [{"role": "user", "content": "Hi"}],
        "max_tokens": 4, "ignore_eos": true, "temperature": 0, "logprobs": true})"), true);
    ASSERT_EQ(bare.entries.size(), 4u);
    EXPECT_TRUE(bare.entries[0].top.empty());
    stop();
  }
}

TEST_F(ServerTest, CompletionLogprobsStreamedAndWhole) {
  for (int32_t parallel : {4, 0}) {
    SCOPED_TRACE("parallel " + std::to_string(parallel));
    Config c;
    c.parallel = parallel;
    start(c);
    const std::string body =
        R"({"prompt": "Once upon a time", "max_tokens": 16, "temperature": 0, "ignore_eos": true, "logprobs": 2)";
    const Reply w = whole(post("/v1/completions", body + "}"), false);
    EXPECT_EQ(w.text, greedy(completion_prompt("Once upon a time"), 16));
    ASSERT_EQ(w.entries.size(), 16u);
    EXPECT_EQ(spelled(w.entries), w.text);
    int64_t offset = 0;
    for (const Entry& e : w.entries) {
      EXPECT_EQ(e.offset, offset);  // bytes into the generated text
      offset += static_cast<int64_t>(e.token.size());
      ASSERT_EQ(e.top.size(), 2u);  // greedy: the sampled token is the first of the two
      EXPECT_EQ(e.top[0], std::make_pair(e.token, e.logprob));
    }
    expect_same(streamed(post("/v1/completions", body + R"(, "stream": true})"), false), w);
    stop();
  }
}

TEST_F(ServerTest, LogprobsStopWhereAStopStringCutsTheText) {
  start();
  const std::string full = greedy(completion_prompt("Once upon a time"), 40);
  ASSERT_GT(full.size(), 20u);
  const std::string stop = full.substr(12, 5);
  const std::string body = R"({"prompt": "Once upon a time", "max_tokens": 40, "temperature": 0, "logprobs": 0,
      "stop": [)" + chat::json_quote(stop) + "]";
  const Reply w = whole(post("/v1/completions", body + "}"), false);
  ASSERT_EQ(w.text, full.substr(0, full.find(stop)));
  // The tokens cover the text, and none lies wholly past it.
  ASSERT_FALSE(w.entries.empty());
  const std::string s = spelled(w.entries);
  EXPECT_EQ(s.substr(0, w.text.size()), w.text);
  EXPECT_LT(static_cast<size_t>(w.entries.back().offset), w.text.size());
  EXPECT_EQ(w.entries[0].top.size(), 1u);  // logprobs 0: only the sampled token, as OpenAI always adds it
  expect_same(streamed(post("/v1/completions", body + R"(, "stream": true})"), false), w);
}

// A completions logprobs object's parallel arrays, nulls kept (an echoed prompt's first token has none).
struct EchoEntries {
  std::vector<std::string> tokens;
  std::vector<std::optional<double>> logprobs;
  std::vector<int64_t> offsets;
};
void add_echo_entries(const Value& lp, EchoEntries& out) {
  for (const Value& t : at(lp, "tokens").items()) out.tokens.push_back(t.as_string());
  for (const Value& v : at(lp, "token_logprobs").items())
    out.logprobs.push_back(v.is_none() ? std::nullopt : std::optional<double>(v.as_float()));
  for (const Value& o : at(lp, "text_offset").items()) out.offsets.push_back(o.as_int());
  EXPECT_EQ(at(lp, "top_logprobs").items().size(), at(lp, "tokens").items().size());
}

// echo with logprobs, as evaluation harnesses score a text: the prompt's tokens lead the reply's, the first with a
// null logprob, each other the log-softmax of the row of the token before it (one unpaged evaluation of the prompt
// gives them, within float rounding); the text is the prompt's ids decoded and then the reply, and the offsets count
// in it; streamed as whole. The one-sequence worker cannot give them: a 400.
TEST_F(ServerTest, EchoWithLogprobsScoresThePrompt) {
  start();
  const std::string text = "Once upon a time, there was a dog";
  const std::vector<int32_t> prompt = completion_prompt(text);
  const std::string body = R"({"prompt": ")" + text + R"(", "max_tokens": 3, "temperature": 0, "ignore_eos": true,
      "echo": true, "logprobs": 2)";
  const auto r = post("/v1/completions", body + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  const Value parsed = json(r.body);
  const Value& c = at(at(parsed, "choices"), 0);
  const std::string echoed = tok_->decode(prompt);
  EXPECT_EQ(str(at(c, "text")), echoed + greedy(prompt, 3));
  EchoEntries w;
  add_echo_entries(at(c, "logprobs"), w);
  ASSERT_EQ(w.tokens.size(), prompt.size() + 3);
  ASSERT_EQ(w.logprobs.size(), w.tokens.size());
  EXPECT_FALSE(w.logprobs[0].has_value());
  EXPECT_TRUE(at(at(at(c, "logprobs"), "top_logprobs"), 0).is_none());
  runtime::CpuSession session(model_, 512, 1);
  const std::span<const float> rows = session.eval(prompt, 0, true);
  const size_t n_vocab = size_t(session.n_vocab());
  for (size_t i = 1; i < prompt.size(); ++i) {
    ASSERT_TRUE(w.logprobs[i].has_value()) << i;
    const float want = runtime::token_logprobs(rows.subspan((i - 1) * n_vocab, n_vocab), prompt[i], 0).sampled.logprob;
    EXPECT_NEAR(*w.logprobs[i], want, 1e-4) << "prompt token " << i;
  }
  EXPECT_EQ(w.offsets[0], 0);
  for (size_t i = 1; i < w.offsets.size(); ++i) EXPECT_GE(w.offsets[i], w.offsets[i - 1]) << i;
  EXPECT_EQ(w.offsets[prompt.size()], int64_t(echoed.size()));  // the first generated token, after the prompt

  const auto sr = post("/v1/completions", body + R"(, "stream": true})");
  ASSERT_EQ(sr.status, 200) << sr.body;
  EchoEntries s;
  std::string streamed_text;
  for (const std::string& ev : test_http::sse_data(sr.body)) {
    if (ev == "[DONE]") break;
    const Value chunk = json(ev);
    const Value& sc = at(at(chunk, "choices"), 0);
    streamed_text += str(at(sc, "text"));
    if (!at(sc, "logprobs").is_none()) add_echo_entries(at(sc, "logprobs"), s);
  }
  EXPECT_EQ(streamed_text, str(at(c, "text")));
  EXPECT_EQ(s.tokens, w.tokens);
  EXPECT_EQ(s.logprobs, w.logprobs);
  EXPECT_EQ(s.offsets, w.offsets);
  stop();

  Config fifo;
  fifo.parallel = 0;
  start(fifo);
  const auto refused = post("/v1/completions", body + "}");
  EXPECT_EQ(refused.status, 400) << refused.body;
  EXPECT_EQ(str(at(error_of(refused), "param")), "logprobs");
}

TEST_F(ServerTest, LogprobsOutOfRangeAre400) {
  start();
  const auto expect_400 = [&](const std::string& path, const std::string& body, const std::string& param) {
    const auto r = post(path, body);
    EXPECT_EQ(r.status, 400) << body;
    EXPECT_EQ(str(at(error_of(r), "param")), param) << body;
  };
  const std::string chat = R"({"messages": [{"role": "user", "content": "Hi"}], )";
  expect_400("/v1/chat/completions", chat + R"("logprobs": true, "top_logprobs": 21})", "top_logprobs");
  expect_400("/v1/chat/completions", chat + R"("logprobs": true, "top_logprobs": -1})", "top_logprobs");
  expect_400("/v1/chat/completions", chat + R"("top_logprobs": 2})", "top_logprobs");
  expect_400("/v1/chat/completions", chat + R"("logprobs": 1})", "logprobs");
  expect_400("/v1/completions", R"({"prompt": "x", "logprobs": 6})", "logprobs");
  expect_400("/v1/completions", R"({"prompt": "x", "logprobs": -1})", "logprobs");
  expect_400("/v1/completions", R"({"prompt": "x", "logprobs": true})", "logprobs");
  expect_400("/v1/completions", R"({"prompt": "x", "top_logprobs": 2})", "top_logprobs");
  EXPECT_EQ(engine_->stats().requests_accepted, 0u);
  // Without them the choice says null, as before.
  const auto r = post("/v1/completions", R"({"prompt": "x", "max_tokens": 2, "logprobs": null})");
  ASSERT_EQ(r.status, 200) << r.body;
  const Value body = json(r.body);
  EXPECT_TRUE(at(at(at(body, "choices"), 0), "logprobs").is_none());
}

}  // namespace
}  // namespace test_server
