// Capability questions answered from the kernels' own limits (see capabilities.h).
#include "cuda/capabilities.h"

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/moe.cuh"

namespace cuda {

bool kv_cache_supported(graph::KvType type, const AttentionShape& s) {
  return !graph::kv_quantized(type) || kv_quant_supported(s.n_head, s.n_head_kv, s.head_dim, s.head_dim_v);
}

std::string kv_cache_refusal(graph::KvType type, const AttentionShape& s) {
  if (kv_cache_supported(type, s)) return {};
  return kv_quant_refusal(type, s.n_head, s.n_head_kv, s.head_dim, s.head_dim_v);
}

namespace {

// Why Executor::lower cannot lower this node ("" when it can): one case per op, so a new op must be placed here.
std::string node_refusal(const graph::Graph& g, const graph::Node& n) {
  switch (n.op) {
    case graph::Op::TopK:
      return g.node(n.inputs.at(0)).shape.ne[0] <= kTopKMaxN
                 ? ""
                 : "top-k over more than " + std::to_string(kTopKMaxN) + " values";
    case graph::Op::MoeWeights:
      return n.shape.ne[0] <= 64 ? "" : "more than 64 experts per token";
    case graph::Op::Weight:
    case graph::Op::MulMatId:
    case graph::Op::SwiGluOai:
    case graph::Op::WeightedSum:
    case graph::Op::Input:
    case graph::Op::GetRows:
    case graph::Op::RmsNorm:
    case graph::Op::MulMat:
    case graph::Op::Add:
    case graph::Op::Mul:
    case graph::Op::Silu:
    case graph::Op::SwiGlu:
    case graph::Op::Softmax:
    case graph::Op::Reshape:
    case graph::Op::LastToken:
    case graph::Op::Argmax:
    case graph::Op::Rope:
    case graph::Op::GeGlu:
    case graph::Op::Scale:
    case graph::Op::Softcap:
    case graph::Op::Slice:
    case graph::Op::Gather: return "";
    case graph::Op::Attention: {
      const auto& a = std::get<graph::AttentionParams>(n.params);
      if (a.sinks && !kv_quant_supported(a.n_head, a.n_head_kv, a.head_dim, a.head_dim_v))
        return "attention sinks of this head shape (the tensor-core kernels' head_dim 64, 128 or 256 and 1, 2, 4 or 8 "
               "query heads per KV head)";
      return a.window == 0 || window_supported(a.n_head, a.n_head_kv, a.head_dim, a.head_dim_v)
                 ? ""
                 : "sliding-window attention of this head shape";
    }
  }
  return std::string("op ") + std::to_string(int(n.op));
}

}  // namespace

bool paged_block_size_supported(int64_t bs) { return bs >= 16 && bs <= 256 && (bs & (bs - 1)) == 0; }

std::string graph_refusal(const graph::Graph& g) {
  if (g.kv.paged() && !paged_block_size_supported(g.kv.block_size))
    return "paged KV cache block size " + std::to_string(g.kv.block_size) +
           " (the CUDA kernels serve powers of two from 16 to 256)";
  for (const graph::Node& n : g.nodes())
    if (const std::string why = node_refusal(g, n); !why.empty())
      return why + " (node '" + n.name + "')";
  return {};
}

}  // namespace cuda
