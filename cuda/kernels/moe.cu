// Routing and the element-wise mixture-of-experts ops (moe.cuh). All small: a decode step's router row has a few
// dozen to a few hundred scores; the routing launch takes a block a token (moe_route_block.cuh), the unfused TopK a
// warp a row, MoeWeights a thread a token.
#include "cuda/kernels/moe.cuh"

#include <algorithm>
#include <climits>

#include "cuda/check.h"
#include "cuda/kernels/matvec_f32_cols.cuh"
#include "cuda/kernels/moe_route_block.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/reduce.cuh"
#include "cuda/kernels/swiglu.cuh"

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

constexpr int kRouteThreads = 512;  // four lanes an expert ranking 128 (rank_scores)

// route_weights with lane j < k holding choice j's score (moe_route_block.cuh).
using route::warp_route_weight;

// Token r of a block (more experts than the block's routing serves): one warp's softmax over the row in shared
// memory (in place), its k rounds of arg-max and the weights; lane j < k ends with choice j in id and w.
__device__ void route_row_warp(const MoeRouteParams& p, float* row, uint8_t* taken, int32_t* ids, int32_t& id,
                               double& w) {
  const int lane = threadIdx.x & 31;
  const int64_t n = p.n_expert;
  if (p.softmax_all) {
    float m = -INFINITY;
    for (int64_t i = lane; i < n; i += 32) m = fmaxf(m, row[i]);
    m = warp_max(m);
    float s = 0.0f;
    for (int64_t i = lane; i < n; i += 32) s += expf(row[i] - m);
    const float inv = 1.0f / warp_sum_f(s);
    for (int64_t i = lane; i < n; i += 32) row[i] = expf(row[i] - m) * inv;
    __syncwarp();
  }
  warp_top_k(row, taken, n, p.k, ids);
  __syncwarp();
  float val = 0.0f;
  id = 0;
  if (lane < p.k) id = ids[lane], val = row[id];
  w = warp_route_weight(double(val), int(p.k), p.softmax_chosen, p.normalize);
}

// A block's tokens (p.per_block of them): every thread first loads the router's partial sums of all of them (bias,
// then parts in order) into shared memory. Then, up to kRouteBlockMaxExperts experts, the whole block routes each
// token in turn (moe_route_block.cuh: the optional softmax over all experts, as the Softmax op computes it, the
// top k by ranks, their weights); past that each warp routes its tokens (route_row_warp). Reading every row before
// any write lets the outputs share bytes with the logits when one block holds every token.
__global__ void __launch_bounds__(kRouteThreads) moe_route_kernel(MoeRouteParams p) {
  extern __shared__ float vals[];  // [per_block][n], then the block's routing scratch or [per_block][n] taken flags
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  const int64_t n = p.n_expert, t0 = int64_t(blockIdx.x) * p.per_block;
  const int64_t rows = p.T - t0 < p.per_block ? p.T - t0 : p.per_block;
  if (!p.late_dependents) pdl_launch_dependents();
  pdl_wait();  // a programmatic dependent of the launch before (the router's): resident before the scores are in
  for (int64_t i = threadIdx.x; i < rows * n; i += blockDim.x) vals[i] = route::logit(p, t0 + i / n, int(i % n));
  __syncthreads();
  if (p.late_dependents) pdl_launch_dependents();
  const auto write = [&](int64_t r, int32_t id, double w) {
    const int64_t at = (t0 + r) * p.k + lane;
    p.ids[at] = id, p.weights[at] = float(w);
    if (p.ids_copy) p.ids_copy[at] = id, p.weights_copy[at] = float(w);
  };
  if (n <= kRouteBlockMaxExperts) {
    auto& s = *reinterpret_cast<route::Shared*>(reinterpret_cast<char*>(vals) +
                                                route_scratch_at(size_t(p.per_block * n) * sizeof(float)));
    for (int64_t r = 0; r < rows; ++r) {
      if (warp == 0) {
        float* row = vals + r * n;
        if (p.softmax_all) route::softmax_row(row, int(n));
        __syncwarp();
        route::put_scores(s, row, int(n));
      }
      route::rank_scores(s, int(n), int(p.k), 8);
      if (warp == 0) {
        route::choose_weights(s, p);
        if (lane < p.k) write(r, s.id[lane], s.weight[lane]);
      }
    }
    return;
  }
  auto* taken = reinterpret_cast<uint8_t*>(vals + p.per_block * n);
  for (int64_t r = warp; r < rows; r += n_warps) {
    int32_t id;
    double w;
    route_row_warp(p, vals + r * n, taken + r * n, p.ids + (t0 + r) * p.k, id, w);
    if (lane < p.k) write(r, id, w);
  }
}

constexpr int kRouterSlice = 256;      // K per part: 64 float4, two per lane
constexpr int kRouterRowsPerWarp = 4;
constexpr int kRouterWarps = 8;

// Block (part q, row block, token t): each warp dots kRouterRowsPerWarp rows over the part's slice of K, every lane
// two float4 of each row in flight at once.
__global__ void __launch_bounds__(kRouterWarps * 32) router_parts_kernel(RouterPartsParams p) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t q = blockIdx.x, t = blockIdx.z;
  const int64_t n0 = (int64_t(blockIdx.y) * kRouterWarps + warp) * kRouterRowsPerWarp;
  const int64_t k0 = q * kRouterSlice, k1 = k0 + kRouterSlice < p.K ? k0 + kRouterSlice : p.K;
  pdl_launch_dependents();
  float acc[kRouterRowsPerWarp] = {};
  float4 w[kRouterRowsPerWarp][2];
  const int64_t ka = k0 + 4 * lane, kb = ka + 128;
#pragma unroll
  for (int r = 0; r < kRouterRowsPerWarp; ++r) {  // the weights: before the wait (no kernel writes them)
    const int64_t n = n0 + r < p.n_expert ? n0 + r : p.n_expert - 1;
    const float* row = p.w + n * p.K;
    w[r][0] = ka < k1 ? __ldg(reinterpret_cast<const float4*>(row + ka)) : make_float4(0, 0, 0, 0);
    w[r][1] = kb < k1 ? __ldg(reinterpret_cast<const float4*>(row + kb)) : make_float4(0, 0, 0, 0);
  }
  float4 na = make_float4(1, 1, 1, 1), nb = na;  // the folded norm's weights
  if (p.norm_w) {
    na = ka < k1 ? __ldg(reinterpret_cast<const float4*>(p.norm_w + ka)) : make_float4(0, 0, 0, 0);
    nb = kb < k1 ? __ldg(reinterpret_cast<const float4*>(p.norm_w + kb)) : make_float4(0, 0, 0, 0);
  }
  pdl_wait();  // x
  const float* x = p.x + t * p.K;
  float4 xa = ka < k1 ? *reinterpret_cast<const float4*>(x + ka) : make_float4(0, 0, 0, 0);
  float4 xb = kb < k1 ? *reinterpret_cast<const float4*>(x + kb) : make_float4(0, 0, 0, 0);
  if (p.norm_w) {  // the slice's sum of squares and x w, written by one warp of the slice's blocks
    float ss = 0.0f;
    for (const float v : {xa.x, xa.y, xa.z, xa.w, xb.x, xb.y, xb.z, xb.w}) ss = fmaf(v, v, ss);
    ss = warp_sum_f(ss);
    xa = make_float4(xa.x * na.x, xa.y * na.y, xa.z * na.z, xa.w * na.w);
    xb = make_float4(xb.x * nb.x, xb.y * nb.y, xb.z * nb.z, xb.w * nb.w);
    if (blockIdx.y == 0 && warp == 0) {
      if (lane == 0) p.norm_ss[q * p.T + t] = ss;
      float* xw = p.xw + t * p.K;
      if (ka < k1) *reinterpret_cast<float4*>(xw + ka) = xa;
      if (kb < k1) *reinterpret_cast<float4*>(xw + kb) = xb;
    }
  }
#pragma unroll
  for (int r = 0; r < kRouterRowsPerWarp; ++r) {
    const float4 a = w[r][0], b = w[r][1];
    acc[r] = a.x * xa.x + a.y * xa.y + a.z * xa.z + a.w * xa.w + b.x * xb.x + b.y * xb.y + b.z * xb.z + b.w * xb.w;
  }
  const float v = warp_sum_rows<kRouterRowsPerWarp>(acc, lane);
  const int64_t n = n0 + lane / (32 / kRouterRowsPerWarp);
  if ((lane & (32 / kRouterRowsPerWarp - 1)) == 0 && n < p.n_expert) p.parts[(q * p.T + t) * p.n_expert + n] = v;
}

__global__ void swiglu_oai_kernel(SwiGluOaiKernelParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.n) return;
  p.out[i] = swiglu_oai(p.gate[i], p.up[i], p.alpha, p.limit);
}

__global__ void weighted_sum_kernel(WeightedSumParams p) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.ne0 * p.T) return;
  const int64_t t = i / p.ne0, d = i % p.ne0;
  const float* a = p.a + t * p.k * p.ne0 + d;
  const float* w = p.w + t * p.k;
  float s = 0.0f;
#pragma unroll 8
  for (int64_t j = 0; j < p.k; ++j) s = fmaf(w[j], a[j * p.ne0], s);
  p.out[i] = s;
}

// weighted_sum_kernel four outputs a thread (ne0 a multiple of 4, 16-byte aligned a and out: every model's), each
// the same fma chain in j order, a thread's k loads in flight together (unrolled): the one-output form with its loop
// not unrolled took 13 us a layer of Qwen3-30B-A3B's pp512 for 38 MB.
__global__ void weighted_sum4_kernel(WeightedSumParams p) {
  const int64_t i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 4;
  if (i >= p.ne0 * p.T) return;
  const int64_t t = i / p.ne0, d = i % p.ne0;
  const float* a = p.a + t * p.k * p.ne0 + d;
  const float* w = p.w + t * p.k;
  float4 s = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll 8
  for (int64_t j = 0; j < p.k; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(a + j * p.ne0);
    const float wj = w[j];
    s.x = fmaf(wj, v.x, s.x), s.y = fmaf(wj, v.y, s.y), s.z = fmaf(wj, v.z, s.z), s.w = fmaf(wj, v.w, s.w);
  }
  *reinterpret_cast<float4*>(p.out + i) = s;
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
  LLM_REQUIRE(p.n_expert > 0 && p.n_expert <= kTopKMaxN && p.k > 0 && p.k <= p.n_expert && p.k <= 32 &&
                  p.T > 0 && p.T <= 0x7fffffff,
              "moe_route: bad shape");
  LLM_REQUIRE(p.n_parts >= 1 && p.per_block >= 1 && p.per_block <= p.T &&
                  moe_route_smem(p.n_expert, p.per_block) <= kMoeRouteMaxSmem,
              "moe_route: bad parts or tokens per block");
  const unsigned blocks = unsigned((p.T + p.per_block - 1) / p.per_block);
  launch_pdl(moe_route_kernel, dim3(blocks), dim3(kRouteThreads), moe_route_smem(p.n_expert, p.per_block), stream, p);
  CUDA_CHECK_LAUNCH(stream);
}

int router_parts_count(int64_t K) { return int((K + kRouterSlice - 1) / kRouterSlice); }

void launch_router_parts(const RouterPartsParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.parts, "router_parts: null pointer");
  if (p.T >= kF32ColumnsMin) {  // many tokens (prefill): tiles that read the matrix once per 32 columns
    LLM_REQUIRE(p.n_parts == router_parts_count(p.K) && !p.norm_w, "router_parts: bad shape");
    launch_f32_column_parts(p.w, p.x, p.parts, p.K, p.n_expert, p.T, kRouterSlice, stream, p.outer_tiles);
    return;
  }
  LLM_REQUIRE(p.K > 0 && p.K % 4 == 0 && p.n_expert > 0 && p.T > 0 && p.T <= 65535 &&
                  p.n_parts == router_parts_count(p.K) && (!p.norm_w || (p.norm_ss && p.xw)),
              "router_parts: bad shape");
  const int64_t rows = int64_t(kRouterWarps) * kRouterRowsPerWarp;
  launch_pdl(router_parts_kernel, dim3(unsigned(p.n_parts), unsigned((p.n_expert + rows - 1) / rows), unsigned(p.T)),
             dim3(kRouterWarps * 32), 0, stream, p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_swiglu_oai(const SwiGluOaiKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.gate && p.up && p.out && p.n > 0, "swiglu_oai: bad params");
  swiglu_oai_kernel<<<blocks_of(p.n, 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_weighted_sum(const WeightedSumParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.a && p.w && p.out && p.ne0 > 0 && p.k > 0 && p.T > 0, "weighted_sum: bad params");
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (p.ne0 % 4 == 0 && a16(p.a) && a16(p.out))
    weighted_sum4_kernel<<<blocks_of(p.ne0 * p.T / 4, 256), 256, 0, stream>>>(p);
  else
    weighted_sum_kernel<<<blocks_of(p.ne0 * p.T, 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
