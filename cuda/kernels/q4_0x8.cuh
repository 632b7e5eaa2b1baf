// Q4_0 matrices regrouped at upload ("Q4_0x8"): every run of 8 blocks of a row (8 x 18 bytes = 144) becomes their
// 8 x 16 quant bytes followed by their 8 binary16 scales. Same bytes per row, same values; but a block's quants
// start on a 16-byte boundary (one aligned 16-byte load instead of five 4-byte ones at an 18-byte stride), and the
// decode matvec holds ~5 registers per row instead of 7, room for 8 rows per group (docs/kernel-notes.md).
// Applies to rows of K % 256 == 0 elements (whole runs of 8 blocks) starting on 16-byte boundaries.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/half.h"

namespace cuda {

inline constexpr int64_t kQ4_0x8Run = 144;  // bytes of one run of 8 blocks

// Whether a Q4_0 matrix with rows of K elements at w can be regrouped.
bool q4_0x8_fits(const void* w, int64_t K);

// Block u of a regrouped row: its 16 quant bytes (low nibbles elements 0..15, high 16..31) and its scale.
__host__ __device__ inline const uint8_t* q4_0x8_quants(const uint8_t* row, int64_t u) {
  return row + kQ4_0x8Run * (u >> 3) + 16 * (u & 7);
}
__host__ __device__ inline const uint8_t* q4_0x8_scale(const uint8_t* row, int64_t u) {
  return row + kQ4_0x8Run * (u >> 3) + 128 + 2 * (u & 7);
}

// The 32 values of block u of a regrouped row, as the GGUF Q4_0 decoder gives them: (q - 8) * d.
__host__ __device__ inline void q4_0x8_dequant_block(const uint8_t* row, int64_t u, float (&v)[32]) {
  const uint8_t* s = q4_0x8_scale(row, u);
  const float d = quant::f16_to_f32(uint16_t(s[0] | s[1] << 8));
  alignas(16) uint8_t q[16];
#ifdef __CUDA_ARCH__
  *reinterpret_cast<uint4*>(q) = *reinterpret_cast<const uint4*>(q4_0x8_quants(row, u));  // one aligned load
#else
  for (int j = 0; j < 16; ++j) q[j] = q4_0x8_quants(row, u)[j];
#endif
  for (int j = 0; j < 16; ++j) {
    v[j] = float((q[j] & 0x0f) - 8) * d;
    v[j + 16] = float((q[j] >> 4) - 8) * d;
  }
}

// In place on the device: the N rows of K elements at w (Q4_0 as in GGUF) regrouped. q4_0x8_fits(w, K) must hold.
void launch_q4_0x8_regroup(void* w, int64_t K, int64_t N, cudaStream_t stream);

// The same on the host, from src (GGUF layout) into dst (for tests and the reference of the kernel).
void q4_0x8_regroup_host(const void* src, void* dst, int64_t K, int64_t N);

}  // namespace cuda
