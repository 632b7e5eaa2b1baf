// Element-wise kernels compiled ahead of time: residual add, multiply with row broadcast (norm weights, biases via
// add), SiLU and SwiGLU. The NVRTC-generated fused versions (cuda/rtc_elementwise.h) are checked against these.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

enum class BinaryOp : uint8_t { Add, Mul };

struct BinaryParams {
  BinaryOp op = BinaryOp::Add;
  const float* a = nullptr;  // [n]
  const float* b = nullptr;  // [nb]: nb == n, or one row broadcast over the rows of a (n % nb == 0)
  float* out = nullptr;      // [n]; may equal a or b
  int64_t n = 0;
  int64_t nb = 0;
};
void launch_binary(const BinaryParams& p, cudaStream_t stream);

enum class UnaryOp : uint8_t { Silu };
struct UnaryParams {
  UnaryOp op = UnaryOp::Silu;
  const float* a = nullptr;  // [n]
  float* out = nullptr;      // [n]
  int64_t n = 0;
};
void launch_unary(const UnaryParams& p, cudaStream_t stream);

struct SwiGluParams {
  const float* gate = nullptr;  // [n]
  const float* up = nullptr;    // [n]
  float* out = nullptr;         // [n] = silu(gate) * up
  int64_t n = 0;
};
void launch_swiglu(const SwiGluParams& p, cudaStream_t stream);

}  // namespace cuda
