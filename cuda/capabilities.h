// What the CUDA path can run, asked before a session allocates anything: the runtime checks a model and a KV-cache
// type here instead of knowing the kernels' limits itself.
#pragma once
#include <cstdint>
#include <string>

#include "graph/ir.h"

namespace cuda {

// The attention shape of a model, as the kernels see it.
struct AttentionShape {
  int64_t n_head = 0, n_head_kv = 0, head_dim = 0, head_dim_v = 0;
};

// Whether the attention kernels can read a KV cache of this type for this shape (f16: every shape; q8_0 / q4_0: the
// tensor-core kernels' head sizes and group sizes).
bool kv_cache_supported(graph::KvType type, const AttentionShape& shape);
// Why kv_cache_supported refuses: what is needed and what this shape has; empty when it is supported.
std::string kv_cache_refusal(graph::KvType type, const AttentionShape& shape);

// Block sizes of a paged KV cache the kernels serve: powers of two from 16 to 256. The quantized split kernel copies a
// warp's 16 positions as one run of slots, so a block holds at least 16; above 256 nothing breaks but nothing is
// tested.
bool paged_block_size_supported(int64_t block_size);

// What in a model's graph the CUDA executor cannot run yet ("sliding-window attention (node 'blk.0.attn')"), asked
// once when a session starts so that an unsupported model is refused before anything is allocated (and
// --device auto runs it on the CPU reference instead); empty when every node lowers. A paged graph whose block size
// the kernels do not serve is refused too ("paged KV cache block size 8 (...)").
std::string graph_refusal(const graph::Graph& g);

}  // namespace cuda
