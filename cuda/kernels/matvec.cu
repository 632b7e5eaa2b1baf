// Decode matrix-vector products: each warp owns kRows weight rows; lanes stride over 32-element chunks
// (quant/dequant.cuh), load the matching 32 floats of x once into registers and reuse them for all kRows rows.
// Why several rows per warp: with one row per warp every lane re-read 128 bytes of x per chunk, several times the
// weight bytes of a quantized chunk, and the kernel ran at L1 speed, not DRAM speed (docs/kernel-notes.md).
#include "cuda/kernels/matvec.cuh"

#include "cuda/check.h"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 4;   // rows per warp
constexpr int kRowsPerBlock = kWarps * kRows;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <quant::Type T>
__global__ void __launch_bounds__(kWarps * 32) matvec_kernel(MatvecParams p, size_t row_bytes) {
  using quant::dev::kChunk;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * kRows;
  const int64_t t = blockIdx.y;
  const float* x = p.x + t * p.K;
  if (n0 >= p.N) return;
  const int rows = int(p.N - n0 < kRows ? p.N - n0 : kRows);
  const uint8_t* w = static_cast<const uint8_t*>(p.w) + n0 * row_bytes;
  const int64_t n_chunks = (p.K + kChunk - 1) / kChunk;
  const bool x_aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  float acc[kRows] = {};
  for (int64_t c = lane; c < n_chunks; c += 32) {
    const int valid = int(p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk);
    float xr[kChunk];
    const float* xc = x + c * kChunk;
    if (valid == kChunk && x_aligned) {
#pragma unroll
      for (int i = 0; i < kChunk; i += 4) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(xc + i));
        xr[i] = xv.x, xr[i + 1] = xv.y, xr[i + 2] = xv.z, xr[i + 3] = xv.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) xr[i] = i < valid ? xc[i] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r < rows) {
        float v[kChunk];
        quant::dev::dequant_chunk<T>(w + r * row_bytes, c, valid, v);
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < kChunk; ++i) a += v[i] * xr[i];  // v is 0 beyond `valid` (float formats)
        acc[r] += a;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0 && r < rows) p.y[t * p.N + n0 + r] = sum + (p.bias ? p.bias[n0 + r] : 0.0f);
  }
}

}  // namespace

void launch_matvec(const MatvecParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.y, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.T <= 65535, "too many columns for one launch");
  LLM_REQUIRE(p.N <= int64_t(kRowsPerBlock) * 0x7fffffff, "too many rows");
  const size_t rb = quant::row_bytes(p.type, p.K);  // throws for K not a multiple of the block size
  const dim3 grid(unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(p.T));
  dispatch_qtype(p.type, "matvec", [&](auto tag) {
    matvec_kernel<decltype(tag)::value><<<grid, kWarps * 32, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
