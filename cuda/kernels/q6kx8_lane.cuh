// Q6_K blocks in the regrouped layout (q6_kx8.cuh) unpacked by a warp's lanes straight into tensor-core A fragments,
// as q4k_lane.cuh does for Q4_K (batch_mm_wgmma.cu). Lane 4 g + t loads, for its rows g and g + 8 and one block
// (256 elements), the parts of units 2 t and 2 t + 1: 32 ql bytes, 16 bytes of high-bit nibbles, 4 scale bytes
// and the block's d.
//
// Elements. Unit 2 t's first run starts at P0(t) = 128 (t >> 1) + 32 (t & 1), unit 2 t + 1's 16 further, and
// each second run 64 further. So word j of the lane's ql bytes (j = 0..7) holds, in its low nibbles, elements
// P0 + 4 j + 0..3 and in its high ones P0 + 64 + 4 j + 0..3; their high bits are half-word j of the lane's 16
// nibble bytes (nibble i: value i's first-run bits | its second-run bits << 2); their scales are bytes 2 (j >> 2)
// (first runs) and 2 (j >> 2) + 1 (second) of the lane's 4. A k-step takes one word's low or high nibbles, values
// 0, 1, 2, 3 at positions 2 t, 2 t + 1, 2 t + 8, 2 t + 9: q4k_lane.cuh's places with another base and run offset.
//
// Unpacking: a byte permute puts the ql bytes of two values beside 0x64 bytes, another the nibble byte of their high
// bits in bytes 0 and 2; masks and shifts put the 6-bit code c under the 0x64 exponent (the half 1024 + c); one
// exact subtraction leaves c - 32 and one multiply by fl(d sc) rounds once, as the other small-batch kernels hold W.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/matvec_units.cuh"
#include "cuda/kernels/q4k_lane.cuh"  // Word, as_h2, as_u32
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/unpack_half.cuh"  // q6_scales_of

namespace cuda::q6kx8_lane {

using q4k_lane::Word;

// Where the lane's first-run elements of a block start (the file header).
__host__ __device__ constexpr int first_run_base(int t) { return 128 * (t >> 1) + 32 * (t & 1); }

// A lane's share of one block: rows g (index 0) and g + 8 (1).
struct BlockRegs {
  uint4 ql[2][2];
  uint4 qh[2];
  uint32_t sc[2];
  uint32_t d[2];  // the block's d in the low 16 bits
};

// Block sb (0-based along the row) of each of the lane's two rows (row[i]: the row's first byte).
__device__ __forceinline__ void load_block(BlockRegs& r, const uint8_t* const (&row)[2], int sb, int t) {
  const int b = sb & 7;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const uint8_t* run = row[i] + size_t(sb >> 3) * kQ6_Kx8Run;
    r.ql[i][0] = mv::ldg_w(reinterpret_cast<const uint4*>(run + 128 * b + 32 * t));
    r.ql[i][1] = mv::ldg_w(reinterpret_cast<const uint4*>(run + 128 * b + 32 * t + 16));
    r.qh[i] = mv::ldg_w(reinterpret_cast<const uint4*>(run + 1024 + 64 * b + 16 * t));
    r.sc[i] = mv::ldg_w(reinterpret_cast<const uint32_t*>(run + 1536 + 16 * b + 4 * t));
    r.d[i] = mv::ldg_w(reinterpret_cast<const uint16_t*>(run + 1664 + 2 * b));
  }
}

// fl(d sc) of the lane's four runs (unit 2 t first, second, unit 2 t + 1 first, second) of one row, each in both
// halves of a pair.
struct RowScales {
  __half2 s[4];
};
__device__ __forceinline__ RowScales row_scales(uint32_t sc, uint32_t d) {
  const uint2 u0 = unpack_half::q6_scales_of(sc, d), u1 = unpack_half::q6_scales_of(sc >> 16, d);
  return {{q4k_lane::as_h2(u0.x), q4k_lane::as_h2(u0.y), q4k_lane::as_h2(u1.x), q4k_lane::as_h2(u1.y)}};
}

// Word j's A values (q4k_lane::Word: the low nibbles' values 0, 1 and 2, 3, then the high nibbles'): ql the word,
// hw the 32-bit word of nibble bytes that holds half-word j (hsel: its byte within hw, 0 or 2).
__device__ __forceinline__ Word unpack_word(uint32_t ql, uint32_t hw, int hsel, __half2 s_first, __half2 s_second) {
  const uint32_t p01 = __byte_perm(ql, 0x64646464u, 0x4140), p23 = __byte_perm(ql, 0x64646464u, 0x4342);
  // The nibble byte of values 0, 1 (then 2, 3) in bytes 0 and 2: value 0's nibble at bits 0..3, value 1's at 20..23.
  const uint32_t h01 = __byte_perm(hw, 0, hsel == 0 ? 0x4040 : 0x4242);
  const uint32_t h23 = __byte_perm(hw, 0, hsel == 0 ? 0x4141 : 0x4343);
  const __half2 off = __float2half2_rn(-1056.0f);  // 1024 + 32
  auto first = [&](uint32_t p, uint32_t h) {
    const uint32_t c = (p & 0xFF0FFF0Fu) | ((h << 4) & 0x00000030u) | (h & 0x00300000u);
    return q4k_lane::as_u32(__hmul2(__hadd2(q4k_lane::as_h2(c), off), s_first));
  };
  auto second = [&](uint32_t p, uint32_t h) {
    const uint32_t c = ((p >> 4) & 0x000F000Fu) | 0x64006400u | ((h << 2) & 0x00000030u) | ((h >> 2) & 0x00300000u);
    return q4k_lane::as_u32(__hmul2(__hadd2(q4k_lane::as_h2(c), off), s_second));
  };
  return {first(p01, h01), first(p23, h23), second(p01, h01), second(p23, h23)};
}

// Word j of row i (0: g, 1: g + 8) of a lane's block.
__device__ __forceinline__ Word block_word(const BlockRegs& r, const RowScales& sc, int i, int j) {
  const uint4& q = r.ql[i][j >> 2];
  const uint32_t qw = (j & 3) == 0 ? q.x : (j & 3) == 1 ? q.y : (j & 3) == 2 ? q.z : q.w;
  const int hc = j >> 1;  // the 32-bit word of the 16 nibble bytes that holds half-word j
  const uint32_t hw = hc == 0 ? r.qh[i].x : hc == 1 ? r.qh[i].y : hc == 2 ? r.qh[i].z : r.qh[i].w;
  return unpack_word(qw, hw, 2 * (j & 1), sc.s[2 * (j >> 2)], sc.s[2 * (j >> 2) + 1]);
}

}  // namespace cuda::q6kx8_lane
