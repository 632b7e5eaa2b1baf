// A loaded model: the mapped GGUF file, its resolved Config and the checked Weights that point into the mapping.
// Immutable after load, so sessions on any device can share one (std::shared_ptr<const Model>).
#pragma once
#include <memory>
#include <string>

#include "gguf/gguf.h"
#include "model/config.h"
#include "model/weights.h"

namespace model {

class Model {
 public:
  // Maps the file and validates hyperparameters and tensors. Throws gguf::GgufError for a malformed file and
  // ModelError for a well-formed file this runtime cannot run.
  static std::shared_ptr<const Model> load(const std::string& path);
  // Same, over a file already opened (tests build files in memory with gguf::Writer; for File::parse the buffer
  // must outlive the Model).
  static std::shared_ptr<const Model> from_file(gguf::File file);

  const gguf::File& file() const { return file_; }
  const Config& config() const { return config_; }
  const Weights& weights() const { return weights_; }

 private:
  Model(gguf::File file, Config config, Weights weights)
      : file_(std::move(file)), config_(std::move(config)), weights_(std::move(weights)) {}
  gguf::File file_;   // owns the mapping the weights point into; declared first so it is destroyed last
  Config config_;
  Weights weights_;
};

}  // namespace model
