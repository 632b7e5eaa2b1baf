// Q4_K super-blocks unpacked by a warp's lanes straight into tensor-core A fragments, with no trip through shared
// memory (batch_mm_wide.cu on mma.sync, batch_mm_wgmma.cu on wgmma: both take a warp's A fragment in the same
// layout). Lane 4 g + t loads, for its rows g and g + 8, a super-block's 16-byte header and the 32 code bytes of qs
// group t, and unpacks them into the A values of the k-steps below.
//
// Fragments. An mma's 16 k positions may stand for any 16 elements of x so long as A and B agree. A lane's values
// are all from its group t: the k-step of word j (bytes 4 j .. 4 j + 3 of each lane's group) and the low nibbles
// takes, at positions 2 t, 2 t + 1, 2 t + 8, 2 t + 9, elements 64 t + 4 j + 0, 1, 2, 3; the high nibbles' step the
// elements 32 further. So a lane needs the scales of its group's two sub-blocks only (2 t, 2 t + 1).
//
// Unpacking, 14 instructions a word of 8 codes: two byte permutes put bytes (0, 1) and (2, 3) in the low bytes of
// two half pairs whose high bytes are 0x74; keeping the low nibble and clearing bit 4 of 0x74 leaves 0x64 | q, the
// half 1024 + q; keeping the high nibble and clearing bit 5 leaves 0x54 | q << 4, the half 64 + q. One exact
// subtraction each and one fused multiply-add, q s - m (m the sub-block's min times dmin) rounded once, in half as
// the other small-batch kernels hold W.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/matvec_units.cuh"

namespace cuda::q4k_lane {

inline constexpr int kSbBytes = 144;  // a Q4_K super-block
inline constexpr int kSbElems = 256;

__device__ __forceinline__ __half2 as_h2(uint32_t u) { return *reinterpret_cast<const __half2*>(&u); }
__device__ __forceinline__ uint32_t as_u32(__half2 h) { return *reinterpret_cast<const uint32_t*>(&h); }

// The lane's two sub-blocks (2 t, 2 t + 1) of one row's super-block, as half pairs: scales s = d sc and
// nm = -dmin m.
struct Scales {
  __half2 s, nm;
};
// h: the super-block's header (d and dmin, then the 12 bytes of 6-bit scales and mins); upper: sub-blocks 4..7
// (t >= 2), whose values are split between bytes 8..11 and the top bits of bytes 0..7; sel: the byte pair of the
// lane's sub-blocks, spread into two halves with high byte 0x64 (1024 + value). (1024 + v) f - 1024 f = v f rounded
// once: 1024 f is exact.
// The 6-bit scales and mins of sub-blocks 0..3 (upper: 4..7) of a super-block's header, one byte each (GGUF's
// packing: 0..3 in bytes 4..11, 4..7 split between bytes 12..15 and the top bits of 4..11).
struct PackedScales {
  uint32_t sc, mn;
};
__device__ __forceinline__ PackedScales packed_scales(const uint4& h, bool upper) {
  return {upper ? (h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u) : h.y & 0x3F3F3F3Fu,
          upper ? ((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u) : h.z & 0x3F3F3F3Fu};
}

__device__ __forceinline__ Scales group_scales(const uint4& h, bool upper, uint32_t sel) {
  const auto [sc, mn] = packed_scales(h, upper);
  const __half2 d = as_h2(__byte_perm(h.x, 0, 0x1010)), dm = as_h2(__byte_perm(h.x, 0, 0x3232));
  const __half2 k1024 = __float2half2_rn(1024.0f);
  return {__hfma2(as_h2(__byte_perm(sc, 0x64646464u, sel)), d, __hmul2(d, __hneg2(k1024))),
          __hfma2(as_h2(__byte_perm(mn, 0x64646464u, sel)), __hneg2(dm), __hmul2(dm, k1024))};
}

// One word of a row's codes (bytes 4 j .. 4 j + 3 of the lane's group) as A values: the low nibbles' pairs (bytes
// 0, 1) and (2, 3), then the high nibbles'. The codes come out of the masks as 1024 + q (low) and 64 + q (high):
// subtracting those is exact, so a weight is q s - m rounded once, as the other small-batch kernels compute it.
struct Word {
  uint32_t lo01, lo23, hi01, hi23;
};
__device__ __forceinline__ uint32_t weight_pair(uint32_t bits, __half2 offset, __half2 s, __half2 nm) {
  return as_u32(__hfma2(__hadd2(as_h2(bits), offset), s, nm));
}
__device__ __forceinline__ Word unpack_word(uint32_t w, const Scales& sc) {
  const uint32_t p01 = __byte_perm(w, 0x74747474u, 0x4140), p23 = __byte_perm(w, 0x74747474u, 0x4342);
  const __half2 slo = __low2half2(sc.s), mlo = __low2half2(sc.nm), shi = __high2half2(sc.s), mhi = __high2half2(sc.nm);
  const __half2 olo = __float2half2_rn(-1024.0f), ohi = __float2half2_rn(-64.0f);
  return {weight_pair(p01 & 0xEF0FEF0Fu, olo, slo, mlo), weight_pair(p23 & 0xEF0FEF0Fu, olo, slo, mlo),
          weight_pair(p01 & 0xDFF0DFF0u, ohi, shi, mhi), weight_pair(p23 & 0xDFF0DFF0u, ohi, shi, mhi)};
}

// A lane's share of one super-block: rows g, g + 8 of each m-tile (index 2 mt + h), header and qs group t.
template <int MT>
struct SbRegs {
  uint4 h[2 * MT];
  uint4 q[2 * MT][2];
};
// hrow[i]: row i's super-block; qrow[i]: its qs group t (hrow[i] + 16 + 32 t).
template <int MT>
__device__ __forceinline__ void load_sb(SbRegs<MT>& r, const uint8_t* const (&hrow)[2 * MT],
                                        const uint8_t* const (&qrow)[2 * MT]) {
#pragma unroll
  for (int i = 0; i < 2 * MT; ++i) {
    r.h[i] = mv::ldg_w(reinterpret_cast<const uint4*>(hrow[i]));
    r.q[i][0] = mv::ldg_w(reinterpret_cast<const uint4*>(qrow[i]));
    r.q[i][1] = mv::ldg_w(reinterpret_cast<const uint4*>(qrow[i] + 16));
  }
}

}  // namespace cuda::q4k_lane
