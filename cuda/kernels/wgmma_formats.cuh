// The weight formats of the warpgroup (wgmma) products (batch_mm_wgmma.cu): how a lane holds its
// rows' part of a super-block (256 elements), unpacks word j (0..7) of it into A values (q4k_lane::Word), and which
// element of the super-block k-step s's position kk stands for (the order of the x images those kernels read).
// Included by the sm_90a kernels' files only.
#pragma once
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/q4k_lane.cuh"
#include "cuda/kernels/q6kx8_lane.cuh"
#include "quant/types.h"

namespace cuda::wgmma_formats {

using q4k_lane::Word;

struct Q4kFormat {
  static constexpr quant::Type kType = quant::Type::Q4_K;
  using Regs = q4k_lane::SbRegs<1>;
  struct Scales {
    q4k_lane::Scales s[2];
  };
  __host__ __device__ static constexpr int element(int s, int kk) {
    return 64 * ((kk & 7) >> 1) + 32 * ((s & 3) >> 1) + 4 * (2 * (s >> 2) + (s & 1)) + (kk & 1) + 2 * (kk >> 3);
  }
  struct Cursor {  // rows g, g + 8 from super-block sb0 on
    const uint8_t* hrow[2];
    const uint8_t* qrow[2];
    __device__ Cursor(const uint8_t* const (&row)[2], int sb0, int t) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
        hrow[i] = row[i] + size_t(sb0) * q4k_lane::kSbBytes, qrow[i] = hrow[i] + 16 + 32 * t;
    }
    __device__ void load(Regs& r) {  // the next super-block
      q4k_lane::load_sb<1>(r, hrow, qrow);
#pragma unroll
      for (int i = 0; i < 2; ++i) hrow[i] += q4k_lane::kSbBytes, qrow[i] += q4k_lane::kSbBytes;
    }
  };
  __device__ static Scales scales(const Regs& r, int t) {
    const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;
    return {{q4k_lane::group_scales(r.h[0], t >= 2, sel), q4k_lane::group_scales(r.h[1], t >= 2, sel)}};
  }
  __device__ static Word word(const Regs& r, const Scales& sc, int i, int j) {
    const uint4& q = r.q[i][j >> 2];
    return q4k_lane::unpack_word((j & 3) == 0 ? q.x : (j & 3) == 1 ? q.y : (j & 3) == 2 ? q.z : q.w, sc.s[i]);
  }
};

struct Q6kx8Format {
  static constexpr quant::Type kType = quant::Type::Q6_K;
  using Regs = q6kx8_lane::BlockRegs;
  struct Scales {
    q6kx8_lane::RowScales s[2];
  };
  __host__ __device__ static constexpr int element(int s, int kk) {
    return q6kx8_lane::first_run_base((kk & 7) >> 1) + 64 * ((s & 3) >> 1) + 4 * (2 * (s >> 2) + (s & 1)) +
           (kk & 1) + 2 * (kk >> 3);
  }
  struct Cursor {
    const uint8_t* row[2];
    int sb, t;
    __device__ Cursor(const uint8_t* const (&r)[2], int sb0, int lane_t) : row{r[0], r[1]}, sb(sb0), t(lane_t) {}
    __device__ void load(Regs& r) { q6kx8_lane::load_block(r, row, sb++, t); }
  };
  __device__ static Scales scales(const Regs& r, int) {
    return {{q6kx8_lane::row_scales(r.sc[0], r.d[0]), q6kx8_lane::row_scales(r.sc[1], r.d[1])}};
  }
  __device__ static Word word(const Regs& r, const Scales& sc, int i, int j) {
    return q6kx8_lane::block_word(r, sc.s[i], i, j);
  }
};

// Both formats' words put values 0 and 1 (2, 3) of a k-step's lane side by side: one float2 of x each.
static_assert(Q4kFormat::element(0, 8) == 2 && Q4kFormat::element(1, 0) == 4 && Q4kFormat::element(2, 0) == 32 &&
                  Q4kFormat::element(4, 0) == 8 && Q4kFormat::element(0, 2) == 64,
              "the lane mapping of q4k_lane.cuh");
static_assert(Q6kx8Format::element(2, 0) == 64 && Q6kx8Format::element(0, 2) == 32 &&
                  Q6kx8Format::element(0, 4) == 128 && Q6kx8Format::element(5, 9) == 12 + 1 + 2,
              "the lane mapping of q6kx8_lane.cuh");

// The A registers of group jj of a super-block (k-steps 4 jj .. 4 jj + 3: words 2 jj and 2 jj + 1 of the lane's two
// rows, low nibbles then high ones), b[k-step][register] in mma's A order (rows g: registers 0, 2; g + 8: 1, 3).
template <class F>
__device__ __forceinline__ void group_fragments(uint32_t (&b)[4][4], const typename F::Regs& r,
                                                const typename F::Scales& sc, int jj) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const Word w0 = F::word(r, sc, h, 2 * jj), w1 = F::word(r, sc, h, 2 * jj + 1);
    b[0][h] = w0.lo01, b[0][2 + h] = w0.lo23;
    b[1][h] = w1.lo01, b[1][2 + h] = w1.lo23;
    b[2][h] = w0.hi01, b[2][2 + h] = w0.hi23;
    b[3][h] = w1.hi01, b[3][2 + h] = w1.hi23;
  }
}

}  // namespace cuda::wgmma_formats
