// Regrouping Q6_K matrices by runs of 8 blocks (q6_kx8.cuh).
#include "cuda/kernels/q6_kx8.cuh"

#include "cuda/check.h"

namespace cuda {
namespace {

constexpr int kThreads = 256;

// One block per run: the run is copied into shared memory, then every byte of it rewritten from the copy, so the
// regrouping is done in place (runs never overlap).
__global__ void __launch_bounds__(kThreads) regroup_kernel(uint8_t* w) {
  __shared__ uint8_t src[kQ6_Kx8Run];
  uint8_t* run = w + int64_t(blockIdx.x) * kQ6_Kx8Run;
  for (int i = threadIdx.x; i < int(kQ6_Kx8Run); i += kThreads) src[i] = run[i];
  __syncthreads();
  for (int o = threadIdx.x; o < int(kQ6_Kx8Run); o += kThreads) run[o] = q6_kx8_byte(src, o);
}

}  // namespace

bool q6_kx8_fits(const void* w, int64_t K) {
  return K > 0 && K % 2048 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void launch_q6_kx8_regroup(void* w, int64_t K, int64_t N, cudaStream_t stream) {
  LLM_REQUIRE(w && N > 0 && q6_kx8_fits(w, K), "Q6_Kx8: rows of a multiple of 2048 elements, 16-byte aligned");
  const int64_t runs = K / 2048 * N;
  LLM_REQUIRE(runs <= 0x7fffffff, "Q6_Kx8: too many runs for one launch");
  regroup_kernel<<<unsigned(runs), kThreads, 0, stream>>>(static_cast<uint8_t*>(w));
  CUDA_CHECK_LAUNCH(stream);
}

void q6_kx8_regroup_host(const void* src, void* dst, int64_t K, int64_t N) {
  LLM_REQUIRE(K > 0 && K % 2048 == 0 && N > 0, "Q6_Kx8: rows of a multiple of 2048 elements");
  const int64_t runs = K / 2048 * N;
  for (int64_t r = 0; r < runs; ++r) {
    const uint8_t* s = static_cast<const uint8_t*>(src) + r * kQ6_Kx8Run;
    uint8_t* d = static_cast<uint8_t*>(dst) + r * kQ6_Kx8Run;
    for (int o = 0; o < int(kQ6_Kx8Run); ++o) d[o] = q6_kx8_byte(s, o);
  }
}

}  // namespace cuda
