// Q4_K products of 2..4 tokens on s8 tensor cores (batch_mm_i8.cuh).
//
// Fragments (PTX ISA, mma.m16n8k32 with 8-bit operands; lane = 4 g + q). A's registers 0 and 2 hold row g at k
// positions 4 q .. 4 q + 3 and 16 + 4 q .. 16 + 4 q + 3, registers 1 and 3 row g + 8; B's register 0 holds column g
// at k 4 q .. 4 q + 3 and register 1 at 16 + 4 q ..; C's values 0, 1 are row g, columns 2 q, 2 q + 1, values 2, 3
// row g + 8. The 32 k positions of a product may stand for any 32 elements so long as A and B agree: here positions
// 4 q + j and 16 + 4 q + j stand for elements 8 q + j and 8 q + 4 + j of one Q4_K sub-block, so a lane's A registers
// are the two words of bytes 8 q .. 8 q + 7 of a qs group (low nibbles: sub-block 2 i of group i; high nibbles, shifted
// down: sub-block 2 i + 1), and its B registers are bytes 8 q .. 8 q + 7 of column g's 32 bytes in element order.
//
// Columns. Column 2 c of column tile ct holds token 4 ct + c's high bytes, column 2 c + 1 its low bytes, so a lane's
// C values 0 and 1 are token 4 ct + q's two integer sums for row g: 256 hi + lo, exact in int32 (|sum| < 2^24,
// times a 6-bit scale < 2^30).
//
// Sums. Per sub-block s, row and token: d sc_s x_s (256 C_hi + C_lo) - dmin m_s S_s, x_s the run's step and S_s its
// exact float sum; a super-block's terms are added in sub-block order, then d and dmin applied, then super-blocks in
// order along each warp's share of K, then the warps' shares in warp order: the same bits every run, whatever the grid.
//
// Grid. A block is one tile of 16 rows; its warps split K into equal runs of super-blocks (more warps where the
// tiles are few), each lane loading its rows' next super-block before it multiplies the current one.
#include "cuda/kernels/batch_mm_i8.cuh"

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/glu_epilogue.cuh"
#include "cuda/kernels/matvec_units.cuh"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

constexpr int kSbBytes = 144;  // a Q4_K super-block: d, dmin, 12 bytes of scales, 128 of codes
constexpr int kSbElems = 256;
constexpr int kMaxWarps = 8;  // 16 (one super-block a warp on q/k and o): -1.7% at B = 3 / 4 (session 43)
constexpr int kWarpsPerSm = 32;  // 12 and 24 with x prefetched: no faster (session 43)
constexpr int kTileRows = 16;
constexpr float kSteps = 32639.0f;  // |v| <= 32639 splits into hi, lo in [-128, 127] (v = 256 hi + lo)
constexpr uint32_t kNibbles = 0x0F0F0F0Fu;

// The image: column tile ct, pair of k-blocks kp (64 elements), lane l: 16 bytes, k-block 2 kp then 2 kp + 1, each
// the 8 bytes B register pair of lane l; then the runs' steps [4 NT tokens][K / 32] and exact sums, as floats.
__host__ __device__ size_t codes_bytes(int64_t K, int nt) { return size_t(nt) * size_t(K) * 8; }
__host__ __device__ size_t runs_floats(int64_t K, int nt) { return size_t(4 * nt) * size_t(K / 32); }

// Four threads a run (token, k-block), thread q taking elements 8 q .. 8 q + 7: the run's largest magnitude and sum
// across the four (sums in one fixed order), each value as int16 steps split into bytes, and thread q writes its own
// 8 bytes of the high and of the low column (lane q of the B pieces). Tokens past T (up to the column tiles' 4 NT)
// are zeros. One thread a run (32 values, ~300 dependent instructions) took 3.6 us a launch at 4 tokens.
__global__ void i8_image_kernel(const float* x, int64_t K, int T, int nt, uint8_t* __restrict__ image) {
  pdl_launch_dependents();
  const int nkb = int(K / 32);
  const int i = int(blockIdx.x) * int(blockDim.x) + int(threadIdx.x);
  const int run = i >> 2, q = i & 3;
  if (run >= 4 * nt * nkb) return;  // whole groups of four leave together (blockDim a multiple of 4)
  const int tt = run / nkb, kb = run - tt * nkb;
  float v[8];
  pdl_wait();
  if (tt < T) {
    const float4* src = reinterpret_cast<const float4*>(x + int64_t(tt) * K + int64_t(kb) * 32 + 8 * q);
    const float4 a = src[0], b = src[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
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
  const int ct = tt >> 2, col = 2 * (tt & 3);
  uint2* codes = reinterpret_cast<uint2*>(image);
  const int64_t pair = int64_t(ct) * (nkb / 2) + kb / 2;
  codes[((pair * 32) + 4 * col + q) * 2 + (kb & 1)] = make_uint2(hw[0], hw[1]);
  codes[((pair * 32) + 4 * (col + 1) + q) * 2 + (kb & 1)] = make_uint2(lw[0], lw[1]);
  if (q == 0) {
    float* runs = reinterpret_cast<float*>(image + codes_bytes(K, nt));
    runs[tt * nkb + kb] = m * (1.0f / kSteps);
    runs[runs_floats(K, nt) + size_t(tt * nkb + kb)] = S;
  }
}

// D = A B for one 16 x 8 x 32 tile of signed bytes, int32 sums.
__device__ __forceinline__ void mma_s8(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
      : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// Byte B of w (0..255) as a float, by the exponent trick (no quarter-rate conversion).
template <int B>
__device__ __forceinline__ float byte_float(uint32_t w) {
  return __uint_as_float(__byte_perm(w, 0x4b000000u, 0x7440u + B)) - 8388608.0f;
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
// sums of the 8 runs, for each column tile.
template <int NT>
struct XRegs {
  uint4 b[NT][4];
  float4 step[NT][2], sum[NT][2];
};
template <int NT>
__device__ __forceinline__ void load_x(XRegs<NT>& x, const uint4* codes, const float* steps, const float* sums,
                                       int nkb, int sb, int lane) {
#pragma unroll
  for (int ct = 0; ct < NT; ++ct) {
#pragma unroll
    for (int i = 0; i < 4; ++i) x.b[ct][i] = codes[(size_t(ct) * (nkb / 2) + size_t(sb) * 4 + i) * 32 + lane];
    const size_t at = size_t(4 * ct + (lane & 3)) * nkb + size_t(sb) * 8;
    x.step[ct][0] = *reinterpret_cast<const float4*>(steps + at);
    x.step[ct][1] = *reinterpret_cast<const float4*>(steps + at + 4);
    x.sum[ct][0] = *reinterpret_cast<const float4*>(sums + at);
    x.sum[ct][1] = *reinterpret_cast<const float4*>(sums + at + 4);
  }
}

// One super-block's products for the lane's rows (g, g + 8) and tokens (4 ct + q), added into acc.
template <int NT>
__device__ __forceinline__ void sb_products(const SbRegs& w, const XRegs<NT>& x, float (&acc)[2][NT]) {
  const auto& b = x.b;
  const auto& step = x.step;
  const auto& sum = x.sum;
  uint32_t sc[2][2], mn[2][2];
  float d[2], dmin[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {  // GGUF's 6-bit packing: sub-blocks 0..3 in bytes 4..11, 4..7 split
    const uint4 h = w.h[r];
    sc[r][0] = h.y & 0x3F3F3F3Fu, sc[r][1] = (h.w & kNibbles) | ((h.y >> 2) & 0x30303030u);
    mn[r][0] = h.z & 0x3F3F3F3Fu, mn[r][1] = ((h.w >> 4) & kNibbles) | ((h.z >> 2) & 0x30303030u);
    d[r] = mv::h2f(h.x & 0xffffu), dmin[r] = mv::h2f(h.x >> 16);
  }
  float A[2][NT], M[2][NT];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int ct = 0; ct < NT; ++ct) A[r][ct] = M[r][ct] = 0.0f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const uint32_t lo[4] = {w.c[0][i].x & kNibbles, w.c[1][i].x & kNibbles, w.c[0][i].y & kNibbles,
                            w.c[1][i].y & kNibbles};
    const uint32_t hi[4] = {(w.c[0][i].x >> 4) & kNibbles, (w.c[1][i].x >> 4) & kNibbles,
                            (w.c[0][i].y >> 4) & kNibbles, (w.c[1][i].y >> 4) & kNibbles};
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * i + half;  // the sub-block
#pragma unroll
      for (int ct = 0; ct < NT; ++ct) {
        int c[4];
        if (half == 0) mma_s8(c, lo, b[ct][i].x, b[ct][i].y);
        else mma_s8(c, hi, b[ct][i].z, b[ct][i].w);
        const float xs = component(step[ct][s >> 2], s & 3), xS = component(sum[ct][s >> 2], s & 3);
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int scale = int(__byte_perm(sc[r][s >> 2], 0, 0x4440 + (s & 3)));
          float mf;
          switch (s & 3) {
            case 0: mf = byte_float<0>(mn[r][s >> 2]); break;
            case 1: mf = byte_float<1>(mn[r][s >> 2]); break;
            case 2: mf = byte_float<2>(mn[r][s >> 2]); break;
            default: mf = byte_float<3>(mn[r][s >> 2]); break;
          }
          A[r][ct] = fmaf(float((c[2 * r] * 256 + c[2 * r + 1]) * scale), xs, A[r][ct]);
          M[r][ct] = fmaf(mf, xS, M[r][ct]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int ct = 0; ct < NT; ++ct) acc[r][ct] = fmaf(d[r], A[r][ct], fmaf(-dmin[r], M[r][ct], acc[r][ct]));
}

// Block b: rows 16 b .. 16 b + 15 of the launch (a stack's numbering); warp w: super-blocks [w spw, (w + 1) spw).
template <int NT, bool kStack>
__global__ void __launch_bounds__(kMaxWarps * 32)
    i8_q4k_kernel(BatchMmParams p, const uint8_t* image, uint32_t rb, int spw, GluEpilogue glu, ProductStack stack) {
  __shared__ float part[kMaxWarps][2 * NT][32];
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, n_warps = int(blockDim.x) >> 5;
  const int q = lane & 3, g = lane >> 2;
  const int64_t first = int64_t(blockIdx.x) * kTileRows;
  const uint8_t* wm;
  const float* bias;
  float* y;
  int64_t N, r0;
  if constexpr (kStack) {  // a tile never holds rows of two matrices (check_product_stack)
    const StackedMatrix m = stacked_matrix(stack, first);
    wm = static_cast<const uint8_t*>(m.w), bias = m.bias, y = m.y, N = m.N, r0 = first - m.row0;
  } else {
    wm = static_cast<const uint8_t*>(p.w), bias = p.bias, y = p.y, N = p.N, r0 = first;
  }
  const uint8_t* row[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {  // rows past N read the last one and are not stored
    const int64_t n = r0 + g + 8 * r;
    row[r] = wm + (n < N ? n : N - 1) * int64_t(rb);
  }
  const int n_sb = int(p.K / kSbElems), nkb = int(p.K / 32);
  const int sb0 = warp * spw, sb1 = sb0 + spw < n_sb ? sb0 + spw : n_sb;
  float acc[2][NT];
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int ct = 0; ct < NT; ++ct) acc[r][ct] = 0.0f;
  // W of the next super-block loaded before the current one is multiplied; x (from L2, ~1/5 of W's bytes) at the
  // top of each super-block: prefetching it too took 170 registers a thread instead of 84 and measured slower
  // (docs/kernel-notes.md, session 43).
  SbRegs cur, nxt;
  pdl_launch_dependents();
  if (sb0 < sb1) load_sb(cur, row, sb0, q);  // weights before the wait, overlapping the image launch
  pdl_wait();
  const uint4* codes = reinterpret_cast<const uint4*>(image);
  const float* steps = reinterpret_cast<const float*>(image + codes_bytes(p.K, NT));
  const float* sums = steps + runs_floats(p.K, NT);
  for (int sb = sb0; sb < sb1; ++sb) {
    if (sb + 1 < sb1) load_sb(nxt, row, sb + 1, q);
    XRegs<NT> x;
    load_x(x, codes, steps, sums, nkb, sb, lane);
    sb_products<NT>(cur, x, acc);
    cur = nxt;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r)
#pragma unroll
    for (int ct = 0; ct < NT; ++ct) part[warp][r * NT + ct][lane] = acc[r][ct];
  __syncthreads();
  for (int i = int(threadIdx.x); i < 2 * NT * 32; i += int(blockDim.x)) {
    const int rc = i >> 5, l = i & 31, r = rc / NT, ct = rc - r * NT;
    const int64_t n = r0 + (l >> 2) + 8 * r;
    const int t = 4 * ct + (l & 3);
    if (n >= N || t >= p.T) continue;
    float v = 0.0f;
    for (int w = 0; w < n_warps; ++w) v += part[w][rc][l];
    if (bias) v += bias[n];
    const int64_t at = int64_t(t) * N + n;
    y[at] = kStack ? v : glu_finish(glu, v, at);
  }
}

template <int NT>
void launch_product(const BatchMmParams& p, const uint8_t* image, const GluEpilogue& glu, const ProductStack* stack,
                    cudaStream_t stream, bool programmatic) {
  const int64_t tiles = (p.N + kTileRows - 1) / kTileRows;
  const int n_sb = int(p.K / kSbElems);
  // Warps a tile: enough for ~kWarpsPerSm warps an SM over the grid, in equal runs of super-blocks.
  const int64_t want = int64_t(current_device_sm_count()) * kWarpsPerSm;
  int warps = 1;
  while (warps < kMaxWarps && warps < n_sb && tiles * warps < want) warps *= 2;
  const int spw = (n_sb + warps - 1) / warps;
  warps = (n_sb + spw - 1) / spw;
  LLM_REQUIRE(tiles <= 0x7fffffff, "small-batch product: too many rows");
  const uint32_t rb = uint32_t(quant::row_bytes(p.type, p.K));
  if (stack)
    launch_programmatic(programmatic, i8_q4k_kernel<NT, true>, dim3(unsigned(tiles)), dim3(unsigned(32 * warps)), 0,
                        stream, p, image, rb, spw, GluEpilogue{}, *stack);
  else
    launch_programmatic(programmatic, i8_q4k_kernel<NT, false>, dim3(unsigned(tiles)), dim3(unsigned(32 * warps)), 0,
                        stream, p, image, rb, spw, glu, ProductStack{});
}

}  // namespace

bool batch_mm_i8_serves(quant::Type type, bool regrouped, int64_t T) {
  return type == quant::Type::Q4_K && !regrouped && T >= 2 && T <= kBatchMmI8MaxTokens;
}

size_t batch_mm_i8_scratch(int64_t K) {
  constexpr int kNt = int(kBatchMmI8MaxTokens / 4);
  return (codes_bytes(K, kNt) + 2 * runs_floats(K, kNt) * 4 + 255) & ~size_t(255);
}

void launch_batch_mm_i8(const BatchMmParams& p, void* image, const GluEpilogue& glu, const ProductStack* stack,
                        cudaStream_t stream, bool programmatic) {
  LLM_REQUIRE(batch_mm_i8_serves(p.type, p.regrouped, p.T) && p.K % kSbElems == 0,
              "i8 small-batch product: not served");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(image) & 15) == 0 && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0,
              "i8 small-batch product: x and its image must be 16-byte aligned");
  const int nt = int((p.T + 3) / 4);
  const int64_t threads = 4 * 4 * nt * (p.K / 32);  // four a run
  auto* img = static_cast<uint8_t*>(image);
  launch_programmatic(programmatic, i8_image_kernel, dim3(unsigned((threads + 63) / 64)), dim3(64), 0, stream, p.x,
                      p.K, int(p.T), nt, img);
  static_assert(kBatchMmI8MaxTokens == 4, "one column tile");
  launch_product<1>(p, img, glu, stack, stream, programmatic);
}

}  // namespace cuda
