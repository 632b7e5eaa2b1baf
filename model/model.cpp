// Model loading: open the GGUF file, resolve its hyperparameters, check its tensors.
#include "model/model.h"

namespace model {

std::shared_ptr<const Model> Model::from_file(gguf::File file) {
  Config config = read_config(file);
  Weights weights = Weights::load(file, config);
  // gguf::File moves keep the mapping (and so every TensorInfo::data pointer) in place.
  return std::shared_ptr<const Model>(new Model(std::move(file), std::move(config), std::move(weights)));
}

std::shared_ptr<const Model> Model::load(const std::string& path) { return from_file(gguf::File::open(path)); }

}  // namespace model
