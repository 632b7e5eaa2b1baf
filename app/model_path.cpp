// Where the model comes from when -m is not given.
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "app/cli.h"

namespace app {

namespace {
// The small real model shipped with the repository (karpathy's stories260K, MIT), the default of last resort.
constexpr const char* kShippedModel = "stories260K.gguf";
}  // namespace

std::string resolve_model_path(const std::string& flag_value) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!flag_value.empty()) {
    if (!fs::exists(flag_value, ec)) throw UsageError("model file '" + flag_value + "' does not exist");
    return flag_value;
  }
  if (const char* env = std::getenv("LLM_RUN_MODEL"); env && *env) {
    if (!fs::exists(env, ec)) throw UsageError(std::string("model file '") + env + "' (from $LLM_RUN_MODEL) does not exist");
    return env;
  }
  // models/ of the working directory first, then of the checkout this binary was built from (LLM_SOURCE_DIR), so
  // that the quick start works from any directory.
  const fs::path roots[] = {fs::path("."), fs::path(LLM_SOURCE_DIR)};
  for (const fs::path& root : roots)
    if (const fs::path p = root / "models" / "default.gguf"; fs::exists(p, ec)) return p.lexically_normal().string();
  for (const fs::path& root : roots)
    if (const fs::path p = root / "models" / kShippedModel; fs::exists(p, ec)) {
      std::fprintf(stderr,
                   "llm-run: no -m given: using %s, the tiny story model shipped with llm-run (models/README.md)\n",
                   p.lexically_normal().string().c_str());
      return p.lexically_normal().string();
    }
  throw UsageError(
      "no model given: pass -m FILE.gguf, set $LLM_RUN_MODEL, or place one at models/default.gguf\n"
      "  hint: small GGUF models to start with, from the Hugging Face hub: "
      "Qwen/Qwen2.5-0.5B-Instruct-GGUF (qwen2.5-0.5b-instruct-q4_k_m.gguf), "
      "bartowski/Llama-3.2-1B-Instruct-GGUF (Llama-3.2-1B-Instruct-Q4_K_M.gguf), "
      "TheBloke/TinyLlama-1.1B-Chat-v1.0-GGUF (tinyllama-1.1b-chat-v1.0.Q4_K_M.gguf); see models/README.md");
}

}  // namespace app
