// What the expert-grouped prefill kernels share (moe_gemm.cu: the grouping, x's half copy, the half-tile kernel and
// the dispatch; moe_fragments.cu: the kernels that unpack straight into mma fragments). Internal to those two files.
#pragma once
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/matvec_id.cuh"
#include "cuda/kernels/moe_gemm.cuh"

namespace cuda::moe_tiles {

constexpr int kBN = 128;     // expert rows of a tile
constexpr int kStep = 64;    // K per step: four 16-element chunks
constexpr int kXStages = 3;  // x ring: step s in use, s + 1 landing, s + 2 being issued
constexpr int kThreads = 256;

struct Groups {
  int32_t* counts;   // [n_expert]
  int32_t* offsets;  // [n_expert]
  int32_t* users;    // [k T], grouped by expert
};

struct TileArgs {
  MatvecIdParams p;
  Groups g;
  const __half* xh;  // [x_slots T][kp]
  int64_t kp;        // K rounded up to kStep
  size_t row_bytes;
  MoeGluOut glu;     // out set: the activation of this product and glu.other as half, instead of y
  bool compact = false;  // MoeGemmOptions::compact_tiles: the grid over live (expert, user tile) pairs (tile_place)
};

// A warp's outputs of a tile, rows n_first and n_first + 8 against users c0 + 8 i (+ 1) of the tile (the mma
// accumulator layout: acc[i][c] is row n_first + 8 (c >> 1), tile column c0 + 8 i + (c & 1); users: the tile's
// users, load_tile_users' second half), plus the expert's bias: into y, or with the activation epilogue (glu.out)
// act(gate, up) rounded to half, one of the two read back from the pair's earlier product. Those reads go out a row
// at a time, 2 kN8 together (each output's read behind the one before, they cost the up launch 20 us of its 110). The
// same float operations as the element-wise SwiGlu / SwiGluOai kernels and x's half copy (__float2half_rn), so the
// down product's x has the bits the unfused launches gave it.
template <int kN8>
__device__ __forceinline__ void store_tile_outputs(const TileArgs& a, const float (&acc)[kN8][4],
                                                   const int32_t* users, int64_t e, int64_t n_first, int c0) {
  const MatvecIdParams& p = a.p;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t n = n_first + 8 * h;
    if (n >= p.N) continue;
    const float bias = p.bias ? p.bias[e * p.N + n] : 0.0f;
    if (!a.glu.out) {
#pragma unroll
      for (int i = 0; i < kN8; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
          if (const int32_t u = users[c0 + 8 * i + j]; u >= 0) p.y[int64_t(u) * p.N + n] = acc[i][2 * h + j] + bias;
      continue;
    }
    float other[kN8][2];
#pragma unroll
    for (int i = 0; i < kN8; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int32_t u = users[c0 + 8 * i + j];
        other[i][j] = u >= 0 ? __ldg(a.glu.other + int64_t(u) * p.N + n) : 0.0f;
      }
#pragma unroll
    for (int i = 0; i < kN8; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int32_t u = users[c0 + 8 * i + j];
        if (u < 0) continue;
        const float v = acc[i][2 * h + j] + bias;
        const float gate = a.glu.acc_is_gate ? v : other[i][j], up = a.glu.acc_is_gate ? other[i][j] : v;
        a.glu.out[int64_t(u) * p.N + n] = __float2half_rn(activate(a.glu.act, gate, up, a.glu.alpha, a.glu.limit));
      }
  }
}

// Tile u0's users: their half-x rows into xrow[0, kBT) (t x_slots + slot, or -1 past the expert's count) and the
// users themselves (t k + slot, or -1) into xrow[kBT, 2 kBT) for the outputs (store_tile_outputs), then a barrier.
// The caller puts a barrier between a tile's outputs and the next tile's call.
template <int kBT>
__device__ inline void load_tile_users(int32_t* xrow, const MatvecIdParams& p, const int32_t* list, int64_t u0,
                                       int32_t count) {
  const int tid = int(threadIdx.x);
  if (tid < kBT) {
    const int64_t ui = u0 + tid;
    int32_t r = -1, user = -1;
    if (ui < count) {
      user = list[ui];
      const int64_t t = user / p.k, j = user % p.k;
      r = int32_t(t * p.x_slots + (p.x_slots == 1 ? 0 : j));
    }
    xrow[tid] = r;
    xrow[kBT + tid] = user;
  }
  __syncthreads();
}

// A row's slice of `bytes` raw bytes at `start` (any alignment) staged at shared-space rd as the 16-byte aligned
// pieces around it (so it lands at its address modulo 16): pieces dc, dc + 2, ... of kPieces (the row's other thread
// takes the rest), none past the slice, zero-filled past w_end (the tensor's end; the slice itself is inside).
template <int kPieces>
__device__ __forceinline__ void stage_slice_pieces(uint32_t rd, const uint8_t* start, int bytes, int dc,
                                                   const uint8_t* w_end) {
  const uint8_t* base = reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(start) & ~uintptr_t(15));
#pragma unroll
  for (int j = 0; j < (kPieces + 1) / 2; ++j) {
    const int q = dc + 2 * j;
    const uint8_t* src = base + 16 * q;
    if (q >= kPieces || src >= start + bytes) continue;  // past this row's slice
    const int64_t left = w_end - src;
    cp_async16_zfill_s(rd + 16 * q, src, int(left >= 16 ? 16 : left));
  }
}

// The tile grids. blockIdx.x is the row tile in both. Plain: blockIdx.y the expert, blockIdx.z the first of its user
// tiles the block takes (then every gridDim.z-th), blocks past the expert's count exit at once. Compact
// (MoeGemmOptions::compact_tiles): blockIdx.y is a live (expert, user tile) pair, counted expert by expert (an
// expert's tiles side by side, so that its rows come from DRAM once and from L2 for its other tiles), one tile a
// block, blocks past the last pair exit at once; its y is moe_gemm_tile_slots (moe_gemm.cuh). At a Qwen3-30B-A3B
// pp512 ~15 of the plain grid's 16k blocks are empty (an expert has ~32 users on average), and each holds one of the
// SM's two block slots while it starts and leaves: ~10% of a down launch's warp samples (docs/kernel-notes.md,
// session 77). The compact grid is the default since session 79 (H100: Qwen3-30B-A3B pp512 +3.2%, gpt-oss-20b +0.7%).
struct TilePlace {  // 32-bit: a value the kernels keep through their loops in one register, not two
  int32_t e = 0;      // the expert
  int32_t u0 = 0;     // its first user of the block's first tile
  int32_t count = 0;  // the expert's users
  bool live = false;  // false: the block has no tile
};

// The compact grid's pair of this block, found by each warp on its own (every lane of the warp calls it): a scan
// of the experts' tile counts, 32 experts a round.
template <int kBT>
__device__ __forceinline__ TilePlace tile_place(const int32_t* counts, int64_t n_expert) {
  const int lane = int(threadIdx.x) & 31;
  const int32_t t = int32_t(blockIdx.y);
  int32_t base = 0;  // tiles of the experts before this round's
  for (int64_t e0 = 0; e0 < n_expert; e0 += 32) {
    const int32_t c = e0 + lane < n_expert ? counts[e0 + lane] : 0;
    const int32_t v = (c + kBT - 1) / kBT;
    int32_t incl = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
      const int32_t n = __shfl_up_sync(~0u, incl, o);
      if (lane >= o) incl += n;
    }
    const unsigned here = __ballot_sync(~0u, t >= base + incl - v && t < base + incl);
    if (here) {
      const int src = __ffs(int(here)) - 1;
      const int32_t first = __shfl_sync(~0u, base + incl - v, src), cnt = __shfl_sync(~0u, c, src);
      return {int32_t(e0) + src, (t - first) * kBT, cnt, true};
    }
    base += __shfl_sync(~0u, incl, 31);
  }
  return {};
}

// This block's first tile in either grid (every lane of every warp calls it).
template <int kBT>
__device__ __forceinline__ TilePlace first_tile(const TileArgs& a) {
  if (a.compact) return tile_place<kBT>(a.g.counts, a.p.n_expert);
  const int32_t e = int32_t(blockIdx.y), count = a.g.counts[e], u0 = int32_t(blockIdx.z) * kBT;
  return {e, u0, count, u0 < count};
}

// The block's tiles of an expert of `count` users from its first, u0: tile(u0) for each (the compact grid: one), a
// barrier between two (the caller's outputs read the users, and the pair's exchange, before the next tile's replace
// them).
template <int kBT, class Tile>
__device__ __forceinline__ void each_tile(const TileArgs& a, int32_t u0, int32_t count, const Tile& tile) {
  for (;;) {
    tile(u0);
    if (a.compact) return;
    u0 += int32_t(gridDim.z) * kBT;
    if (u0 >= count) return;
    __syncthreads();
  }
}

// A tile kernel over either grid (row tiles of kRows: kBN, or kBN / 2 rows of each product of a pair; users in tiles
// of kBT) with kSmem bytes of dynamic shared memory.
// An expert has at most T users when a token's k ids are distinct (TopK's are); in the plain grid more are taken by
// the kernels' loop (each_tile).
template <auto kernel, size_t kSmem, int kBT, int kRows = kBN>
void launch_tile_kernel(const TileArgs& a, cudaStream_t stream) {
  static const bool attr = [] {  // once per instance, at its first launch (before any graph capture)
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    // The largest shared carveout, so that two blocks fit an SM (left to itself the driver may take less).
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                    int(cudaSharedmemCarveoutMaxShared)));
    return true;
  }();
  (void)attr;
  const MatvecIdParams& p = a.p;
  const unsigned rows = unsigned((p.N + kRows - 1) / kRows);
  if (a.compact) {
    const int64_t slots = moe_gemm_tile_slots(p.n_expert, p.k, p.T, kBT);
    LLM_REQUIRE(slots <= 65535, "moe_gemm: " + std::to_string(p.T) + " tokens x " + std::to_string(p.k) +
                                    " experts need more user tiles than one launch's grid holds");
    if (slots == 0) return;
    kernel<<<dim3(rows, unsigned(slots), 1u), kThreads, kSmem, stream>>>(a);
    return;
  }
  const int64_t z = (p.T + kBT - 1) / kBT;
  kernel<<<dim3(rows, unsigned(p.n_expert), unsigned(z < 65535 ? z : 65535)), kThreads, kSmem, stream>>>(a);
}

// Launches the fragment tiles (moe_fragments.cu) where one serves these products: Q4_K and Q6_K at up to 40 users an
// expert on average (64-user tiles); recoded MXFP4 at up to 90 (64-user tiles, 96 past 40) whose 128 rows' scale bytes fit
// the staging (K <= 3072). False where none does (the caller takes the half-tile kernel).
bool launch_fragment_tiles(const TileArgs& a, bool wide, cudaStream_t stream);

}  // namespace cuda::moe_tiles
