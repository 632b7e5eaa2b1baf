// Regrouping Q4_0 matrices by column blocks (q4_0_cols.cuh).
#include "cuda/kernels/q4_0_cols.cuh"

#include <cstring>

#include "cuda/check.h"
#include "cuda/raii.h"

namespace cuda {
namespace {

constexpr int kThreads = 256;

// One thread per block of the matrix, reading the file layout at src and writing the regrouped one at dst.
__global__ void __launch_bounds__(kThreads) regroup_kernel(const uint8_t* src, uint8_t* dst, int64_t K, int64_t N) {
  const int64_t blocks = K / 32 * N;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < blocks; i += int64_t(gridDim.x) * kThreads) {
    const int64_t c = i / N, n = i % N;  // consecutive threads: consecutive rows of one column block
    const uint8_t* b = src + (n * (K / 32) + c) * 18;
    const Q4_0ColsBlock o = q4_0_cols_block(dst, K, N, n, c);
    uint8_t* qs = const_cast<uint8_t*>(o.qs);
    for (int k = 0; k < 16; ++k) qs[k] = b[2 + k];
    uint8_t* d = const_cast<uint8_t*>(o.d);
    d[0] = b[0], d[1] = b[1];
  }
}

}  // namespace

bool q4_0_cols_fits(const void* w, int64_t K, int64_t N) {
  return w && K > 0 && N > 0 && K % 256 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void launch_q4_0_cols_regroup(void* w, int64_t K, int64_t N, cudaStream_t stream) {
  LLM_REQUIRE(q4_0_cols_fits(w, K, N), "Q4_0 by columns: K a multiple of 256, 16-byte aligned");
  const size_t bytes = size_t(K / 32) * size_t(N) * 18;
  DeviceBuffer copy(bytes);
  CUDA_CHECK(cudaMemcpyAsync(copy.get(), w, bytes, cudaMemcpyDeviceToDevice, stream));
  regroup_kernel<<<1024, kThreads, 0, stream>>>(copy.as<uint8_t>(), static_cast<uint8_t*>(w), K, N);
  CUDA_CHECK_LAUNCH(stream);
  CUDA_CHECK(cudaStreamSynchronize(stream));  // the copy is freed on return
}

void q4_0_cols_regroup_host(const void* src, void* dst, int64_t K, int64_t N) {
  LLM_REQUIRE(K > 0 && K % 256 == 0 && N > 0, "Q4_0 by columns: K a multiple of 256");
  const auto* s = static_cast<const uint8_t*>(src);
  auto* d = static_cast<uint8_t*>(dst);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < K / 32; ++c) {
      const uint8_t* b = s + (n * (K / 32) + c) * 18;
      const Q4_0ColsBlock o = q4_0_cols_block(d, K, N, n, c);
      ::std::memcpy(const_cast<uint8_t*>(o.qs), b + 2, 16);
      ::std::memcpy(const_cast<uint8_t*>(o.d), b, 2);
    }
}

}  // namespace cuda
