// A held reply that a thinking model may open with its reasoning (runtime/lead_in.h): at every step of
// replies spelled token by token, the mask is exactly the tokens that keep the text a beginning of an allowed reply
// as an independent reading of the form (string searches, below) decides, an end of generation only once the reply
// is whole; on stories260K's vocabulary (which spells the markers byte by byte, and with harmony's markers added as
// tokens) and on Qwen 2's (151k tokens, with pieces such as ">\n\n" that close the tag and go on). Mistral's and
// Granite's marker tokens: tests/server/test_tool_calls.cpp.
#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "assets.h"
#include "chat/json.h"
#include "gguf/gguf.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/lead_in.h"
#include "tokenizer/tokenizer.h"
#include "vocab_masks.h"

namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";
constexpr size_t kMaxSpaces = runtime::JsonPrefix::kMaxSpaces;

enum class Fit { No, Prefix, Whole };

Fit better(Fit a, Fit b) { return a == Fit::Whole || b == Fit::Whole ? Fit::Whole : a == Fit::Prefix ? a : b; }

// How `text` stands against a literal that must come next and then `rest`: a beginning of it, or past it.
template <class Rest>
Fit after_literal(std::string_view text, std::string_view literal, Rest&& rest) {
  if (text.size() < literal.size()) return literal.starts_with(text) ? Fit::Prefix : Fit::No;
  return text.starts_with(literal) ? rest(text.substr(literal.size())) : Fit::No;
}

enum class Markup { Think, ThinkInside, HarmonyFinal, HarmonyCall };

// The forms read directly, with string searches (runtime::Lead says the same in nodes):
// - Think: the held text; or up to kMaxSpaces whitespace bytes, "<think>", text without "</think>", "</think>", the
//   held text with whitespace first (`spaced`); ThinkInside: the part from the text on.
// - HarmonyFinal: the held text; or messages "<|channel|>analysis<|message|>" text "<|end|><|start|>assistant", then
//   "<|channel|>final", " <|constrain|>json" or not, "<|message|>", the held text. HarmonyCall: the messages, then
//   "<|channel|>" and the held text.
template <class State>
struct Reference {
  State plain, spaced;  // before the held text's first byte
  Markup markup = Markup::Think;

  static Fit held_fit(State s, std::string_view text) {
    for (const char c : text)
      if (!s.feed(static_cast<unsigned char>(c))) return Fit::No;
    return s.complete() ? Fit::Whole : Fit::Prefix;
  }
  Fit block(std::string_view text) const {
    const size_t close = text.find(kClose);
    return close == std::string_view::npos ? Fit::Prefix : held_fit(spaced, text.substr(close + kClose.size()));
  }
  Fit harmony(std::string_view text) const {
    return after_literal(text, "<|channel|>", [&](std::string_view header) {
      Fit f = after_literal(header, "analysis<|message|>", [&](std::string_view body) {
        const size_t end = body.find("<|end|>");
        if (end == std::string_view::npos) return Fit::Prefix;
        return after_literal(body.substr(end + 7), "<|start|>assistant", [&](std::string_view next) {
          return harmony(next);
        });
      });
      if (markup == Markup::HarmonyCall) return better(f, held_fit(plain, header));
      for (const std::string_view h : {"final<|message|>", "final <|constrain|>json<|message|>"})
        f = better(f, after_literal(header, h, [&](std::string_view v) { return held_fit(plain, v); }));
      return f;
    });
  }
  Fit fit(std::string_view text) const {
    switch (markup) {
      case Markup::ThinkInside: return block(text);
      case Markup::HarmonyFinal: return better(held_fit(plain, text), harmony(text));
      case Markup::HarmonyCall: return harmony(text);
      case Markup::Think: break;
    }
    const size_t spaces = std::min(text.find_first_not_of(" \n\t\r"), text.size());
    Fit f = held_fit(plain, text);
    if (spaces <= kMaxSpaces) f = better(f, after_literal(text.substr(spaces), kOpen, [&](std::string_view b) {
                                       return block(b);
                                     }));
    return f;
  }
};

// JSON mode's reference for a markup (its held text takes leading whitespace itself).
Reference<runtime::JsonPrefix> json_reference(Markup m) { return {runtime::JsonPrefix{}, runtime::JsonPrefix{}, m}; }

runtime::Lead lead_of(Markup m) {
  switch (m) {
    case Markup::Think: return runtime::Lead::think(false);
    case Markup::ThinkInside: return runtime::Lead::think(true);
    case Markup::HarmonyFinal: return runtime::Lead::harmony_final();
    case Markup::HarmonyCall: return runtime::Lead::harmony_call();
  }
  return runtime::Lead::think(false);
}

struct Vocabulary {
  explicit Vocabulary(const tokenizer::Tokenizer& t)
      : tok(t), vocab(std::make_shared<runtime::ConstraintVocabulary>(t)) {
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
// The tokens containing a byte (the lead-in's end-tag candidates), found once a vocabulary: those of a scan of every
// piece, in id order, the same list whichever of several threads asks first.
TEST(LeadIn, TokensContainingAByteAreThoseOfAScan) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  for (const unsigned char c : std::vector<unsigned char>{'>', 'e', ' ', '\n', 0xC3, 0xFF}) {
    std::vector<int32_t> want;
    for (int32_t id = 0; id < v.vocab->n_vocab(); ++id)
      if (v.vocab->piece(id).find(static_cast<char>(c)) != std::string_view::npos) want.push_back(id);
    std::vector<const std::vector<int32_t>*> got(4, nullptr);
    std::vector<std::thread> threads;
    for (size_t i = 0; i < got.size(); ++i)
      threads.emplace_back([&, i] { got[i] = &v.vocab->tokens_containing(c); });
    for (std::thread& t : threads) t.join();
    for (const auto* g : got) {
      ASSERT_EQ(g, got[0]) << "byte " << int(c) << ": one list, kept";
      EXPECT_EQ(*g, want) << "byte " << int(c);
    }
  }
}

TEST(LeadIn, JsonModeMasksAreExactOnAByteVocabulary) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const std::string object = R"({"name": "Lily", "age": 3})";
  for (const std::string& reply :
       {"  <think>\nShe wants {\"a\": 1} </thin k> and </think>\n\n" + object, object, "\n " + object}) {
    const auto c = runtime::lead_in_json(v.vocab, lead_of(Markup::Think));
    EXPECT_TRUE(spell_checked(v, *c, json_reference(Markup::Think), reply)) << reply;
  }
  const auto c = runtime::lead_in_json(v.vocab, lead_of(Markup::ThinkInside));
  EXPECT_TRUE(spell_checked(v, *c, json_reference(Markup::ThinkInside), "The user asks. </think> " + object));
}

// Random replies drawn from the masks themselves, mostly along a script that opens, falsely starts the end tag,
// closes and writes an object (or writes harmony's messages), each time split into random pieces and now and then
// derailed: each step's mask is exact wherever the reply goes.
TEST(LeadIn, RandomRepliesFromTheMasksAreExact) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const std::vector<std::pair<Markup, std::string>> scripts = {
      {Markup::Think, " <think>a </thin k></think>\n{\"a\": 1}"},
      {Markup::Think, "{\"b\": [true]}"},
      {Markup::ThinkInside, "x</t</think> {\"c\":\"</think>\"}"},
      {Markup::Think, "\n\n<think></think>{}"},
      {Markup::HarmonyFinal,
       "<|channel|>analysis<|message|>a <|end <|end|><|start|>assistant<|channel|>final<|message|>{}"},
      {Markup::HarmonyFinal, "<|channel|>final <|constrain|>json<|message|>{\"d\": null}"},
      {Markup::HarmonyCall, "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>{\"e\": 2}"}};
  int whole = 0;
  for (uint32_t seed = 0; seed < 42; ++seed) {
    std::mt19937 rng(seed);
    const auto& [markup, script] = scripts[seed % scripts.size()];
    const Reference<runtime::JsonPrefix> ref = json_reference(markup);
    const auto c = runtime::lead_in_json(v.vocab, lead_of(markup));
    std::string so_far;
    for (int step = 0; step < 96; ++step) {
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
      const std::vector<int32_t>& from = !along.empty() && rng() % 16 != 0 ? along : allowed;
      const int32_t id = from[rng() % from.size()];
      c->accept(id);
      so_far += v.pieces[static_cast<size_t>(id)];
    }
    whole += ref.fit(so_far) == Fit::Whole;
  }
  EXPECT_GT(whole, 6);  // the walks reached whole replies, after a lead-in too
}

// Whitespace before "<think>" is bounded as the held text's is: after kMaxSpaces of it, no more whitespace, but
// the object or the tag may still begin.
TEST(LeadIn, SpacesBeforeTheBlockAreBounded) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const auto c = runtime::lead_in_json(v.vocab, lead_of(Markup::Think));
  EXPECT_FALSE(spell_checked(v, *c, json_reference(Markup::Think), std::string(kMaxSpaces, ' ')));
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
TEST(LeadIn, SchemaMasksAreExactOnQwenVocabulary) {
  REQUIRE_ASSET(path, "tokenizer/ggml-vocab-qwen2.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const auto schema = runtime::json_schema_grammar(chat::parse_json(
      R"({"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
          "required": ["city", "days"]})"));
  const auto spaced = runtime::with_leading_space(*schema);
  const std::string object = R"({"city": "Oslo", "days": 3})";
  const std::string block = "Two facts: Oslo, 3 days.</think>\n\n";
  for (const auto& [markup, reply] : {std::pair{Markup::Think, "<think>\n" + block + object},
                                      std::pair{Markup::ThinkInside, block + object},
                                      std::pair{Markup::Think, object}}) {
    const Reference<runtime::GrammarState> ref{runtime::GrammarState(*schema), runtime::GrammarState(*spaced), markup};
    const auto c = runtime::lead_in_grammar(v.vocab, {schema}, lead_of(markup));
    EXPECT_TRUE(spell_checked(v, *c, ref, reply, true)) << reply;
  }
}

// stories260K's vocabulary with harmony's markers added as tokens, as o200k_harmony has them (<|start|>,
// <|channel|>, <|message|>, <|constrain|> and <|end|> written in the text, <|return|> and <|call|> ending
// generation): an analysis message, then the final channel with and without its constraint, or the object alone;
// and a call after an analysis message, each spelled by its longest pieces (the markers whole).
TEST(LeadIn, HarmonyMasksAreExactWithMarkerTokens) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  tokenizer::Vocab vocab = tokenizer::Vocab::from_gguf(gguf::File::open(path));
  for (const char* marker : {"<|start|>", "<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|return|>",
                             "<|call|>"}) {
    vocab.tokens.emplace_back(marker);
    if (!vocab.scores.empty()) vocab.scores.push_back(0.0f);
    vocab.types.push_back(tokenizer::TokenType::CONTROL);  // as the file has them; the first five are written in text
  }
  const auto n = static_cast<int32_t>(vocab.tokens.size());
  vocab.eos = n - 2, vocab.eot = n - 1;  // <|return|>, <|call|>
  const auto tok = tokenizer::Tokenizer::from_vocab(std::move(vocab));
  const Vocabulary v(tok);
  ASSERT_EQ(v.pieces[static_cast<size_t>(n - 3)], "<|end|>");  // in the text: <|return|> ends generation instead
  ASSERT_EQ(tok.encode("<|channel|>", false, true).size(), 1u);
  const std::string analysis = "<|channel|>analysis<|message|>Need JSON.<|end|><|start|>assistant";
  const std::string object = R"({"ok": true})";
  for (const auto& [markup, reply] :
       {std::pair{Markup::HarmonyFinal, analysis + "<|channel|>final<|message|>" + object},
        std::pair{Markup::HarmonyFinal, "<|channel|>final <|constrain|>json<|message|>" + object},
        std::pair{Markup::HarmonyFinal, object}, std::pair{Markup::HarmonyCall, analysis + "<|channel|>" + object}}) {
    const auto c = runtime::lead_in_json(v.vocab, lead_of(markup));
    EXPECT_TRUE(spell_checked(v, *c, json_reference(markup), reply)) << reply;
  }
}

// A lead-in with a held text per function (Mistral's name, then [ARGS]): JSON mode gives each its own state, and
// grammars must be one per held text.
TEST(LeadIn, EveryHeldTextHasItsState) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto file = gguf::File::open(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(file);
  const Vocabulary v(tok);
  const runtime::Lead lead = runtime::Lead::marker_name_arguments(1, {"a", "b"}, 2);  // bos and eos stand in
  const auto c = runtime::lead_in_json(v.vocab, lead);
  std::vector<float> logits(v.pieces.size(), 0.0f);
  c->mask(logits);
  EXPECT_EQ(logits[1], 0.0f);  // the marker first
  const auto schema = runtime::json_schema_grammar(chat::parse_json(R"({"type": "object"})"));
  EXPECT_THROW(runtime::lead_in_grammar(v.vocab, {schema}, lead), std::invalid_argument);
  EXPECT_NO_THROW(runtime::lead_in_grammar(v.vocab, {schema, schema}, lead));
}

// The grammar with leading space takes what the grammar takes, after up to kMaxSpaces more whitespace bytes than
// the grammar itself takes first.
TEST(LeadIn, LeadingSpaceGrammar) {
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
