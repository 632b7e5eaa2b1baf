// What the quantized KV caches' writers and readers share (layout: cuda/kernels/attention.cuh): the quant bytes of
// a slot's row, the host checks of the writers' launches, and the block writer of the KV write kernels
// (attention.cu, rope.cu).
#pragma once
#include <cstdint>
#include <string>

#include "cuda/check.h"
#include "cuda/kernels/kv_q4_0.cuh"
#include "cuda/kernels/kv_q8_0.cuh"
#include "graph/ir.h"

namespace cuda {

// Quant bytes of one slot's row of hd values: q8_0 one per value, q4_0 one per two.
template <graph::KvType KV>
__host__ __device__ constexpr int64_t kv_row_bytes(int64_t hd) {
  static_assert(KV == graph::KvType::Q8_0 || KV == graph::KvType::Q4_0, "a quantized cache type");
  return KV == graph::KvType::Q4_0 ? hd / 2 : hd;
}

// What a launch writing a quantized cache requires of its arguments: heads of whole 32-value blocks, both scales.
inline void require_quant_cache_args(graph::KvType type, int64_t hd, int64_t hd_v, const void* k_scales,
                                     const void* v_scales) {
  const ::std::string name = graph::kv_type_name(type);
  LLM_REQUIRE(graph::kv_head_dims_fit(type, hd, hd_v), name + " KV cache: head dims must be multiples of 32");
  LLM_REQUIRE(k_scales && v_scales, name + " KV cache: null scales");
}

// Block b of the head_dim values of cache slot `slot` (head * n_ctx + position), quantized by a warp (lane i holds
// value i): q8_0 32 int8 quants, q4_0 16 bytes of nibbles; one binary16 scale.
template <graph::KvType KV>
__device__ __forceinline__ void quantize_kv_block(float x, int lane, void* cache, uint16_t* scales, int64_t slot,
                                                  int64_t head_dim, int64_t b) {
  static_assert(KV == graph::KvType::Q8_0 || KV == graph::KvType::Q4_0, "a quantized cache type");
  uint16_t* scale = scales + slot * (head_dim / 32) + b;
  if constexpr (KV == graph::KvType::Q8_0)
    quantize_q8_0_warp(x, lane, static_cast<int8_t*>(cache) + slot * kv_row_bytes<KV>(head_dim) + b * 32, scale);
  else
    quantize_q4_0_warp(x, lane, static_cast<uint8_t*>(cache) + slot * kv_row_bytes<KV>(head_dim) + b * 16, scale);
}

}  // namespace cuda
