// Quantized (q8_0, q4_0) K rows straight into the split attention's mma fragments (attention_split_tc.cu's
// quantized kernel): a block's codes become exact f16 pairs with no conversion instruction, and the products of
// codes and f16 q are scaled by the slots' block scales in f32 afterwards.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/kv_quant.cuh"
#include "cuda/kernels/mma.cuh"
#include "graph/ir.h"

namespace cuda {

// Block b of a quantized K row as this lane's B registers of the block's two 16-dimension chunks (f[0], f[1]: chunk
// 2 b, f[2], f[3]: chunk 2 b + 1), each an exact f16 pair with no conversion instruction: a value v in the low
// mantissa bits of 1024 is 1024 + v. row: the slot's quant row plus 4 tg bytes.
// q4_0: the 4 bytes 4 tg.. of the block hold values 4 tg..4 tg + 3 in their low nibbles, 16 + 4 tg.. in their high
// ones; masked in place a high nibble is 1024 + 16 q, so q - 8 is 1024 + q - 1032 or (1024 + 16 q) / 16 - 72.
// q8_0: the 4 bytes 16 h + 4 tg.. of the block are values 16 h + 4 tg.. (chunk 2 b + h); q + 128 as a byte, so
// q is 1024 + 128 + q - 1152.
// Either way chunk 2 b + h holds values 16 h + 4 tg + (0, 2) in fragment positions (2 tg, 2 tg + 1) and
// 16 h + 4 tg + (1, 3) in (2 tg + 8, 2 tg + 9): load_q's kQuantOrder (attention_split_tc.cu).
template <graph::KvType KV>
__device__ __forceinline__ void k_block_fragments(const uint8_t* row, int b, uint32_t (&f)[4]) {
  const auto lop = [](uint32_t w, uint32_t mask) { return (w & mask) | 0x64006400u; };
  const auto as_u32 = [](__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); };
  const auto as_h2 = [](uint32_t u) { return *reinterpret_cast<const __half2*>(&u); };
  if constexpr (KV == graph::KvType::Q4_0) {
    const __half2 bias = __half2half2(__ushort_as_half(0x6408)), sixteenth = __half2half2(__float2half(0.0625f)),
                  bias_hi = __half2half2(__float2half(-72.0f));  // 1032
    const uint32_t w = *reinterpret_cast<const uint32_t*>(row + 16 * b), w8 = w >> 8;
    f[0] = as_u32(__hsub2(as_h2(lop(w, 0x000f000fu)), bias));                 // values 4 tg, 4 tg + 2
    f[1] = as_u32(__hsub2(as_h2(lop(w8, 0x000f000fu)), bias));                // 4 tg + 1, 4 tg + 3
    f[2] = as_u32(__hfma2(as_h2(lop(w, 0x00f000f0u)), sixteenth, bias_hi));   // 16 + the same
    f[3] = as_u32(__hfma2(as_h2(lop(w8, 0x00f000f0u)), sixteenth, bias_hi));
  } else {
    const __half2 bias = __half2half2(__ushort_as_half(0x6480));  // 1152
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint32_t x = *reinterpret_cast<const uint32_t*>(row + 32 * b + 16 * h) ^ 0x80808080u;
      f[2 * h] = as_u32(__hsub2(as_h2(lop(x, 0x00ff00ffu)), bias));           // values 16 h + 4 tg + (0, 2)
      f[2 * h + 1] = as_u32(__hsub2(as_h2(lop(x >> 8, 0x00ff00ffu)), bias));  // + (1, 3)
    }
  }
}

// Quantized K straight from the ring into the QK^T B fragments (k_block_fragments), the scales applied after the
// products: each block's two products start from zero and the slot's block scale multiplies their sum in f32, so
// the products are exact integers times f16 Q: no f16 rounding of q x scale (the f16 tiles round it) and no
// per-value multiply. kq: the 8 slots' quant rows, ksc: their HD / 32 binary16 scales each, both in slot order.
template <int HD, graph::KvType KV>
__device__ __forceinline__ void qk_8slots_quant(float (&s)[4], const uint32_t (&qf)[HD / 16][4], const int8_t* kq,
                                                const uint16_t* ksc, int lane) {
  constexpr int kBlocks = HD / 32, kRowBytes = int(kv_row_bytes<KV>(HD));
  const int g = lane >> 2, tg = lane & 3;
  // C fragment columns 2 tg, 2 tg + 1: those slots' scales, kBlocks binary16 each (4-byte aligned pairs).
  __half2 sc[2][kBlocks / 2];
#pragma unroll
  for (int c = 0; c < 2; ++c)
#pragma unroll
    for (int i = 0; i < kBlocks / 2; ++i)
      sc[c][i] = *reinterpret_cast<const __half2*>(ksc + (2 * tg + c) * kBlocks + 2 * i);
  const uint8_t* row = reinterpret_cast<const uint8_t*>(kq) + g * kRowBytes + 4 * tg;
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) {
    uint32_t f[4];
    k_block_fragments<KV>(row, b, f);
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma::m16n8k16(a, qf[2 * b], f[0], f[1]);
    mma::m16n8k16(a, qf[2 * b + 1], f[2], f[3]);
    // a[2], a[3]: rows g + 8, which Q leaves zero.
    const float2 d0 = __half22float2(sc[0][b / 2]), d1 = __half22float2(sc[1][b / 2]);
    s[0] = fmaf(b % 2 ? d0.y : d0.x, a[0], s[0]);
    s[1] = fmaf(b % 2 ? d1.y : d1.x, a[1], s[1]);
  }
}

// Slot-row form: S^T of a warp's 16 slots (K the A operand: rows g and g + 8 of the ring, their blocks' fragments as
// in qk_8slots_quant, each block's product scaled by its two rows' scales). kq, ksc: the 16 slots' rows and scales.
template <int HD, graph::KvType KV>
__device__ __forceinline__ void kq_16slots_quant(float (&st)[4], const uint32_t (&qb)[HD / 16][2], const int8_t* kq,
                                                 const uint16_t* ksc, int lane) {
  constexpr int kBlocks = HD / 32, kRowBytes = int(kv_row_bytes<KV>(HD));
  const int g = lane >> 2, tg = lane & 3;
  __half2 sc[2][kBlocks / 2];  // rows g and g + 8
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int i = 0; i < kBlocks / 2; ++i)
      sc[r][i] = *reinterpret_cast<const __half2*>(ksc + (g + 8 * r) * kBlocks + 2 * i);
  const uint8_t* row = reinterpret_cast<const uint8_t*>(kq) + g * kRowBytes + 4 * tg;
#pragma unroll
  for (int b = 0; b < kBlocks; ++b) {
    uint32_t f0[4], f1[4];
    k_block_fragments<KV>(row, b, f0);
    k_block_fragments<KV>(row + 8 * kRowBytes, b, f1);
    const uint32_t lo[4] = {f0[0], f1[0], f0[1], f1[1]}, hi[4] = {f0[2], f1[2], f0[3], f1[3]};
    float a[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    mma::m16n8k16(a, lo, qb[2 * b][0], qb[2 * b][1]);
    mma::m16n8k16(a, hi, qb[2 * b + 1][0], qb[2 * b + 1][1]);
    const float2 d0 = __half22float2(sc[0][b / 2]), d1 = __half22float2(sc[1][b / 2]);
    const float e0 = b % 2 ? d0.y : d0.x, e1 = b % 2 ? d1.y : d1.x;
    st[0] = fmaf(e0, a[0], st[0]), st[1] = fmaf(e0, a[1], st[1]);
    st[2] = fmaf(e1, a[2], st[2]), st[3] = fmaf(e1, a[3], st[3]);
  }
}

}  // namespace cuda
