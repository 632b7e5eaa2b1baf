// Fuzzing in the normal suite: every seed of every fuzz target runs through the target's exercise function, and
// every input a fuzzer ever crashed on is replayed here (one TEST each, with what it found and where it was fixed).
// Built with the normal compiler by scripts/test.sh, and under ASan/UBSan by scripts/sanitize.sh.
#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <string>

#include "assets.h"
#include "exercise.h"
#include "seeds.h"

namespace {

using fuzz::Bytes;

std::vector<uint8_t> bytes_of(std::string_view s) { return std::vector<uint8_t>(s.begin(), s.end()); }

const fuzz::Vocabularies* vocabularies() {
  static const std::optional<fuzz::Vocabularies> v = []() -> std::optional<fuzz::Vocabularies> {
    if (!testing_assets::path("tokenizer/ggml-vocab-llama-spm.gguf")) return std::nullopt;
    return fuzz::load_vocabularies();
  }();
  return v ? &*v : nullptr;
}

std::optional<std::string> assets() {
  const auto root = testing_assets::root();
  return root ? std::optional<std::string>(root->string()) : std::nullopt;
}

#define REQUIRE_VOCABULARIES()                                                                   \
  if (vocabularies() == nullptr) GTEST_SKIP() << "shared tokenizer vocabularies not found (set LLM_TEST_ASSETS)"

// ---- the seed corpora ----

TEST(FuzzSeeds, Gguf) {
  const auto seeds = fuzz::gguf_seeds();
  EXPECT_GE(seeds.size(), 30u);
  for (const fuzz::Seed& s : seeds) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_gguf(s.bytes));
  }
}

TEST(FuzzSeeds, Model) {
  for (const fuzz::Seed& s : fuzz::model_seeds()) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_model(s.bytes));
    EXPECT_LT(s.bytes.size(), 64u << 10) << "model seeds must fit the fuzzer's -max_len";
  }
}

TEST(FuzzSeeds, Tokenizer) {
  REQUIRE_VOCABULARIES();
  for (const fuzz::Seed& s : fuzz::tokenizer_seeds(assets())) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_tokenizer(*vocabularies(), s.bytes));
  }
}

TEST(FuzzSeeds, ChatTemplate) {
  for (const fuzz::Seed& s : fuzz::chat_template_seeds(assets())) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_chat_template(s.bytes));
  }
}

TEST(FuzzSeeds, ApiRequest) {
  const auto seeds = fuzz::api_request_seeds();
  EXPECT_GE(seeds.size(), 10u);
  for (const fuzz::Seed& s : seeds) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_api_request(s.bytes));
  }
}

TEST(FuzzSeeds, JsonSchema) {
  const auto seeds = fuzz::json_schema_seeds();
  EXPECT_GE(seeds.size(), 5u);
  for (const fuzz::Seed& s : seeds) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_json_schema(s.bytes));
  }
}

TEST(FuzzSeeds, ToolCalls) {
  const auto seeds = fuzz::tool_calls_seeds();
  EXPECT_GE(seeds.size(), 10u);
  for (const fuzz::Seed& s : seeds) {
    SCOPED_TRACE(s.name);
    EXPECT_NO_THROW(fuzz::exercise_tool_calls(s.bytes));
  }
}

// ---- inputs the fuzzers found (newest last) ----

// Sanitizer builds run several times slower; time bounds apply to plain builds only.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

// Found by the hostile chat-template seeds (2026-11, fuzz_chat_template timing out): nested loops cost ~14 us per
// inner iteration under ASan (a 12-entry `loop` object, a std::function and a scope per iteration), and
// ChatTemplate::parse renders a probe under the default 2M-step budget, so this 100-byte template held the fuzzer for
// ~30 s per input. It must still stop at the work budget with TemplateError, and in a plain build within seconds.
TEST(FuzzRegression, NestedLoopTemplateStopsAtTheWorkBudget) {
  const auto input = bytes_of("{% for i in range(100) %}{% for j in range(10000) %}{% endfor %}{% endfor %}");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_NO_THROW(fuzz::exercise_chat_template(input));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!kSanitized) {
    EXPECT_LT(seconds, 20.0) << "parse + render of a nested-loop template";
  }
}

// Found by fuzz_tokenizer over other vocabularies (LLM_FUZZ_VOCABS=...falcon...): a harness false positive, kept so
// the harness stays honest. Falcon's vocabulary has no byte token for \x0b (nor 27 other bytes), so encode drops it
// and decode(encode("v\x0b\x1b")) == "v\x1b" is right; the round-trip check now applies only to spellable texts.
TEST(FuzzRegression, FalconCannotSpellVerticalTab) {
  if (!testing_assets::path("tokenizer/ggml-vocab-falcon.gguf")) GTEST_SKIP() << "falcon vocabulary not found";
  const fuzz::Vocabularies falcon = fuzz::load_vocabularies({"ggml-vocab-falcon.gguf"});
  EXPECT_FALSE(falcon.has_byte_token[0][0x0b]);
  const uint8_t input[] = {0xc0, 'v', 0x0b, 0x1b};  // encode mode, text "v\x0b\x1b"
  EXPECT_NO_THROW(fuzz::exercise_tokenizer(falcon, input));
}

// Found by a mutation run over the api_request seeds while the target was written: a body with a byte that is not
// UTF-8 where a value starts gave a JSON error whose message quoted that byte, and the error body was not valid
// UTF-8 JSON. Fixed in server/api_response.cpp (json_string replaces such bytes with U+FFFD in every response).
TEST(FuzzRegression, ErrorBodyQuotingABadByteIsValidJson) {
  EXPECT_NO_THROW(fuzz::exercise_api_request(bytes_of("{\"prompt\": \xb7" "1, 2]}")));
}

// Found by fuzz_tool_calls in its first minute over the harmony split (2026-12, session 49): a header whose
// <|message|> came more than 256 bytes in was a header when the reply came whole and plain text when it came in
// pieces (the bound was checked on the text held so far). Fixed in chat/harmony_split.cpp: the bound applies to
// where <|message|> is, however the text arrives. A shortened form of the input.
TEST(FuzzRegression, HarmonyHeaderBoundIsTheSameInPieces) {
  std::string input = "\x07 to=functions.x<|channel|>commentary json";
  input += std::string(260, 'y');
  input += "<|message|>[0]<|end|><|start|>assistant<|channel|>final<|message|>ok";
  EXPECT_NO_THROW(fuzz::exercise_tool_calls(bytes_of(input)));
  // Found by the next run: a <|message|> starting just within the bound, so a text held before its last bytes
  // arrived had already passed the bound; only a text too long for one to start within it settles that.
  std::string within = "\x07 to=functions.x<|channel|>commentary json";
  within += std::string(256 - within.size() + 1 - 3, 'y');  // <|message|> starts 3 bytes before the bound
  within += "<|message|>[1]<|end|><|start|>assistant<|channel|>final<|message|>Done";
  EXPECT_NO_THROW(fuzz::exercise_tool_calls(bytes_of(within)));
}

// Found by fuzz_json_schema's first run: the schema {"]nLength": 2} (any value) and text that, with the bytes the
// grammar refused skipped, read "\udefength": a low surrogate alone, which the grammar (and JSON mode's automaton)
// took as a \u escape and the JSON parser refuses. Surrogates now come in pairs in both (runtime/byte_grammar.cpp,
// runtime/json_prefix.cpp).
TEST(FuzzRegression, LoneSurrogateEscapeIsRefused) {
  std::string input = "{\"]nLength\": 2}";
  input += '\0';
  input += "\"\x1d\\u{\"]\"#/$defs/\"nLength\": e9\"?0e9\"]nen&\\l\xc3\xa9\"";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

// Found by fuzz_json_schema: a harness bug. Draft 4's tuple form, "items" as a list of schemas, took the test
// validator (tests/runtime/schema_validator.h) down (it read the list as one schema); it now reads it as the tuple
// and additionalItems as the rest, as the grammar does.
TEST(FuzzRegression, ValidatorReadsDraft4Tuples) {
  std::string input = R"({"items": [{"oncst": 0}], "item:s": {"enum": ["a", null]}, "maxItems":91})";
  input += '\0';
  input += R"([1, " null])";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

// Found by fuzz_json_schema: a harness bug. The pattern "^[A-Z][a-z]+( \\w+){0s,3}$" reads its brace as literal
// text (JavaScript's Annex B and Python do so too), while std::regex, which the test validator checks patterns
// with, throws on it; the validator now leaves such patterns unjudged.
TEST(FuzzRegression, ValidatorLeavesPatternsStdRegexRefuses) {
  std::string input = R"({"type": "string", "pattern": "^[A-Z][a-z]+( \\w+){0s,3}$"})";
  input += '\0';
  input += "\"An[a-z]+( \\\\w+){0s,3}$na\xaclee-x\"";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

// Found by fuzz_json_schema: the pattern "[]AZ-]..." read its leading ']' as a literal (as POSIX classes do), where
// ECMAScript reads [] as a class that matches nothing; the grammar took text the validator's std::regex refuses.
// ']' now always closes a class.
TEST(FuzzRegression, EmptyClassMatchesNothing) {
  std::string input;
  input += "{\"tyep\": \"string\", \"pattern\": \"[]AZ-][a-z-1c18]+( \\\\w+){1,3},\"}";
  input += '\0';
  input += "e18]+( \\\\w+){\"string\", \"pattern\": \"[^AZ-][a-z-1c18]+( \\\\w+){1,3},\"}";
  input += '\0';
  input += "e1" + std::string(85, '\'') + "8]+( \\\\w+){5,3},\"\"additionalIteos\"}";
  input += '\0';
  input += "\"Anna dee-x\"Anna \"string\",lIteos\"}";
  input += '\0';
  input += "\"An~a dee-x\"Anna lee-x\"";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

// Found by fuzz_json_schema: a harness bug. A pattern with a brace of 19 digits that our reader takes as literal text
// made std::regex (the test validator's) overflow a signed integer in libstdc++ 12 (UBSan); the validator no longer
// builds a std::regex for patterns with runs of more than 9 digits.
TEST(FuzzRegression, ValidatorSkipsPatternsWithHugeCounts) {
  std::string input = R"({"type": "string", "pattern": "^[A-Z][a-z]+(] )" + std::string(48, 'C') + std::string(50, '4') +
                      "{" + std::string(42, '4') + "," + std::string(19, '4') + "V" + std::string(12, '4') +
                      std::string(79, 'C') + R"(\\w+){0,3}$"})";
  input += '\0';
  input += R"("Anna lee-x")";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

// Found by fuzz_json_schema: a harness bug. A count written as a whole-number float ("maxItems": -0e183, read as 0
// as JSON Schema has it, since draft 6 a number with a zero fraction is an integer) took the test validator down: it
// read the count as an integer value; it now reads any number.
TEST(FuzzRegression, ValidatorReadsCountsWrittenAsFloats) {
  std::string input = R"({"uniqtype": "array", "prefixItems": [{"const": 5}], "maxItems": -0e183})";
  input += '\0';
  input += R"([1": 3})";
  input += '\0';
  input += R"([1a", null])";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

// Found by fuzz_json_schema the run after its lead-in part was added (session 53): JSON mode behind Mistral's
// name-then-[ARGS] lead-in, whose held texts are one per function, read past its one JSON state. JSON mode now has
// a state for every held text a lead-in enters, and a lead-in that enters one its caller did not give is refused.
TEST(FuzzRegression, JsonModeBehindALeadInOfSeveralHeldTexts) {
  std::string input = "true";
  input += '\0';
  input += "\x8f\xdd\xdd";
  input += std::string(13, '\0');
  input += "\"null\"";
  input += std::string(11, '\0');
  input += "t\"";
  EXPECT_NO_THROW(fuzz::exercise_json_schema(bytes_of(input)));
}

}  // namespace
