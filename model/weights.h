// The weights a model uses: tensor name -> graph::WeightParams (host pointer into the mapped file, type, byte size,
// offset in the single device weight arena) and shape, checked against the Config when loaded. Executors upload
// [arena_offset, arena_offset + nbytes) of every entry into one allocation of arena_bytes().
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "graph/ir.h"
#include "model/config.h"

namespace gguf {
class File;
}

namespace model {

struct WeightInfo {
  graph::WeightParams params;  // params.tensor is the GGUF name
  graph::Shape shape;          // as in the file: ne[0] is the row length
};

// How a weight is checked: its expected shape (trailing dims 1) and whether 1-D float storage is required.
struct WeightSpec {
  std::string name;
  std::vector<int64_t> ne;     // expected dims, innermost first
  bool required = true;
  bool f32_only = false;       // norms, biases and rope factors: the graph multiplies them as F32 vectors
  graph::WeightRole role = graph::WeightRole::Other;  // what it is for (executors choose layouts by it)
  int32_t layer = -1;          // its block; -1 for model-wide weights
};

// The tensors an architecture reads, with their expected shapes; Weights::load checks exactly these.
std::vector<WeightSpec> weight_specs(const Config& c);

class Weights {
 public:
  static constexpr uint64_t kArenaAlignment = 256;

  // Checks every spec against the file (presence, shape, type) and lays out the arena in file order.
  // Throws ModelError naming the file and the tensor: "missing tensor blk.3.ffn_up.weight",
  // "tensor blk.0.attn_q.weight has shape [256, 128], expected [256, 256]", "... type Q8_K is not supported ...".
  static Weights load(const gguf::File& file, const Config& c);

  const WeightInfo* find(std::string_view name) const;  // nullptr when the (optional) tensor is absent
  const WeightInfo& get(std::string_view name) const;   // throws ModelError when absent
  bool has(std::string_view name) const { return find(name) != nullptr; }

  const std::vector<WeightInfo>& all() const { return entries_; }  // in arena order
  uint64_t arena_bytes() const { return arena_bytes_; }

 private:
  std::string file_;
  std::vector<WeightInfo> entries_;
  std::unordered_map<std::string, size_t> index_;
  uint64_t arena_bytes_ = 0;
};

// Quant types a weight matrix may have (the CPU reference and the CUDA kernels support all of them).
bool is_supported_weight_type(quant::Type t);

}  // namespace model
