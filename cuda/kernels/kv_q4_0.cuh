// The q4_0 KV cache on the device (layout: cuda/kernels/attention.cuh; rounding: graph/ir.h): the writers' quantizer
// of one 32-value block per warp (kv_write, rope_kv), and the 4-bit -> f16 conversion of the attention kernels.
// A block is GGUF's Q4_0 without its scale, which lives in the scales array: 16 bytes, byte j holding element j in
// its low nibble and element j + 16 in its high nibble.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/kv_q8_0.cuh"

namespace cuda {

// One 32-value block, lane i holding value x, quantized as quant::quantize_row(Q4_0) does on the CPU: m = the value
// of largest magnitude (the lowest lane on ties; never a NaN, so that every lane agrees on the winner: the CPU
// quantizer refuses non-finite blocks, the device must at least write one consistent block), d = m / -8,
// q = trunc(clamp(x * (1 / d) + 8.5, 0, 15)) (NaN -> 0; the product rounded before the add, as the CPU computes it,
// not fused); lanes 0..15 write byte i (q of lanes i and i + 16), lane 0 the binary16 scale d. Every lane of the
// warp must call it.
__device__ __forceinline__ void quantize_q4_0_warp(float x, int lane, uint8_t* quants, uint16_t* scale) {
  float amax = fabsf(x);
  if (!(amax >= 0.0f)) amax = -1.0f;  // NaN: below every number, so all lanes agree on the winner
  int at = lane;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    const float a = __shfl_xor_sync(0xffffffffu, amax, o);
    const int l = __shfl_xor_sync(0xffffffffu, at, o);
    if (a > amax || (a == amax && l < at)) amax = a, at = l;
  }
  const float m = __shfl_sync(0xffffffffu, x, at);
  const float d = m / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float t = __fadd_rn(__fmul_rn(x, id), 8.5f);
  const int q = !(t >= 0.0f) ? 0 : (t >= 15.0f ? 15 : int(t));
  const int hi = __shfl_down_sync(0xffffffffu, q, 16);
  if (lane < 16) quants[lane] = uint8_t(q | (hi << 4));
  if (lane == 0) *scale = __half_as_ushort(__float2half_rn(d));
}

// Eight consecutive values of a block as f16, each (q - 8) * scale rounded once: the low (values 0..15 of the block)
// or high (16..31) nibbles of eight quant bytes, minus 1032 (kv_q8_0.cuh's conversion).
__device__ __forceinline__ uint4 dequant8_q4_0(uint2 q, bool high, __half scale) {
  const uint32_t w[2] = {(high ? q.x >> 4 : q.x) & 0x0f0f0f0fu, (high ? q.y >> 4 : q.y) & 0x0f0f0f0fu};
  return biased_bytes_to_half8(w, __ushort_as_half(0x6408), scale);  // 1032
}

}  // namespace cuda
