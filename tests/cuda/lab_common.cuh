// What the kernel-lab executables share (matvec_lab.cu, stream_lab.cu): a fatal check, random weight bytes, median
// timings by CUDA events, and the device-to-device copy figure every lab table is read against.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define LAB_CHECK(e)                                                                            \
  do {                                                                                          \
    cudaError_t err_ = (e);                                                                     \
    if (err_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #e, cudaGetErrorString(err_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

namespace lab {

// Random bytes with every binary16 field small and finite: the 0x3f mask keeps the high byte of each half < 0x40.
__global__ inline void fill_kernel(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
    p[i] = uint8_t(h & 0x3f);
  }
}

// Median over `reps` samples of the time of `batch` calls f(sample * batch + i) back to back on s, in us per call
// (one warm-up batch first).
template <class F>
float median_us(int reps, int batch, cudaStream_t s, F&& f) {
  cudaEvent_t a, b;
  LAB_CHECK(cudaEventCreate(&a));
  LAB_CHECK(cudaEventCreate(&b));
  for (int i = 0; i < batch; ++i) f(i);
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    LAB_CHECK(cudaEventRecord(a, s));
    for (int i = 0; i < batch; ++i) f(r * batch + i);
    LAB_CHECK(cudaEventRecord(b, s));
    LAB_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    LAB_CHECK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms * 1e3f / batch);
  }
  LAB_CHECK(cudaEventDestroy(a));
  LAB_CHECK(cudaEventDestroy(b));
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// Device 0's properties and a new stream on it, the device named on stdout (every lab's first lines).
inline cudaStream_t open_device(cudaDeviceProp& prop) {
  LAB_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  LAB_CHECK(cudaStreamCreate(&s));
  std::printf("device: %s, %d SMs, L2 %d MiB\n", prop.name, prop.multiProcessorCount, prop.l2CacheSize >> 20);
  return s;
}

// The device-to-device copy of 1 GiB, read + write counted, in GB/s (median of 11).
inline double copy_gbs(cudaStream_t s) {
  const size_t bytes = size_t(1) << 30;
  void *a, *b;
  LAB_CHECK(cudaMalloc(&a, bytes));
  LAB_CHECK(cudaMalloc(&b, bytes));
  LAB_CHECK(cudaMemset(a, 1, bytes));
  const float us =
      median_us(11, 1, s, [&](int) { LAB_CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, s)); });
  LAB_CHECK(cudaFree(a));
  LAB_CHECK(cudaFree(b));
  return 2.0 * bytes / us / 1e3;
}

}  // namespace lab
