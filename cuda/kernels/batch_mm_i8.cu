// Q4_K products of 2..8 tokens (regrouped Q6_K of 2..4) on s8 tensor cores (batch_mm_i8.cuh).
//
// Fragments (PTX ISA, mma.m16n8k32 with 8-bit operands; lane = 4 g + q). A's registers 0 and 2 hold row g at k
// positions 4 q .. 4 q + 3 and 16 + 4 q .. 16 + 4 q + 3, registers 1 and 3 row g + 8; B's register 0 holds column g
// at k 4 q .. 4 q + 3 and register 1 at 16 + 4 q ..; C's values 0, 1 are row g, columns 2 q, 2 q + 1, values 2, 3
// row g + 8. The 32 k positions of a product may stand for any 32 elements so long as A and B agree: here positions
// 4 q + j and 16 + 4 q + j stand for elements 8 q + j and 8 q + 4 + j of one Q4_K sub-block, so a lane's A registers
// are the two words of bytes 8 q .. 8 q + 7 of a qs group (low nibbles: sub-block 2 i of group i; high nibbles, shifted
// down: sub-block 2 i + 1), and its B registers are bytes 8 q .. 8 q + 7 of column g's 32 bytes in element order.
//
// Columns. Column 2 c holds token c's high bytes, column 2 c + 1 its low bytes, so a lane's C values 0 and 1 are
// token q's two integer sums for row g: 256 hi + lo, exact in int32 (|sum| < 2^24, times a 6-bit scale < 2^30).
//
// Sums. Per sub-block s, row and token: d sc_s x_s (256 C_hi + C_lo) - dmin m_s S_s, x_s the run's step and S_s its
// exact float sum; a super-block's terms are added in sub-block order, then d and dmin applied, then super-blocks in
// order along each warp's share of K, then the warps' shares in warp order: the same bits every run, whatever the grid.
//
// Regrouped Q6_K (Q6_Kx8, with BatchMmChoices::i8_q6x8): the same image and grid, a block of 256 in place of a
// super-block; its codes go into the products as c - 32, and each k-block takes two products of the same A with
// half of x's positions zeroed, one a scale (q6kx8_i8_lane.cuh says how); per block and row d sum_kb x_kb (sc_1 v_1
// + sc_2 v_2), blocks added in order.
//
// Grid. A block is one tile of 16 rows; its warps split K into equal runs of super-blocks (more warps where the tiles
// are few), each lane holding two super-blocks in flight (two register sets in turn: its rows' next two). Two tiles
// a block, each warp's loads of x serving both, lost (sessions 57 and 59, docs/kernel-notes.md).
//
// 5..8 tokens (Q4_K): two groups of 4 tokens, each group the 8 columns of its own products with the same A
// registers; the image holds the groups one after another in each pair of k-blocks. A super-block's scales and
// nibbles are unpacked once for both groups, and x is loaded a group and a pair of sub-blocks at a time.
#include "cuda/kernels/batch_mm_i8.cuh"

#include <type_traits>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/glu_epilogue.cuh"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/q4k_lane.cuh"
#include "cuda/kernels/q6kx8_i8_lane.cuh"
#include "cuda/kernels/swiglu.cuh"

namespace cuda {
namespace {

constexpr int kSbBytes = q4k_lane::kSbBytes;  // a Q4_K super-block: d, dmin, 12 bytes of scales, 128 of codes
constexpr int kSbElems = q4k_lane::kSbElems;
constexpr int kMaxWarps = 8;  // 16 (one super-block a warp on q/k and o): -1.7% at B = 3 / 4 (session 43)
constexpr int kTileRows = 16;
constexpr int kTokens = 4;  // the 8 columns of one product (a group): a high and a low byte a token
constexpr int kMaxGroups = int(kBatchMmI8MaxTokens) / kTokens;  // groups of 4 tokens a launch: 1 or 2
constexpr float kSteps = 32639.0f;  // |v| <= 32639 splits into hi, lo in [-128, 127] (v = 256 hi + lo)
constexpr uint32_t kNibbles = 0x0F0F0F0Fu;
static_assert(kMaxGroups * kTokens == kBatchMmI8MaxTokens, "whole groups");

// The image of a launch of G groups (T rounded up to 4 tokens a group): pair of k-blocks kp (64 elements), group gi,
// lane l: 16 bytes, k-block 2 kp then 2 kp + 1, each the 8 bytes B register pair of lane l for the group's tokens;
// then, at a fixed offset (the codes of kMaxGroups), the runs' steps [kBatchMmI8MaxTokens][K / 32] and exact sums,
// as floats.
__host__ __device__ size_t codes_bytes(int64_t K) { return size_t(K) * 8 * kMaxGroups; }
__host__ __device__ size_t runs_floats(int64_t K) { return size_t(kBatchMmI8MaxTokens) * size_t(K / 32); }

// Four threads a run (token, k-block), thread q taking elements 8 q .. 8 q + 7: the run's largest magnitude and sum
// across the four (sums in one fixed order), each value as int16 steps split into bytes, and thread q writes its own
// 8 bytes of the high and of the low column (lane q of the B pieces). Tokens past T are zeros. One thread a run (32
// values, ~300 dependent instructions) took 3.6 us a launch at 4 tokens.
// gate (BatchMmParams::x_gate): x is the SwiGLU silu(gate) * up of the up products at `x`, formed as the element-wise
// launch it replaces forms it (swiglu.cuh's silu, then the product), so the image holds the same bytes.
// link.norm_w (I8NormLink, reader side): x is the Add's sum, normalised here with the scale every block finds from
// the producer's per-tile sums of squares (its kImageThreads threads are 16 runs of one token: K % 512 == 0).
constexpr int kImageThreads = 64;
__global__ void __launch_bounds__(kImageThreads)
    i8_image_kernel(const float* x, const float* gate, int64_t K, int T, int groups, uint8_t* __restrict__ image,
                    I8NormLink link) {
  pdl_launch_dependents();
  const int nkb = int(K / 32);
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  const int run = i >> 2, q = i & 3;
  float scale = 1.0f;
  if (link.norm_w) {  // every thread of the block, before any leaves: the sums in one fixed order
    __shared__ float red[kImageThreads / 32];
    const int bt = int(blockIdx.x) * (kImageThreads / 4) / nkb;  // the block's token
    pdl_wait();
    float ss = 0.0f;
    if (bt < T)
      for (int k = int(threadIdx.x); k < link.parts; k += kImageThreads) ss += link.sumsq_in[bt * link.parts + k];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = ss;
    __syncthreads();
    scale = rsqrtf((red[0] + red[1]) / float(K) + link.eps);
  }
  if (run >= kTokens * groups * nkb) return;  // whole groups of four leave together (blockDim a multiple of 4)
  const int tt = run / nkb, kb = run - tt * nkb;
  float v[8];
  pdl_wait();
  if (tt < T) {
    const float4* src = reinterpret_cast<const float4*>(x + int64_t(tt) * K + int64_t(kb) * 32 + 8 * q);
    const float4 a = src[0], b = src[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    if (gate) {
      const float4* gs = reinterpret_cast<const float4*>(gate + int64_t(tt) * K + int64_t(kb) * 32 + 8 * q);
      const float4 ga = gs[0], gb = gs[1];
      const float g[8] = {ga.x, ga.y, ga.z, ga.w, gb.x, gb.y, gb.z, gb.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = silu(g[j]) * v[j];
    }
    if (link.norm_w) {  // as the norm launch: (x scale) w
      const float4* ws = reinterpret_cast<const float4*>(link.norm_w + int64_t(kb) * 32 + 8 * q);
      const float4 wa = ws[0], wb = ws[1];
      const float w[8] = {wa.x, wa.y, wa.z, wa.w, wb.x, wb.y, wb.z, wb.w};
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = v[j] * scale * w[j];
    }
  } else {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = 0.0f;
  }
  float m = 0.0f, S = 0.0f;
#pragma unroll
  for (int j = 0; j < 8; ++j) m = fmaxf(m, fabsf(v[j])), S += v[j];
  const unsigned quad = 0xFu << (threadIdx.x & 28);
  m = fmaxf(m, __shfl_xor_sync(quad, m, 1)), m = fmaxf(m, __shfl_xor_sync(quad, m, 2));
  S += __shfl_xor_sync(quad, S, 1);  // (s0 + s1) + (s2 + s3) on every thread of the four
  S += __shfl_xor_sync(quad, S, 2);
  const float inv = m > 0.0f ? kSteps / m : 0.0f;
  uint32_t hw[2], lw[2];
#pragma unroll
  for (int w = 0; w < 2; ++w) {
    hw[w] = lw[w] = 0;
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int c = __float2int_rn(v[4 * w + b] * inv), h = (c + 128) >> 8, l = c - 256 * h;
      hw[w] |= (uint32_t(h) & 0xffu) << (8 * b), lw[w] |= (uint32_t(l) & 0xffu) << (8 * b);
    }
  }
  // Lane 4 col + q of k-block pair kb / 2 and group tt / 4, half kb & 1 (8-byte pieces): columns 2 (tt % 4) (high)
  // and 2 (tt % 4) + 1 (low).
  uint2* codes = reinterpret_cast<uint2*>(image) + ((int64_t(kb / 2) * groups + tt / kTokens) * 32 + q) * 2 + (kb & 1);
  codes[16 * (tt % kTokens)] = make_uint2(hw[0], hw[1]);
  codes[16 * (tt % kTokens) + 8] = make_uint2(lw[0], lw[1]);
  if (q == 0) {
    float* runs = reinterpret_cast<float*>(image + codes_bytes(K));
    runs[tt * nkb + kb] = m * (1.0f / kSteps);
    runs[runs_floats(K) + size_t(tt * nkb + kb)] = S;
  }
}

// D = A B for one 16 x 8 x 32 tile of signed bytes, int32 sums.
__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

__device__ __forceinline__ float component(const float4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// A lane's share of one super-block of its rows g, g + 8: the headers and bytes 8 q .. 8 q + 7 of each qs group.
struct SbRegs {
  uint4 h[2];
  uint2 c[2][4];
};
__device__ __forceinline__ void load_sb(SbRegs& s, const uint8_t* const (&row)[2], int sb, int q) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const uint8_t* b = row[r] + size_t(sb) * kSbBytes;
    s.h[r] = mv::ldg_w(reinterpret_cast<const uint4*>(b));
#pragma unroll
    for (int i = 0; i < 4; ++i) s.c[r][i] = mv::ldg_w(reinterpret_cast<const uint2*>(b + 16 + 32 * i + 8 * q));
  }
}

// A lane's share of one super-block of x: its B registers (k-blocks 8 sb .. 8 sb + 7) and its token's steps and
// sums of the 8 runs.
struct XRegs {
  uint4 b[4];
  float4 step[2], sum[2];
};
__device__ __forceinline__ void load_x(XRegs& x, const uint4* codes, const float* steps, const float* sums, int nkb,
                                       int sb, int lane) {
#pragma unroll
  for (int i = 0; i < 4; ++i) x.b[i] = codes[(size_t(sb) * 4 + i) * 32 + lane];
  const size_t at = size_t(lane & 3) * nkb + size_t(sb) * 8;
  x.step[0] = *reinterpret_cast<const float4*>(steps + at);
  x.step[1] = *reinterpret_cast<const float4*>(steps + at + 4);
  x.sum[0] = *reinterpret_cast<const float4*>(sums + at);
  x.sum[1] = *reinterpret_cast<const float4*>(sums + at + 4);
}

// Where a launch of G groups finds x (G > 1): the image's B registers, a group after another in each pair of
// k-blocks, and the runs' steps and sums of every token.
struct XSource {
  const uint4* codes;
  const float* steps;
  const float* sums;
  int nkb;
  // Lane `lane`'s B registers for k-blocks 2 kp, 2 kp + 1 of group gi, and the steps / sums of its token's runs
  // kb, kb + 1 (kb even).
  template <int G>
  __device__ uint4 b(int kp, int gi, int lane) const {
    return codes[(size_t(kp) * G + gi) * 32 + lane];
  }
  __device__ size_t run(int gi, int lane, int kb) const { return size_t(kTokens * gi + (lane & 3)) * nkb + kb; }
};

// Byte j (compile-time after unrolling) of w as a float (mv16::byte_float).
__device__ __forceinline__ float byte_float(uint32_t w, int j) {
  switch (j) {
    case 0: return mv16::byte_float<0>(w);
    case 1: return mv16::byte_float<1>(w);
    case 2: return mv16::byte_float<2>(w);
    default: return mv16::byte_float<3>(w);
  }
}

// A super-block's headers as a lane's two rows use them: the packed scales and mins of sub-blocks 0..3 and 4..7,
// and d, dmin.
struct SbHeader {
  q4k_lane::PackedScales ps[2][2];  // [row][sub-blocks 0..3, 4..7]
  float d[2], dmin[2];
};
__device__ __forceinline__ SbHeader sb_header(const SbRegs& w) {
  SbHeader h;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    h.ps[r][0] = q4k_lane::packed_scales(w.h[r], false), h.ps[r][1] = q4k_lane::packed_scales(w.h[r], true);
    h.d[r] = mv::h2f(w.h[r].x & 0xffffu), h.dmin[r] = mv::h2f(w.h[r].x >> 16);
  }
  return h;
}

// Qs group i's codes as the A registers of its two sub-blocks: lo (sub-block 2 i) and hi (2 i + 1).
__device__ __forceinline__ void group_codes(const SbRegs& w, int i, uint32_t (&lo)[4], uint32_t (&hi)[4]) {
  const uint2* c0 = &w.c[0][i];
  const uint2* c1 = &w.c[1][i];
  lo[0] = c0->x & kNibbles, lo[1] = c1->x & kNibbles, lo[2] = c0->y & kNibbles, lo[3] = c1->y & kNibbles;
  hi[0] = (c0->x >> 4) & kNibbles, hi[1] = (c1->x >> 4) & kNibbles, hi[2] = (c0->y >> 4) & kNibbles,
  hi[3] = (c1->y >> 4) & kNibbles;
}

// Sub-block s's product c (token q's high and low sums of rows g, g + 8) into A and its min term into M: the
// integer sums times the scale, one conversion, one fma with the run's step; the min with the run's exact sum.
__device__ __forceinline__ void add_sub_block(const SbHeader& h, int s, const int (&c)[4], float xstep, float xsum,
                                              float (&A)[2], float (&M)[2]) {
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const q4k_lane::PackedScales& p = h.ps[r][s >> 2];
    const int scale = int(__byte_perm(p.sc, 0, 0x4440 + (s & 3)));
    A[r] = fmaf(float((c[2 * r] * 256 + c[2 * r + 1]) * scale), xstep, A[r]);
    M[r] = fmaf(byte_float(p.mn, s & 3), xsum, M[r]);
  }
}

// One super-block's products for the lane's rows (g, g + 8) and token q, added into acc.
__device__ __forceinline__ void sb_products(const SbRegs& w, const XRegs& x, float (&acc)[2]) {
  const SbHeader h = sb_header(w);
  float A[2] = {0.0f, 0.0f}, M[2] = {0.0f, 0.0f};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t lo[4], hi[4];
    group_codes(w, i, lo, hi);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * i + half;  // the sub-block
      int c[4];
      if (half == 0) mma_s8(c, lo, x.b[i].x, x.b[i].y);
      else mma_s8(c, hi, x.b[i].z, x.b[i].w);
      add_sub_block(h, s, c, component(x.step[s >> 2], s & 3), component(x.sum[s >> 2], s & 3), A, M);
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) acc[r] = fmaf(h.d[r], A[r], fmaf(-h.dmin[r], M[r], acc[r]));
}

// The same for G groups of 4 tokens (acc[gi]: group gi's token q): the scales unpacked and the codes masked once for
// all groups, x loaded a group and a pair of sub-blocks at a time; each group's sums in the order of sb_products,
// so a token's outputs have the same bits whatever the launch's groups.
template <int G>
__device__ __forceinline__ void sb_products_groups(const SbRegs& w, const XSource& xs, int sb, int lane,
                                                   float (&acc)[G][2]) {
  const SbHeader h = sb_header(w);
  float A[G][2] = {}, M[G][2] = {};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    uint32_t lo[4], hi[4];
    group_codes(w, i, lo, hi);
#pragma unroll
    for (int gi = 0; gi < G; ++gi) {
      const uint4 b = xs.b<G>(sb * 4 + i, gi, lane);
      const size_t at = xs.run(gi, lane, sb * 8 + 2 * i);
      const float2 st = *reinterpret_cast<const float2*>(xs.steps + at);
      const float2 su = *reinterpret_cast<const float2*>(xs.sums + at);
      int c[4];
      mma_s8(c, lo, b.x, b.y);
      add_sub_block(h, 2 * i, c, st.x, su.x, A[gi], M[gi]);
      mma_s8(c, hi, b.z, b.w);
      add_sub_block(h, 2 * i + 1, c, st.y, su.y, A[gi], M[gi]);
    }
  }
#pragma unroll
  for (int gi = 0; gi < G; ++gi)
#pragma unroll
    for (int r = 0; r < 2; ++r) acc[gi][r] = fmaf(h.d[r], A[gi][r], fmaf(-h.dmin[r], M[gi][r], acc[gi][r]));
}

// What the kernel needs of a weight format: a lane's registers for one 256-element block of its two rows, their
// loads, and their products with the same block of x (XRegs; Q4_K also for two groups, XSource), added into acc.
struct Q4kWeights {
  using Regs = SbRegs;
  __device__ static void load(Regs& s, const uint8_t* const (&row)[2], int sb, int q) { load_sb(s, row, sb, q); }
  __device__ static void products(const Regs& w, const XRegs& x, int, float (&acc)[2]) { sb_products(w, x, acc); }
  template <int G>
  __device__ static void products(const Regs& w, const XSource& xs, int sb, int lane, float (&acc)[G][2]) {
    sb_products_groups<G>(w, xs, sb, lane, acc);
  }
};

struct Q6x8Weights {
  struct Regs {
    q6kx8_i8::RowRegs r[2];
  };
  __device__ static void load(Regs& s, const uint8_t* const (&row)[2], int sb, int q) {
    using namespace q6kx8_i8;
    const int b = sb & 7;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint8_t* run = run_of(row[i], sb);
#pragma unroll
      for (int p = 0; p < 4; ++p) {
        s.r[i].ql[p] = mv::ldg_w(reinterpret_cast<const uint2*>(run + ql_offset(b, p, q)));
        s.r[i].qh[p] = mv::ldg_w(reinterpret_cast<const uint32_t*>(run + qh_offset(b, p, q)));
      }
      s.r[i].sc = mv::ldg_w(reinterpret_cast<const uint4*>(run + scales_offset(b)));
      s.r[i].d = mv::ldg_w(reinterpret_cast<const uint16_t*>(run + d_offset(b)));
    }
  }
  __device__ static void products(const Regs& w, const XRegs& x, int q, float (&acc)[2]) {
    float A[2] = {0.0f, 0.0f};
#pragma unroll
    for (int kb = 0; kb < 8; ++kb) {
      uint32_t a[4], first[2], second[2];
      q6kx8_i8::a_fragment(w.r[0], w.r[1], kb, a);
      const uint4& xb = x.b[kb >> 1];
      q6kx8_i8::b_halves(q, (kb & 1) ? xb.z : xb.x, (kb & 1) ? xb.w : xb.y, first, second);
      int c_first[4], c_second[4];
      mma_s8(c_first, a, first[0], first[1]);
      mma_s8(c_second, a, second[0], second[1]);
      q6kx8_i8::add_sums(w.r[0], w.r[1], kb, c_first, c_second, component(x.step[kb >> 2], kb & 3), A);
    }
#pragma unroll
    for (int r = 0; r < 2; ++r) acc[r] = fmaf(q6kx8_i8::block_d(w.r[r]), A[r], acc[r]);
  }
};

// One tile's rows as a lane sees them: its two rows' bytes (rows past N read the last one and are not stored) and
// where the tile's outputs go.
struct TileRows {
  const uint8_t* row[2];
  const float* bias;
  float* y;
  int64_t N, r0;  // the tile's matrix's rows, and the tile's first row in it
};
template <bool kStack>
__device__ __forceinline__ TileRows tile_rows(const BatchMmParams& p, const ProductStack& stack, int64_t first,
                                              uint32_t rb, int g) {
  TileRows t;
  const uint8_t* wm;
  if constexpr (kStack) {  // a tile never holds rows of two matrices (check_product_stack)
    const StackedMatrix m = stacked_matrix(stack, first);
    wm = static_cast<const uint8_t*>(m.w), t.bias = m.bias, t.y = m.y, t.N = m.N, t.r0 = first - m.row0;
  } else {
    wm = static_cast<const uint8_t*>(p.w), t.bias = p.bias, t.y = p.y, t.N = p.N, t.r0 = first;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t n = t.r0 + g + 8 * r;
    t.row[r] = wm + (n < t.N ? n : t.N - 1) * int64_t(rb);
  }
  return t;
}

// Block b: tile b (16 rows) of the launch (a stack's numbering); warp w: super-blocks [w spw, (w + 1) spw) of it.
// W in two super-blocks' registers in turn (w0 the even steps, w1 the odd): each is loaded again as soon as its
// products are formed, so two super-blocks are in flight while a warp waits. The form before (multiply cur, then
// cur = nxt) waited for the next super-block at the copy, one in flight. x (from L2) at the top of each super-block:
// prefetching it too took 170 registers a thread instead of 84 and measured slower (session 43).
// kGroups = 2 (5..8 tokens): each super-block's products taken for both groups of 4 tokens (x from XSource, a pair
// of sub-blocks at a time).
template <class W, bool kStack, int kGroups>
__global__ void __launch_bounds__(kMaxWarps * 32) i8_product_kernel(BatchMmParams p, const uint8_t* image, uint32_t rb,
                                                                  int spw, GluEpilogue glu, ProductStack stack,
                                                                  I8NormLink link) {
  __shared__ float part[kMaxWarps][kGroups][2][32];
  __shared__ float squares[kGroups][2][32];  // link.sumsq_out: each output's square, zero where there is none
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, n_warps = int(blockDim.x) >> 5;
  const int q = lane & 3, g = lane >> 2;
  const TileRows tile = tile_rows<kStack>(p, stack, int64_t(blockIdx.x) * kTileRows, rb, g);
  const int n_sb = int(p.K / kSbElems), nkb = int(p.K / 32);
  const int sb0 = warp * spw, sb1 = sb0 + spw < n_sb ? sb0 + spw : n_sb;
  float acc[kGroups][2] = {};  // [token group][row g, g + 8]
  typename W::Regs w0, w1;
  pdl_launch_dependents();
  const uint4* codes = reinterpret_cast<const uint4*>(image);
  const float* steps = reinterpret_cast<const float*>(image + codes_bytes(p.K));
  const float* sums = steps + runs_floats(p.K);
  // One super-block's products into acc: one group's x whole in registers, or two groups' from XSource.
  auto multiply = [&](const typename W::Regs& w, int sb) {
    if constexpr (kGroups > 1) {
      W::template products<kGroups>(w, XSource{codes, steps, sums, nkb}, sb, lane, acc);
    } else {
      XRegs x;
      load_x(x, codes, steps, sums, nkb, sb, lane);
      W::products(w, x, q, acc[0]);
    }
  };
  const auto& row = tile.row;
  if (sb0 < sb1) W::load(w0, row, sb0, q);  // weights before the wait, overlapping the image launch
  if (sb0 + 1 < sb1) W::load(w1, row, sb0 + 1, q);
  pdl_wait();
  for (int sb = sb0; sb < sb1; sb += 2) {
    multiply(w0, sb);
    if (sb + 2 < sb1) W::load(w0, row, sb + 2, q);
    if (sb + 1 >= sb1) break;
    multiply(w1, sb + 1);
    if (sb + 3 < sb1) W::load(w1, row, sb + 3, q);
  }
#pragma unroll
  for (int gi = 0; gi < kGroups; ++gi) part[warp][gi][0][lane] = acc[gi][0], part[warp][gi][1][lane] = acc[gi][1];
  __syncthreads();
  for (int i = int(threadIdx.x); i < kGroups * 2 * 32; i += int(blockDim.x)) {
    const int gi = i >> 6, r = (i >> 5) & 1, l = i & 31;
    const int64_t n = tile.r0 + (l >> 2) + 8 * r;
    const int t = kTokens * gi + (l & 3);
    squares[gi][r][l] = 0.0f;
    if (n >= tile.N || t >= p.T) continue;
    float v = 0.0f;
    for (int w = 0; w < n_warps; ++w) v += part[w][gi][r][l];
    if (tile.bias) v += tile.bias[n];
    const int64_t at = int64_t(t) * tile.N + n;
    if (kStack) {
      tile.y[at] = v;
    } else {
      if (link.residual) v += link.residual[at];  // each element read and written by this thread alone
      tile.y[at] = glu_finish(glu, v, at);
      squares[gi][r][l] = v * v;
    }
  }
  if (!kStack && link.sumsq_out) {  // each tile's rows in order, per token
    __syncthreads();
    const int64_t n_tiles = (p.N + kTileRows - 1) / kTileRows;
    if (threadIdx.x < kGroups * kTokens) {  // the launch's token columns, T rounded up to a group
      const int gi = int(threadIdx.x) / kTokens, tq = int(threadIdx.x) % kTokens;
      float ss = 0.0f;
#pragma unroll
      for (int r = 0; r < 2; ++r)
#pragma unroll
        for (int g8 = 0; g8 < 8; ++g8) ss += squares[gi][r][4 * g8 + tq];
      // One block a tile (launch_batch_mm_i8's grid): block b's sums are tile b's.
      link.sumsq_out[int64_t(kTokens * gi + tq) * n_tiles + blockIdx.x] = ss;
    }
  }
}

}  // namespace

bool batch_mm_i8_serves(quant::Type type, bool regrouped, int64_t T, bool q6_kx8) {
  const bool format = regrouped ? q6_kx8 && type == quant::Type::Q6_K : type == quant::Type::Q4_K;
  return format && T >= 2 && T <= (regrouped ? kBatchMmI8Q6x8MaxTokens : kBatchMmI8MaxTokens);
}

bool batch_mm_i8_norm_fits(int64_t K) { return K > 0 && (K / 32) % (kImageThreads / 4) == 0 && K % 32 == 0; }

size_t batch_mm_i8_sumsq_floats(int64_t N) {
  return size_t(kBatchMmI8MaxTokens) * size_t((N + kTileRows - 1) / kTileRows);
}

size_t batch_mm_i8_scratch(int64_t K) { return (codes_bytes(K) + 2 * runs_floats(K) * 4 + 255) & ~size_t(255); }

void launch_batch_mm_i8(const BatchMmParams& p, void* image, const GluEpilogue& glu, const ProductStack* stack,
                        cudaStream_t stream, bool programmatic, const I8NormLink& link, int warps_per_sm) {
  LLM_REQUIRE(batch_mm_i8_serves(p.type, p.regrouped, p.T, true) && p.K % kSbElems == 0 &&
                  (!p.regrouped || p.K % 2048 == 0),
              "i8 small-batch product: not served");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(image) & 15) == 0 && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0,
              "i8 small-batch product: x and its image must be 16-byte aligned");
  auto* img = static_cast<uint8_t*>(image);
  const int groups = int((p.T + kTokens - 1) / kTokens);  // 1 or 2
  const int64_t threads = 4 * kTokens * groups * (p.K / 32);  // four a run
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.x_gate) & 15) == 0, "i8 small-batch product: x_gate 16-byte aligned");
  LLM_REQUIRE(!link.norm_w || (link.sumsq_in && link.parts > 0 && batch_mm_i8_norm_fits(p.K) &&
                               (reinterpret_cast<uintptr_t>(link.norm_w) & 15) == 0),
              "i8 small-batch product: a norm in the image needs the sums, K % 512 == 0 and an aligned weight");
  LLM_REQUIRE(!(link.residual || link.sumsq_out) || (!stack && !glu.gate),
              "i8 small-batch product: a residual or sums of squares only on a plain launch");
  launch_programmatic(programmatic, i8_image_kernel, dim3(unsigned((threads + kImageThreads - 1) / kImageThreads)),
                      dim3(kImageThreads), 0, stream, p.x, p.x_gate, p.K, int(p.T), groups, img, link);
  // Warps a tile: enough for ~warps_per_sm warps an SM over the grid, in equal runs of super-blocks. 32 was chosen
  // at 84 registers (12 and 24 with x prefetched: no faster, session 43). At 128 registers (W's two buffers) an SM
  // holds 16, and 8 (the default) measured best (session 56, H100, B = 3 / 4 against 32: +5.4 / +5.3%; 16 +3.5 /
  // +2.9%, 12 +3.7 / +3.9%, 10 +4.7 / +4.6%, 6 -0.9 / -1.1%, 4 -4.3 / -4.2%): an 8B's gate|up gets 1 warp a tile
  // (16 super-blocks each), q|k 4, o and down 8; 6 gives o and down 4 as well.
  LLM_REQUIRE(warps_per_sm > 0, "i8 small-batch product: warps_per_sm must be positive");
  const int64_t blocks = (p.N + kTileRows - 1) / kTileRows;  // one tile a block
  const int n_sb = int(p.K / kSbElems);
  const int64_t want = int64_t(current_device_sm_count()) * warps_per_sm;
  int warps = 1;
  while (warps < kMaxWarps && warps < n_sb && blocks * warps < want) warps *= 2;
  const int spw = (n_sb + warps - 1) / warps;
  warps = (n_sb + spw - 1) / spw;
  LLM_REQUIRE(blocks <= 0x7fffffff, "small-batch product: too many rows");
  const uint32_t rb = uint32_t(quant::row_bytes(p.type, p.K));
  const dim3 grid{unsigned(blocks)}, block{unsigned(32 * warps)};
  const auto* x_image = static_cast<const uint8_t*>(img);
  auto launch = [&](auto weights, auto groups_c) {
    using W = decltype(weights);
    constexpr int kGroups = decltype(groups_c)::value;
    if (stack)
      launch_programmatic(programmatic, i8_product_kernel<W, true, kGroups>, grid, block, 0, stream, p, x_image, rb,
                          spw, GluEpilogue{}, *stack, I8NormLink{});
    else
      launch_programmatic(programmatic, i8_product_kernel<W, false, kGroups>, grid, block, 0, stream, p, x_image, rb,
                          spw, glu, ProductStack{}, link);
  };
  using One = ::std::integral_constant<int, 1>;
  using Two = ::std::integral_constant<int, 2>;
  if (p.regrouped) launch(Q6x8Weights{}, One{});
  else if (groups == 2) launch(Q4kWeights{}, Two{});
  else launch(Q4kWeights{}, One{});
}

}  // namespace cuda
