// fuzz-seeds OUT_DIR [ASSETS_DIR]: writes the seed corpora of seeds.h to OUT_DIR/<target>/*.bin (gguf, model,
// tokenizer, chat_template, api_request, tool_calls). ASSETS_DIR (default $LLM_TEST_ASSETS) adds the shared tokenizer test strings and the
// chat templates of the shared vocabularies. scripts/fuzz.sh runs it before fuzzing.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include "seeds.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: fuzz-seeds OUT_DIR [ASSETS_DIR]\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::optional<std::string> assets;
  if (argc == 3) {
    assets = argv[2];
  } else if (const char* env = std::getenv("LLM_TEST_ASSETS"); env && *env) {
    assets = env;
  }
  if (assets && !std::filesystem::is_directory(*assets)) assets.reset();
  try {
    const std::pair<const char*, std::vector<fuzz::Seed>> sets[] = {
        {"gguf", fuzz::gguf_seeds()},
        {"model", fuzz::model_seeds()},
        {"tokenizer", fuzz::tokenizer_seeds(assets)},
        {"chat_template", fuzz::chat_template_seeds(assets)},
        {"api_request", fuzz::api_request_seeds()},
        {"json_schema", fuzz::json_schema_seeds()},
        {"tool_calls", fuzz::tool_calls_seeds()},
    };
    for (const auto& [target, seeds] : sets) {
      const std::filesystem::path dir = out / target;
      std::filesystem::create_directories(dir);
      uint64_t bytes = 0;
      for (const fuzz::Seed& s : seeds) {
        std::ofstream f(dir / s.name, std::ios::binary);
        f.write(reinterpret_cast<const char*>(s.bytes.data()), static_cast<std::streamsize>(s.bytes.size()));
        if (!f) throw std::runtime_error("cannot write " + (dir / s.name).string());
        bytes += s.bytes.size();
      }
      std::printf("fuzz-seeds: %-14s %3zu seeds, %7llu bytes -> %s\n", target, seeds.size(),
                  static_cast<unsigned long long>(bytes), dir.string().c_str());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz-seeds: %s\n", e.what());
    return 1;
  }
  return 0;
}
