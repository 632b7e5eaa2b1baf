// Attention and the o projection as one split-K launch (attention_o.cuh).
#include "cuda/kernels/attention_o.cuh"

#include <cuda_fp16.h>

#include "cuda/check.h"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/q4_0_cols.cuh"

namespace cuda {
namespace {

using mv16::Run;
constexpr int kHd = 128, kThreads = 512, kWarps = kThreads / 32, kQuarters = 4, kColsH = kHd / 32;
constexpr int kSlotChunk = 8;  // slots a warp loads at once: 16 warps x 8 cover a 128-slot context in one round

// Head h's attention over slots [0, pos] into att[128]: warp w takes slots w, w + 16, ..., lane l dimensions
// 4l..4l+3, an online softmax per warp, then the warps' states merged in warp order.
__device__ __forceinline__ void attend(const AttentionOParams& p, int h, float* att, float (*wacc)[kHd], float* wm,
                                       float* wl) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int g = h / (p.n_head / p.n_head_kv);
  const int pos = *p.position;
  const float4 qv = reinterpret_cast<const float4*>(p.q + size_t(h) * kHd)[lane];
  const float q0 = qv.x * p.scale, q1 = qv.y * p.scale, q2 = qv.z * p.scale, q3 = qv.w * p.scale;
  const __half* K = reinterpret_cast<const __half*>(p.k_cache) + size_t(g) * p.n_ctx * kHd;
  const __half* V = reinterpret_cast<const __half*>(p.v_cache) + size_t(g) * p.n_ctx * kHd;
  float m = -INFINITY, l = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  for (int s0 = warp; s0 <= pos; s0 += kWarps * kSlotChunk) {
    uint2 kr[kSlotChunk], vr[kSlotChunk];
#pragma unroll
    for (int i = 0; i < kSlotChunk; ++i) {
      const int s = s0 + kWarps * i;
      if (s <= pos) {
        kr[i] = reinterpret_cast<const uint2*>(K + size_t(s) * kHd)[lane];
        vr[i] = reinterpret_cast<const uint2*>(V + size_t(s) * kHd)[lane];
      }
    }
    float sc[kSlotChunk];
    float cm = m;
#pragma unroll
    for (int i = 0; i < kSlotChunk; ++i) {
      float d = -INFINITY;
      if (s0 + kWarps * i <= pos) {
        const float2 k01 = __half22float2(*reinterpret_cast<const __half2*>(&kr[i].x));
        const float2 k23 = __half22float2(*reinterpret_cast<const __half2*>(&kr[i].y));
        d = q0 * k01.x + q1 * k01.y + q2 * k23.x + q3 * k23.y;
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
      }
      sc[i] = d;
      cm = fmaxf(cm, d);
    }
    const float corr = m == -INFINITY ? 0.0f : __expf(m - cm);
    l *= corr, a0 *= corr, a1 *= corr, a2 *= corr, a3 *= corr;
#pragma unroll
    for (int i = 0; i < kSlotChunk; ++i) {
      if (sc[i] == -INFINITY) continue;
      const float e = __expf(sc[i] - cm);
      const float2 v01 = __half22float2(*reinterpret_cast<const __half2*>(&vr[i].x));
      const float2 v23 = __half22float2(*reinterpret_cast<const __half2*>(&vr[i].y));
      l += e, a0 += e * v01.x, a1 += e * v01.y, a2 += e * v23.x, a3 += e * v23.y;
    }
    m = cm;
  }
  if (lane == 0) wm[warp] = m, wl[warp] = l;
  wacc[warp][4 * lane] = a0, wacc[warp][4 * lane + 1] = a1;
  wacc[warp][4 * lane + 2] = a2, wacc[warp][4 * lane + 3] = a3;
  __syncthreads();
  if (threadIdx.x < kHd) {
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w]);
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (wm[w] == -INFINITY) continue;  // a warp that had no slot
      const float f = __expf(wm[w] - M);
      L += wl[w] * f, A += wacc[w][threadIdx.x] * f;
    }
    att[threadIdx.x] = A / L;
  }
}

template <int kRowsT>  // o rows per thread: D / 4 / 512
__global__ void __launch_bounds__(kThreads, 1) attention_o_kernel(AttentionOParams p) {
  __shared__ float wm[kWarps], wl[kWarps], wacc[kWarps][kHd], att[kHd];
  __shared__ Run runs[2 * kColsH];
  const int64_t D = int64_t(kHd) * p.n_head;
  const int h = int(blockIdx.x) / kQuarters, quarter = int(blockIdx.x) % kQuarters;
  const int64_t row0 = quarter * (D / kQuarters) + threadIdx.x;
  const auto* w = static_cast<const uint8_t*>(p.o);
  uint4 wq[kColsH][kRowsT];
  uint32_t wd[kColsH][kRowsT];
  pdl_launch_dependents();
#pragma unroll
  for (int c = 0; c < kColsH; ++c)  // o's weights: before the wait, overlapping the previous kernel
#pragma unroll
    for (int j = 0; j < kRowsT; ++j) {
      const Q4_0ColsBlock b = q4_0_cols_block(w, D, D, row0 + kThreads * j, kColsH * h + c);
      wq[c][j] = mv::ldg_w(reinterpret_cast<const uint4*>(b.qs));
      wd[c][j] = mv::ldg_w(reinterpret_cast<const uint16_t*>(b.d));
    }
  pdl_wait();
  if (p.zero_next)  // after the wait: the launches that read it are done
    for (int64_t n = int64_t(blockIdx.x) * kThreads + threadIdx.x; n < D; n += int64_t(gridDim.x) * kThreads)
      p.zero_next[n] = 0;
  if (p.attn) {
    if (threadIdx.x < kHd) att[threadIdx.x] = p.attn[size_t(h) * kHd + threadIdx.x];
  } else {
    attend(p, h, att, wacc, wm, wl);
  }
  __syncthreads();
  if (threadIdx.x < 2 * kColsH) runs[threadIdx.x] = mv16::quantize_run(att + 16 * threadIdx.x);
  __syncthreads();
  float a[kRowsT] = {};
#pragma unroll
  for (int c = 0; c < kColsH; ++c) {
    const Run r0 = runs[2 * c], r1 = runs[2 * c + 1];
#pragma unroll
    for (int j = 0; j < kRowsT; ++j) {
      const uint32_t qw[4] = {wq[c][j].x, wq[c][j].y, wq[c][j].z, wq[c][j].w};
      a[j] += mv16::q4_0_dot(qw, wd[c][j], r0, r1);
    }
  }
  constexpr float kOne = float(kFixedOne);
#pragma unroll
  for (int j = 0; j < kRowsT; ++j) {
    const int64_t n = row0 + kThreads * j;
    long long v = __float2ll_rn(a[j] * kOne);
    if (h == 0) v += __float2ll_rn(p.residual[n] * kOne);  // the residual, exactly once
    atomicAdd(p.acc + n, (unsigned long long)v);
  }
}

}  // namespace

bool attention_o_fits(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t head_dim_v) {
  return head_dim == kHd && head_dim_v == kHd && (n_head == 16 || n_head == 32 || n_head == 64) && n_head_kv > 0 &&
         n_head % n_head_kv == 0;
}

void launch_attention_o(const AttentionOParams& p, cudaStream_t stream) {
  LLM_REQUIRE(attention_o_fits(p.n_head, p.n_head_kv, kHd, kHd), "attention_o: head_dim 128; 16, 32 or 64 heads");
  LLM_REQUIRE(p.o && p.residual && p.acc && (p.attn || (p.q && p.k_cache && p.v_cache && p.position)),
              "attention_o: null pointer");
  const dim3 grid(unsigned(p.n_head * kQuarters)), block(kThreads);
  switch (p.n_head / 16) {  // D / 4 / 512 rows a thread
    case 1: launch_pdl(attention_o_kernel<1>, grid, block, 0, stream, p); break;
    case 2: launch_pdl(attention_o_kernel<2>, grid, block, 0, stream, p); break;
    default: launch_pdl(attention_o_kernel<4>, grid, block, 0, stream, p); break;
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
