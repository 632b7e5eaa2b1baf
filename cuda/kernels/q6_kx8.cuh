// Q6_K matrices regrouped at upload ("Q6_Kx8"), in runs of 8 blocks (8 x 210 = 1680 bytes, a multiple of 16):
//   [0, 1024)     per block b, per unit i (32 values: 16 at 128n + 32kk + 16g and 16 at 64 further, where
//                 n = i / 4, kk = (i / 2) % 2, g = i % 2): the unit's 16 ql bytes, at 128 b + 16 i
//   [1024, 1536)  per block, per unit: its 16 pairs of high-bit fields as 16 nibbles (8 bytes), at 1024 + 64 b + 8 i;
//                 nibble t = the 2 high bits of value t of the first run | those of value t of the second run << 2
//   [1536, 1664)  per block, per unit: its two int8 scales (first run, second run), at 1536 + 16 b + 2 i
//   [1664, 1680)  per block: d (binary16), at 1664 + 2 b
// Same values as Q6_K; a unit is one aligned 16-byte load, one 8-byte load and two 2-byte ones instead of ~12
// unaligned ones, and ~8 registers a row instead of 14 (docs/kernel-notes.md). Rows of K % 2048 == 0 (whole runs)
// starting on 16-byte boundaries.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/half.h"

namespace cuda {

inline constexpr int64_t kQ6_Kx8Run = 1680;

bool q6_kx8_fits(const void* w, int64_t K);

struct Q6_Kx8Unit {  // where unit u of a regrouped row keeps its parts
  const uint8_t* ql;
  const uint8_t* qh;
  const uint8_t* scales;
  const uint8_t* d;
};
__host__ __device__ inline Q6_Kx8Unit q6_kx8_unit(const uint8_t* row, int64_t u) {
  const uint8_t* run = row + kQ6_Kx8Run * (u >> 6);
  const int b = int((u >> 3) & 7), i = int(u & 7);
  return {run + 128 * b + 16 * i, run + 1024 + 64 * b + 8 * i, run + 1536 + 16 * b + 2 * i, run + 1664 + 2 * b};
}

// Byte o (0 <= o < 1680) of a regrouped run, from the run's 8 GGUF blocks at src.
__host__ __device__ inline uint8_t q6_kx8_byte(const uint8_t* src, int o) {
  constexpr int kBlock = 210;
  if (o < 1024) {
    const int b = o / 128, i = (o % 128) / 16, t = o % 16;
    const int n = i / 4, kk = (i / 2) % 2, g = i % 2;
    return src[kBlock * b + 64 * n + 32 * kk + 16 * g + t];
  }
  if (o < 1536) {
    const int r = o - 1024, b = r / 64, i = (r % 64) / 8, k = r % 8;
    const int n = i / 4, kk = (i / 2) % 2, g = i % 2;
    uint8_t out = 0;
    for (int half = 0; half < 2; ++half) {
      const int h = src[kBlock * b + 128 + 32 * n + 16 * g + 2 * k + half];
      const int nib = ((h >> (2 * kk)) & 3) | (((h >> (2 * kk + 4)) & 3) << 2);
      out |= uint8_t(nib << (4 * half));
    }
    return out;
  }
  if (o < 1664) {
    const int r = o - 1536, b = r / 16, i = (r % 16) / 2, s = r % 2;
    const int n = i / 4, kk = (i / 2) % 2, g = i % 2;
    return src[kBlock * b + 192 + 8 * n + 2 * kk + g + 4 * s];
  }
  const int r = o - 1664, b = r / 2, s = r % 2;
  return src[kBlock * b + 208 + s];
}

// A unit's 6-bit codes (value = d * scale * (code - 32)) as the int16 matvec dots them: from its 16 ql bytes l and
// its 16 nibbles hw, byte b of q0[w] is the code of value 4w + b of the first run, of q1[w] of the second run.
// Four of them: from a ql word l (values 4w..4w+3) and the 16 bits of their nibbles x, the first run's codes (q0)
// and the second's (q1), a byte each.
__host__ __device__ inline void q6_kx8_word(uint32_t l, uint32_t x, uint32_t& q0, uint32_t& q1) {
  // The nibbles, one to a byte: bits 0-1 the first run's high bits, 2-3 the second's.
  const uint32_t s = (x & 0xfu) | ((x & 0xf0u) << 4) | ((x & 0xf00u) << 8) | ((x & 0xf000u) << 12);
  q0 = (l & 0x0f0f0f0fu) | ((s & 0x03030303u) << 4);
  q1 = ((l >> 4) & 0x0f0f0f0fu) | ((s & 0x0c0c0c0cu) << 2);
}
__host__ __device__ inline void q6_kx8_codes(const uint32_t (&l)[4], const uint32_t (&hw)[2], uint32_t (&q0)[4],
                                             uint32_t (&q1)[4]) {
  for (int w = 0; w < 4; ++w) q6_kx8_word(l[w], (hw[w >> 1] >> (16 * (w & 1))) & 0xffffu, q0[w], q1[w]);
}

// The 32 values [32 c, 32 c + 32) of a regrouped row (the prefill dequantization's chunk c), as the GGUF Q6_K
// decoder gives them: d * scale * (q - 32). They are the first or second runs (hi) of two units g = 0, 1.
__host__ __device__ inline void q6_kx8_dequant_chunk(const uint8_t* row, int64_t c, float (&v)[32]) {
  const int64_t block = c >> 3;
  const int e = int(c & 7) * 32, n = e / 128, q = (e % 128) / 32, kk = q & 1, hi = q >> 1;
  for (int g = 0; g < 2; ++g) {
    const Q6_Kx8Unit p = q6_kx8_unit(row, block * 8 + 4 * n + 2 * kk + g);
    const float d = quant::f16_to_f32(uint16_t(p.d[0] | p.d[1] << 8));
    const float s = float(int8_t(p.scales[hi])) * d;
    alignas(16) uint8_t ql[16];
    alignas(8) uint8_t qh[8];
#ifdef __CUDA_ARCH__
    *reinterpret_cast<uint4*>(ql) = *reinterpret_cast<const uint4*>(p.ql);  // aligned 16- and 8-byte loads
    *reinterpret_cast<uint2*>(qh) = *reinterpret_cast<const uint2*>(p.qh);
#else
    for (int j = 0; j < 16; ++j) ql[j] = p.ql[j];
    for (int j = 0; j < 8; ++j) qh[j] = p.qh[j];
#endif
    for (int t = 0; t < 16; ++t) {
      const int low = hi ? ql[t] >> 4 : ql[t] & 0x0f;
      const int nib = (qh[t / 2] >> (4 * (t % 2))) & 0x0f;
      const int high = hi ? nib >> 2 : nib & 3;
      v[16 * g + t] = s * float((low | (high << 4)) - 32);
    }
  }
}

// In place on the device: the N rows of K elements at w (Q6_K as in GGUF) regrouped; q6_kx8_fits(w, K) must hold.
void launch_q6_kx8_regroup(void* w, int64_t K, int64_t N, cudaStream_t stream);

// The same on the host, from src into dst (tests).
void q6_kx8_regroup_host(const void* src, void* dst, int64_t K, int64_t N);

}  // namespace cuda
