// Copy-bandwidth probe and memory query; see device_info.h.
#include "cuda/device_info.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <mutex>
#include <tuple>
#include <vector>

#include "cuda/check.h"
#include "cuda/raii.h"

namespace cuda {

double measure_copy_bandwidth_gbs() {
  constexpr size_t kBytes = size_t(1) << 30;
  constexpr int kReps = 10;
  const DeviceBuffer src(kBytes), dst(kBytes);
  // Nonzero data: an all-zero buffer can move faster than real data on compressing memory paths.
  CUDA_CHECK(cudaMemset(src.get(), 0x5a, kBytes));
  const Event start = Event::create(true), stop = Event::create(true);
  std::vector<float> ms;
  for (int i = 0; i < kReps + 2; ++i) {
    start.record(nullptr);
    CUDA_CHECK(cudaMemcpyAsync(dst.get(), src.get(), kBytes, cudaMemcpyDeviceToDevice));
    stop.record(nullptr);
    stop.synchronize();
    if (i >= 2) ms.push_back(stop.since(start));  // the first two are warm-up
  }
  std::sort(ms.begin(), ms.end());
  const double median_s = ms[ms.size() / 2] * 1e-3;
  return 2.0 * static_cast<double>(kBytes) / median_s / 1e9;
}

uint64_t device_memory_used() {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return total_b - free_b;
}

uint64_t device_memory_free() {
  size_t free_b = 0, total_b = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
  return free_b;
}

int current_device_sm_count() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices] = {};
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  int n = dev < kDevices ? cached[dev].load(std::memory_order_relaxed) : 0;
  if (n == 0) {
    CUDA_CHECK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev));
    if (dev < kDevices) cached[dev].store(n, std::memory_order_relaxed);
  }
  return n;
}

int kernel_blocks_per_sm(const void* kernel, int threads, size_t smem) {
  static std::mutex m;
  static std::map<std::tuple<const void*, int, size_t>, int> memo;
  const std::lock_guard<std::mutex> lock(m);
  auto [it, fresh] = memo.try_emplace({kernel, threads, smem}, 0);
  if (fresh) CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&it->second, kernel, threads, smem));
  return it->second;
}

size_t current_device_smem_optin() {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices] = {};
  int dev = 0, bytes = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (dev < kDevices && (bytes = cached[dev].load(std::memory_order_relaxed)) > 0) return size_t(bytes);
  if (cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  if (dev < kDevices) cached[dev].store(bytes, std::memory_order_relaxed);
  return size_t(bytes);
}

size_t kernel_opt_in_smem(const void* kernel) {
  cudaFuncAttributes a{};
  CUDA_CHECK(cudaFuncGetAttributes(&a, kernel));
  const size_t limit = current_device_smem_optin() - a.sharedSizeBytes;
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(limit)));
  return limit;
}

std::string device_name() {
  int dev = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, dev));
  return prop.name;
}

}  // namespace cuda
