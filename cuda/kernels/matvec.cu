// Decode matrix-vector products: one warp per weight row, lanes striding over 32-element chunks (quant/dequant.cuh),
// so a warp's loads cover consecutive bytes of the row and every weight byte is fetched once per column.
// Why warp-per-row: decode rows are 1-30k elements; a warp reduction per row is cheap and keeps the grid
// (N / 4 blocks) large enough to fill all SMs. Lab numbers are in docs/kernel-notes.md.
#include "cuda/kernels/matvec.cuh"

#include "cuda/check.h"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kWarps = 4;  // rows per block

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <quant::Type T>
__global__ void __launch_bounds__(kWarps * 32) matvec_kernel(MatvecParams p, size_t row_bytes) {
  using quant::dev::kChunk;
  const int lane = threadIdx.x & 31;
  const int64_t n = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  if (n >= p.N) return;
  const int64_t t = blockIdx.y;
  const uint8_t* row = static_cast<const uint8_t*>(p.w) + n * row_bytes;
  const float* x = p.x + t * p.K;
  const int64_t n_chunks = (p.K + kChunk - 1) / kChunk;
  const bool x_aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  float acc = 0.0f;
#pragma unroll 2
  for (int64_t c = lane; c < n_chunks; c += 32) {
    const int valid = int((p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk));
    float v[kChunk];
    quant::dev::dequant_chunk<T>(row, c, valid, v);
    const float* xc = x + c * kChunk;
    if (valid == kChunk && x_aligned) {
#pragma unroll
      for (int i = 0; i < kChunk; i += 4) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(xc + i));
        acc += v[i] * xv.x + v[i + 1] * xv.y + v[i + 2] * xv.z + v[i + 3] * xv.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i)
        if (i < valid) acc += v[i] * xc[i];
    }
  }
  acc = warp_sum(acc);
  if (lane == 0) p.y[t * p.N + n] = acc + (p.bias ? p.bias[n] : 0.0f);
}

}  // namespace

void launch_matvec(const MatvecParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.y, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.T <= 65535, "too many columns for one launch");
  LLM_REQUIRE(p.N <= int64_t(kWarps) * 0x7fffffff, "too many rows");
  const size_t rb = quant::row_bytes(p.type, p.K);  // throws for K not a multiple of the block size
  const dim3 grid(unsigned((p.N + kWarps - 1) / kWarps), unsigned(p.T));
  dispatch_qtype(p.type, "matvec", [&](auto tag) {
    matvec_kernel<decltype(tag)::value><<<grid, kWarps * 32, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
