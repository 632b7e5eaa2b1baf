// Routing and the element-wise mixture-of-experts ops (moe.cuh). All small: a decode step's router row has a few
// dozen to a few hundred scores, so one warp per row and one thread per token are enough.
#include "cuda/kernels/moe.cuh"

#include <climits>

#include "cuda/check.h"

namespace cuda {
namespace {

// One warp per row: k rounds of a warp-wide arg-max over the values not yet taken (larger value wins, the lower
// index on equal values), so ties come out in index order as the reference's stable sort gives them.
__global__ void __launch_bounds__(32) top_k_kernel(TopKKernelParams p) {
  extern __shared__ float vals[];  // [n], then n taken flags
  auto* taken = reinterpret_cast<uint8_t*>(vals + p.n);
  const int lane = threadIdx.x;
  const float* a = p.a + int64_t(blockIdx.x) * p.n;
  for (int64_t i = lane; i < p.n; i += 32) vals[i] = a[i], taken[i] = 0;
  __syncwarp();
  for (int64_t r = 0; r < p.k; ++r) {
    float best = -INFINITY;
    int32_t bi = INT_MAX;
    for (int64_t i = lane; i < p.n; i += 32) {
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
      p.out[int64_t(blockIdx.x) * p.k + r] = bi;
      taken[bi] = 1;
    }
    __syncwarp();
  }
}

// One thread per token: k is small (2 to 8 in the supported models).
__global__ void moe_weights_kernel(MoeWeightsKernelParams p) {
  const int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= p.T) return;
  constexpr int kMaxK = 64;
  double v[kMaxK];
  const int k = int(p.k);
  for (int j = 0; j < k; ++j) {
    const int32_t e = p.ids[t * p.k + j];
    v[j] = e >= 0 && e < p.n_expert ? double(p.scores[t * p.n_expert + e]) : 0.0;
  }
  if (p.softmax) {
    double m = -INFINITY, s = 0.0;
    for (int j = 0; j < k; ++j) m = fmax(m, v[j]);
    for (int j = 0; j < k; ++j) s += (v[j] = exp(v[j] - m));
    for (int j = 0; j < k; ++j) v[j] /= s;
  }
  if (p.normalize) {
    double s = 0.0;
    for (int j = 0; j < k; ++j) s += v[j];
    s = fmax(s, 6.103515625e-5);  // the smallest normal f16, as llama.cpp guards the division
    for (int j = 0; j < k; ++j) v[j] /= s;
  }
  for (int j = 0; j < k; ++j) p.out[t * p.k + j] = float(v[j]);
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
