// RMSNorm: one block per row; each thread keeps its share of the row in registers between the two passes (sum of
// squares, then scale), all its loads issued before the first is summed: as a loop of dependent loads, a one-row
// decode norm of 3840 floats took 10 us (H200, Nsight Compute; 18% of a Gemma-3-12B decode step, which has two of
// them per layer), bound by one L2 round trip per element per thread. Rows that do not fit the registers, or are not
// float4-aligned, take the plain loop. Small rows (per-head norm, ne0 = 64..256) use a 64-thread block so a decode
// step with many heads still spreads. With a residual, the output is residual + norm(x) (Gemma's post-norms before
// the residual add, one launch instead of two); with an add, the input is x + add, written to sum as it is read
// (the residual stream's Add before a layer's norm, one launch instead of two).
#include "cuda/kernels/norm.cuh"

#include <cuda_fp16.h>

#include "cuda/check.h"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/reduce.cuh"

namespace cuda {
namespace {

__device__ __forceinline__ float4 scaled(float4 v, float s, float4 w) {
  return make_float4(v.x * s * w.x, v.y * s * w.y, v.z * s * w.z, v.w * s * w.w);
}

// kCached float4 per thread: rows of ne0 <= 4 kThreads kCached elements, 16-byte aligned, take the register path.
template <int kThreads, int kCached>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormParams p) {
  pdl_launch_dependents();  // a matvec after it (the LM head after an unfolded final norm) may start on its weights
  __shared__ float red[kThreads / 32];
  const int64_t r = blockIdx.x;
  const float* x = p.x + r * p.ne0;
  const float* res = p.residual ? p.residual + r * p.ne0 : nullptr;
  const float* add = p.add ? p.add + r * p.ne0 : nullptr;
  float* sum = p.add ? p.sum + r * p.ne0 : nullptr;
  float* out = p.out + r * p.ne0;
  __half* half_out = p.half_out ? static_cast<__half*>(p.half_out) + r * p.ne0 : nullptr;
  const auto aligned = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  const int64_t n4 = p.ne0 / 4;
  if (p.ne0 % 4 == 0 && n4 <= int64_t(kThreads) * kCached && aligned(x) && aligned(out) && (!p.w || aligned(p.w)) &&
      (!res || aligned(res)) && (!add || (aligned(add) && aligned(sum)))) {
    // x, the weight and the residual all loaded before the reduction: one memory round trip on the critical path.
    // The weight, which no kernel writes, first: a programmatic launch loads it before waiting for the kernel before.
    const float4 zero = make_float4(0.f, 0.f, 0.f, 0.f), one = make_float4(1.f, 1.f, 1.f, 1.f);
    float4 v[kCached], wv[kCached], rv[kCached];
    float ss = 0.0f;
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * kThreads;
      wv[k] = i < n4 && p.w ? reinterpret_cast<const float4*>(p.w)[i] : one;
    }
    pdl_wait();
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * kThreads;
      const bool in = i < n4;
      v[k] = in ? reinterpret_cast<const float4*>(x)[i] : zero;
      rv[k] = in && res ? reinterpret_cast<const float4*>(res)[i] : zero;
      if (add) {
        const float4 a = in ? reinterpret_cast<const float4*>(add)[i] : zero;
        v[k].x += a.x, v[k].y += a.y, v[k].z += a.z, v[k].w += a.w;
      }
    }
    if (add) {  // after every load of this thread: sum may be x or add
#pragma unroll
      for (int k = 0; k < kCached; ++k) {
        const int64_t i = threadIdx.x + int64_t(k) * kThreads;
        if (i < n4) reinterpret_cast<float4*>(sum)[i] = v[k];
      }
    }
#pragma unroll
    for (int k = 0; k < kCached; ++k) ss += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
    const float scale = rsqrtf(block_sum<kThreads>(ss, red) / float(p.ne0) + p.eps);
#pragma unroll
    for (int k = 0; k < kCached; ++k) {
      const int64_t i = threadIdx.x + int64_t(k) * kThreads;
      if (i >= n4) break;
      float4 o = scaled(v[k], scale, wv[k]);
      o.x += rv[k].x, o.y += rv[k].y, o.z += rv[k].z, o.w += rv[k].w;
      reinterpret_cast<float4*>(out)[i] = o;
      if (half_out) {
        const __half2 a = __floats2half2_rn(o.x, o.y), b = __floats2half2_rn(o.z, o.w);
        reinterpret_cast<uint2*>(half_out)[i] =
            make_uint2(*reinterpret_cast<const uint32_t*>(&a), *reinterpret_cast<const uint32_t*>(&b));
      }
    }
    return;
  }
  // With an add, the sum is written in the first pass and read back in the second, each element by one thread.
  pdl_wait();
  const float* in = add ? sum : x;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) {
    const float v = add ? x[i] + add[i] : x[i];
    if (add) sum[i] = v;
    ss += v * v;
  }
  const float scale = rsqrtf(block_sum<kThreads>(ss, red) / float(p.ne0) + p.eps);
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) {
    const float v = in[i] * scale;
    const float o = (p.w ? v * p.w[i] : v) + (res ? res[i] : 0.0f);
    out[i] = o;
    if (half_out) half_out[i] = __float2half_rn(o);
  }
}

}  // namespace

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream, bool programmatic) {
  LLM_REQUIRE(p.x && p.out, "null pointer");
  LLM_REQUIRE(p.ne0 > 0 && p.rows > 0 && p.rows <= 0x7fffffff, "bad shape");
  LLM_REQUIRE(p.eps >= 0.0f, "negative eps");
  LLM_REQUIRE(!p.add == !p.sum && !(p.add && p.residual), "rms_norm: add needs sum, and excludes residual");
  LLM_REQUIRE(reinterpret_cast<uintptr_t>(p.half_out) % 16 == 0, "rms_norm: half_out must be 16-byte aligned");
  // The register path holds ne0 / 1024 float4 a thread (x, w and the residual: 12 registers each), so that a prompt's
  // rows of 2048 or 4096 take 40-60 registers, not the 114 of 8192 (70B's n_embd): at 114 two blocks an SM were
  // resident and a Qwen3-30B-A3B pp512 norm (512 rows of 2048) took 9.0 us at 28% of the DRAM's bandwidth, waiting on
  // its loads (Nsight, session 73). The sums are the same: a thread's slots past the row add zeros.
  const dim3 grid(unsigned(p.rows));
  if (p.ne0 <= 256) launch_programmatic(programmatic, rms_norm_kernel<64, 1>, grid, 64, 0, stream, p);
  else if (p.ne0 <= 2048) launch_programmatic(programmatic, rms_norm_kernel<256, 2>, grid, 256, 0, stream, p);
  else if (p.ne0 <= 4096) launch_programmatic(programmatic, rms_norm_kernel<256, 4>, grid, 256, 0, stream, p);
  else launch_programmatic(programmatic, rms_norm_kernel<256, 8>, grid, 256, 0, stream, p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
