// Regrouped Q6_K (q6_kx8.cuh) on the s8 tensor cores of batch_mm_i8.cu: what one lane loads of a block and how its
// bytes become A fragments of mma.m16n8k32 (s8) and, after the products, sums. Host and device: the host test
// (tests/cuda/test_q6kx8_i8_lane.cpp) runs the same functions under an emulated mma.
//
// Positions. The i8 image of x (batch_mm_i8.cu) gives lane 4 g + q, for each k-block (32 elements of x), the
// elements 8 q .. 8 q + 3 at k positions 4 q .. 4 q + 3 (B register 0) and 8 q + 4 .. 8 q + 7 at 16 + 4 q .. (B
// register 1). So the lane's A registers 0 / 2 (row g) and 1 / 3 (row g + 8) hold those elements of its rows.
//
// Where they lie. K-block kb of a block (elements 32 kb ..) is n = kb / 4, kk = kb % 2, run hi = (kb / 2) % 2:
// its first 16 elements are run hi of unit 4 n + 2 kk (low nibbles of the unit's ql bytes if hi = 0, high ones if 1;
// high bits in the unit's nibbles, bits 0-1 or 2-3), its last 16 run hi of unit 4 n + 2 kk + 1. Lane q takes unit
// 4 n + 2 kk + (q >> 1), values 8 (q & 1) .. + 7: ql bytes 128 b + 32 p + 8 q (p = 2 n + kk, b the block in its run
// of 8), nibble bytes 1024 + 64 b + 16 p + 4 q. The two k-blocks of a pair p (hi = 0, 1) share those bytes.
//
// Scales. A Q6_K scale covers 16 elements, so one k-block has two: lanes q < 2 hold the first 16, q >= 2 the last,
// in A and in B alike. Each k-block takes two products of the same A, one with the B registers of lanes q >= 2
// zeroed (the first 16 elements' sum) and one with those of q < 2 zeroed; every lane gets both sums of its rows and
// token and needs both scales (the block's 16 scale bytes: unit i's runs at 2 i, 2 i + 1, so pair p's at bytes
// 4 p + hi and 4 p + 2 + hi, word p).
//
// Codes. value = d sc (c - 32), c the 6-bit code: A holds c - 32 as a signed byte (in [-32, 31]): c ^ 32 is c - 32
// modulo 64, and bit 5 copied into bits 6 and 7 makes it the byte. Sums: |sum of 16 (c - 32) v| <= 16 * 32 * 32639
// < 2^24, times |sc| <= 128 < 2^31: exact in int32, then one rounding to float per half.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/q6_kx8.cuh"
#include "quant/half.h"

namespace cuda::q6kx8_i8 {

inline constexpr int kBlockElems = 256;

// Byte offsets, within a regrouped run of 8 blocks, of what lane q loads of block b (0..7): pair p's 8 ql bytes and
// 4 nibble bytes, the block's 16 scale bytes and its d.
__host__ __device__ constexpr int ql_offset(int b, int p, int q) { return 128 * b + 32 * p + 8 * q; }
__host__ __device__ constexpr int qh_offset(int b, int p, int q) { return 1024 + 64 * b + 16 * p + 4 * q; }
__host__ __device__ constexpr int scales_offset(int b) { return 1536 + 16 * b; }
__host__ __device__ constexpr int d_offset(int b) { return 1664 + 2 * b; }

// A lane's share of one block of one row: ql[p] (x: values 0..3, y: 4..7), qh[p] (nibble pairs of values 0..7),
// sc the block's scales (word p: pair p's), d in the low 16 bits.
struct RowRegs {
  uint2 ql[4];
  uint32_t qh[4];
  uint4 sc;
  uint32_t d;
};

// The start of the run of 8 blocks that holds block `block` of a regrouped row (its place there: block & 7).
__host__ __device__ inline const uint8_t* run_of(const uint8_t* row, int block) {
  return row + size_t(block >> 3) * size_t(kQ6_Kx8Run);
}

// __byte_perm on the device, the same selection on the host (selector nibbles 0..7 name bytes of y:x).
__host__ __device__ inline uint32_t perm(uint32_t x, uint32_t y, uint32_t sel) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, sel);
#else
  const uint64_t xy = uint64_t(x) | uint64_t(y) << 32;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) r |= uint32_t((xy >> (8 * ((sel >> (4 * i)) & 7))) & 0xffu) << (8 * i);
  return r;
#endif
}

// Four codes - 32 as signed bytes: word w (0: values 0..3, 1: 4..7) of the lane's ql bytes, run hi, their high
// bits from the nibble bytes h.
__host__ __device__ inline uint32_t signed_codes(uint32_t ql, uint32_t h, int w, int hi) {
  const uint32_t low = hi ? (ql >> 4) & 0x0F0F0F0Fu : ql & 0x0F0F0F0Fu;
  // Nibble bytes 2 w, 2 w, 2 w + 1, 2 w + 1: even result bytes take their low nibble, odd ones their high.
  const uint32_t nb = perm(h, 0, w == 0 ? 0x1100u : 0x3322u);
  const uint32_t high = hi ? ((nb << 2) & 0x00300030u) | ((nb >> 2) & 0x30003000u)
                           : ((nb << 4) & 0x00300030u) | (nb & 0x30003000u);
  const uint32_t y = (low | high) ^ 0x20202020u;  // c - 32 modulo 64
  return y | ((y & 0x20202020u) * 6u);            // bit 5 into bits 6, 7 (0x20 * 6 = 0xC0: no carry between bytes)
}

// The lane's A registers for k-block kb of its rows (r0: row g, r1: row g + 8).
__host__ __device__ inline void a_fragment(const RowRegs& r0, const RowRegs& r1, int kb, uint32_t (&a)[4]) {
  const int p = 2 * (kb >> 2) + (kb & 1), hi = (kb >> 1) & 1;
  a[0] = signed_codes(r0.ql[p].x, r0.qh[p], 0, hi), a[1] = signed_codes(r1.ql[p].x, r1.qh[p], 0, hi);
  a[2] = signed_codes(r0.ql[p].y, r0.qh[p], 1, hi), a[3] = signed_codes(r1.ql[p].y, r1.qh[p], 1, hi);
}

// The lane's B registers (b0, b1: the image's, k-block kb) for the product of one half: B's k positions of lanes
// q >= 2 are the elements 16..31 of the k-block in both registers, so zeroing them leaves the first 16 elements'
// sum (`first`), zeroing lanes q < 2 the last 16's (`second`). Two registers masked, not A's four.
__host__ __device__ inline void b_halves(int q, uint32_t b0, uint32_t b1, uint32_t (&first)[2],
                                         uint32_t (&second)[2]) {
  const uint32_t keep_first = q < 2 ? ~0u : 0u;
  first[0] = b0 & keep_first, first[1] = b1 & keep_first;
  second[0] = b0 & ~keep_first, second[1] = b1 & ~keep_first;
}

__host__ __device__ inline uint32_t word_of(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// One row's share of add_sums: sc (256 C_hi + C_lo) of each half (scale word sw: the pair's), times xs, into A.
__host__ __device__ inline float row_sums(uint32_t sw, int hi, int first_hi, int first_lo, int second_hi,
                                          int second_lo, float xs, float A) {
  const int s_first = int(int8_t(uint8_t(sw >> (8 * hi)))), s_second = int(int8_t(uint8_t(sw >> (16 + 8 * hi))));
  return fmaf(float((first_hi * 256 + first_lo) * s_first) + float((second_hi * 256 + second_lo) * s_second), xs, A);
}

// After k-block kb's two products (c_first, c_second: the C values of lane g, q: token q's high and low sums of
// rows g and g + 8), adds each row's sums times the run's step xs into A (one per row).
__host__ __device__ inline void add_sums(const RowRegs& r0, const RowRegs& r1, int kb, const int (&c_first)[4],
                                         const int (&c_second)[4], float xs, float (&A)[2]) {
  const int p = 2 * (kb >> 2) + (kb & 1), hi = (kb >> 1) & 1;
  A[0] = row_sums(word_of(r0.sc, p), hi, c_first[0], c_first[1], c_second[0], c_second[1], xs, A[0]);
  A[1] = row_sums(word_of(r1.sc, p), hi, c_first[2], c_first[3], c_second[2], c_second[3], xs, A[1]);
}

// The block's d of a row, as a float.
__host__ __device__ inline float block_d(const RowRegs& r) {
#ifdef __CUDA_ARCH__
  return __half2float(__ushort_as_half(uint16_t(r.d & 0xffffu)));  // one conversion instruction
#else
  return quant::f16_to_f32(uint16_t(r.d & 0xffffu));
#endif
}

}  // namespace cuda::q6kx8_i8
