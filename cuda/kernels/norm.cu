// RMSNorm: one block per row; the sum of squares is accumulated in float per thread, then reduced across the block.
// Small rows (per-head norm, ne0 = 64..256) use a 64-thread block so a decode step with many heads still spreads.
#include "cuda/kernels/norm.cuh"

#include "cuda/check.h"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

template <int kThreads>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(RmsNormParams p) {
  pdl_launch_dependents();  // a matvec after it (the LM head after an unfolded final norm) may start on its weights
  const int64_t r = blockIdx.x;
  const float* x = p.x + r * p.ne0;
  float* out = p.out + r * p.ne0;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) ss += x[i] * x[i];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  __shared__ float partial[kThreads / 32];
  if ((threadIdx.x & 31) == 0) partial[threadIdx.x >> 5] = ss;
  __syncthreads();
  float total = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) total += partial[w];
  const float scale = rsqrtf(total / float(p.ne0) + p.eps);
  for (int64_t i = threadIdx.x; i < p.ne0; i += kThreads) {
    const float v = x[i] * scale;
    out[i] = p.w ? v * p.w[i] : v;
  }
}

}  // namespace

void launch_rms_norm(const RmsNormParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out, "null pointer");
  LLM_REQUIRE(p.ne0 > 0 && p.rows > 0 && p.rows <= 0x7fffffff, "bad shape");
  LLM_REQUIRE(p.eps >= 0.0f, "negative eps");
  if (p.ne0 <= 256)
    rms_norm_kernel<64><<<unsigned(p.rows), 64, 0, stream>>>(p);
  else
    rms_norm_kernel<256><<<unsigned(p.rows), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
