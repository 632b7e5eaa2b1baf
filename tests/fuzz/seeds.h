// Seed inputs for the fuzz targets, built in code so that no binary corpus has to live in the repository:
// small valid GGUF files written with gguf::Writer, malformed ones built field by field (tests/gguf/raw_gguf.h),
// tiny models of every supported architecture, tokenizer texts and id streams, chat templates. make_seeds writes them
// to a corpus folder for libFuzzer; the regression suite runs each through its exercise function.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fuzz {

struct Seed {
  std::string name;  // file name in the corpus folder: "<what>.bin"
  std::vector<uint8_t> bytes;
};

std::vector<Seed> gguf_seeds();
std::vector<Seed> model_seeds();
// assets: $LLM_TEST_ASSETS when present, for the test strings of the shared tokenizer vectors (*.inp).
std::vector<Seed> tokenizer_seeds(const std::optional<std::string>& assets);
// assets: for the chat templates stored in the shared vocabularies.
std::vector<Seed> chat_template_seeds(const std::optional<std::string>& assets);
// Request bodies of the HTTP routes: valid ones with every field, and near misses.
std::vector<Seed> api_request_seeds();
std::vector<Seed> json_schema_seeds();
// Model replies for the tool-call reader, byte 0 naming the format: real calls of each family, and near misses.
std::vector<Seed> tool_calls_seeds();

}  // namespace fuzz
