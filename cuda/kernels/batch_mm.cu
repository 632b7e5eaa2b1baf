// Small-batch products on tensor cores. A block of 4 warps owns R rows of W and up to 32 tokens, and walks K in
// slices through a ring of 3 shared-memory stages: each stage holds a slice of every row's raw quant blocks and of
// X (already half, converted once per launch), copied by cp.async two slices ahead. Warps multiply with
// mma.m16n8k16 (W rows as A, tokens as B, float32 accumulators in registers). Two kernels:
// - fragment (Q4_K, Q6_Kx8: a Q4_K_M model's matrices): each thread unpacks its A operands straight from the staged
//   codes (unpack_half.cuh's exponent trick, about 2 instructions an element), each warp its own rows' scales;
// - half tile (Q4_0, Q8_0, Q6_K in the file's layout): every thread unpacks two 32-element units into a half tile,
//   which the warps read with ldmatrix.
//
// W is read from memory once for all tokens. Every slice of X is read from L2 by N / R blocks, so R grows with T
// (X's L2 traffic is 3.6 T / R times W's for Q4_K): R = 16 rows for T <= 8, 32 above. More than 16 tokens go in
// token tiles of 32, the tiles of one row tile next to each other in the work, so the second reads the rows from L2
// (a wider token tile would leave no room for three stages of X). The grid is what the GPU holds at once, each
// block a run of consecutive (tile, slice) units (stream-K, Work below); a tile two blocks share is added up by the
// last of them. Every partial sum (warps' k groups, blocks' runs) is added in a fixed order: the same bits every
// run. Q4_K products of 9..48 tokens go to batch_mm_wide.cu instead (W unpacked in registers, no staging).
// Measurements and history: docs/kernel-notes.md, "Small-batch products" and "Session 29".
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_i8.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/batch_mm_wide.cuh"
#include "cuda/kernels/batch_mm_work.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/unpack_half.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

using namespace batch_mm_work;  // Work, Segment, for_each_segment, store_tile, choose_blocks

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnitsPerThread = 2;  // 32-element units of W a thread unpacks per slice
constexpr int kStages = 3;          // slice s being multiplied, s + 1 landing, s + 2 being issued
constexpr int kMaxTileTokens = 32;

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
constexpr bool takes_fragments(quant::Type type, bool regrouped) {
  return regrouped ? type == quant::Type::Q6_K : type == quant::Type::Q4_K;
}
template <quant::Type Q, bool kX8>
inline constexpr bool kFragments = takes_fragments(Q, kX8);

// Halves a row of X takes in a stage: 8 past the slice for the tile kernel's 32-bit B loads (rows 4 banks apart),
// 16 for the fragment kernel's 64-bit ones (8 banks apart).
template <quant::Type Q, bool kX8, int kSlice>
inline constexpr int kXLd = kSlice + (kFragments<Q, kX8> ? 16 : 8);

// The fragment kernel's per-slice scales: for every row and 32-element sub-block (Q4_K) or unit (Q6_Kx8) of the
// slice, two f16x2 words (Q4_K: d sc and -dmin m; Q6_Kx8: d sc of the unit's two runs), rows 2 entries apart past
// their last (8 rows read at one offset fall on distinct banks).
template <int kSlice>
inline constexpr int kScaleLd = kSlice / 32 + 2;  // 8-byte entries a row

// The fragment kernel with one n-tile (T <= 8) reads X as float from global memory into its B registers, converting
// there: no stage of X in shared memory (more blocks an SM) and no conversion launch before it.
template <quant::Type Q, bool kX8, int NT>
inline constexpr bool kFloatX = kFragments<Q, kX8> && NT == 1;

template <quant::Type Q, bool kX8, int R, int NT>
constexpr size_t stage_bytes() {
  using Tl = Tile<R, NT>;
  const size_t x = kFloatX<Q, kX8, NT> ? 0 : size_t(Tl::kCols) * kXLd<Q, kX8, Tl::kSlice> * 2;
  return size_t(R) * Raw<Q, kX8, Tl::kSlice>::kLd + x;
}

template <quant::Type Q, bool kX8, int R, int NT>
constexpr size_t smem_bytes() {
  using Tl = Tile<R, NT>;
  const size_t tail = kFragments<Q, kX8> ? size_t(R) * kScaleLd<Tl::kSlice> * 8 : size_t(R) * Tl::kLd * 2;
  return kStages * stage_bytes<Q, kX8, R, NT>() + tail;
}

// Blocks an SM the register allocation must leave room for, what the stages' shared memory holds (five of the
// 16-row tiles, whose shared memory would hold more, as before the segment loop): left alone, ptxas gave the segment
// loop up to 128 (16 rows) and 133 (32 rows, 16 tokens) registers, a block less an SM.
template <int R, int NT>
inline constexpr int kMinBlocks = R == 16 ? 5 : NT == 2 ? 4 : 3;

// A value kept in a register for the whole slice loop. Without it the compiler recomputes per-thread offsets and
// pointers from the thread index every slice (it did once registers were plentiful: a third more instructions and
// ~35% more time in the lab), since nothing tells it that the loop, not the registers, is the scarce resource.
__device__ __forceinline__ int pinned(int v) {
  asm volatile("" : "+r"(v));
  return v;
}
template <class T>
__device__ __forceinline__ T* pinned(T* v) {
  asm volatile("" : "+l"(v));
  return v;
}

// cp.async to a shared-window address: the stages' base converted once (the generic-pointer forms convert each copy,
// reading the CTA's shared window base every time).
__device__ __forceinline__ void copy16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
__device__ __forceinline__ void copy16_zfill(uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes)
               : "memory");
}

// What a thread copies into a stage every slice. Raw pieces: kThreads / R threads a row, thread t taking pieces
// q = t % (kThreads / R) + m kThreads / R of row t / (kThreads / R) (a power of two: no division by a piece count),
// from a source pointer carried from slice to slice. X pieces: 8 elements of token t0 + tl each (tokens past T
// zero-filled). issue() takes the block's slices in order. Elements past K are zero in X; the raw bytes past a
// row's last block are not copied.
template <quant::Type Q, bool kX8, int R, int NT>
struct Stager {
  using Tl = Tile<R, NT>;
  using Rw = Raw<Q, kX8, Tl::kSlice>;
  using L = typename Rw::L;
  static constexpr int kXLd = ::cuda::kXLd<Q, kX8, Tl::kSlice>;
  static constexpr int kStageBytes = int(stage_bytes<Q, kX8, R, NT>());
  static constexpr int kRowThreads = kThreads / R;
  static constexpr int kWPieces = (Rw::kPieces + kRowThreads - 1) / kRowThreads;
  static constexpr int kVecs = Tl::kSlice / 8;  // 16-byte pieces of a token's slice of X
  static constexpr int kXPieces = kFloatX<Q, kX8, NT> ? 0 : Tl::kCols * kVecs / kThreads;  // none: read as float
  static_assert(Tl::kCols * kVecs % kThreads == 0 && kThreads % R == 0, "pieces spread evenly");

  const uint8_t* w_src[kWPieces];  // piece m's source in the next slice (the slice's start, file layouts but Q4_K)
  bool last_live;                  // whether the last piece exists (the others always do)
  int w_dst, q0;                   // this thread's first piece in a stage, and its index in the row
  const __half* x_src[kXPieces ? kXPieces : 1];  // X piece j's source at k = 0 (null: a token past T)
  int x_dst[kXPieces ? kXPieces : 1], x_k[kXPieces ? kXPieces : 1];

  __device__ __forceinline__ Stager(const BatchMmParams& p, const uint8_t* w, size_t row_bytes, const __half* xh,
                                    int64_t n0, int64_t t0, int sl0, int tid) {
    const int r = tid / kRowThreads;
    q0 = pinned(tid % kRowThreads);
    static_assert((kWPieces - 1) * kRowThreads < Rw::kPieces, "all but the last piece exist for every thread");
    last_live = q0 + (kWPieces - 1) * kRowThreads < Rw::kPieces;
    w_dst = pinned(r * Rw::kLd + 16 * q0);
    const uint8_t* row = w + ::std::min<int64_t>(n0 + r, p.N - 1) * row_bytes;
#pragma unroll
    for (int m = 0; m < kWPieces; ++m) {
      const int q = q0 + m * kRowThreads;
      if constexpr (kX8) {
        // Piece q of a slice's nb blocks: ql, high bits, scales (each nb whole pieces), then the run's d's.
        constexpr int nb = Rw::kX8Blocks;
        const int k0 = sl0 * Tl::kSlice, b0 = (k0 % 2048) / 256;
        const int at = q < 8 * nb    ? 16 * q
                       : q < 12 * nb ? 1024 + 16 * (q - 8 * nb)
                       : q < 13 * nb ? 1536 + 16 * (q - 12 * nb)
                                     : 1664;
        w_src[m] = row + kQ6_Kx8Run * (k0 / 2048) + at + step(q) * b0;
      } else if constexpr (Q == quant::Type::Q4_K) {
        w_src[m] = row + size_t(sl0) * Rw::kBytes + 16 * q;
      } else {
        w_src[m] = row + size_t(sl0) * Rw::kBytes;
      }
    }
#pragma unroll
    for (int j = 0; j < kXPieces; ++j) {
      const int i = tid + j * kThreads, tl = i / kVecs;
      x_k[j] = pinned(8 * (i % kVecs));
      x_dst[j] = pinned(tl * kXLd + x_k[j]);
      x_src[j] = pinned(t0 + tl < p.T ? xh + (t0 + tl) * p.K + x_k[j] : nullptr);
    }
  }

  // Q6_Kx8: bytes a block advances piece q's source within a run (ql 128, high bits 64, scales 16, the d's 0).
  static __device__ __forceinline__ int step(int q) {
    constexpr int nb = Rw::kX8Blocks;
    return q < 8 * nb ? 128 : q < 12 * nb ? 64 : q < 13 * nb ? 16 : 0;
  }

  // Slice sl (the one after the previous call's) into stage `stage`. K: p.K as int.
  // dyn_s: the stages' shared-window address.
  __device__ __forceinline__ void issue(int K, const uint8_t* w_end, const __half* xh, uint32_t dyn_s, int sl,
                                        int stage, int sl_end) {
    if (sl < sl_end) {
      const int k0 = sl * Tl::kSlice;
      const uint32_t raw = dyn_s + stage * kStageBytes + w_dst;
      constexpr int kBlocks = Rw::kBlocks;
      const int blocks = ::std::min(kBlocks, (K - k0) / L::kBlockElems);
#pragma unroll
      for (int m = 0; m < kWPieces; ++m) {
        if (m == kWPieces - 1 && !last_live) continue;
        const int q = q0 + m * kRowThreads;
        const uint32_t dst = raw + 16 * m * kRowThreads;
        if constexpr (kX8) {
          copy16(dst, w_src[m]);
          // Next slice: the next nb blocks of the run, or the next run's first.
          constexpr int kRunSlices = 2048 / Tl::kSlice;
          w_src[m] += (sl + 1) % kRunSlices ? step(q) * Rw::kX8Blocks : int(kQ6_Kx8Run) - step(q) * (8 - Rw::kX8Blocks);
        } else if constexpr (Q == quant::Type::Q4_K) {
          // Rows and slices of whole 16-byte pieces (144-byte blocks, weights 16-byte aligned): no alignment work.
          if (16 * q < blocks * L::kBlockBytes) copy16(dst, w_src[m]);
          w_src[m] += Rw::kBytes;
        } else {
          const uint8_t* start = w_src[m];
          w_src[m] += Rw::kBytes;
          const int lead = int(reinterpret_cast<uintptr_t>(start) & 15);
          if (16 * q >= lead + blocks * L::kBlockBytes) continue;  // past this row's slice
          const uint8_t* src = start - lead + 16 * q;
          const int64_t left = w_end - src;
          copy16_zfill(dst, src, int(left >= 16 ? 16 : left));
        }
      }
      const uint32_t xs = dyn_s + stage * kStageBytes + R * Rw::kLd;  // [kCols][kXLd] halves
#pragma unroll
      for (int j = 0; j < kXPieces; ++j) {
        const bool in = x_src[j] && k0 + x_k[j] < K;  // K % 32 == 0: a piece is wholly inside or outside the row
        copy16_zfill(xs + 2 * x_dst[j], in ? x_src[j] + k0 : xh, in ? 16 : 0);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  }
};

// Where a thread stands: its warp and mma coordinates (K as int: kernels index a row's slices and elements in 32
// bits); and a segment's rows (row0) and tokens (token0).
template <int R, int NT>
struct Place {
  using Tl = Tile<R, NT>;
  int tid, lane, warp, wr, wk, g, tg, K;
  __device__ __forceinline__ explicit Place(const BatchMmParams& p) {
    tid = pinned(int(threadIdx.x)), lane = tid & 31, warp = tid >> 5;
    wr = warp % Tl::kRowGroups, wk = warp / Tl::kRowGroups, g = lane >> 2, tg = lane & 3;
    K = int(p.K);
  }
  // A segment's first row and token.
  static __device__ __forceinline__ int64_t row0(const Work& w, const Segment& sg) {
    return int64_t(sg.tile / w.token_tiles) * R;
  }
  static __device__ __forceinline__ int64_t token0(const Work& w, const Segment& sg) {
    return sg.tile % w.token_tiles * Tl::kCols;
  }
};

// The slice pipeline of both kernels: slices sl0 .. sl_end - 1 through the ring, each handed to body(sl, k0, raw)
// once it has landed everywhere and the slice kStages - 1 ahead is issued. The barrier that starts a slice also
// says every warp is done with the one before (its stage, and the tile or scales the body wrote from it).
// The kernels are launched programmatically (pdl.cuh): the first stages' copies of W, which no kernel writes, are
// issued before pdl_wait, X's (in the same stages unless the kernel reads x as float) after it; then start(), the
// body's first reads of what earlier kernels wrote.
template <class St, class Start, class Body>
__device__ __forceinline__ void for_each_slice(St& stager, int K, const uint8_t* w_end, const __half* xh, uint8_t* dyn,
                                               uint32_t dyn_s, int sl0, int sl_end, Start&& start, Body&& body) {
  if constexpr (St::kXPieces > 0) pdl_wait();
  for (int st = 0; st < kStages - 1; ++st) stager.issue(K, w_end, xh, dyn_s, sl0 + st, st, sl_end);
  pdl_wait();
  start();
  for (int sl = sl0, stage = 0; sl < sl_end; ++sl, stage = stage == kStages - 1 ? 0 : stage + 1) {
    cp_async_wait<kStages - 2>();
    __syncthreads();
    stager.issue(K, w_end, xh, dyn_s, sl + kStages - 1, stage == 0 ? kStages - 1 : stage - 1, sl_end);
    body(sl, sl * St::Tl::kSlice, dyn + stage * St::kStageBytes);
  }
  cp_async_wait<0>();
  __syncthreads();  // the stages are dead: store_tile may reuse their memory
}

// The half-tile kernel (Q4_0, Q8_0, Q6_K in the file's layout): each slice every thread unpacks two 32-element units
// into the half tile ws, then warps multiply it (ldmatrix) with X.
template <quant::Type Q, bool kX8, int R, int NT, bool kSegments, typename... Extra>
__global__ void __launch_bounds__(kThreads, kMinBlocks<R, NT>) batch_mm_tile_kernel(BatchMmParams p, const __half* xh,
                                                                               size_t row_bytes, Work work,
                                                                               Extra... extra) {
  const GluEpilogue glu = glu_of(extra...);
  using Tl = Tile<R, NT>;
  using St = Stager<Q, kX8, R, NT>;
  using Rw = typename St::Rw;
  using L = typename Rw::L;
  static_assert(R * Tl::kUnitsPerRow == kThreads * kUnitsPerThread, "every thread unpacks kUnitsPerThread units");
  extern __shared__ __align__(16) uint8_t dyn[];
  uint16_t* ws = reinterpret_cast<uint16_t*>(dyn + size_t(kStages) * St::kStageBytes);  // [R][kLd]: W's slice, half
  const Place<R, NT> b(p);
  const int tid = b.tid, lane = b.lane, warp = b.warp, wr = b.wr, wk = b.wk, g = b.g, tg = b.tg, K = b.K;
  const uint32_t dyn_s = uint32_t(__cvta_generic_to_shared(dyn));
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const uint8_t* w_end = w + size_t(p.N) * row_bytes;
  for_each_segment<R, NT, kSegments>(work, [&](const Segment& sg) {
   with_matrix(p, w, w_end, row_bytes, b.row0(work, sg), [&](const BatchMmParams& p, const uint8_t* w,
                                                              const uint8_t* w_end, const int64_t n0) {
    const int64_t t0 = b.token0(work, sg);
    St stager(p, w, row_bytes, xh, n0, t0, sg.sl0, tid);

    // The units this thread unpacks: unit u of row r, rows fastest, so that the 8 lanes of a 16-byte store phase
    // write 8 rows (4 banks apart: conflict-free) and read 8 staged rows. u_lead: the row's address modulo 16, where
    // its staged slices start.
    int u_r[kUnitsPerThread], u_u[kUnitsPerThread], u_lead[kUnitsPerThread];
#pragma unroll
    for (int j = 0; j < kUnitsPerThread; ++j) {
      const int i = tid + j * kThreads;
      u_r[j] = pinned(i % R), u_u[j] = pinned(i / R);
      const uint8_t* row = w + ::std::min<int64_t>(n0 + u_r[j], p.N - 1) * row_bytes;
      u_lead[j] = pinned(int(reinterpret_cast<uintptr_t>(row) & 15));
    }

    float acc[NT][4] = {};
    for_each_slice(stager, K, w_end, xh, dyn, dyn_s, sg.sl0, sg.sl_end, [] {}, [&](int sl, int k0, const uint8_t* raw) {
      const uint16_t* xs = reinterpret_cast<const uint16_t*>(raw + R * Rw::kLd);
      const bool partial = k0 + Tl::kSlice > K;  // the last slice of a row not a whole number of slices
#pragma unroll
      for (int j = 0; j < kUnitsPerThread; ++j) {
        const int r = u_r[j], u = u_u[j];
        const uint8_t* srow = raw + r * Rw::kLd + ((u_lead[j] + sl * Rw::kBytes) & 15);
        uint32_t h[16];
        if constexpr (Q == quant::Type::Q6_K) unpack_half::q6_k(srow + L::kBlockBytes * (u >> 3), u & 7, h);
        else if constexpr (Q == quant::Type::Q8_0) unpack_half::q8_0(srow + L::kBlockBytes * u, h);
        else unpack_half::q4_0(srow + L::kBlockBytes * u, h);
        // Units past K were never copied: zero.
        if (partial && k0 + (L::kBlockElems == 256 ? 256 * (u >> 3) : 32 * u) >= K) {
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
    });
    store_tile<R, NT, Tl::kKGroups, kThreads>(p, glu, work, sg, acc, reinterpret_cast<float*>(dyn), n0, t0, warp, wr, g, tg,
                                              tid);
   }, extra...);
  });
  pdl_wait();  // a block without work too: this grid ends only after the ones it depends on (pdl.cuh)
}

// The fragment kernel (Q4_K, Q6_Kx8): no half tile. A warp's rows are 16 of the block's, g and g + 8 a thread's; an
// mma's 16 k positions may stand for any 16 elements so long as A and B agree, and here thread tg's four (2 tg,
// 2 tg + 1, 2 tg + 8, 2 tg + 9) stand for elements 4 tg .. 4 tg + 3 of a run of 16: one 32-bit word of a row's
// staged codes gives a thread its A halves (two codes a half pair, unpack_half's exponent trick), and one 64-bit
// load its B pair from X. Each slice a warp first decodes the scales of its own rows and 128 elements into `scales`
// (one f16x2 pair per 32 elements, zero past K so that stale bytes there multiply to 0), then unpacks and multiplies.
// Q4_K: a 32-byte group of a block holds sub-block 2 gi (low nibbles) and 2 gi + 1 (high), element l in byte l; a
// word of 4 bytes is 4 elements of each. Q6_Kx8: a unit's 16 ql bytes and 16 high-bit nibbles are its two runs of
// 16 (64 elements apart); a ql word and a 16-bit word of nibbles are 4 elements of each.
template <quant::Type Q, bool kX8, int R, int NT, bool kSegments, typename... Extra>
__global__ void __launch_bounds__(kThreads, kMinBlocks<R, NT>) batch_mm_frag_kernel(BatchMmParams p, const __half* xh,
                                                                               size_t row_bytes, Work work,
                                                                               Extra... extra) {
  const GluEpilogue glu = glu_of(extra...);
  using Tl = Tile<R, NT>;
  using St = Stager<Q, kX8, R, NT>;
  using Rw = typename St::Rw;
  constexpr int kSubs = Tl::kSlice / 32;  // scale entries a row and slice
  constexpr int kSLd = kScaleLd<Tl::kSlice>;
  static_assert(Tl::kWarpK == 128 && kSubs == 4 * Tl::kKGroups, "a warp takes 128 of K: 4 scale entries a row");
  extern __shared__ __align__(16) uint8_t dyn[];
  uint2* scales = reinterpret_cast<uint2*>(dyn + size_t(kStages) * St::kStageBytes);  // [R][kSLd]
  const Place<R, NT> b(p);
  const int tid = b.tid, lane = b.lane, warp = b.warp, wr = b.wr, wk = b.wk, g = b.g, tg = b.tg, K = b.K;
  const uint32_t dyn_s = uint32_t(__cvta_generic_to_shared(dyn));
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const uint8_t* w_end = w + size_t(p.N) * row_bytes;

  // The scale entries a warp multiplies with, which it decodes itself (no barrier but the warp's): its 16 rows by
  // the 4 sub-blocks or units of its 128 elements of K, 4 wk .. 4 wk + 3 (either tile). Entry e = lane, lane + 32:
  // row 16 wr + e % 16, entry 4 wk + e / 16 (its place in the stage and in scales).
  int e_c[2], e_row[2], e_at[2];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int e = lane + 32 * j, row = 16 * wr + e % 16, c = 4 * wk + e / 16;
    e_c[j] = pinned(c), e_row[j] = pinned(row * Rw::kLd), e_at[j] = pinned(row * kSLd + c);
  }
  const int r0 = wr * 16 + g;  // this thread's rows in the mma: r0 and r0 + 8
  const int raw_row0 = pinned(r0 * Rw::kLd), sc_row0 = pinned(r0 * kSLd);

  // The warp's 8 runs of 16 elements a slice, slice-relative, in the order the mma loop below takes them (Q4_K:
  // group gi's 16 st low-nibble elements, then the high ones 32 further; Q6_Kx8: unit ui's first run, then its second
  // 64 further).
  const auto run_k = [&](int i) {
    if constexpr (kX8) {
      const int b = wk / 2, n = wk % 2, ui = i >> 1, u = 4 * n + ui;
      return 256 * b + 128 * n + 32 * ((u >> 1) & 1) + 16 * (u & 1) + 64 * (i & 1);
    } else {
      constexpr int kBlocks = Tl::kSlice / 256;
      const int b = kBlocks == 2 ? wk / 2 : 0, gi = (kBlocks == 2 ? 2 * (wk % 2) : 2 * wk) + (i >> 2);
      return 256 * b + 64 * gi + 16 * ((i >> 1) & 1) + 32 * (i & 1);
    }
  };
  for_each_segment<R, NT, kSegments>(work, [&](const Segment& sg) {
   with_matrix(p, w, w_end, row_bytes, b.row0(work, sg), [&](const BatchMmParams& p, const uint8_t* w,
                                                              const uint8_t* w_end, const int64_t n0) {
    const int64_t t0 = b.token0(work, sg);
    const int sl0 = sg.sl0, sl_end = sg.sl_end;
    St stager(p, w, row_bytes, xh, n0, t0, sl0, tid);
    // kFloatX: this thread's B pairs for the next slice, as float (token t0 + g, elements run_k(i) + 4 tg ..), loaded a
    // slice ahead so that their latency passes with the barrier and the scales; zero past T and K. Plain loads: x
    // is the earlier kernel's output, read after pdl_wait (a non-coherent load could be scheduled above it).
    constexpr int kRuns = 8;
    float4 xf[kFloatX<Q, kX8, NT> ? kRuns : 1];
    const float* x_row = t0 + g < p.T ? p.x + (t0 + g) * p.K + 4 * tg : nullptr;
    const auto load_x = [&](int sl) {
      if constexpr (kFloatX<Q, kX8, NT>) {
        const int k0 = sl * Tl::kSlice;
#pragma unroll
        for (int i = 0; i < kRuns; ++i) {
          const int k = k0 + run_k(i);
          xf[i] = x_row && sl < sl_end && k < K ? *reinterpret_cast<const float4*>(x_row + k)
                                                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
    };

    float acc[NT][4] = {};
    const auto start = [&] { load_x(sl0); };
    for_each_slice(stager, K, w_end, xh, dyn, dyn_s, sl0, sl_end, start, [&](int sl, int k0, const uint8_t* raw) {
      const uint16_t* xs = reinterpret_cast<const uint16_t*>(raw + R * Rw::kLd);
      const int b0x8 = (k0 % 2048) / 256;  // the slice's first block within its Q6_Kx8 run
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int c = e_c[j];
        const uint8_t* row = raw + e_row[j];
        uint2 v = make_uint2(0u, 0u);
        if constexpr (kX8) {
          constexpr int nb = Rw::kX8Blocks;
          const int b = c >> 3;
          v = unpack_half::q6_scales(row + 192 * nb + 16 * b + 2 * (c & 7), row + 208 * nb + 2 * ((b0x8 + b) & 7));
        } else if (k0 + 32 * c < K) {
          v = unpack_half::q4_k_scales(row + 144 * (c >> 3), c & 7);
        }
        scales[e_at[j]] = v;
      }
      __syncwarp();  // the warp's scales are written
      const uint8_t* raw0 = raw + raw_row0;
      const uint8_t* raw8 = raw0 + 8 * Rw::kLd;
      const uint2* sc0 = scales + sc_row0;
      const uint2* sc8 = sc0 + 8 * kSLd;
      // B pair of n-tile nt for run i, the 16 elements starting at k (slice-relative): token g of the tile, elements
      // k + 4 tg .. k + 4 tg + 3 (from the stage, or from the float registers rounded as launch_x_to_half rounds).
      const uint16_t* xb = xs + g * St::kXLd + 4 * tg;
      auto mma_run = [&](const uint32_t (&a)[4], int k, int i) {
        if constexpr (kFloatX<Q, kX8, NT>) {
          mma::m16n8k16(acc[0], a, mma::pack_half2(xf[i].x, xf[i].y), mma::pack_half2(xf[i].z, xf[i].w));
        } else {
#pragma unroll
          for (int nt = 0; nt < NT; ++nt) {
            const uint2 b = *reinterpret_cast<const uint2*>(xb + nt * 8 * St::kXLd + k);
            mma::m16n8k16(acc[nt], a, b.x, b.y);
          }
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
          mma_run(a, k, 2 * ui);
          unpack_half::q6_codes4(s0c, s0.y, a[0], a[2]);
          unpack_half::q6_codes4(s8c, s8.y, a[1], a[3]);
          mma_run(a, k + 64, 2 * ui + 1);
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
            const int i = 4 * (gi - gbase) + 2 * st;
            mma_run(a, k, i);
            unpack_half::q4_k_high4(q0, hi0, a[0], a[2]);
            unpack_half::q4_k_high4(q8, hi8, a[1], a[3]);
            mma_run(a, k + 32, i + 1);
          }
        }
      }
      load_x(sl + 1);  // the next slice's B pairs, in flight through the barrier
    });
    store_tile<R, NT, Tl::kKGroups, kThreads>(p, glu, work, sg, acc, reinterpret_cast<float*>(dyn), n0, t0, warp, wr, g, tg,
                                              tid);
   }, extra...);
  });
  pdl_wait();  // a block without work too: this grid ends only after the ones it depends on (pdl.cuh)
}

// The one place T picks the tile: rows per block, and tokens per block (padded to 8-token n-tiles).
struct Shape {
  int rows, cols;
};
Shape shape_for_tokens(int64_t T) { return T <= 8 ? Shape{16, 8} : T <= 16 ? Shape{32, 16} : Shape{32, 32}; }

int64_t token_tiles_for(int64_t T) {
  const Shape s = shape_for_tokens(T);
  return (T + s.cols - 1) / s.cols;
}
int64_t tiles_for(int64_t N, int64_t T) {
  const int64_t rows = shape_for_tokens(T).rows;
  return (N + rows - 1) / rows * token_tiles_for(T);
}
// Slices of K a tile takes (Tile::kSlice of the tile T picks).
int64_t slices_for(int64_t K, int64_t T) {
  const int64_t slice = kThreads * kUnitsPerThread * 32 / shape_for_tokens(T).rows;
  return (K + slice - 1) / slice;
}

// Partial-sum slots: two a block of [kCols][R] floats, after x's half copy in the scratch.
size_t part_bytes(int64_t T) {
  const Shape s = shape_for_tokens(T);
  return size_t(kMaxBlocks) * 2 * size_t(s.rows) * size_t(s.cols) * 4;
}

struct Plan {
  Work work;
  dim3 grid;
};
Plan plan_launch(const BatchMmParams& p, int64_t resident) {
  const int64_t tiles = tiles_for(p.N, p.T), n_slices = slices_for(p.K, p.T);
  const int64_t blocks = choose_blocks(tiles, n_slices, resident, shape_for_tokens(p.T).cols > 8);
  return {work_for(p, tiles, n_slices, token_tiles_for(p.T), blocks), dim3(unsigned(blocks))};
}

// The one-n-tile instances take the SwiGLU epilogue as a last argument; the others are compiled without it (with it
// as an unused argument, the 16- and 32-token launches decoded 0.8% slower: kernel notes, session 23). kStack: the
// instances of stacked launches (a ProductStack argument).
template <quant::Type Q, bool kX8, int R, int NT, bool kSegments, bool kStack = false>
constexpr auto kernel_for() {
  if constexpr (kStack) {
    if constexpr (kFragments<Q, kX8>) return batch_mm_frag_kernel<Q, kX8, R, NT, kSegments, ProductStack>;
    else return batch_mm_tile_kernel<Q, kX8, R, NT, kSegments, ProductStack>;
  } else if constexpr (NT == 1) {
    if constexpr (kFragments<Q, kX8>) return batch_mm_frag_kernel<Q, kX8, R, NT, kSegments, GluEpilogue>;
    else return batch_mm_tile_kernel<Q, kX8, R, NT, kSegments, GluEpilogue>;
  } else {
    if constexpr (kFragments<Q, kX8>) return batch_mm_frag_kernel<Q, kX8, R, NT, kSegments>;
    else return batch_mm_tile_kernel<Q, kX8, R, NT, kSegments>;
  }
}

// The shared memory opt-in of both instances and how many blocks the GPU holds at once (the segment-loop instance's
// occupancy: the grid is planned before the instance is picked), once, at the first launch (before any capture).
template <quant::Type Q, bool kX8, int R, int NT>
int64_t prepare_instances() {
  constexpr size_t smem = smem_bytes<Q, kX8, R, NT>();
  for (auto* kernel : {kernel_for<Q, kX8, R, NT, true>(), kernel_for<Q, kX8, R, NT, false>()})
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  for (auto* kernel : {kernel_for<Q, kX8, R, NT, true, true>(), kernel_for<Q, kX8, R, NT, false, true>()})
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const auto* kernel = reinterpret_cast<const void*>(kernel_for<Q, kX8, R, NT, true>());
  return ::std::max<int64_t>(1, int64_t(current_device_sm_count()) * kernel_blocks_per_sm(kernel, kThreads, smem));
}

template <quant::Type Q, bool kX8, int R, int NT>
void launch_tile(const BatchMmParams& p, const __half* xh, const GluEpilogue& glu, const ProductStack* stack, size_t rb,
                 cudaStream_t stream, bool pdl) {
  constexpr size_t smem = smem_bytes<Q, kX8, R, NT>();
  static const int64_t resident = prepare_instances<Q, kX8, R, NT>();
  const Plan plan = plan_launch(p, resident);
  if (stack) {
    const auto kernel = plan.work.runs_stay_in_tiles() ? kernel_for<Q, kX8, R, NT, false, true>()
                                                       : kernel_for<Q, kX8, R, NT, true, true>();
    launch_programmatic(pdl, kernel, plan.grid, kThreads, smem, stream, p, xh, rb, plan.work, *stack);
    return;
  }
  const auto kernel = plan.work.runs_stay_in_tiles() ? kernel_for<Q, kX8, R, NT, false>()
                                                     : kernel_for<Q, kX8, R, NT, true>();
  if constexpr (NT == 1) launch_programmatic(pdl, kernel, plan.grid, kThreads, smem, stream, p, xh, rb, plan.work, glu);
  else launch_programmatic(pdl, kernel, plan.grid, kThreads, smem, stream, p, xh, rb, plan.work);
}

template <quant::Type Q, bool kX8>
void launch_for_tokens(const BatchMmParams& p, const __half* xh, const GluEpilogue& glu, const ProductStack* stack,
                       size_t rb, cudaStream_t stream, bool pdl) {
  const Shape s = shape_for_tokens(p.T);
  if (s.cols == 8) launch_tile<Q, kX8, 16, 1>(p, xh, glu, stack, rb, stream, pdl);
  else if (s.cols == 16) launch_tile<Q, kX8, 32, 2>(p, xh, glu, stack, rb, stream, pdl);
  else launch_tile<Q, kX8, 32, 4>(p, xh, {}, stack, rb, stream, pdl);
  static_assert(kMaxTileTokens == 32, "the widest tile above");
}

// Whether batch_mm_wgmma.cuh's kernel takes a launch of N rows (it converts x itself, into its own part of the
// scratch). Never one with a SwiGLU epilogue: those have at most 8 tokens, the kernel 9 and more.
bool takes_wgmma(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T, const WgmmaRoute& route) {
  const bool large = K * N >= kBatchMmWgmmaLargeWeights;
  const int64_t large_min = regrouped ? route.q6x8_large_min_tokens : route.large_min_tokens;
  return T >= (large ? ::std::min(route.min_tokens, large_min) : route.min_tokens) &&
         batch_mm_wgmma_supports(type, regrouped, T);
}
static_assert(kBatchMmGluMaxTokens <= 8, "takes_wgmma");

// The wide kernel's share of a launch the wgmma and i8 kernels do not take (batch_mm_takes_wide): Q4_K, and large
// regrouped Q6_K with choices.wide_q6x8.
bool wide_takes(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T, const BatchMmChoices& choices) {
  const bool q6x8 = choices.wide_q6x8 && K * N >= choices.wide_q6x8_min_weights;
  return choices.wide && batch_mm_wide_serves(type, regrouped, T, q6x8);
}

}  // namespace

bool batch_mm_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T) {
  using quant::Type;
  // K below 2^26: the kernels index a row's slices and elements in 32-bit integers.
  if (T < 1 || T > kBatchMmMaxTokens || K <= 0 || K >= (int64_t(1) << 26) || K % quant::traits(type).block_elems != 0)
    return false;
  // A counter a tile, and the launch's (tile, slice) units in 32 bits (Work).
  if (N <= 0) return false;
  const int64_t tiles = tiles_for(N, T);
  if (size_t(tiles) * sizeof(uint32_t) > kBatchMmCounterBytes || tiles * slices_for(K, T) >= (int64_t(1) << 31))
    return false;
  if (regrouped) return type == Type::Q6_K && K % 2048 == 0;
  return type == Type::Q4_0 || type == Type::Q8_0 || type == Type::Q4_K || type == Type::Q6_K;
}

bool batch_mm_reads_float_x(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                            const BatchMmChoices& choices) {
  if (takes_wgmma(type, regrouped, K, N, T, choices.wgmma) || batch_mm_takes_i8(type, regrouped, K, N, T, choices))
    return true;
  return takes_fragments(type, regrouped) && shape_for_tokens(T).cols == 8;  // kFloatX: fragments, one n-tile
}

bool batch_mm_takes_wgmma(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T, const WgmmaRoute& route) {
  return batch_mm_supports(type, regrouped, K, N, T) && takes_wgmma(type, regrouped, K, N, T, route);
}

bool batch_mm_takes_i8(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                       const BatchMmChoices& choices) {
  return choices.i8 && T <= choices.i8_max_tokens && batch_mm_i8_serves(type, regrouped, T, choices.i8_q6x8) &&
         batch_mm_supports(type, regrouped, K, N, T) &&
         !takes_wgmma(type, regrouped, K, N, T, choices.wgmma);
}

bool batch_mm_takes_wide(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                         const BatchMmChoices& choices) {
  return batch_mm_supports(type, regrouped, K, N, T) && !takes_wgmma(type, regrouped, K, N, T, choices.wgmma) &&
         !batch_mm_takes_i8(type, regrouped, K, N, T, choices) && wide_takes(type, regrouped, K, N, T, choices);
}

bool batch_mm_forms_glu_x(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                          const BatchMmChoices& choices) {
  return batch_mm_takes_wgmma(type, regrouped, K, N, T, choices.wgmma) ||
         batch_mm_takes_i8(type, regrouped, K, N, T, choices);
}

size_t batch_mm_scratch(int64_t K, int64_t, int64_t T) {
  size_t need = part_offset(K, T) + part_bytes(T);
  if (T <= kBatchMmI8MaxTokens) need = ::std::max(need, part_offset(K, T) + batch_mm_i8_scratch(K));
  if (T > kBatchMmGluMaxTokens) need = ::std::max({need, batch_mm_wide_scratch(K, T), batch_mm_wgmma_scratch(K, T)});
  return need;
}

void launch_batch_mm(const BatchMmParams& p, cudaStream_t stream, const GluEpilogue& glu, const ProductStack* stack,
                     const BatchMmChoices& choices, const I8NormLink* i8_link) {
  LLM_REQUIRE(p.w && p.x && p.y, "null pointer");
  LLM_REQUIRE(p.N > 0 && p.N <= int64_t(16) * 0x7fffffff, "rows out of range");
  LLM_REQUIRE(batch_mm_supports(p.type, p.regrouped, p.K, p.N, p.T),
              "small-batch product: type " + ::std::string(quant::type_name(p.type)) +
                  (p.regrouped ? " (regrouped)" : "") + ", K = " + ::std::to_string(p.K) +
                  ", N = " + ::std::to_string(p.N) + ", T = " + ::std::to_string(p.T) + " not served");
  LLM_REQUIRE(p.scratch && p.scratch_bytes >= batch_mm_scratch(p.K, p.N, p.T) &&
                  (reinterpret_cast<uintptr_t>(p.scratch) & 15) == 0,
              "scratch below batch_mm_scratch or not 16-byte aligned");
  // The staged copies take the 16-byte aligned pieces around a row's slice, which must not start before the tensor.
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.w) & 15) == 0, "small-batch product: weights must be 16-byte aligned");
  if (p.regrouped) LLM_REQUIRE(q6_kx8_fits(p.w, p.K), "Q6_Kx8 rows: K % 2048 == 0, 16-byte aligned");
  LLM_REQUIRE(p.tile_counters, "small-batch product: tile_counters missing");
  LLM_REQUIRE(!glu.gate || p.T <= kBatchMmGluMaxTokens, "small-batch product: a SwiGLU epilogue above 8 tokens");
  if (stack) {
    LLM_REQUIRE(!glu.gate, "small-batch stack: no SwiGLU epilogue");
    check_product_stack(*stack, p.w, p.N, p.K, p.regrouped, "small-batch");
  }
  static_assert(kBatchMmGluMaxTokens == 8, "the one-n-tile instances (shape_for_tokens) apply it");
  const bool pdl = choices.programmatic;
  const bool wgmma = takes_wgmma(p.type, p.regrouped, p.K, p.N, p.T, choices.wgmma);
  const bool i8 = batch_mm_takes_i8(p.type, p.regrouped, p.K, p.N, p.T, choices);
  LLM_REQUIRE(!p.x_gate || wgmma || i8,
              "small-batch product: a SwiGLU formed from x_gate needs the wgmma or the i8 kernel");
  LLM_REQUIRE(!i8_link || i8, "small-batch product: a norm link needs the i8 kernel");
  if (wgmma) {
    launch_batch_mm_wgmma(p, stack, stream, pdl);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  if (i8) {  // its own image of x, after the half x
    launch_batch_mm_i8(p, static_cast<uint8_t*>(p.scratch) + part_offset(p.K, p.T), glu, stack, stream, pdl,
                       i8_link ? *i8_link : I8NormLink{}, choices.i8_warps_per_sm);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  const size_t rb = quant::row_bytes(p.type, p.K);
  auto* xh = static_cast<__half*>(p.scratch);
  const bool float_x = batch_mm_reads_float_x(p.type, p.regrouped, p.K, p.N, p.T, choices);
  LLM_REQUIRE(!float_x || (reinterpret_cast<uintptr_t>(p.x) & 15) == 0,
              "small-batch product: x must be 16-byte aligned");
  if (!p.x_in_scratch && !float_x) launch_x_to_half(p.x, xh, p.K * p.T, stream, pdl);
  if (!glu.gate && wide_takes(p.type, p.regrouped, p.K, p.N, p.T, choices)) {  // wgmma and i8 are out by now
    launch_batch_mm_wide(p, xh, stack, stream, choices);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  using quant::Type;
  switch (p.type) {
    case Type::Q4_0: launch_for_tokens<Type::Q4_0, false>(p, xh, glu, stack, rb, stream, pdl); break;
    case Type::Q8_0: launch_for_tokens<Type::Q8_0, false>(p, xh, glu, stack, rb, stream, pdl); break;
    case Type::Q4_K: launch_for_tokens<Type::Q4_K, false>(p, xh, glu, stack, rb, stream, pdl); break;
    case Type::Q6_K:
      if (p.regrouped) launch_for_tokens<Type::Q6_K, true>(p, xh, glu, stack, rb, stream, pdl);
      else launch_for_tokens<Type::Q6_K, false>(p, xh, glu, stack, rb, stream, pdl);
      break;
    default: throw InvalidArgument(::std::string("small-batch product: no kernel for ") + quant::type_name(p.type));
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
