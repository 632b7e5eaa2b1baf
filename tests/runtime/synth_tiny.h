// A synthetic tiny-h128 model (model/synth_shapes.cpp: 2048-wide rows, 128-wide heads, two layers) of one preset,
// written to a temporary file by `llm-run synth`'s writer, loaded and the file removed: the GPU session tests' model
// of real row widths that no asset has.
#pragma once
#include <filesystem>
#include <memory>
#include <string>

#include "model/model.h"
#include "model/synth.h"

namespace test_models {

inline std::shared_ptr<const model::Model> synth_tiny_h128(const std::string& vocab, const std::string& preset,
                                                           uint64_t seed) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("llm-run-test-tiny-h128-" + preset + "-" + std::to_string(seed) +
                                                 ".gguf")).string();
  model::SynthOptions so;
  so.shape = "tiny-h128", so.preset = preset, so.vocab_path = vocab, so.out_path = path, so.seed = seed;
  model::write_synthetic_model(so);
  auto m = model::Model::load(path);
  std::filesystem::remove(path);
  return m;
}

}  // namespace test_models
