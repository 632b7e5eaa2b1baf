// LAB (mlp_lab.cuh): timing only, results wrong. The kernel of tests/cuda/mlp_lab.cu's "clusters of 2" variant.
#include "cuda/kernels/mlp_lab.cuh"

#include <cooperative_groups.h>

#include <cstdlib>
#include <cstring>

#include "cuda/check.h"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/pdl.cuh"
#include "quant/types.h"

namespace cuda {
namespace {

using mv16::Run;
constexpr int kK = 4096, kR = 4;
constexpr int kTps = kK / 32, kSlices = 4, kThreads = kTps * kSlices, kWarps = kTps / 32;
constexpr int kRowsPerThread = kK / kThreads;
constexpr size_t kRowBytes = size_t(kK / 32) * 18;
constexpr float kFix = 4294967296.0f;

__device__ __forceinline__ Run quantize_run(const float (&v)[16]) {
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

__device__ __forceinline__ void load_fixed16(const long long* p, float (&v)[16]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const longlong2 a = reinterpret_cast<const longlong2*>(p)[i];
    v[2 * i] = float(a.x) * (1.0f / kFix), v[2 * i + 1] = float(a.y) * (1.0f / kFix);
  }
}

struct Fused {
  const uint8_t* gate;
  const uint8_t* up;
  const uint4* dq;
  const uint16_t* dd;
  const float* norm_w;
  float eps;
  const long long* x;
  unsigned long long* out;
  int gpb, F;
};

struct DownCols {
  uint4 q[kRowsPerThread];
  uint32_t d[kRowsPerThread];
};
__device__ __forceinline__ void load_down(DownCols& dst, const Fused& p, int c) {
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const size_t i = size_t(c) * kK + threadIdx.x + kThreads * j;
    dst.q[j] = mv::ldg_w(p.dq + i);
    dst.d[j] = mv::ldg_w(p.dd + i);
  }
}

__global__ void __launch_bounds__(kThreads, 1) mlp_lab_kernel(Fused p) {
  using U = mv16::Unit<quant::Type::Q4_0>;
  extern __shared__ float part[];
  __shared__ float red[kWarps];
  __shared__ float hid[128];
  __shared__ Run hrun[8];
  __shared__ long long fixed[kK];
  const int slice = int(threadIdx.x) / kTps, u = int(threadIdx.x) % kTps, lane = u & 31, warp = u >> 5;
  const int n_groups = 2 * (p.F / kR);
  const int g0 = int(blockIdx.x) * p.gpb, g1 = min(g0 + p.gpb, n_groups);
  const int cap = p.gpb * kR;
  U::Raw cur[kR], nxt[kR];
  const auto load_group = [&](U::Raw(&dst)[kR], int g) {
    const uint8_t* w = (g & 1) ? p.up : p.gate;
    const int64_t n0 = int64_t(g >> 1) * kR;
#pragma unroll
    for (int r = 0; r < kR; ++r) dst[r] = U::load(w + (n0 + r) * kRowBytes, u);
  };
  const int first = g0 + slice;
  pdl_launch_dependents();
  if (first < g1) load_group(cur, first);
  pdl_wait();
  float xa[16], xb[16], ss = 0.0f;
  if (slice == 0) {
    load_fixed16(p.x + 32 * u, xa);
    load_fixed16(p.x + 32 * u + 16, xb);
    float wa[16], wb[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) wa[i] = __ldg(p.norm_w + 32 * u + i), wb[i] = __ldg(p.norm_w + 32 * u + 16 + i);
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      ss = fmaf(xa[i], xa[i], fmaf(xb[i], xb[i], ss));
      xa[i] *= wa[i], xb[i] *= wb[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) xa[i] = xb[i] = 0.0f;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  if (lane == 0 && slice == 0) red[warp] = ss;
  Run x0 = quantize_run(xa), x1 = quantize_run(xb);
  float* runs = part + kWarps * cap;
  const auto field = [&](int r, int f) -> float& { return runs[(10 * r + f) * kTps + u]; };
  if (slice == 0) {
#pragma unroll
    for (int f = 0; f < 8; ++f) field(0, f) = __int_as_float(x0.q[f]), field(1, f) = __int_as_float(x1.q[f]);
    field(0, 8) = x0.s, field(0, 9) = x0.S, field(1, 8) = x1.s, field(1, 9) = x1.S;
  }
  __syncthreads();
  if (slice != 0) {
#pragma unroll
    for (int f = 0; f < 8; ++f) x0.q[f] = __float_as_int(field(0, f)), x1.q[f] = __float_as_int(field(1, f));
    x0.s = field(0, 8), x0.S = field(0, 9), x1.s = field(1, 8), x1.S = field(1, 9);
  }
  {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += red[w];
    const float scale = 1.0f / sqrtf(total / float(kK) + p.eps);
    x0.s *= scale, x0.S *= scale, x1.s *= scale, x1.S *= scale;
  }
  for (int g = first; g < g1; g += kSlices) {
    if (g + kSlices < g1) load_group(nxt, g + kSlices);
    float acc[kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) acc[r] = U::dot(cur[r], u, x0, x1);
    // the four rows' warp sums (lane 8 r ends with row r), as matvec_i16.cu's warp_sum_rows<4>
    const bool up = lane & 16;
    float k0 = up ? acc[2] : acc[0], k1 = up ? acc[3] : acc[1];
    k0 += __shfl_xor_sync(0xffffffffu, up ? acc[0] : acc[2], 16);
    k1 += __shfl_xor_sync(0xffffffffu, up ? acc[1] : acc[3], 16);
    const bool mid = lane & 8;
    float k = mid ? k1 : k0;
    k += __shfl_xor_sync(0xffffffffu, mid ? k0 : k1, 8);
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) k += __shfl_xor_sync(0xffffffffu, k, o);
    if ((lane & 7) == 0) part[warp * cap + (g - g0) * kR + lane / 8] = k;
#pragma unroll
    for (int r = 0; r < kR; ++r) cur[r] = nxt[r];
  }
  const int h0 = (g0 >> 1) * kR, h1 = (g1 >> 1) * kR;
  const int c0 = h0 / 32, nc = (h1 - 1) / 32 - c0 + 1;
  DownCols dc, dn;
  load_down(dc, p, c0);
  __syncthreads();
  for (int i = int(threadIdx.x); i < 32 * nc; i += kThreads) {
    const int kh = 32 * c0 + i;
    float h = 0.0f;
    if (kh >= h0 && kh < h1) {
      const int j = kh - h0, pair = j / kR, r = j % kR;
      float gt = 0.0f, upv = 0.0f;
      for (int w = 0; w < kWarps; ++w) gt += part[w * cap + 2 * pair * kR + r], upv += part[w * cap + (2 * pair + 1) * kR + r];
      h = gt / (1.0f + expf(-gt)) * upv;
    }
    hid[i] = h;
  }
  __syncthreads();
  if (int(threadIdx.x) < 2 * nc) {
    float v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = hid[16 * threadIdx.x + i];
    hrun[threadIdx.x] = quantize_run(v);
  }
  __syncthreads();
  float acc[kRowsPerThread] = {};
  for (int c = 0; c < nc; ++c) {
    if (c + 1 < nc) load_down(dn, p, c0 + c + 1);
    const Run r0 = hrun[2 * c], r1 = hrun[2 * c + 1];
#pragma unroll
    for (int j = 0; j < kRowsPerThread; ++j) {
      const uint32_t q[4] = {dc.q[j].x, dc.q[j].y, dc.q[j].z, dc.q[j].w};
      acc[j] += mv16::q4_0_dot(q, dc.d[j], r0, r1);
    }
    dc = dn;
  }
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
#pragma unroll
  for (int j = 0; j < kRowsPerThread; ++j) {
    const int n = int(threadIdx.x) + kThreads * j;
    fixed[n] = __float2ll_rn(acc[j] * kFix) + (blockIdx.x == 0 ? p.x[n] : 0ll);
  }
  cluster.sync();
  constexpr int kShare = kK / 2;
  const int rank = int(cluster.block_rank());
  for (int n = rank * kShare + int(threadIdx.x); n < (rank + 1) * kShare; n += kThreads) {
    const long long v = cluster.map_shared_rank(fixed, 0)[n] + cluster.map_shared_rank(fixed, 1)[n];
    atomicAdd(p.out + n, (unsigned long long)v);
  }
  cluster.sync();
}

long long* scratch() {
  static long long* s = nullptr;
  if (!s) {
    CUDA_CHECK(cudaMalloc(&s, 2 * kK * sizeof(long long)));
    CUDA_CHECK(cudaMemset(s, 0, 2 * kK * sizeof(long long)));
  }
  return s;
}

}  // namespace

bool mlp_lab_enabled() {
  const char* e = ::std::getenv("LLM_CUDA_LAB_MLP");
  const bool on = e && ::std::strcmp(e, "1") == 0;
  if (on) scratch();  // allocated before any capture
  return on;
}

void launch_mlp_lab(const MlpLabParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.K == kK && p.F % 32 == 0, "mlp lab: K = 4096 only");
  const int sms = 132;
  const int n_groups = int(2 * (p.F / kR));
  int gpb = (n_groups + sms - 1) / sms;
  gpb = (gpb + 1) & ~1;
  int grid = (n_groups + gpb - 1) / gpb;
  LLM_REQUIRE(grid % 2 == 0, "mlp lab: whole clusters of 2 only");
  const size_t smem = size_t(kWarps) * gpb * kR * 4 + size_t(20) * kTps * 4;
  const auto* dq = static_cast<const uint4*>(p.down);
  Fused f{static_cast<const uint8_t*>(p.gate), static_cast<const uint8_t*>(p.up), dq,
          reinterpret_cast<const uint16_t*>(dq + size_t(p.F / 32) * kK), p.norm_w, p.eps, scratch(),
          reinterpret_cast<unsigned long long*>(scratch() + kK), gpb, int(p.F)};
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(unsigned(grid)), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = 2, attr[0].val.clusterDim.y = 1, attr[0].val.clusterDim.z = 1;
  attr[1].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[1].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 2;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, mlp_lab_kernel, f));
}

}  // namespace cuda
