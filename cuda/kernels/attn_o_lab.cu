// LAB (attn_o_lab.cuh): timing only, results wrong.
#include "cuda/kernels/attn_o_lab.cuh"

#include <cuda_fp16.h>

#include <cstdlib>
#include <cstring>

#include "cuda/check.h"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

using mv16::Run;
constexpr int kHd = 128, kThreads = 512, kWarps = kThreads / 32, kQuarters = 4, kColsH = kHd / 32;
constexpr int kSlotChunk = 8;
constexpr float kFix = 4294967296.0f;

__device__ __forceinline__ Run quantize_run16(const float* v) {
  float m = 0.0f, S = 0.0f;
#pragma unroll
  for (int i = 0; i < 16; ++i) m = fmaxf(m, fabsf(v[i])), S += v[i];
  Run r;
  r.S = S;
  r.s = m * (1.0f / 32767.0f);
  const float inv = m > 0.0f ? 32767.0f / m : 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int lo = __float2int_rn(v[2 * i] * inv), hi = __float2int_rn(v[2 * i + 1] * inv);
    r.q[i] = int32_t((uint32_t(lo) & 0xffffu) | (uint32_t(hi) << 16));
  }
  return r;
}

// kVariant (lab switch value): 1 full, 2 without atomics (one plain store per row), 3 without the attention, 4 the
// first K/V chunk loaded alongside the position.
template <int kRowsT, int kVariant>  // o rows per thread: D / 4 / 512
__global__ void __launch_bounds__(kThreads, 1) attn_o_lab_kernel(AttnOLabParams p, unsigned long long* acc) {
  __shared__ float wm[kWarps], wl[kWarps], wacc[kWarps][kHd], att[kHd];
  __shared__ Run runs[2 * kColsH];
  const int D = kHd * p.n_head, rows_q = D / kQuarters;
  const int h = int(blockIdx.x) / kQuarters, quarter = int(blockIdx.x) % kQuarters;
  const int g = h / (p.n_head / p.n_head_kv);
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  const int row0 = quarter * rows_q + int(threadIdx.x);
  const uint4* oq = static_cast<const uint4*>(p.o);
  const uint16_t* od = reinterpret_cast<const uint16_t*>(oq + size_t(D / 32) * D);
  uint4 wq[kColsH][kRowsT];
  uint32_t wd[kColsH][kRowsT];
  pdl_launch_dependents();
#pragma unroll
  for (int c = 0; c < kColsH; ++c)
#pragma unroll
    for (int j = 0; j < kRowsT; ++j) {
      const size_t i = size_t(kColsH * h + c) * D + row0 + kThreads * j;
      wq[c][j] = mv::ldg_w(oq + i);
      wd[c][j] = mv::ldg_w(od + i);
    }
  pdl_wait();
  const __half* K = reinterpret_cast<const __half*>(p.k_cache) + size_t(g) * p.n_ctx * kHd;
  const __half* V = reinterpret_cast<const __half*>(p.v_cache) + size_t(g) * p.n_ctx * kHd;
  uint2 kr[kSlotChunk], vr[kSlotChunk];
  const auto load_chunk = [&](int s0, int last) {
#pragma unroll
    for (int i = 0; i < kSlotChunk; ++i) {
      const int s = s0 + kWarps * i;
      if (s <= last) {
        kr[i] = reinterpret_cast<const uint2*>(K + size_t(s) * kHd)[lane];
        vr[i] = reinterpret_cast<const uint2*>(V + size_t(s) * kHd)[lane];
      }
    }
  };
  // kVariant 4: the first chunk's K/V loaded before the position is known (slots past it are masked below), so
  // the two L2 round trips overlap.
  if (kVariant == 4) load_chunk(warp, int(p.n_ctx) - 1);
  const int pos = *p.position;
  const float4 qv = reinterpret_cast<const float4*>(p.q + size_t(h) * kHd)[lane];
  const float q0 = qv.x * p.scale, q1 = qv.y * p.scale, q2 = qv.z * p.scale, q3 = qv.w * p.scale;
  float m = -INFINITY, l = 0.0f, a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
  if (kVariant == 3) m = 0.0f, l = 1.0f, a0 = q0, a1 = q1, a2 = q2, a3 = q3;
  for (int s0 = warp; s0 <= (kVariant == 3 ? -1 : pos); s0 += kWarps * kSlotChunk) {
    if (kVariant != 4 || s0 != warp) load_chunk(s0, pos);
    float sc[kSlotChunk];
    float cm = m;
#pragma unroll
    for (int i = 0; i < kSlotChunk; ++i) {
      const int s = s0 + kWarps * i;
      float d = -INFINITY;
      if (s <= pos) {
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
  wacc[warp][4 * lane] = a0, wacc[warp][4 * lane + 1] = a1, wacc[warp][4 * lane + 2] = a2,
  wacc[warp][4 * lane + 3] = a3;
  __syncthreads();
  if (threadIdx.x < kHd) {
    float M = -INFINITY;
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, wm[w]);
    float L = 0.0f, A = 0.0f;
    for (int w = 0; w < kWarps; ++w) {
      if (wm[w] == -INFINITY) continue;
      const float f = __expf(wm[w] - M);
      L += wl[w] * f, A += wacc[w][threadIdx.x] * f;
    }
    att[threadIdx.x] = A / L;
  }
  __syncthreads();
  if (threadIdx.x < 2 * kColsH) runs[threadIdx.x] = quantize_run16(att + 16 * threadIdx.x);
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
#pragma unroll
  for (int j = 0; j < kRowsT; ++j) {
    const int n = row0 + kThreads * j;
    long long v = __float2ll_rn(a[j] * kFix);
    if (h == 0) v += (long long)acc[D + n];  // stands for the residual read
    if (kVariant == 2) {
      if (h == 31) acc[n] = (unsigned long long)v;
    } else {
      atomicAdd(acc + n, (unsigned long long)v);
    }
  }
}

unsigned long long* scratch_acc() {
  static unsigned long long* acc = nullptr;
  if (!acc) CUDA_CHECK(cudaMalloc(&acc, 2 * 8192 * sizeof(unsigned long long)));
  return acc;
}

}  // namespace

int lab_variant() {
  const char* e = ::std::getenv("LLM_CUDA_LAB_ATTN_O");
  return e ? ::std::atoi(e) : 0;
}

bool attn_o_lab_enabled() {
  const bool on = lab_variant() >= 1 && lab_variant() <= 4;
  if (on) scratch_acc();  // allocated before any capture
  return on;
}

void launch_attn_o_lab(const AttnOLabParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.n_head * kHd == 4096 && p.n_head % p.n_head_kv == 0, "attn_o lab: D = 4096 only");
  const dim3 grid(unsigned(p.n_head * kQuarters));
  switch (lab_variant()) {
    case 2: launch_pdl(attn_o_lab_kernel<2, 2>, grid, dim3(kThreads), 0, stream, p, scratch_acc()); break;
    case 3: launch_pdl(attn_o_lab_kernel<2, 3>, grid, dim3(kThreads), 0, stream, p, scratch_acc()); break;
    case 4: launch_pdl(attn_o_lab_kernel<2, 4>, grid, dim3(kThreads), 0, stream, p, scratch_acc()); break;
    default: launch_pdl(attn_o_lab_kernel<2, 1>, grid, dim3(kThreads), 0, stream, p, scratch_acc()); break;
  }
}

}  // namespace cuda
