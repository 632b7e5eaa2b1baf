// The weight formats of the wide small-batch kernel (batch_mm_wide.cu): how a warp's lanes hold one super-block (256
// elements) of their rows in registers and unpack word j (0..7) of row i into half A fragments, and where the x
// values of a lane's words lie in the block's staged super-block of x (16-byte pieces P = 0..31 of 8 halves).
//
// A lane 4 g + t multiplies words 2 jj and 2 jj + 1 (jj = 0..3) of its rows against 8 consecutive halves of x, one
// 16-byte load at piece lo_piece(t) + jj for the low nibbles' two k-steps and one kHiHalves further for the high
// ones'. The stage stores piece P at P ^ lane_of(P) (within its aligned four): every lane_of(P) is the t whose loads
// read P, so a quarter warp's eight loads (two tokens, four t, the same jj) fall on distinct 16-byte bank groups
// (token columns are 64 bytes apart modulo 128).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/q4k_lane.cuh"
#include "cuda/kernels/q6kx8_lane.cuh"
#include "quant/types.h"

namespace cuda::wide_formats {

using q4k_lane::Word;

// Q4_K in the file's layout (q4k_lane.cuh): MT m-tiles a warp, rows 16 mt + g + 8 h at index 2 mt + h.
struct Q4k {
  static constexpr quant::Type kType = quant::Type::Q4_K;
  static constexpr int kMaxMt = 2;
  static constexpr int kHiHalves = 32;  // a word's high nibbles: the elements 32 further
  __host__ __device__ static constexpr int lo_piece(int t) { return 8 * t; }
  __host__ __device__ static constexpr int lane_of(int piece) { return (piece >> 3) & 3; }
  template <int MT>
  using Regs = q4k_lane::SbRegs<MT>;
  using Scales = q4k_lane::Scales;
  template <int MT>
  struct Cursor {  // from super-block sb0 on; load the current one, then advance
    const uint8_t* hrow[2 * MT];
    const uint8_t* qrow[2 * MT];
    __device__ Cursor(const uint8_t* const (&row)[2 * MT], int sb0, int t) {
#pragma unroll
      for (int i = 0; i < 2 * MT; ++i)
        hrow[i] = row[i] + size_t(sb0) * q4k_lane::kSbBytes, qrow[i] = hrow[i] + 16 + 32 * t;
    }
    __device__ void load(Regs<MT>& r) { q4k_lane::load_sb<MT>(r, hrow, qrow); }
    __device__ void advance() {
#pragma unroll
      for (int i = 0; i < 2 * MT; ++i) hrow[i] += q4k_lane::kSbBytes, qrow[i] += q4k_lane::kSbBytes;
    }
  };
  template <int MT>
  __device__ static Scales scales(const Regs<MT>& r, int i, bool upper, uint32_t sel) {
    return q4k_lane::group_scales(r.h[i], upper, sel);
  }
  template <int MT>
  __device__ static Word word(const Regs<MT>& r, const Scales& sc, int i, int j) {
    const uint4& q = r.q[i][j >> 2];
    return q4k_lane::unpack_word((j & 3) == 0 ? q.x : (j & 3) == 1 ? q.y : (j & 3) == 2 ? q.z : q.w, sc);
  }
};

// Q6_K regrouped at upload (Q6_Kx8, q6kx8_lane.cuh): one m-tile a warp. Lane t's words hold elements
// first_run_base(t) + 4 j + 0..3 (low nibbles) and 64 further (high).
struct Q6kx8 {
  static constexpr quant::Type kType = quant::Type::Q6_K;
  static constexpr int kMaxMt = 1;
  static constexpr int kHiHalves = 64;
  __host__ __device__ static constexpr int lo_piece(int t) { return q6kx8_lane::first_run_base(t) / 8; }
  __host__ __device__ static constexpr int lane_of(int piece) { return ((piece >> 2) & 1) | ((piece >> 3) & 2); }
  template <int MT>
  using Regs = q6kx8_lane::BlockRegs;
  using Scales = q6kx8_lane::RowScales;
  template <int MT>
  struct Cursor {
    const uint8_t* row[2];
    int sb, t;
    __device__ Cursor(const uint8_t* const (&r)[2 * MT], int sb0, int lane_t) : row{r[0], r[1]}, sb(sb0), t(lane_t) {
      static_assert(MT == 1, "Q6_Kx8: one m-tile a warp");
    }
    __device__ void load(Regs<MT>& r) { q6kx8_lane::load_block(r, row, sb, t); }
    __device__ void advance() { ++sb; }
  };
  template <int MT>
  __device__ static Scales scales(const Regs<MT>& r, int i, bool, uint32_t) {
    return q6kx8_lane::row_scales(r.sc[i], r.d[i]);
  }
  template <int MT>
  __device__ static Word word(const Regs<MT>& r, const Scales& sc, int i, int j) {
    return q6kx8_lane::block_word(r, sc, i, j);
  }
};

// Every piece a lane t reads (lo_piece(t) + jj, and kHiHalves / 8 further) has lane_of = t.
template <class F>
constexpr bool lanes_match() {
  for (int t = 0; t < 4; ++t)
    for (int jj = 0; jj < 4; ++jj)
      if (F::lane_of(F::lo_piece(t) + jj) != t || F::lane_of(F::lo_piece(t) + jj + F::kHiHalves / 8) != t ||
          (F::lo_piece(t) & 3) != 0)
        return false;
  return true;
}
static_assert(lanes_match<Q4k>() && lanes_match<Q6kx8>(), "the x stage's swizzle");

}  // namespace cuda::wide_formats
