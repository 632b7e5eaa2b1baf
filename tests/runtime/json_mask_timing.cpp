// Times structured output's masks on real vocabularies (not a test; run it as `build/tests/runtime/json_mask_timing
// ../shared/tokenizer/ggml-vocab-llama-bpe.gguf ../shared/tokenizer/ggml-vocab-qwen2.gguf`): the
// one-time build of the vocabulary's tries, then each step's mask while a sample reply is spelled token by token
// as the tokenizer splits it, for JSON mode, for JSON schemas, and for a schema after a thinking model's reasoning.
// Prints one table row per mode.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "chat/json.h"
#include "gguf/gguf.h"
#include "runtime/json_constraint.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/lead_in.h"
#include "tokenizer/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) { return std::chrono::duration<double, std::milli>(Clock::now() - t).count(); }

constexpr const char* kReply =
    R"({"title": "The lighthouse keeper", "year": 1987, "rating": 4.5, "tags": ["drama", "sea", "family"],)"
    R"( "cast": [{"name": "Anna Berg", "role": "keeper"}, {"name": "Tom Lind", "role": "son"}],)"
    R"( "summary": "A keeper and her son spend one last winter at the light before it is automated; \"quiet\" and)"
    R"( patient, it watches the weather more than the people."})";

constexpr const char* kThought =
    "<think>\nThe user wants a film record. A lighthouse story from 1987 fits; rating 4.5, three tags, two cast "
    "members, and a short summary with a quoted word. Keep it under the schema's limits.\n</think>\n\n";

constexpr const char* kSchema = R"({"type": "object", "properties": {
    "title": {"type": "string"}, "year": {"type": "integer", "minimum": 1880, "maximum": 2030},
    "rating": {"type": "number", "minimum": 0}, "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
    "cast": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"},
             "role": {"type": "string"}}, "required": ["name", "role"]}},
    "summary": {"type": "string", "maxLength": 400}},
    "required": ["title", "year", "rating", "tags", "cast", "summary"]})";

constexpr const char* kContact =
    R"({"name": "Anna Berg", "phone": "555-1234", "email": "anna.berg@example.org", "note": "it is ok now"})";

constexpr const char* kContactSchema = R"({"type": "object", "properties": {
    "name": {"type": "string", "pattern": "^[A-Z][a-z]+( [A-Z][a-z]+)*$"},
    "phone": {"type": "string", "pattern": "^\\d{3}-\\d{4}$"},
    "email": {"type": "string", "pattern": "^[^@\\s]+@[^@\\s]+\\.[a-z]{2,}$"},
    "note": {"type": "string", "pattern": "ok"}}})";

void row(const char* vocab, const char* mode, double build_ms, runtime::TokenConstraint& c,
         const std::vector<int32_t>& ids, int32_t n_vocab) {
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<double> steps;
  for (const int32_t id : ids) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    const auto t = Clock::now();
    c.mask(logits);
    steps.push_back(ms_since(t));
    if (logits[static_cast<size_t>(id)] == -std::numeric_limits<float>::infinity())
      std::printf("  (the mask refused token %d of the sample reply)\n", id);
    c.accept(id);
  }
  std::vector<double> sorted = steps;
  std::sort(sorted.begin(), sorted.end());
  double sum = 0;
  for (const double s : steps) sum += s;
  std::printf("| %s | %s | %zu | %.1f | %.3f | %.3f | %.3f |\n", vocab, mode, steps.size(), build_ms,
              sum / static_cast<double>(steps.size()), sorted[sorted.size() / 2], sorted.back());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: json_mask_timing VOCAB.gguf...\n");
    return 2;
  }
  std::printf("| vocabulary | mode | tokens | trie build ms | mask mean ms | median ms | max ms |\n"
              "|---|---|---:|---:|---:|---:|---:|\n");
  for (int i = 1; i < argc; ++i) {
    const auto file = gguf::File::open(argv[i]);
    const auto tok = tokenizer::Tokenizer::from_gguf(file);
    const std::string name = std::string(argv[i]).substr(std::string(argv[i]).find_last_of('/') + 1);
    const auto t = Clock::now();
    const auto vocab = std::make_shared<const runtime::ConstraintVocabulary>(tok);
    const double build_ms = ms_since(t);
    const std::vector<int32_t> ids = tok.encode(kReply, false, false);
    runtime::JsonConstraint object(vocab);
    row(name.c_str(), "json_object", build_ms, object, ids, tok.n_vocab());
    const auto t2 = Clock::now();
    const auto grammar = runtime::json_schema_grammar(chat::parse_json(kSchema));
    const double compile_ms = ms_since(t2);
    const auto schema = runtime::make_grammar_constraint(vocab, grammar);
    row(name.c_str(), "json_schema", compile_ms, *schema, ids, tok.n_vocab());
    // Patterns: a broad negated class ([^@\s]+) and an unanchored pattern are the costly cases.
    const std::vector<int32_t> contact_ids = tok.encode(kContact, false, false);
    const auto t3 = Clock::now();
    const auto contact = runtime::json_schema_grammar(chat::parse_json(kContactSchema));
    const double contact_ms = ms_since(t3);
    const auto held = runtime::make_grammar_constraint(vocab, contact);
    row(name.c_str(), "json_schema, patterns", contact_ms, *held, contact_ids, tok.n_vocab());
    // A thinking model's reasoning, then the schema's reply (runtime/lead_in.h): the build column is the
    // constraint's own (its lists of tokens that can open and close the block).
    const std::vector<int32_t> thought_ids = tok.encode(std::string(kThought) + kReply, false, false);
    const auto t4 = Clock::now();
    const auto thinking = runtime::lead_in_grammar(vocab, {grammar}, runtime::Lead::think(false));
    row(name.c_str(), "reasoning, then json_schema", ms_since(t4), *thinking, thought_ids, tok.n_vocab());
    // A second request's: the vocabulary keeps the end tag's candidates (ConstraintVocabulary::tokens_containing).
    const auto t5 = Clock::now();
    const auto again = runtime::lead_in_grammar(vocab, {grammar}, runtime::Lead::think(false));
    row(name.c_str(), "the same, a second request", ms_since(t5), *again, thought_ids, tok.n_vocab());
  }
  std::printf("(json_schema's build column is the schema's compile; the vocabulary's tries are shared)\n");
  return 0;
}
