// The quantized KV caches' block writer, shared by the KV write kernels (attention.cu, rope.cu): block b of the
// head_dim values of cache slot `slot` (head * n_ctx + position), quantized by a warp (lane i holds value i), at
// the layout of cuda/kernels/attention.cuh (q8_0: 32 int8 quants; q4_0: 16 bytes of nibbles; one binary16 scale).
#pragma once
#include <cstdint>

#include "cuda/kernels/kv_q4_0.cuh"
#include "cuda/kernels/kv_q8_0.cuh"
#include "graph/ir.h"

namespace cuda {

template <graph::KvType KV>
__device__ __forceinline__ void quantize_kv_block(float x, int lane, void* cache, uint16_t* scales, int64_t slot,
                                                  int64_t head_dim, int64_t b) {
  static_assert(KV == graph::KvType::Q8_0 || KV == graph::KvType::Q4_0, "a quantized cache type");
  uint16_t* scale = scales + slot * (head_dim / 32) + b;
  if constexpr (KV == graph::KvType::Q8_0)
    quantize_q8_0_warp(x, lane, static_cast<int8_t*>(cache) + slot * head_dim + b * 32, scale);
  else
    quantize_q4_0_warp(x, lane, static_cast<uint8_t*>(cache) + slot * (head_dim / 2) + b * 16, scale);
}

}  // namespace cuda
