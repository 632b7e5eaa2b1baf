// What the expert-grouped prefill kernels share (moe_gemm.cu: the grouping, x's half copy, the half-tile kernel and
// the dispatch; moe_fragments.cu: the kernels that unpack straight into mma fragments). Internal to those two files.
#pragma once
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/matvec_id.cuh"

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
};

// Tile u0's users: their half-x rows into xrow (t x_slots + slot, or -1 past the expert's count), then a barrier.
template <int kBT>
__device__ inline void load_tile_users(int32_t* xrow, const MatvecIdParams& p, const int32_t* list, int64_t u0,
                                       int32_t count) {
  const int tid = int(threadIdx.x);
  if (tid < kBT) {
    const int64_t ui = u0 + tid;
    int32_t r = -1;
    if (ui < count) {
      const int64_t u = list[ui], t = u / p.k, j = u % p.k;
      r = int32_t(t * p.x_slots + (p.x_slots == 1 ? 0 : j));
    }
    xrow[tid] = r;
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

// A tile kernel over grid (row tiles of kBN, experts, user tiles of kBT) with kSmem bytes of dynamic shared memory.
// An expert has at most T users when a token's k ids are distinct (TopK's are); more are taken by the kernels' loop.
template <auto kernel, size_t kSmem, int kBT>
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
  const int64_t z = (p.T + kBT - 1) / kBT;
  const dim3 grid(unsigned((p.N + kBN - 1) / kBN), unsigned(p.n_expert), unsigned(z < 65535 ? z : 65535));
  kernel<<<grid, kThreads, kSmem, stream>>>(a);
}

// Launches the fragment tiles (moe_fragments.cu) where one serves these products: Q4_K and Q6_K at up to 40 users an
// expert on average (64-user tiles); recoded MXFP4 at up to 90 (64-user tiles, 96 past 40) whose 128 rows' scale bytes fit
// the staging (K <= 3072). False where none does (the caller takes the half-tile kernel).
bool launch_fragment_tiles(const TileArgs& a, bool wide, cudaStream_t stream);

}  // namespace cuda::moe_tiles
