// What each fuzz target does with one input, shared by the libFuzzer entry points (fuzz_*.cpp, clang builds) and the
// regression suite (test_fuzz_regressions.cpp, every build), so a saved crash input replays the exact code path.
// Each function swallows only the errors its API documents for bad input (GgufError, ModelError, TokenizerError,
// TemplateError, ApiError); anything else escapes, and a broken invariant aborts with a message: both are findings.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tokenizer {
class Tokenizer;
}
namespace runtime {
class ByteGrammar;
}

namespace fuzz {

using Bytes = std::span<const uint8_t>;

// GGUF reader: File::parse, then every accessor (typed reads of every key, arrays, tensors and their data bytes,
// a first-row dequantize), then a Writer round trip that must reproduce the same metadata and tensors.
void exercise_gguf(Bytes input);

// Model loading on top: parse, Model::from_file, the tokenizer from the same metadata, and for small models the
// one-token graph, its buffer plan and one CPU reference step.
void exercise_model(Bytes input);

// Tokenizer over fixed vocabularies. Byte 0 picks the vocabulary (low bits) and the mode (high bits): encode the
// rest as text (with and without special-token parsing), or read it as token ids for decode / StreamDecoder.
struct Vocabularies {
  std::vector<std::string> names;
  std::vector<std::unique_ptr<tokenizer::Tokenizer>> tokenizers;
  // Per vocabulary: which bytes have a byte token (BPE alphabet, or SentencePiece <0xNN>); the round-trip and
  // "some tokens" checks apply only to texts it can spell (falcon's vocabulary lacks 28 of the 256, e.g. \x0b).
  std::vector<std::vector<bool>> has_byte_token;
  Vocabularies();
  ~Vocabularies();
  Vocabularies(Vocabularies&&) noexcept;
};
// Loads the named vocabulary files from $LLM_TEST_ASSETS/tokenizer (default: ../shared/tokenizer beside the source
// tree); `files` empty means the default pair (llama-spm, llama-bpe). Throws std::runtime_error when one is missing.
Vocabularies load_vocabularies(const std::vector<std::string>& files = {});
void exercise_tokenizer(const Vocabularies& vocabs, Bytes input);

// Chat-template renderer: the input is template text, rendered on a fixed conversation under tight limits.
void exercise_chat_template(Bytes input);

// HTTP request parser (server/api_request.h): the input is a request body, parsed as every route parses it.
void exercise_api_request(Bytes input);

// Reply readers: byte 0 picks the tool-call format (server/tool_calls.h) or the reply split (chat/reply_split.h), the
// rest is a model's reply.
void exercise_tool_calls(Bytes input);

// JSON schemas (runtime/json_schema_grammar.h): a schema's text, a NUL byte, and text its grammar reads byte by byte;
// then the same text picks tokens of a reply held to the grammar after a lead-in (exercise_lead_in).
void exercise_json_schema(Bytes input);
// A grammar held after a lead-in (runtime/lead_in.h): text's first byte picks the lead-in, the rest the tokens.
void exercise_lead_in(const std::shared_ptr<const runtime::ByteGrammar>& grammar, std::string_view text);

// Per-input heap budget the fuzz entry points enforce (alloc_guard.cpp): the live heap growing during one input
// beyond factor * input size + slack, or one allocation beyond that or max_single_bytes, aborts the run.
struct AllocBudget {
  uint64_t factor;
  uint64_t slack_bytes;
  uint64_t max_single_bytes = UINT64_MAX;
};

}  // namespace fuzz
