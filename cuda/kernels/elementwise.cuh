// Element-wise kernels compiled ahead of time: residual add, multiply with row broadcast (norm weights, biases via
// add), SiLU, scale and softcap, SwiGLU and GeGLU, and the row slice of a fused product. The NVRTC-generated fused
// versions (cuda/rtc_elementwise.h) are checked against these.
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

// Silu: x / (1 + e^-x); Scale: x * param; Softcap: param * tanh(x / param) (param > 0). Scale and softcap are
// evaluated in double and rounded once, as the CPU reference does.
enum class UnaryOp : uint8_t { Silu, Scale, Softcap };
struct UnaryParams {
  UnaryOp op = UnaryOp::Silu;
  const float* a = nullptr;  // [n]
  float* out = nullptr;      // [n]
  int64_t n = 0;
  float param = 0.0f;        // Scale: the factor; Softcap: the cap
};
void launch_unary(const UnaryParams& p, cudaStream_t stream);

struct SwiGluParams {
  const float* gate = nullptr;  // [n]
  const float* up = nullptr;    // [n]
  float* out = nullptr;         // [n] = silu(gate) * up (launch_geglu: gelu_tanh(gate) * up)
  int64_t n = 0;
  void* half_out = nullptr;     // [n] out as half, rounded to nearest, or null: the next product's x (as norm.cuh)
};
void launch_swiglu(const SwiGluParams& p, cudaStream_t stream);
// Gemma's feed-forward gate: the tanh-approximated GELU in double, rounded once (graph::ref::geglu).
void launch_geglu(const SwiGluParams& p, cudaStream_t stream);

// Elements [offset, offset + n) of every row of a: q, k and v of a fused qkv product, gate and up of a fused gate+up.
struct SliceParams {
  const float* a = nullptr;  // [ne0, rows]
  float* out = nullptr;      // [n, rows]
  int64_t ne0 = 0, rows = 0, offset = 0, n = 0;
};
void launch_slice(const SliceParams& p, cudaStream_t stream);

}  // namespace cuda
