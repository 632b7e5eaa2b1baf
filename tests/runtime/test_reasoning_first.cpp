// A held reply that a thinking model may open with its reasoning (runtime/reasoning_first.h): at every step of
// replies spelled token by token, the mask is exactly the tokens that keep the text a beginning of an allowed reply
// as an independent reading of the form (string searches, below) decides, an end of generation only once the reply
// is whole; on stories260K's vocabulary (which spells "<think>" byte by byte) and on Qwen 2's (151k tokens, with
// pieces such as ">\n\n" that close the tag and go on).
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "assets.h"
#include "chat/json.h"
#include "gguf/gguf.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/reasoning_first.h"
#include "tokenizer/tokenizer.h"
#include "vocab_masks.h"

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";
constexpr size_t kMaxSpaces = runtime::JsonPrefix::kMaxSpaces;

enum class Fit { No, Prefix, Whole };

// The form read directly: [spaces "<think>" text-without-"</think>" "</think>"] held, where the held text may begin
// with spaces (at most kMaxSpaces, as each way's whitespace); the bracket is required when the prompt opened the block
// (and its opening is then in the prompt).
template <class State>
struct Reference {
  State held;  // before the held text's first byte (a grammar's with_leading_space)
  bool starts_inside = false;

  Fit held_fit(std::string_view text) const {
    State s = held;
    for (const char c : text)
      if (!s.feed(static_cast<unsigned char>(c))) return Fit::No;
    return s.complete() ? Fit::Whole : Fit::Prefix;
  }
  Fit fit(std::string_view text) const {
    Fit best = starts_inside ? Fit::No : held_fit(text);
    const auto take = [&](Fit f) {
      if (f == Fit::Whole || (f == Fit::Prefix && best == Fit::No)) best = f;
    };
    std::string_view block;
    if (starts_inside) {
      block = text;
    } else {
      const size_t spaces = text.find_first_not_of(" \n\t\r");
      const std::string_view rest = text.substr(spaces == std::string_view::npos ? text.size() : spaces);
      if (text.size() - rest.size() > kMaxSpaces) return best;
      if (rest.size() < kOpen.size()) {
        if (kOpen.starts_with(rest)) take(Fit::Prefix);
        return best;
      }
      if (!rest.starts_with(kOpen)) return best;
      block = rest.substr(kOpen.size());
    }
    const size_t close = block.find(kClose);
    take(close == std::string_view::npos ? Fit::Prefix : held_fit(block.substr(close + kClose.size())));
    return best;
  }
};

struct Vocabulary {
  explicit Vocabulary(const tokenizer::Tokenizer& t) : tok(t), vocab(std::make_shared<runtime::ConstraintVocabulary>(t)) {
    for (int32_t id = 0; id < t.n_vocab(); ++id)
      pieces.push_back(t.is_eog(id) || t.is_control(id) ? "" : t.token_to_piece(id));
  }
  const tokenizer::Tokenizer& tok;
  std::shared_ptr<runtime::ConstraintVocabulary> vocab;
  std::vector<std::string> pieces;
};

// The constraint's mask after `so_far` against the reference; "" when they agree, else the first difference.
template <class State>
std::string mask_difference(const Vocabulary& v, const runtime::TokenConstraint& c, const Reference<State>& ref,
                            const std::string& so_far) {
  std::vector<float> logits(v.pieces.size(), 0.0f);
  c.mask(logits);
  std::vector<uint8_t> want(v.pieces.size(), 0);
  bool any = false;
  for (size_t id = 0; id < v.pieces.size(); ++id)
    if (!v.pieces[id].empty()) any |= (want[id] = ref.fit(so_far + v.pieces[id]) != Fit::No);
  const bool end = ref.fit(so_far) == Fit::Whole || !any;
  for (size_t id = 0; id < v.pieces.size(); ++id) {
    const bool w = v.tok.is_eog(static_cast<int32_t>(id)) ? end : want[id] != 0;
    if ((logits[id] == 0.0f) != w)
      return "token " + std::to_string(id) + " '" + v.pieces[id] + "' " + (w ? "refused" : "allowed") + " after '" +
             so_far + "'";
  }
  return "";
}

// Spells `reply` token by token, the mask checked before every token: as the tokenizer splits it (by_tokenizer), or
// each time the longest piece that goes on with it (stories260K's tokenizer writes a leading space of its own).
// Returns whether the reply is whole.
template <class State>
bool spell_checked(const Vocabulary& v, runtime::TokenConstraint& c, const Reference<State>& ref,
                   const std::string& reply, bool by_tokenizer = false) {
  std::vector<int32_t> ids;
  if (by_tokenizer) ids = v.tok.encode(reply, false, false);
  std::string so_far;
  for (size_t i = 0; so_far.size() < reply.size(); ++i) {
    const std::string diff = mask_difference(v, c, ref, so_far);
    EXPECT_EQ(diff, "");
    if (!diff.empty()) return false;
    int32_t id = -1;
    if (by_tokenizer) {
      if (i == ids.size()) break;
      id = ids[i];
    } else {
      for (size_t t = 0; t < v.pieces.size(); ++t) {
        const std::string& p = v.pieces[t];
        if (!p.empty() && reply.compare(so_far.size(), p.size(), p) == 0 &&
            (id < 0 || p.size() > v.pieces[static_cast<size_t>(id)].size()))
          id = static_cast<int32_t>(t);
      }
      if (id < 0) break;
    }
    c.accept(id);
    so_far += v.pieces[static_cast<size_t>(id)];
  }
  EXPECT_EQ(so_far, reply);
  EXPECT_EQ(mask_difference(v, c, ref, so_far), "");
  return ref.fit(so_far) == Fit::Whole;
}

// A byte vocabulary spells the tags byte by byte: the opening after spaces, a block with a false start of its end
// ("</thin" then more text), and pieces of JSON in the block that the held text would take; then the object.
// The same reply without a block, and one whose prompt opened the block.
TEST(ReasoningFirst, JsonModeMasksAreExactOnAByteVocabulary) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const Reference<runtime::JsonPrefix> ref{runtime::JsonPrefix{}, false};
  const std::string object = R"({"name": "Lily", "age": 3})";
  for (const std::string& reply :
       {"  <think>\nShe wants {\"a\": 1} </thin k> and </think>\n\n" + object, object, "\n " + object}) {
    const auto c = runtime::reasoning_first_json(v.vocab, false);
    EXPECT_TRUE(spell_checked(v, *c, ref, reply)) << reply;
  }
  const Reference<runtime::JsonPrefix> inside{runtime::JsonPrefix{}, true};
  const auto c = runtime::reasoning_first_json(v.vocab, true);
  EXPECT_TRUE(spell_checked(v, *c, inside, "The user asks. </think> " + object));
}

// Random replies drawn from the masks themselves, mostly along a script that opens, falsely starts the end tag,
// closes and writes an object, each time split into random pieces and now and then derailed: each step's mask is
// exact wherever the reply goes.
TEST(ReasoningFirst, RandomRepliesFromTheMasksAreExact) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const std::vector<std::string> scripts = {" <think>a </thin k></think>\n{\"a\": 1}", "{\"b\": [true]}",
                                            "x</t</think> {\"c\":\"</think>\"}", "\n\n<think></think>{}"};
  int whole = 0;
  for (uint32_t seed = 0; seed < 32; ++seed) {
    std::mt19937 rng(seed);
    const std::string& script = scripts[seed % scripts.size()];
    const bool inside = script[0] == 'x';
    const Reference<runtime::JsonPrefix> ref{runtime::JsonPrefix{}, inside};
    const auto c = runtime::reasoning_first_json(v.vocab, inside);
    std::string so_far;
    for (int step = 0; step < 64; ++step) {
      const std::string diff = mask_difference(v, *c, ref, so_far);
      ASSERT_EQ(diff, "") << "seed " << seed;
      std::vector<float> logits(v.pieces.size(), 0.0f);
      c->mask(logits);
      std::vector<int32_t> allowed, along;
      for (size_t id = 0; id < logits.size(); ++id) {
        const std::string& p = v.pieces[id];
        if (logits[id] != 0.0f || p.empty()) continue;
        allowed.push_back(static_cast<int32_t>(id));
        if (script.starts_with(so_far) && script.compare(so_far.size(), p.size(), p) == 0)
          along.push_back(static_cast<int32_t>(id));
      }
      if (allowed.empty()) break;  // only an end is left
      const std::vector<int32_t>& from = !along.empty() && rng() % 12 != 0 ? along : allowed;
      const int32_t id = from[rng() % from.size()];
      c->accept(id);
      so_far += v.pieces[static_cast<size_t>(id)];
    }
    whole += ref.fit(so_far) == Fit::Whole;
  }
  EXPECT_GT(whole, 4);  // the walks reached whole replies, after a block too
}

// Whitespace before "<think>" is bounded as the held text's is: after kMaxSpaces of it, no more whitespace, but
// the object or the tag may still begin.
TEST(ReasoningFirst, SpacesBeforeTheBlockAreBounded) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const Reference<runtime::JsonPrefix> ref{runtime::JsonPrefix{}, false};
  const auto c = runtime::reasoning_first_json(v.vocab, false);
  EXPECT_FALSE(spell_checked(v, *c, ref, std::string(kMaxSpaces, ' ')));
  std::vector<float> logits(v.pieces.size(), 0.0f);
  c->mask(logits);
  int spaces = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    const std::string& p = v.pieces[id];
    if (p.empty()) continue;
    if (p.find_first_not_of(" \n\t\r") == std::string::npos) {
      EXPECT_NE(logits[id], 0.0f) << id;
      ++spaces;
    }
    if (p == "{" || p == "<") {
      EXPECT_EQ(logits[id], 0.0f) << p;
    }
  }
  EXPECT_GT(spaces, 0);
}

// A schema's grammar on Qwen 2's vocabulary, whose pieces cross the tags (">\n\n" closes a block and begins the
// held text's whitespace): a reply that thinks first, one that does not, and one whose prompt opened the block.
TEST(ReasoningFirst, SchemaMasksAreExactOnQwenVocabulary) {
  REQUIRE_ASSET(path, "tokenizer/ggml-vocab-qwen2.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const auto schema = runtime::json_schema_grammar(chat::parse_json(
      R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"]})"));
  const auto held = runtime::with_leading_space(*schema);
  const std::string object = R"({"city": "Oslo", "days": 3})";
  for (const bool inside : {false, true}) {
    const Reference<runtime::GrammarState> ref{runtime::GrammarState(*held), inside};
    const std::string block = "Two facts: Oslo, 3 days.</think>\n\n";
    const auto c = runtime::reasoning_first_grammar(v.vocab, *schema, inside);
    EXPECT_TRUE(spell_checked(v, *c, ref, (inside ? "" : "<think>\n") + block + object, true)) << inside;
  }
  const Reference<runtime::GrammarState> ref{runtime::GrammarState(*held), false};
  const auto c = runtime::reasoning_first_grammar(v.vocab, *schema, false);
  EXPECT_TRUE(spell_checked(v, *c, ref, object, true));
}

// The grammar with leading space takes what the grammar takes, after up to kMaxSpaces more whitespace bytes than
// the grammar itself takes first.
TEST(ReasoningFirst, LeadingSpaceGrammar) {
  const auto schema = runtime::json_schema_grammar(chat::parse_json(R"({"type": "boolean"})"));
  const auto g = runtime::with_leading_space(*schema);
  size_t own = 0;
  while (test_masks::grammar_accepts(*schema, std::string(own + 1, ' ') + "true")) ++own;
  EXPECT_LE(own, kMaxSpaces);
  for (const std::string& text : {std::string("true"), std::string(" \n\t\rfalse"),
                                  std::string(own + kMaxSpaces, ' ') + "true"})
    EXPECT_TRUE(test_masks::grammar_accepts(*g, text)) << text;
  for (const std::string& text : {std::string(own + kMaxSpaces + 1, ' ') + "true", std::string(" "),
                                  std::string("x true")})
    EXPECT_FALSE(test_masks::grammar_accepts(*g, text)) << text;
}

}  // namespace
