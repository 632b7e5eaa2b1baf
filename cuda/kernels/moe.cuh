// The mixture-of-experts kernels around the expert products (graph/ir.h TopK, MoeWeights, SwiGluOai, WeightedSum):
// routing reads the router's scores and writes expert ids and weights to device memory, where the products
// (matvec_id.cuh, moe_gemm.cuh) read them, so a decode step needs no host round trip and stays one captured graph.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// The k largest of each row, largest first, equal values in index order (the CPU reference's stable sort).
struct TopKKernelParams {
  const float* a = nullptr;  // [n, rows]
  int32_t* out = nullptr;    // [k, rows]
  int64_t n = 0;             // <= kTopKMaxN
  int64_t k = 0;             // 1..n
  int64_t rows = 0;
};
inline constexpr int64_t kTopKMaxN = 4096;  // a row and its taken flags in shared memory
void launch_top_k(const TopKKernelParams& p, cudaStream_t stream);

// scores[ids[j, t], t], then optionally softmax over the k and / or division by their sum (clamped below at the
// smallest normal f16, as the reference), in double as the CPU reference.
struct MoeWeightsKernelParams {
  const float* scores = nullptr;  // [n_expert, T]
  const int32_t* ids = nullptr;   // [k, T], each in [0, n_expert) (TopK's output)
  float* out = nullptr;           // [k, T]
  int64_t n_expert = 0, k = 0, T = 0;
  bool softmax = false;
  bool normalize = false;
};
void launch_moe_weights(const MoeWeightsKernelParams& p, cudaStream_t stream);

// What a mixture's routing reads and how it weighs its choices: softmax_all: the top k of softmax(logits) (the
// Softmax op's values) with weights from those probabilities; otherwise the top k of the logits. softmax_chosen /
// normalize as MoeWeightsKernelParams. The logits may come as n_parts partial sums ([n_parts][T][n_expert], added
// in part order after the bias). The routing launch below takes it, and so do the decode expert launches that
// route their tokens themselves (expert_matvec.cuh, moe_route_block.cuh).
// With norm_ss set, the router's input was an RmsNorm folded into the parts (RouterPartsParams::norm_w): the parts
// are of x w, norm_ss holds each part's sum of squares of x, and a logit is (sum of the parts) / rms(x) + bias.
struct MoeRouteSource {
  const float* logits = nullptr;  // [n_parts][T][n_expert]
  int64_t n_expert = 0, k = 0, T = 0;  // n_expert <= kTopKMaxN, k <= 32 (a lane per choice)
  int n_parts = 1;
  const float* bias = nullptr;    // [n_expert] or null: added to every token's logits first
  const float* norm_ss = nullptr; // [n_parts][T] or null
  int64_t norm_k = 0;             // the norm's row length
  float norm_eps = 0.0f;
  bool softmax_all = false;
  bool softmax_chosen = false;
  bool normalize = false;
};

// TopK and MoeWeights in one launch over the router's logits (the executor's fusion of a mixture's routing). The
// ids are written where the TopK op's output lives, the weights where MoeWeights' does. A block reads all of its
// per_block tokens' rows before it writes anything: with per_block = T (one block) the outputs may share bytes with
// the logits.
struct MoeRouteParams : MoeRouteSource {
  int32_t* ids = nullptr;         // [k, T]
  float* weights = nullptr;       // [k, T]
  int32_t* ids_copy = nullptr;    // set: the ids and weights also here (the executor's private copy, which the
  float* weights_copy = nullptr;  // fused expert launches read, so the graph's slots of both may be reused)
  int64_t per_block = 1;
  // Set: the launch lets the next one (a programmatic gate/up launch, ExpertGluParams::programmatic) start only once
  // the logits are read, so that its blocks become resident while this one ranks and weighs (resident early, during
  // the router's and the o launches, they cost 3.7%: kernel notes, session 44; after the rank, 0.7%: session 46).
  bool late_dependents = false;
};
// A block's routing of one token (moe_route_block.cuh) serves up to kRouteBlockMaxExperts experts in
// kRouteBlockSmem bytes of shared memory; past that the launch routes by warps (k rounds of arg-max).
inline constexpr int64_t kRouteBlockMaxExperts = 256;
inline constexpr size_t kRouteBlockSmem = kRouteBlockMaxExperts * 12 + 32 * 8;
inline constexpr size_t kMoeRouteMaxSmem = 48 << 10;
// Where a kernel's routing scratch goes after `bytes` of its other shared memory: 16-byte aligned, since the
// ranking reads two 64-bit keys a load (moe_route_block.cuh).
inline constexpr size_t route_scratch_at(size_t bytes) { return (bytes + 15) / 16 * 16; }
// The rows of per_block tokens, then the block's routing scratch or (more experts) a row of taken flags a token.
inline constexpr size_t moe_route_smem(int64_t n_expert, int64_t per_block) {
  const size_t rows = size_t(n_expert) * size_t(per_block) * 4;
  return n_expert <= kRouteBlockMaxExperts ? route_scratch_at(rows) + kRouteBlockSmem : rows + rows / 4;
}
void launch_moe_route(const MoeRouteParams& p, cudaStream_t stream);

// A mixture's router product as n_parts partial sums over slices of K (the float32 router of a decode step: a
// narrow matrix, n_expert rows, whose one-pass matvec leaves most of the GPU idle), for moe_route to add in part
// order: parts[q][t][n] = sum over k in slice q of w[n][k] x[t][k]. The router's bias, if any, is moe_route's.
struct RouterPartsParams {
  const float* w = nullptr;  // [K, n_expert] float32
  const float* x = nullptr;  // [K, T]
  float* parts = nullptr;    // [n_parts][T][n_expert]
  // Set (decode, T below kF32ColumnsMin): x is an RmsNorm's input, folded in: the parts are of x norm_w, each part's
  // sum of squares of x goes to norm_ss[q][t] for the routing to finish the norm (MoeRouteSource::norm_ss), and
  // x norm_w itself to xw for the gate/up launch (ExpertGluParams::norm_ss).
  const float* norm_w = nullptr;  // [K]
  float* norm_ss = nullptr;       // [n_parts][T]
  float* xw = nullptr;            // [K, T]
  int64_t K = 0, n_expert = 0, T = 0;
  int n_parts = 0;           // router_parts_count(K)
  bool outer_tiles = true;  // from kF32ColumnsMin tokens: launch_f32_column_parts' 64 x 64 tiles where they fit
                            // (the executor's default, ExecutorOptions::router_outer_tiles)
};
int router_parts_count(int64_t K);
void launch_router_parts(const RouterPartsParams& p, cudaStream_t stream);

// gpt-oss's clamped SwiGLU: g' sigmoid(alpha g') (u' + 1), g' = min(gate, limit), u' = clamp(up, -limit, limit).
struct SwiGluOaiKernelParams {
  const float* gate = nullptr;  // [n]
  const float* up = nullptr;    // [n]
  float* out = nullptr;         // [n]
  int64_t n = 0;
  float alpha = 1.702f;
  float limit = 7.0f;
};
void launch_swiglu_oai(const SwiGluOaiKernelParams& p, cudaStream_t stream);

// out[:, t] = sum_j w[j, t] a[:, j, t]: the chosen experts' outputs mixed by their weights (j in order).
struct WeightedSumParams {
  const float* a = nullptr;  // [ne0, k, T]
  const float* w = nullptr;  // [k, T]
  float* out = nullptr;      // [ne0, T]
  int64_t ne0 = 0, k = 0, T = 0;
};
void launch_weighted_sum(const WeightedSumParams& p, cudaStream_t stream);

}  // namespace cuda
