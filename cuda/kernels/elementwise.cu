// Ahead-of-time element-wise kernels: grid-stride loops, one element per step (memory-bound and tiny next to the
// matrix products; the fused NVRTC versions exist to save launches, not bandwidth).
#include "cuda/kernels/elementwise.cuh"

#include <algorithm>

#include <cuda_fp16.h>

#include "cuda/check.h"
#include "cuda/kernels/swiglu.cuh"
#include "cuda/kernels/gelu.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 256;

unsigned grid_for(int64_t n) { return unsigned(::std::min<int64_t>((n + kThreads - 1) / kThreads, 65535 * 8)); }

__global__ void binary_kernel(BinaryParams p) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * kThreads) {
    const float b = p.b[p.nb == p.n ? i : i % p.nb];
    p.out[i] = p.op == BinaryOp::Add ? p.a[i] + b : p.a[i] * b;
  }
}

__global__ void unary_kernel(UnaryParams p) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * kThreads) {
    const float x = p.a[i];
    switch (p.op) {
      case UnaryOp::Silu: p.out[i] = silu(x); break;
      case UnaryOp::Scale: p.out[i] = float(double(x) * double(p.param)); break;
      case UnaryOp::Softcap: p.out[i] = float(double(p.param) * tanh(double(x) / double(p.param))); break;
    }
  }
}

__global__ void geglu_kernel(SwiGluParams p) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * kThreads) {
    const float v = float(gelu_tanh(p.gate[i]) * double(p.up[i]));
    p.out[i] = v;
    if (p.half_out) static_cast<__half*>(p.half_out)[i] = __float2half_rn(v);
  }
}

__global__ void slice_kernel(SliceParams p) {
  const int64_t total = p.n * p.rows;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < total; i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / p.n, c = i % p.n;
    p.out[i] = p.a[r * p.ne0 + p.offset + c];
  }
}

__global__ void swiglu_kernel(SwiGluParams p) {
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < p.n; i += int64_t(gridDim.x) * kThreads) {
    const float v = silu(p.gate[i]) * p.up[i];
    p.out[i] = v;
    if (p.half_out) static_cast<__half*>(p.half_out)[i] = __float2half_rn(v);
  }
}

}  // namespace

void launch_binary(const BinaryParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.a && p.b && p.out, "null pointer");
  LLM_REQUIRE(p.n > 0 && p.nb > 0 && p.n % p.nb == 0, "b must have n elements or divide n (row broadcast)");
  binary_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_unary(const UnaryParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.a && p.out, "null pointer");
  LLM_REQUIRE(p.n > 0, "empty");
  LLM_REQUIRE(p.op != UnaryOp::Softcap || p.param > 0.0f, "softcap needs a positive cap");
  unary_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_swiglu(const SwiGluParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.gate && p.up && p.out, "null pointer");
  LLM_REQUIRE(p.n > 0, "empty");
  swiglu_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_geglu(const SwiGluParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.gate && p.up && p.out, "null pointer");
  LLM_REQUIRE(p.n > 0, "empty");
  geglu_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_slice(const SliceParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.a && p.out, "null pointer");
  LLM_REQUIRE(p.n > 0 && p.rows > 0 && p.offset >= 0 && p.offset + p.n <= p.ne0, "slice outside the rows");
  slice_kernel<<<grid_for(p.n * p.rows), kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
