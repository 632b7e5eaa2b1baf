// libFuzzer entry point: exercise_tokenizer() (exercise.h) over vocabularies loaded once at startup, under the
// per-input heap budget. LLM_FUZZ_VOCABS=a.gguf,b.gguf picks other files of $LLM_TEST_ASSETS/tokenizer.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <sstream>
#include <string>
#include <vector>

#include "alloc_guard.h"
#include "exercise.h"

namespace {
fuzz::Vocabularies* g_vocabs = nullptr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  std::vector<std::string> files;
  if (const char* env = std::getenv("LLM_FUZZ_VOCABS"); env && *env) {
    std::stringstream s(env);
    for (std::string f; std::getline(s, f, ',');)
      if (!f.empty()) files.push_back(f);
  }
  try {
    g_vocabs = new fuzz::Vocabularies(fuzz::load_vocabularies(files));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_tokenizer: %s\n", e.what());
    std::exit(1);
  }
  for (const std::string& name : g_vocabs->names) std::fprintf(stderr, "fuzz_tokenizer: vocabulary %s\n", name.c_str());
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::AllocGuard guard(size, fuzz::AllocBudget{64, size_t{4} << 20});
  fuzz::exercise_tokenizer(*g_vocabs, fuzz::Bytes(data, size));
  return 0;
}
