// JSON mode (runtime/json_prefix.h, runtime/json_constraint.h): the byte automaton against the project's JSON parser
// on whole texts and every prefix; the vocabulary's masks against trying every token byte by byte; a target object
// spelled through the masks, the end of generation allowed exactly at its end; and generation through the engine.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "assets.h"
#include "chat/json.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/json_constraint.h"
#include "runtime/json_prefix.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"
#include "vocab_masks.h"

namespace {

using runtime::JsonPrefix;

// How far the automaton reads s: the bytes it took, and whether they make a whole object.
struct Read {
  size_t taken = 0;
  bool complete = false;
};
Read read(std::string_view s) {
  JsonPrefix p;
  Read r;
  for (const char c : s) {
    if (!p.feed(static_cast<unsigned char>(c))) break;
    ++r.taken;
  }
  r.complete = p.complete();
  return r;
}

bool parses_as_object(std::string_view s) {
  try {
    return chat::parse_json(s).is_object();
  } catch (const chat::JsonError&) {
    return false;
  }
}

TEST(JsonPrefix, WholeObjectsAndEveryPrefix) {
  for (const std::string s :
       {R"({})", R"({"a":1})", R"( {"a": [1, -2.5e+3, 0.25E-1, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"]} )",
        R"({"nested": {"deep": [[[]], {}]}, "": ""})", "{\"caf\xc3\xa9\": \"\xe2\x82\xac\"}",
        R"({"pair": "\ud83d\ude00 \uD7FF \uE000"})"}) {
    const std::string trimmed = s.substr(0, s.find_last_not_of(' ') + 1);
    const Read r = read(trimmed);
    EXPECT_EQ(r.taken, trimmed.size()) << s;
    EXPECT_TRUE(r.complete) << s;
    EXPECT_TRUE(parses_as_object(trimmed)) << s;
    for (size_t n = 0; n < trimmed.size(); ++n) EXPECT_FALSE(read(trimmed.substr(0, n)).complete) << s << " " << n;
  }
}

TEST(JsonPrefix, WhereInvalidTextStops) {
  const std::pair<std::string, size_t> cases[] = {
      {"[1]", 0},                 // the top level is an object
      {"\"s\"", 0},
      {"{a:1}", 1},               // keys are strings
      {"{\"a\" 1}", 5},           // a colon after a key
      {"{\"a\":01}", 6},          // no leading zeros
      {"{\"a\":1.}", 7},          // digits after the point
      {"{\"a\":tru}", 8},
      {"{\"a\":\"\n\"}", 6},      // control characters are escaped in strings
      {"{\"a\":\"\\x\"}", 7},     // no such escape
      {"{\"a\":\"\\u12g4\"}", 10},
      {"{\"a\":\"\\ude00\"}", 9},      // a low surrogate alone
      {"{\"a\":\"\\ud83dx\"}", 12},    // a high one without its pair
      {"{\"a\":\"\\ud83d\\u0041\"}", 14},
      {"{\"a\":\"\x80\"}", 6},            // strings are valid UTF-8: no stray continuation byte,
      {"{\"a\":\"\xc3\"}", 7},            // no character cut short,
      {"{\"\xc0\xaf\":1}", 2},              // no overlong form,
      {"{\"a\":\"\xe0\x9f\xbf\"}", 7},
      {"{\"a\":\"\xed\xa0\x80\"}", 7},   // no surrogate,
      {"{\"a\":\"\xf4\x90\x80\x80\"}", 7},  // nothing above U+10FFFF,
      {"{\"a\":\"\xf5\"}", 6},            // no byte that never begins a character
      {"{\"a\":1,}", 7},          // no trailing comma
      {"{\"a\":[1,]}", 8},
      {"{\"a\":1]", 6},           // brackets match
      {"{} ", 2},                 // nothing after the object, not even space
      {"{}{}", 2},
  };
  for (const auto& [s, taken] : cases) {
    EXPECT_EQ(read(s).taken, taken) << s;
    EXPECT_FALSE(parses_as_object(s) && read(s).complete && read(s).taken == s.size()) << s;
  }
}

TEST(JsonPrefix, Limits) {
  std::string deep(JsonPrefix::kMaxDepth - 1, '[');
  deep = "{\"a\":" + deep;  // kMaxDepth containers open with the object
  EXPECT_EQ(read(deep).taken, deep.size());
  EXPECT_EQ(read(deep + "[").taken, deep.size());  // one more is refused
  const std::string spaces = "{" + std::string(JsonPrefix::kMaxSpaces, ' ');
  EXPECT_EQ(read(spaces).taken, spaces.size());
  EXPECT_EQ(read(spaces + " ").taken, spaces.size());
  const std::string in_string = "{\"" + std::string(100, ' ');  // spaces inside strings are text
  EXPECT_EQ(read(in_string).taken, in_string.size());
}

// Random texts built from JSON's alphabet: the automaton takes all of a text and calls it whole exactly when the
// parser reads it as one object (within the automaton's limits, which these texts stay under).
TEST(JsonPrefix, AgreesWithTheParserOnRandomTexts) {
  const std::string alphabet = "{}[]:,\" \\-+.eE0123456789truefalsnlxudDc";
  std::mt19937 rng(49);
  int wholes = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string s = "{";
    const int len = 1 + static_cast<int>(rng() % 14);
    for (int k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
    const Read r = read(s);
    const bool whole = r.taken == s.size() && r.complete;
    const bool object = parses_as_object(s) && s.back() != ' ';
    EXPECT_EQ(whole, object) << s;
    wholes += whole;
  }
  EXPECT_GT(wholes, 0);  // the property was tried on whole objects too
}

using JsonVocabularyTest = test_masks::StoriesVocabulary;

// A target object spelled token by token through the masks (the longest allowed token that continues it each time):
// at every step the mask is exactly what trying every token gives, an end of generation is allowed only at the end,
// and the text comes out whole.
TEST_F(JsonVocabularyTest, MasksSpellAnObjectAndAreExact) {
  // Characters of two to four bytes too, which this vocabulary spells byte by byte (its byte tokens).
  const std::string target =
      "{\"story\": \"Once upon a time, \\\"Lily\\\" ran caf\xc3\xa9 \xe2\x82\xac\xf0\x9f\x98\x80.\", "
      "\"n\": [1, -2.5e3, true, null], \"o\": {}}";
  runtime::JsonConstraint c(vocab_);
  int plain = 0, steps = 0;
  const std::string spelled = test_masks::spell_through_masks(*tok_, *vocab_, c, target, plain, &steps);
  EXPECT_EQ(spelled, target);
  EXPECT_TRUE(c.state().complete());
  std::vector<uint8_t> allowed;
  vocab_->allowed(c.state(), allowed);
  for (int32_t id = 0; id < tok_->n_vocab(); ++id)
    EXPECT_EQ(allowed[static_cast<size_t>(id)] != 0, tok_->is_eog(id)) << id;  // only the end now
  EXPECT_GT(steps, 10);
}

// Through the batching engine, greedy and sampled: the text is always a prefix of a JSON object, and a reply that
// ended on its own is a whole one. stories260K writes stories, so its strings are long: a generous token limit, and
// one request leaning to close.
TEST_F(JsonVocabularyTest, GenerationKeepsToAnObject) {
  runtime::SessionOptions so;
  so.device = "cpu";
  so.n_ctx = 1024;
  so.n_seq = 2;
  so.n_threads = 1;
  runtime::EngineOptions eo;
  runtime::Engine engine(model_, tokenizer::Tokenizer::from_gguf(model_->file()), runtime::make_session(model_, so),
                         eo);
  // The last request leans (by logit bias) towards '"', '}' and the end of text, so that it closes its object and
  // ends on its own: the masks then let only what fits through, and the end only after the '}'.
  std::vector<std::pair<int32_t, float>> lean;
  for (int32_t id = 0; id < tok_->n_vocab(); ++id) {
    const std::string piece = tok_->is_control(id) ? "" : tok_->token_to_piece(id);
    if (piece == "\"" || piece == "}" || tok_->is_eog(id)) lean.emplace_back(id, 30.0f);
  }
  ASSERT_GE(lean.size(), 3u);
  int ended = 0;
  for (int i = 0; i < 7; ++i) {
    runtime::EngineRequest req;
    req.prompt = tok_->encode("Once upon a time", true, false);
    req.sampling.temp = i == 0 ? 0.0f : 1.0f;
    req.sampling.seed = static_cast<uint64_t>(i);
    if (i == 6) req.sampling.logit_bias = lean;
    req.max_tokens = 300;
    req.constraint = std::make_shared<runtime::JsonConstraint>(vocab_);
    std::string text;
    runtime::FinishReason finish = runtime::FinishReason::Error;
    std::mutex m;
    std::condition_variable cv;
    bool done = false;
    const auto sub = engine.submit(std::move(req), [&](const runtime::EngineEvent& e) {
      std::lock_guard lock(m);
      text += e.text;
      if (e.kind == runtime::EngineEvent::Kind::Final) finish = e.finish, done = true, cv.notify_all();
      return true;
    });
    ASSERT_EQ(sub.status, runtime::SubmitStatus::Accepted);
    std::unique_lock lock(m);
    cv.wait(lock, [&] { return done; });
    ASSERT_NE(finish, runtime::FinishReason::Error);
    const Read r = read(text);
    EXPECT_EQ(r.taken, text.size()) << text;
    ASSERT_FALSE(text.empty());
    EXPECT_EQ(text[text.find_first_not_of(" \n\t\r")], '{') << text;
    if (finish == runtime::FinishReason::Stop) {
      EXPECT_TRUE(r.complete) << text;
      EXPECT_TRUE(parses_as_object(text)) << text;
      ++ended;
    }
  }
  EXPECT_GE(ended, 1) << "the leaning request closes its object";
  std::printf("  JSON mode on stories260K: %d of 7 replies closed their object within 300 tokens\n", ended);
}

}  // namespace
