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

namespace {

// Whether Executor::lower has a lowering for the op (one case per op: a new op must be placed here).
bool lowerable(graph::Op op) {
  switch (op) {
    case graph::Op::Input:
    case graph::Op::Weight:
    case graph::Op::GetRows:
    case graph::Op::RmsNorm:
    case graph::Op::MulMat:
    case graph::Op::Add:
    case graph::Op::Mul:
    case graph::Op::Silu:
    case graph::Op::SwiGlu:
    case graph::Op::Rope:
    case graph::Op::Attention:
    case graph::Op::Softmax:
    case graph::Op::Reshape:
    case graph::Op::LastToken:
    case graph::Op::Argmax: return true;
  }
  return false;
}

}  // namespace

std::string graph_refusal(const graph::Graph& g) {
  for (const graph::Node& n : g.nodes())
    if (!lowerable(n.op)) return "node '" + n.name + "' (" + graph::op_name(n.op) + ")";
  return {};
}

}  // namespace cuda
