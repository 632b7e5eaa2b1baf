// Small-batch products on tensor cores. A block of 4 warps owns R rows of W and up to 32 tokens, and walks K in
// slices through a ring of 3 shared-memory stages: each stage holds a slice of every row's raw quant blocks and of
// X (already half, converted once per launch), copied by cp.async two slices ahead. Each slice the threads unpack the
// raw blocks straight to half pairs (unpack_half.cuh: ~2 instructions an element, no int-to-float conversion) into a
// half tile, and warps multiply with mma.m16n8k16 (W rows as A, tokens as B, float32 accumulators in registers).
//
// W is read from memory once for all tokens. Every slice of X is read from L2 by N / R blocks, so R grows with T
// (X's L2 traffic is 3.6 T / R times W's for Q4_K): R = 16 rows for T <= 8, 32 above. More than 16 tokens go in
// token tiles of 32 whose blocks of one row tile are launched next to each other, so the second reads the rows from
// L2 (a wider token tile would leave no room for three stages of X). Matrices of few blocks split K. Every partial
// sum (warps' k groups, K splits) is added in a fixed order: the same bits every run. Measurements and history:
// docs/kernel-notes.md, "Small-batch products".
#include "cuda/kernels/batch_mm.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/unpack_half.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnitsPerThread = 2;  // 32-element units of W a thread unpacks per slice
constexpr int kStages = 3;          // slice s being multiplied, s + 1 landing, s + 2 being issued
constexpr int kMaxTileTokens = 32;

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

template <int R, int NT>
struct Tile {
  static constexpr int kRowGroups = R / 16;                           // warps along rows
  static constexpr int kKGroups = kWarps / kRowGroups;                // warps along k
  static constexpr int kSlice = kThreads * kUnitsPerThread * 32 / R;  // 512 for R = 16, 256 for 32
  static constexpr int kWarpK = kSlice / kKGroups;
  static constexpr int kLd = kSlice + 8;  // halves a shared row: 16 more bytes make ldmatrix and B loads conflict-free
  static constexpr int kCols = NT * 8;    // tokens, padded to whole mma n-tiles
  static constexpr int kUnitsPerRow = kSlice / 32;
  static_assert(kSlice % 256 == 0 && kWarpK % 16 == 0, "slices of whole super-blocks; whole mma k-steps a warp");
};

// How a row's slice of raw blocks is staged. File layouts: the 16-byte pieces around the slice's bytes, landing at
// the same address modulo 16 as in memory (so the unpackers' aligned loads stay aligned), plus 16 bytes of slack for
// their one word read past a block. Q6_Kx8 (q6_kx8.cuh): the slice's nb blocks' parts, each a whole number of
// aligned pieces: ql [0, 128 nb), high bits [128 nb, 192 nb), scales [192 nb, 208 nb), and the 16 bytes of the run
// holding the d's at 208 nb.
template <quant::Type Q, bool kX8, int kSlice>
struct Raw {
  using L = quant::dev::Layout<Q>;
  static constexpr int kBlocks = kSlice / L::kBlockElems;  // per row and slice
  static constexpr int kBytes = kBlocks * L::kBlockBytes;
  static constexpr int kX8Blocks = kSlice / 256;
  static constexpr int kPieces = kX8 ? 13 * kX8Blocks + 1 : (kBytes + 15 + 15) / 16;
  // An odd number of 16-byte pieces a row (at least one past the copies, for the unpackers' word read past a
  // block): 8 rows read at one offset fall on 8 distinct groups of 4 banks.
  static constexpr int kLd = 16 * ((kPieces + 1) | 1);
};

// Which kernel a format takes: the fragment kernel unpacks the raw blocks straight into mma operands (Q4_K and the
// regrouped Q6_K, the formats of a Q4_K_M model's matrices); the others go through a half tile in shared memory.
template <quant::Type Q, bool kX8>
inline constexpr bool kFragments = Q == quant::Type::Q4_K || kX8;

// Halves a row of X takes in a stage: 8 past the slice for the tile kernel's 32-bit B loads (rows 4 banks apart),
// 16 for the fragment kernel's 64-bit ones (8 banks apart).
template <quant::Type Q, bool kX8, int kSlice>
inline constexpr int kXLd = kSlice + (kFragments<Q, kX8> ? 16 : 8);

// The fragment kernel's per-slice scales: for every row and 32-element sub-block (Q4_K) or unit (Q6_Kx8) of the
// slice, two f16x2 words (Q4_K: d sc and -dmin m; Q6_Kx8: d sc of the unit's two runs), rows 2 entries apart past
// their last (8 rows read at one offset fall on distinct banks).
template <int kSlice>
inline constexpr int kScaleLd = kSlice / 32 + 2;  // 8-byte entries a row

template <quant::Type Q, bool kX8, int R, int NT>
constexpr size_t stage_bytes() {
  using Tl = Tile<R, NT>;
  return size_t(R) * Raw<Q, kX8, Tl::kSlice>::kLd + size_t(Tl::kCols) * kXLd<Q, kX8, Tl::kSlice> * 2;
}

template <quant::Type Q, bool kX8, int R, int NT>
constexpr size_t smem_bytes() {
  using Tl = Tile<R, NT>;
  const size_t tail = kFragments<Q, kX8> ? size_t(R) * kScaleLd<Tl::kSlice> * 8 : size_t(R) * Tl::kLd * 2;
  return kStages * stage_bytes<Q, kX8, R, NT>() + tail;
}

// Split K over gridDim.y (matrices of few blocks, so every SM has some): split y takes slices
// [y * per_split, (y + 1) * per_split) and writes partial sums to part; no split: part is null.
struct Split {
  int64_t per_split;  // slices a split takes
  float* part;        // [splits][T][N] or null
};

// Y for the block's R rows and tokens t0..: accumulator c of n-tile nt is row 16 wr + g + 8 (c >> 1), token
// t0 + 8 nt + 2 tg + (c & 1). With k groups their partial sums go through `red` ([kWarps][16][NT * 8] floats, the
// tiles' dead memory after the last barrier) and are added in group order: the same bits every run.
template <int R, int NT, int KG>
__device__ __forceinline__ void store_tile(const BatchMmParams& p, const Split& sp, const float (&acc)[NT][4],
                                           float* red, int64_t n0, int64_t t0, int warp, int wr, int g, int tg,
                                           int tid) {
  constexpr int kCols = NT * 8, kRowGroups = R / 16;
  // Split K: this split's partial sums into its own [T][N] slab, added (with the bias) by split_sum_kernel.
  float* y = sp.part ? sp.part + int64_t(blockIdx.y) * p.N * p.T : p.y;
  const float* bias = sp.part ? nullptr : p.bias;
  if constexpr (KG == 1) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t n = n0 + wr * 16 + g + 8 * (c >> 1);
        const int64_t t = t0 + nt * 8 + 2 * tg + (c & 1);
        if (n < p.N && t < p.T) y[t * p.N + n] = acc[nt][c] + (bias ? bias[n] : 0.0f);
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[(warp * 16 + g + 8 * (c >> 1)) * kCols + nt * 8 + 2 * tg + (c & 1)] = acc[nt][c];
    __syncthreads();
    for (int i = tid; i < R * kCols; i += kThreads) {
      const int r = i % R, tl = i / R;  // consecutive threads on consecutive rows: coalesced stores of y
      const int64_t n = n0 + r, t = t0 + tl;
      if (n >= p.N || t >= p.T) continue;
      float s = bias ? bias[n] : 0.0f;
#pragma unroll
      for (int k = 0; k < KG; ++k) s += red[((k * kRowGroups + r / 16) * 16 + r % 16) * kCols + tl];
      y[t * p.N + n] = s;
    }
  }
}

// What a thread copies into a stage every slice, worked out once per block: raw piece j is piece q of row r's staged
// slice (null row: none), X piece j is 8 elements of token t0 + tl (null: a token past T, zero-filled). issue(sl)
// copies slice sl's pieces into its stage and commits one group (maybe empty: the waits count the same every slice).
// Elements past K are zero in X; the raw bytes past a row's last block are not copied.
template <quant::Type Q, bool kX8, int R, int NT>
struct Stager {
  using Tl = Tile<R, NT>;
  using Rw = Raw<Q, kX8, Tl::kSlice>;
  using L = typename Rw::L;
  static constexpr int kXLd = ::cuda::kXLd<Q, kX8, Tl::kSlice>;
  static constexpr int kStageBytes = int(stage_bytes<Q, kX8, R, NT>());
  static constexpr int kWPieces = (R * Rw::kPieces + kThreads - 1) / kThreads;
  static constexpr int kVecs = Tl::kSlice / 8;  // 16-byte pieces of a token's slice of X
  static constexpr int kXPieces = Tl::kCols * kVecs / kThreads;
  static_assert(Tl::kCols * kVecs % kThreads == 0, "X pieces spread evenly");

  const uint8_t* w_row[kWPieces];
  int w_q[kWPieces], w_dst[kWPieces];
  const __half* x_src[kXPieces];
  int x_k[kXPieces];

  __device__ __forceinline__ Stager(const BatchMmParams& p, const uint8_t* w, size_t row_bytes, const __half* xh,
                                    int64_t n0, int64_t t0, int tid) {
#pragma unroll
    for (int j = 0; j < kWPieces; ++j) {
      const int i = tid + j * kThreads, r = i / Rw::kPieces;
      w_q[j] = i % Rw::kPieces;
      w_row[j] = i < R * Rw::kPieces ? w + ::std::min<int64_t>(n0 + r, p.N - 1) * row_bytes : nullptr;
      w_dst[j] = r * Rw::kLd + 16 * w_q[j];
    }
#pragma unroll
    for (int j = 0; j < kXPieces; ++j) {
      const int i = tid + j * kThreads, tl = i / kVecs;
      x_k[j] = 8 * (i % kVecs);
      x_src[j] = t0 + tl < p.T ? xh + (t0 + tl) * p.K + x_k[j] : nullptr;
    }
  }

  __device__ __forceinline__ void issue(const BatchMmParams& p, const uint8_t* w_end, const __half* xh, uint8_t* dyn,
                                        int64_t sl, int64_t sl_end, int tid) const {
    if (sl < sl_end) {
      const int64_t k0 = sl * Tl::kSlice;
      uint8_t* raw = dyn + (sl % kStages) * kStageBytes;
      const int64_t blocks = ::std::min<int64_t>(Rw::kBlocks, (p.K - k0) / L::kBlockElems);
#pragma unroll
      for (int j = 0; j < kWPieces; ++j) {
        if (!w_row[j]) continue;
        if constexpr (kX8) {
          // Piece q of the slice's nb blocks: ql, high bits, scales (each nb whole pieces), then the run's d's.
          constexpr int nb = Rw::kX8Blocks;
          const int q = w_q[j], b0 = int(k0 % 2048) / 256;
          const int src = q < 8 * nb    ? 128 * b0 + 16 * q
                          : q < 12 * nb ? 1024 + 64 * b0 + 16 * (q - 8 * nb)
                          : q < 13 * nb ? 1536 + 16 * b0 + 16 * (q - 12 * nb)
                                        : 1664;
          cp_async16(raw + w_dst[j], w_row[j] + kQ6_Kx8Run * (k0 / 2048) + src);
        } else {
          const uint8_t* start = w_row[j] + sl * Rw::kBytes;
          const int lead = int(reinterpret_cast<uintptr_t>(start) & 15);
          if (16 * w_q[j] >= lead + blocks * L::kBlockBytes) continue;  // past this row's slice
          const uint8_t* src = start - lead + 16 * w_q[j];
          const int64_t left = w_end - src;
          cp_async16_zfill(raw + w_dst[j], src, int(left >= 16 ? 16 : left));
        }
      }
      uint16_t* xs = reinterpret_cast<uint16_t*>(raw + R * Rw::kLd);  // [kCols][kXLd]
#pragma unroll
      for (int j = 0; j < kXPieces; ++j) {
        const int i = tid + j * kThreads;
        const bool in = x_src[j] && k0 + x_k[j] < p.K;  // K % 32 == 0: a piece is wholly inside or outside the row
        cp_async16_zfill(xs + (i / kVecs) * kXLd + x_k[j], in ? x_src[j] + k0 : xh, in ? 16 : 0);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
};

// The half-tile kernel (Q4_0, Q8_0, Q6_K in the file's layout): each slice every thread unpacks two 32-element units
// into the half tile ws, then warps multiply it (ldmatrix) with X.
template <quant::Type Q, bool kX8, int R, int NT>
__global__ void __launch_bounds__(kThreads) batch_mm_tile_kernel(BatchMmParams p, const __half* xh, size_t row_bytes,
                                                                 int n_token_tiles, Split sp) {
  using Tl = Tile<R, NT>;
  using St = Stager<Q, kX8, R, NT>;
  using Rw = typename St::Rw;
  using L = typename Rw::L;
  static_assert(R * Tl::kUnitsPerRow == kThreads * kUnitsPerThread, "every thread unpacks kUnitsPerThread units");
  extern __shared__ __align__(16) uint8_t dyn[];
  uint16_t* ws = reinterpret_cast<uint16_t*>(dyn + size_t(kStages) * St::kStageBytes);  // [R][kLd]: W's slice, half
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wr = warp % Tl::kRowGroups, wk = warp / Tl::kRowGroups;
  const int g = lane >> 2, tg = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x / n_token_tiles) * R;
  const int64_t t0 = int64_t(blockIdx.x % n_token_tiles) * Tl::kCols;
  const int64_t sl0 = int64_t(blockIdx.y) * sp.per_split;
  const int64_t sl_end = ::std::min<int64_t>((p.K + Tl::kSlice - 1) / Tl::kSlice, sl0 + sp.per_split);
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const uint8_t* w_end = w + size_t(p.N) * row_bytes;
  const St stager(p, w, row_bytes, xh, n0, t0, tid);

  // The units this thread unpacks: unit u of row r, rows fastest, so that the 8 lanes of a 16-byte store phase
  // write 8 rows (4 banks apart: conflict-free) and read 8 staged rows. u_lead: the row's address modulo 16, where
  // its staged slices start.
  int u_r[kUnitsPerThread], u_u[kUnitsPerThread], u_lead[kUnitsPerThread];
#pragma unroll
  for (int j = 0; j < kUnitsPerThread; ++j) {
    const int i = tid + j * kThreads;
    u_r[j] = i % R, u_u[j] = i / R;
    u_lead[j] = int(reinterpret_cast<uintptr_t>(w + ::std::min<int64_t>(n0 + u_r[j], p.N - 1) * row_bytes) & 15);
  }

  float acc[NT][4] = {};
  for (int st = 0; st < kStages - 1; ++st) stager.issue(p, w_end, xh, dyn, sl0 + st, sl_end, tid);
  for (int64_t sl = sl0; sl < sl_end; ++sl) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // slice sl landed everywhere; every warp is done with slice sl - 1 (ws and its stage)
    stager.issue(p, w_end, xh, dyn, sl + kStages - 1, sl_end, tid);
    const int64_t k0 = sl * Tl::kSlice;
    const uint8_t* raw = dyn + (sl % kStages) * St::kStageBytes;
    const uint16_t* xs = reinterpret_cast<const uint16_t*>(raw + R * Rw::kLd);
    const bool partial = k0 + Tl::kSlice > p.K;  // the last slice of a row not a whole number of slices
#pragma unroll
    for (int j = 0; j < kUnitsPerThread; ++j) {
      const int r = u_r[j], u = u_u[j];
      const uint8_t* srow = raw + r * Rw::kLd + ((u_lead[j] + sl * Rw::kBytes) & 15);
      uint32_t h[16];
      if constexpr (Q == quant::Type::Q6_K) unpack_half::q6_k(srow + L::kBlockBytes * (u >> 3), u & 7, h);
      else if constexpr (Q == quant::Type::Q8_0) unpack_half::q8_0(srow + L::kBlockBytes * u, h);
      else unpack_half::q4_0(srow + L::kBlockBytes * u, h);
      // Units past K were never copied: zero.
      if (partial && k0 + (L::kBlockElems == 256 ? 256 * (u >> 3) : 32 * u) >= p.K) {
#pragma unroll
        for (int e = 0; e < 16; ++e) h[e] = 0;
      }
      uint4* dst = reinterpret_cast<uint4*>(ws + r * Tl::kLd + 32 * u);
#pragma unroll
      for (int q = 0; q < 4; ++q) dst[q] = make_uint4(h[4 * q], h[4 * q + 1], h[4 * q + 2], h[4 * q + 3]);
    }
    __syncthreads();  // the half tile is written
    const uint16_t* wa = ws + (wr * 16 + (lane & 15)) * Tl::kLd + wk * Tl::kWarpK + 8 * (lane >> 4);
    const uint16_t* xb = xs + g * St::kXLd + wk * Tl::kWarpK + 2 * tg;
#pragma unroll
    for (int kk = 0; kk < Tl::kWarpK; kk += 16) {
      uint32_t a[4];
      mma::ldmatrix_x4(wa + kk, a);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint16_t* b = xb + nt * 8 * St::kXLd + kk;
        mma::m16n8k16(acc[nt], a, *reinterpret_cast<const uint32_t*>(b), *reinterpret_cast<const uint32_t*>(b + 8));
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are dead: store_tile reuses their memory
  store_tile<R, NT, Tl::kKGroups>(p, sp, acc, reinterpret_cast<float*>(dyn), n0, t0, warp, wr, g, tg, tid);
}

// The fragment kernel (Q4_K, Q6_Kx8): no half tile. A warp's rows are 16 of the block's, g and g + 8 a thread's; an
// mma's 16 k positions may stand for any 16 elements so long as A and B agree, and here thread tg's four (2 tg,
// 2 tg + 1, 2 tg + 8, 2 tg + 9) stand for elements 4 tg .. 4 tg + 3 of a run of 16: one 32-bit word of a row's
// staged codes gives a thread its A halves (two codes a half pair, unpack_half's exponent trick), and one 64-bit
// load its B pair from X. Each slice the threads first decode every row's sub-block scales into `scales` (one f16x2
// pair per 32 elements, zero past K so that stale bytes there multiply to 0), then the warps unpack and multiply.
// Q4_K: a 32-byte group of a block holds sub-block 2 gi (low nibbles) and 2 gi + 1 (high), element l in byte l; a
// word of 4 bytes is 4 elements of each. Q6_Kx8: a unit's 16 ql bytes and 16 high-bit nibbles are its two runs of
// 16 (64 elements apart); a ql word and a 16-bit word of nibbles are 4 elements of each.
template <quant::Type Q, bool kX8, int R, int NT>
__global__ void __launch_bounds__(kThreads) batch_mm_frag_kernel(BatchMmParams p, const __half* xh, size_t row_bytes,
                                                                 int n_token_tiles, Split sp) {
  using Tl = Tile<R, NT>;
  using St = Stager<Q, kX8, R, NT>;
  using Rw = typename St::Rw;
  constexpr int kSubs = Tl::kSlice / 32;  // scale entries a row and slice
  constexpr int kSLd = kScaleLd<Tl::kSlice>;
  static_assert(R * kSubs == kThreads * 2 && Tl::kWarpK == 128, "two scale entries a thread; a warp takes 128 of K");
  extern __shared__ __align__(16) uint8_t dyn[];
  uint2* scales = reinterpret_cast<uint2*>(dyn + size_t(kStages) * St::kStageBytes);  // [R][kSLd]
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wr = warp % Tl::kRowGroups, wk = warp / Tl::kRowGroups;
  const int g = lane >> 2, tg = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x / n_token_tiles) * R;
  const int64_t t0 = int64_t(blockIdx.x % n_token_tiles) * Tl::kCols;
  const int64_t sl0 = int64_t(blockIdx.y) * sp.per_split;
  const int64_t sl_end = ::std::min<int64_t>((p.K + Tl::kSlice - 1) / Tl::kSlice, sl0 + sp.per_split);
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const uint8_t* w_end = w + size_t(p.N) * row_bytes;
  const St stager(p, w, row_bytes, xh, n0, t0, tid);

  float acc[NT][4] = {};
  for (int st = 0; st < kStages - 1; ++st) stager.issue(p, w_end, xh, dyn, sl0 + st, sl_end, tid);
  for (int64_t sl = sl0; sl < sl_end; ++sl) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // slice sl landed everywhere; every warp is done with slice sl - 1 (scales and its stage)
    stager.issue(p, w_end, xh, dyn, sl + kStages - 1, sl_end, tid);
    const int64_t k0 = sl * Tl::kSlice;
    const uint8_t* raw = dyn + (sl % kStages) * St::kStageBytes;
    const uint16_t* xs = reinterpret_cast<const uint16_t*>(raw + R * Rw::kLd);
    const int b0x8 = int(k0 % 2048) / 256;  // the slice's first block within its Q6_Kx8 run
    // Scale entries e = tid, tid + 128: row e % R, sub-block or unit e / R.
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int e = tid + j * kThreads, r = e % R, c = e / R;
      const uint8_t* row = raw + r * Rw::kLd;
      uint2 v = make_uint2(0u, 0u);
      if constexpr (kX8) {
        constexpr int nb = Rw::kX8Blocks;
        const int b = c >> 3, i = c & 7;
        const float d = quant::dev::h2f(quant::dev::load_u16(row + 208 * nb + 2 * ((b0x8 + b) & 7)));
        const int8_t* sc = reinterpret_cast<const int8_t*>(row + 192 * nb + 16 * b + 2 * i);
        v = make_uint2(unpack_half::splat(d * float(sc[0])), unpack_half::splat(d * float(sc[1])));
      } else {
        const uint8_t* blk = row + 144 * (c >> 3);
        if (k0 + 32 * c < p.K) {
          int sc, m;
          quant::dev::scale_min_k4(c & 7, blk + 4, sc, m);
          v = make_uint2(unpack_half::splat(quant::dev::h2f(quant::dev::load_u16(blk)) * float(sc)),
                         unpack_half::splat(-(quant::dev::h2f(quant::dev::load_u16(blk + 2)) * float(m))));
        }
      }
      scales[r * kSLd + c] = v;
    }
    __syncthreads();  // the scales are written
    const int r0 = wr * 16 + g;  // this thread's rows: r0 and r0 + 8
    const uint8_t* raw0 = raw + r0 * Rw::kLd;
    const uint8_t* raw8 = raw0 + 8 * Rw::kLd;
    const uint2* sc0 = scales + r0 * kSLd;
    const uint2* sc8 = sc0 + 8 * kSLd;
    // B pair of n-tile nt for the 16 elements starting at k (slice-relative): token g of the tile, elements
    // k + 4 tg .. k + 4 tg + 3.
    const uint16_t* xb = xs + g * St::kXLd + 4 * tg;
    auto mma_run = [&](const uint32_t (&a)[4], int k) {
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint2 b = *reinterpret_cast<const uint2*>(xb + nt * 8 * St::kXLd + k);
        mma::m16n8k16(acc[nt], a, b.x, b.y);
      }
    };
    if constexpr (kX8) {
      // The warp's 128 elements are half n of block b: units 4 n .. 4 n + 3, each a run of 16 at
      // 128 n + 32 kk + 16 gg and one 64 further.
      constexpr int nb = Rw::kX8Blocks;
      const int b = wk / 2, n = wk % 2;
#pragma unroll
      for (int ui = 0; ui < 4; ++ui) {
        const int i = 4 * n + ui, unit = 8 * b + i;
        const int ql_at = 128 * b + 16 * i + 4 * tg, qh_at = 128 * nb + 64 * b + 8 * i + 2 * tg;
        const uint32_t l0 = *reinterpret_cast<const uint32_t*>(raw0 + ql_at);
        const uint32_t l8 = *reinterpret_cast<const uint32_t*>(raw8 + ql_at);
        const uint32_t h0 = *reinterpret_cast<const uint16_t*>(raw0 + qh_at);
        const uint32_t h8 = *reinterpret_cast<const uint16_t*>(raw8 + qh_at);
        const uint2 s0 = sc0[unit], s8 = sc8[unit];
        uint32_t f0, s0c, f8, s8c;  // the codes of the first and second runs, a byte each
        q6_kx8_word(l0, h0, f0, s0c);
        q6_kx8_word(l8, h8, f8, s8c);
        const int k = 256 * b + 128 * n + 32 * ((i >> 1) & 1) + 16 * (i & 1);
        uint32_t a[4];
        unpack_half::q6_codes4(f0, s0.x, a[0], a[2]);
        unpack_half::q6_codes4(f8, s8.x, a[1], a[3]);
        mma_run(a, k);
        unpack_half::q6_codes4(s0c, s0.y, a[0], a[2]);
        unpack_half::q6_codes4(s8c, s8.y, a[1], a[3]);
        mma_run(a, k + 64);
      }
    } else {
      // The warp's 128 elements are groups 2 (wk % 2) and 2 (wk % 2) + 1 of block wk / 2 (R = 16, two blocks a
      // slice) or groups 2 wk, 2 wk + 1 of the slice's one block (R = 32).
      constexpr int kBlocks = Tl::kSlice / 256;
      const int b = kBlocks == 2 ? wk / 2 : 0, gbase = kBlocks == 2 ? 2 * (wk % 2) : 2 * wk;
#pragma unroll
      for (int gi = gbase; gi < gbase + 2; ++gi) {
        const int sub = 8 * b + 2 * gi;  // the low nibbles' sub-block within the slice; + 1 the high nibbles'
        const uint2 lo0 = sc0[sub], hi0 = sc0[sub + 1], lo8 = sc8[sub], hi8 = sc8[sub + 1];
#pragma unroll
        for (int st = 0; st < 2; ++st) {
          const int at = 144 * b + 16 + 32 * gi + 16 * st + 4 * tg;
          const uint32_t q0 = *reinterpret_cast<const uint32_t*>(raw0 + at);
          const uint32_t q8 = *reinterpret_cast<const uint32_t*>(raw8 + at);
          const int k = 256 * b + 64 * gi + 16 * st;
          uint32_t a[4];
          unpack_half::q4_k_low4(q0, lo0, a[0], a[2]);
          unpack_half::q4_k_low4(q8, lo8, a[1], a[3]);
          mma_run(a, k);
          unpack_half::q4_k_high4(q0, hi0, a[0], a[2]);
          unpack_half::q4_k_high4(q8, hi8, a[1], a[3]);
          mma_run(a, k + 32);
        }
      }
    }
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are dead: store_tile reuses their memory
  store_tile<R, NT, Tl::kKGroups>(p, sp, acc, reinterpret_cast<float*>(dyn), n0, t0, warp, wr, g, tg, tid);
}

// y = the splits' partial sums in split order (+ bias): the same bits every run.
__global__ void split_sum_kernel(const float* part, const float* bias, float* y, int64_t N, int64_t n, int splits) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = bias ? bias[i % N] : 0.0f;
  for (int k = 0; k < splits; ++k) s += part[k * n + i];
  y[i] = s;
}

__global__ void x_to_half_kernel(const float* x, __half* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

// The one place T picks the tile: rows per block, and tokens per block (padded to 8-token n-tiles).
struct Shape {
  int rows, cols;
};
Shape shape_for_tokens(int64_t T) { return T <= 8 ? Shape{16, 8} : T <= 16 ? Shape{32, 16} : Shape{32, 32}; }

// Splits for a launch of `blocks` blocks: enough for ~4 blocks per SM of a 132-SM H100/H200 (a constant, so the
// scratch bound below does not depend on the device), at most kMaxSplits.
constexpr int64_t kTargetBlocks = 528, kMaxSplits = 8;
int64_t wanted_splits(int64_t blocks) {
  return blocks >= kTargetBlocks ? 1 : ::std::min(kMaxSplits, (kTargetBlocks + blocks - 1) / blocks);
}

// The launch's grid and split plan (slices a split takes; part null without splits). part: the scratch after x's
// half copy.
struct Plan {
  int token_tiles;
  Split split;
  dim3 grid;
};
Plan plan_launch(const BatchMmParams& p) {
  const Shape s = shape_for_tokens(p.T);
  const int slice = kThreads * kUnitsPerThread * 32 / s.rows;
  const int64_t token_tiles = (p.T + s.cols - 1) / s.cols;
  const int64_t blocks = (p.N + s.rows - 1) / s.rows * token_tiles;
  const int64_t n_slices = (p.K + slice - 1) / slice;
  const int64_t want = ::std::min(wanted_splits(blocks), n_slices);
  const int64_t per = (n_slices + want - 1) / want;
  const int64_t splits = (n_slices + per - 1) / per;
  float* part = splits > 1 && p.scratch ? reinterpret_cast<float*>(static_cast<uint8_t*>(p.scratch) +
                                                                   align256(size_t(p.K) * size_t(p.T) * 2))
                                        : nullptr;
  return {int(token_tiles), {per, part}, dim3(unsigned(blocks), unsigned(splits))};
}

template <quant::Type Q, bool kX8, int R, int NT>
void launch_tile(const BatchMmParams& p, const __half* xh, size_t rb, const Plan& plan, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes<Q, kX8, R, NT>();
  constexpr auto kernel = [] {
    if constexpr (kFragments<Q, kX8>) return batch_mm_frag_kernel<Q, kX8, R, NT>;
    else return batch_mm_tile_kernel<Q, kX8, R, NT>;
  }();
  static const bool attr = [] {  // once per instance, at its first launch (before any graph capture)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    return true;
  }();
  (void)attr;
  kernel<<<plan.grid, kThreads, smem, stream>>>(p, xh, rb, plan.token_tiles, plan.split);
}

template <quant::Type Q, bool kX8>
void launch_for_tokens(const BatchMmParams& p, const __half* xh, size_t rb, const Plan& plan, cudaStream_t stream) {
  const Shape s = shape_for_tokens(p.T);
  if (s.cols == 8) launch_tile<Q, kX8, 16, 1>(p, xh, rb, plan, stream);
  else if (s.cols == 16) launch_tile<Q, kX8, 32, 2>(p, xh, rb, plan, stream);
  else launch_tile<Q, kX8, 32, 4>(p, xh, rb, plan, stream);
  static_assert(kMaxTileTokens == 32, "the widest tile above");
}

}  // namespace

bool batch_mm_supports(quant::Type type, bool regrouped, int64_t K, int64_t T) {
  using quant::Type;
  if (T < 1 || T > kBatchMmMaxTokens || K <= 0 || K % quant::traits(type).block_elems != 0) return false;
  if (regrouped) return type == Type::Q6_K && K % 2048 == 0;
  return type == Type::Q4_0 || type == Type::Q8_0 || type == Type::Q4_K || type == Type::Q6_K;
}

size_t batch_mm_scratch(int64_t K, int64_t N, int64_t T) {
  BatchMmParams p;
  p.K = K, p.N = N, p.T = T;
  const Plan plan = plan_launch(p);
  return align256(size_t(K) * size_t(T) * 2) + (plan.grid.y > 1 ? size_t(plan.grid.y) * size_t(N) * size_t(T) * 4 : 0);
}

void launch_batch_mm(const BatchMmParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.y, "null pointer");
  LLM_REQUIRE(p.N > 0 && p.N <= int64_t(16) * 0x7fffffff, "rows out of range");
  LLM_REQUIRE(batch_mm_supports(p.type, p.regrouped, p.K, p.T),
              "small-batch product: type " + ::std::string(quant::type_name(p.type)) +
                  (p.regrouped ? " (regrouped)" : "") + ", K = " + ::std::to_string(p.K) +
                  ", T = " + ::std::to_string(p.T) + " not served");
  LLM_REQUIRE(p.scratch && p.scratch_bytes >= batch_mm_scratch(p.K, p.N, p.T) &&
                  (reinterpret_cast<uintptr_t>(p.scratch) & 15) == 0,
              "scratch below batch_mm_scratch or not 16-byte aligned");
  // The staged copies take the 16-byte aligned pieces around a row's slice, which must not start before the tensor.
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.w) & 15) == 0, "small-batch product: weights must be 16-byte aligned");
  if (p.regrouped) LLM_REQUIRE(q6_kx8_fits(p.w, p.K), "Q6_Kx8 rows: K % 2048 == 0, 16-byte aligned");
  const size_t rb = quant::row_bytes(p.type, p.K);
  auto* xh = static_cast<__half*>(p.scratch);
  if (!p.x_in_scratch) {
    const int64_t n = p.K * p.T;
    x_to_half_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(p.x, xh, n);
    CUDA_CHECK_LAUNCH(stream);
  }
  const Plan plan = plan_launch(p);
  using quant::Type;
  switch (p.type) {
    case Type::Q4_0: launch_for_tokens<Type::Q4_0, false>(p, xh, rb, plan, stream); break;
    case Type::Q8_0: launch_for_tokens<Type::Q8_0, false>(p, xh, rb, plan, stream); break;
    case Type::Q4_K: launch_for_tokens<Type::Q4_K, false>(p, xh, rb, plan, stream); break;
    case Type::Q6_K:
      if (p.regrouped) launch_for_tokens<Type::Q6_K, true>(p, xh, rb, plan, stream);
      else launch_for_tokens<Type::Q6_K, false>(p, xh, rb, plan, stream);
      break;
    default: throw InvalidArgument(::std::string("small-batch product: no kernel for ") + quant::type_name(p.type));
  }
  CUDA_CHECK_LAUNCH(stream);
  if (plan.split.part) {
    const int64_t n = p.N * p.T;
    split_sum_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(plan.split.part, p.bias, p.y, p.N, n,
                                                                     int(plan.grid.y));
    CUDA_CHECK_LAUNCH(stream);
  }
}

}  // namespace cuda
