// Routing and the element-wise mixture-of-experts ops (moe.cuh). All small: a decode step's router row has a few
// dozen to a few hundred scores, so one warp per row and one thread per token are enough.
#include "cuda/kernels/moe.cuh"

#include <climits>

#include "cuda/check.h"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/reduce.cuh"

namespace cuda {
namespace {

// k rounds of a warp-wide arg-max over the n values not yet taken (larger value wins, the lower index on equal
// values), so ties come out in index order as the reference's stable sort gives them. vals and taken are the
// warp's shared memory; out[r] is written by lane 0.
__device__ void warp_top_k(const float* vals, uint8_t* taken, int64_t n, int64_t k, int32_t* out) {
  const int lane = threadIdx.x & 31;
  for (int64_t i = lane; i < n; i += 32) taken[i] = 0;
  __syncwarp();
  for (int64_t r = 0; r < k; ++r) {
    float best = -INFINITY;
    int32_t bi = INT_MAX;
    for (int64_t i = lane; i < n; i += 32) {
      const float v = vals[i];
      if (!taken[i] && (v > best || (v == best && int32_t(i) < bi) || bi == INT_MAX)) best = v, bi = int32_t(i);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, o);
      const int32_t oi = __shfl_xor_sync(0xffffffffu, bi, o);
      if (oi != INT_MAX && (bi == INT_MAX || ov > best || (ov == best && oi < bi))) best = ov, bi = oi;
    }
    if (lane == 0) {
      out[r] = bi;
      taken[bi] = 1;
    }
    __syncwarp();
  }
}

constexpr int kMaxK = 64;

// The routing weights of one token from the scores of its k chosen experts (v[0..k)), in double as the CPU
// reference: optionally softmax over the k, optionally divided by their sum (clamped below at the smallest normal
// f16, as llama.cpp guards the division).
__device__ void route_weights(double* v, int k, bool softmax, bool normalize) {
  if (softmax) {
    double m = -INFINITY, s = 0.0;
    for (int j = 0; j < k; ++j) m = fmax(m, v[j]);
    for (int j = 0; j < k; ++j) s += (v[j] = exp(v[j] - m));
    for (int j = 0; j < k; ++j) v[j] /= s;
  }
  if (normalize) {
    double s = 0.0;
    for (int j = 0; j < k; ++j) s += v[j];
    s = fmax(s, 6.103515625e-5);
    for (int j = 0; j < k; ++j) v[j] /= s;
  }
}

// One warp per row.
__global__ void __launch_bounds__(32) top_k_kernel(TopKKernelParams p) {
  extern __shared__ float vals[];  // [n], then n taken flags
  const float* a = p.a + int64_t(blockIdx.x) * p.n;
  for (int64_t i = threadIdx.x; i < p.n; i += 32) vals[i] = a[i];
  __syncwarp();
  warp_top_k(vals, reinterpret_cast<uint8_t*>(vals + p.n), p.n, p.k, p.out + int64_t(blockIdx.x) * p.k);
}

// One thread per token: k is small (2 to 8 in the supported models).
__global__ void moe_weights_kernel(MoeWeightsKernelParams p) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.T) return;
  double v[kMaxK];
  const int k = int(p.k);
  for (int j = 0; j < k; ++j) {
    const int32_t e = p.ids[t * p.k + j];
    v[j] = e >= 0 && e < p.n_expert ? double(p.scores[t * p.n_expert + e]) : 0.0;
  }
  route_weights(v, k, p.softmax, p.normalize);
  for (int j = 0; j < k; ++j) p.out[t * p.k + j] = float(v[j]);
}

// One warp per token: the router's logits (optionally softmax over all of them first, as the Softmax op computes
// it), the top k, and their weights, in one launch.
__global__ void __launch_bounds__(32) moe_route_kernel(MoeRouteParams p) {
  extern __shared__ float vals[];  // [n], then n taken flags
  const int lane = threadIdx.x;
  const int64_t t = blockIdx.x;
  const float* a = p.logits + t * p.n_expert;
  pdl_launch_dependents();
  pdl_wait();  // the router's logits
  float m = -INFINITY;
  for (int64_t i = lane; i < p.n_expert; i += 32) vals[i] = a[i], m = fmaxf(m, vals[i]);
  if (p.softmax_all) {
    m = warp_max(m);
    float s = 0.0f;
    for (int64_t i = lane; i < p.n_expert; i += 32) s += expf(vals[i] - m);
    const float inv = 1.0f / warp_sum_f(s);
    for (int64_t i = lane; i < p.n_expert; i += 32) vals[i] = expf(vals[i] - m) * inv;
  }
  __syncwarp();
  int32_t* ids = p.ids + t * p.k;
  warp_top_k(vals, reinterpret_cast<uint8_t*>(vals + p.n_expert), p.n_expert, p.k, ids);
  if (lane == 0) {
    double v[kMaxK];
    const int k = int(p.k);
    for (int j = 0; j < k; ++j) v[j] = double(vals[ids[j]]);
    route_weights(v, k, p.softmax_chosen, p.normalize);
    for (int j = 0; j < k; ++j) p.weights[t * p.k + j] = float(v[j]);
  }
}

__global__ void swiglu_oai_kernel(SwiGluOaiKernelParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  const float g = fminf(p.gate[i], p.limit);
  const float u = fminf(fmaxf(p.up[i], -p.limit), p.limit);
  p.out[i] = g / (1.0f + expf(-p.alpha * g)) * (u + 1.0f);
}

__global__ void weighted_sum_kernel(WeightedSumParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.ne0 * p.T) return;
  const int64_t t = i / p.ne0, d = i % p.ne0;
  const float* a = p.a + t * p.k * p.ne0 + d;
  const float* w = p.w + t * p.k;
  float s = 0.0f;
  for (int64_t j = 0; j < p.k; ++j) s = fmaf(w[j], a[j * p.ne0], s);
  p.out[i] = s;
}

unsigned blocks_of(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace

void launch_top_k(const TopKKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.a && p.out, "null pointer");
  LLM_REQUIRE(p.n > 0 && p.n <= kTopKMaxN && p.k > 0 && p.k <= p.n && p.rows > 0 && p.rows <= 0x7fffffff,
              "top_k: bad shape");
  top_k_kernel<<<unsigned(p.rows), 32, size_t(p.n) * 5, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_moe_weights(const MoeWeightsKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.scores && p.ids && p.out, "null pointer");
  LLM_REQUIRE(p.n_expert > 0 && p.k > 0 && p.k <= 64 && p.T > 0, "moe_weights: bad shape (k at most 64)");
  moe_weights_kernel<<<blocks_of(p.T, 64), 64, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_moe_route(const MoeRouteParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.logits && p.ids && p.weights, "null pointer");
  LLM_REQUIRE(p.n_expert > 0 && p.n_expert <= kTopKMaxN && p.k > 0 && p.k <= p.n_expert && p.k <= kMaxK &&
                  p.T > 0 && p.T <= 0x7fffffff,
              "moe_route: bad shape");
  launch_pdl(moe_route_kernel, dim3(unsigned(p.T)), dim3(32), size_t(p.n_expert) * 5, stream, p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_swiglu_oai(const SwiGluOaiKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.gate && p.up && p.out && p.n > 0, "swiglu_oai: bad params");
  swiglu_oai_kernel<<<blocks_of(p.n, 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_weighted_sum(const WeightedSumParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.a && p.w && p.out && p.ne0 > 0 && p.k > 0 && p.T > 0, "weighted_sum: bad params");
  weighted_sum_kernel<<<blocks_of(p.ne0 * p.T, 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
