// Prefill products of the chosen experts (graph/ir.h MulMatId with many tokens), grouped by expert on the device:
// a grouping launch lists each expert's (token, slot) users from the ids, the inputs are rounded to half once, then
// one launch of tensor-core tiles (128 rows of an expert x 64 or 128 of its users) reads each chosen expert's rows
// once per tile of users instead of once per user, and experts nobody chose not at all. The ids never leave the
// device, so a prefill step is capturable too.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/expert_matvec.cuh"
#include "cuda/kernels/matvec_id.cuh"
#include "quant/types.h"

namespace cuda {

// K rounded up to the tiles' K step: the row length of the half copy of x.
inline int64_t moe_gemm_padded_k(int64_t K) { return (K + 63) / 64 * 64; }

// Bytes of the grouping (int32 counts, offsets, user lists of n_expert experts and k x T users), rounded up to 256:
// where the half copy of x starts in the scratch.
inline size_t moe_gemm_x_offset(int64_t n_expert, int64_t k, int64_t T) {
  return (size_t(2 * n_expert + k * T) * 4 + 255) / 256 * 256;
}

// Device scratch of launch_moe_gemm: the grouping, then x as half ([x_slots T][moe_gemm_padded_k(K)]).
inline size_t moe_gemm_scratch_bytes(int64_t n_expert, int64_t k, int64_t T, int64_t K, int64_t x_slots) {
  return moe_gemm_x_offset(n_expert, k, T) + size_t(x_slots * T) * size_t(moe_gemm_padded_k(K)) * 2;
}

// The (expert, user tile) pairs the compact tile grid provides for tiles of users_per_tile users (moe_tiles.cuh's
// tile_place): the sum over experts of ceil(count / users_per_tile) is at most this whatever the ids, since the
// counts add up to at most k T and at most min(n_expert, k T) of them are non-zero.
inline int64_t moe_gemm_tile_slots(int64_t n_expert, int64_t k, int64_t T, int64_t users_per_tile) {
  const int64_t users = k * T, nonzero = n_expert < users ? n_expert : users;
  return (users + (users_per_tile - 1) * nonzero) / users_per_tile;
}

// How a launch runs. reuse_*: what it may take from the scratch as the previous launch on it left it. A prefill
// layer's gate and up products read the same ids and x, and down the same ids: the grouping (one block) and x's
// half copy need not be redone (Qwen3-30B-A3B: ~1 ms of a 32 ms pp512). The caller vouches that the previous launch
// on this scratch had the same ids (groups) or the same x, K and x_slots (x), and that neither changed since.
// half_tiles: the half-tile kernel for every format, not the fragment kernels (moe_fragments.cu): tests compare
// them, ExecutorOptions::moe_fragments (LLM_CUDA_MOE_FRAGMENTS=0) sets it for A/B runs.
// compact_tiles: the tile launches' grid is (row tiles, the live (expert, user tile) pairs), one tile a block, instead
// of (row tiles, experts, T / tile users) with the blocks past an expert's count exiting (false; ExecutorOptions::
// moe_compact_tiles; the same bits either way).
// glu: the later product of a gate/up pair writes act(gate, up) as half into out ([k T][N], N a multiple of 64: the
// down product's half x, which its launch then takes as x_half) instead of its own y; other is the pair's earlier
// product ([k T][N] floats, its bias added), read back output by output. The SwiGlu launch, the down launch's x
// pass and this product's float output go (Executor::plan_moe_glu_out).
// x_half: x already in half as the tiles read it ([x_slots T][K], K a multiple of 64): no x pass.
// up_w (moe_gemm_pairs): both products of the pair in this one launch, p the gate's (w, bias) and up_w / up_bias the
// up's, so neither product is stored and other is not read: each block takes 64 rows of both and forms the
// activation in shared memory.
struct MoeGluOut {
  const float* other = nullptr;
  __half* out = nullptr;
  bool acc_is_gate = false;  // this product is the gate (other the up), else the up
  ExpertAct act = ExpertAct::SwiGlu;
  float alpha = 0.0f, limit = 0.0f;  // SwiGluOai's
  const void* up_w = nullptr;
  const float* up_bias = nullptr;
};

// Whether launch_moe_gemm takes a gate/up pair of this type in one launch (MoeGluOut::up_w): Q4_K at up to 40 users
// an expert on average (the 64-user fragment tiles).
inline bool moe_gemm_pairs(quant::Type type, int64_t n_expert, int64_t k, int64_t T) {
  return type == quant::Type::Q4_K && k * T <= 40 * n_expert;
}
struct MoeGemmOptions {
  bool reuse_groups = false;
  bool reuse_x = false;
  bool half_tiles = false;
  bool compact_tiles = true;  // the tiles' grid over live (expert, user tile) pairs only (moe_tiles.cuh)
  MoeGluOut glu;
  const __half* x_half = nullptr;
};

// Where a gate/up pair's activation (MoeGluOut::out) goes in the scratch of launches of n_expert experts, k slots,
// T tokens and gate/up inputs of K elements in x_slots columns: past what the pair's own launches use, and how many
// bytes the scratch then needs for N activations a user.
inline size_t moe_glu_out_offset(int64_t n_expert, int64_t k, int64_t T, int64_t K, int64_t x_slots) {
  return (moe_gemm_scratch_bytes(n_expert, k, T, K, x_slots) + 255) / 256 * 256;
}
inline size_t moe_glu_scratch_bytes(int64_t n_expert, int64_t k, int64_t T, int64_t K, int64_t x_slots, int64_t N) {
  return moe_glu_out_offset(n_expert, k, T, K, x_slots) + size_t(k * T) * size_t(N) * 2;
}

// p as for launch_matvec_id (any T); scratch holds moe_gemm_scratch_bytes(n_expert, k, T, K, x_slots) bytes,
// 16-byte aligned; the weights are 16-byte aligned (the arena aligns every tensor to 256).
void launch_moe_gemm(const MatvecIdParams& p, void* scratch, size_t scratch_bytes, cudaStream_t stream,
                     MoeGemmOptions options = {});

}  // namespace cuda
