// Embedding lookup through the shared chunk dequantizer: one thread per 32-element chunk of an output column.
#include "cuda/kernels/get_rows.cuh"

#include <cmath>

#include "cuda/check.h"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 128;

template <quant::Type T>
__global__ void __launch_bounds__(kThreads) get_rows_kernel(GetRowsParams p, size_t row_bytes) {
  using quant::dev::kChunk;
  pdl_launch_dependents();  // the decode step's first matvec may start on its weights (pdl.cuh)
  const int64_t chunks = (p.K + kChunk - 1) / kChunk;
  const int64_t c = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t t = blockIdx.y;
  if (c >= chunks) return;
  const int32_t id = p.ids[t];
  const int valid = int((p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk));
  float* out = p.out + t * p.K + c * kChunk;
  if (id < 0 || id >= p.n_rows) {
    for (int j = 0; j < valid; ++j) out[j] = __int_as_float(0x7fc00000);
    return;
  }
  float v[kChunk];
  quant::dev::dequant_chunk<T>(static_cast<const uint8_t*>(p.table) + id * row_bytes, c, valid, v);
#pragma unroll
  for (int j = 0; j < kChunk; ++j)
    if (j < valid) out[j] = v[j];
}

}  // namespace

void launch_get_rows(const GetRowsParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.table && p.ids && p.out, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.n_rows > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.T <= 65535, "too many ids for one launch");
  const size_t rb = quant::row_bytes(p.type, p.K);
  const int64_t chunks = (p.K + quant::dev::kChunk - 1) / quant::dev::kChunk;
  const dim3 grid(unsigned((chunks + kThreads - 1) / kThreads), unsigned(p.T));
  dispatch_qtype(p.type, "get_rows", [&](auto tag) {
    get_rows_kernel<decltype(tag)::value><<<grid, kThreads, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
