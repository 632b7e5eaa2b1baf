// Fuzzing in the normal suite: every seed of every fuzz target runs through the target's exercise function, and
// every input a fuzzer ever crashed on is replayed here (one TEST each, with what it found and where it was fixed).
// Built with the normal compiler by scripts/test.sh, and under ASan/UBSan by scripts/sanitize.sh.
#include <gtest/gtest.h>

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

// ---- inputs the fuzzers found (newest last) ----

}  // namespace
