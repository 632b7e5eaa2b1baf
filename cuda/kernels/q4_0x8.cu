// Regrouping Q4_0 matrices by runs of 8 blocks (q4_0x8.cuh).
#include "cuda/kernels/q4_0x8.cuh"

#include <cstring>

#include "cuda/check.h"

namespace cuda {
namespace {

constexpr int64_t kBlockBytes = 18;  // GGUF Q4_0: binary16 scale, then 16 quant bytes
constexpr int kThreads = 256;

// One run of 8 blocks from the GGUF layout (src) into the regrouped one (dst); src and dst may not overlap.
__host__ __device__ inline void regroup_run(const uint8_t* src, uint8_t* dst) {
  for (int j = 0; j < 8; ++j) {
    const uint8_t* b = src + kBlockBytes * j;
    for (int i = 0; i < 16; ++i) dst[16 * j + i] = b[2 + i];
    dst[128 + 2 * j] = b[0], dst[128 + 2 * j + 1] = b[1];
  }
}

// One thread per run: the run's 144 bytes are read into registers before any is written, so regrouping in place
// is safe (runs never overlap).
__global__ void __launch_bounds__(kThreads) regroup_kernel(uint8_t* w, int64_t runs) {
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  if (i >= runs) return;
  uint8_t* run = w + i * kQ4_0x8Run;
  uint32_t in[kQ4_0x8Run / 4];  // the run, 4-byte aligned: 144 * i from a 16-byte aligned base
#pragma unroll
  for (int k = 0; k < kQ4_0x8Run / 4; ++k) in[k] = reinterpret_cast<const uint32_t*>(run)[k];
  uint32_t out[kQ4_0x8Run / 4];
  regroup_run(reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t*>(out));
#pragma unroll
  for (int k = 0; k < kQ4_0x8Run / 4; ++k) reinterpret_cast<uint32_t*>(run)[k] = out[k];
}

}  // namespace

bool q4_0x8_fits(const void* w, int64_t K) {
  return K > 0 && K % 256 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void launch_q4_0x8_regroup(void* w, int64_t K, int64_t N, cudaStream_t stream) {
  LLM_REQUIRE(w && N > 0 && q4_0x8_fits(w, K), "Q4_0x8: rows of a multiple of 256 elements, 16-byte aligned");
  const int64_t runs = K / 256 * N;  // a row is K / 256 runs, rows back to back
  regroup_kernel<<<unsigned((runs + kThreads - 1) / kThreads), kThreads, 0, stream>>>(static_cast<uint8_t*>(w),
                                                                                        runs);
  CUDA_CHECK_LAUNCH(stream);
}

void q4_0x8_regroup_host(const void* src, void* dst, int64_t K, int64_t N) {
  LLM_REQUIRE(K > 0 && K % 256 == 0 && N > 0, "Q4_0x8: rows of a multiple of 256 elements");
  const int64_t runs = K / 256 * N;
  for (int64_t i = 0; i < runs; ++i)
    regroup_run(static_cast<const uint8_t*>(src) + i * kQ4_0x8Run, static_cast<uint8_t*>(dst) + i * kQ4_0x8Run);
}

}  // namespace cuda
