// The q8_0 KV cache on the device (layout: cuda/kernels/attention.cuh; rounding: graph/ir.h): the writers' quantizer
// of one 32-value block per warp (kv_write, rope_kv), and the int8 -> f16 conversion of the attention kernels.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace cuda {

// One 32-value block, lane i holding value x, quantized as quant::quantize_row(Q8_0) does on the CPU:
// d = max|x| / 127, q = round(x * (1 / d)) (IEEE division, half away from zero, clamped to +-127); lane i writes
// quants[i], lane 0 the binary16 scale d. Every lane of the warp must call it.
__device__ __forceinline__ void quantize_q8_0_warp(float x, int lane, int8_t* quants, uint16_t* scale) {
  float amax = fabsf(x);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const float q = fminf(fmaxf(roundf(x * id), -127.0f), 127.0f);  // NaN -> -127, as the CPU quantizer
  quants[lane] = int8_t(int(q));
  if (lane == 0) *scale = __half_as_ushort(__float2half_rn(d));
}

// Eight bytes b (four in each word of w, in order) as f16 values (1024 + b - bias) * scale, each rounded once: the
// byte as the low mantissa bits of 0x6400 (1024) is 1024 + b exactly, and the subtraction of a bias near 1024 is
// exact too. The conversion of both quantized caches (q8_0 below, q4_0 in kv_q4_0.cuh), without conversion
// instructions.
__device__ __forceinline__ uint4 biased_bytes_to_half8(const uint32_t (&w)[2], __half bias, __half scale) {
  const __half2 s2 = __half2half2(scale), b2 = __half2half2(bias);
  uint32_t r[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t bits = __byte_perm(w[i / 2], 0x64646464u, (i & 1) ? 0x4342 : 0x4140);
    const __half2 h = __hmul2(__hsub2(*reinterpret_cast<const __half2*>(&bits), b2), s2);
    r[i] = *reinterpret_cast<const uint32_t*>(&h);
  }
  return make_uint4(r[0], r[1], r[2], r[3]);
}

// Eight int8 quants times their block's binary16 scale -> eight f16 values, each q * scale rounded once (so a
// reference that rounds the dequantized float to f16 matches bit for bit): q + 128 as a byte, minus 1152.
__device__ __forceinline__ uint4 dequant8_q8_0(uint2 q, __half scale) {
  const uint32_t w[2] = {q.x ^ 0x80808080u, q.y ^ 0x80808080u};
  return biased_bytes_to_half8(w, __ushort_as_half(0x6480), scale);  // 1152
}

}  // namespace cuda
