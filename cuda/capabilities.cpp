// Capability questions answered from the kernels' own limits (see capabilities.h).
#include "cuda/capabilities.h"

#include "cuda/kernels/attention.cuh"

namespace cuda {

bool kv_cache_supported(graph::KvType type, const AttentionShape& s) {
  return !graph::kv_quantized(type) || kv_quant_supported(s.n_head, s.n_head_kv, s.head_dim, s.head_dim_v);
}

std::string kv_cache_refusal(graph::KvType type, const AttentionShape& s) {
  if (kv_cache_supported(type, s)) return {};
  return kv_quant_refusal(type, s.n_head, s.n_head_kv, s.head_dim, s.head_dim_v);
}

}  // namespace cuda
