// The per-device context: one compute stream, one copy stream, a cuBLAS handle bound to the compute stream with a
// preallocated workspace, and the device properties kernels size themselves by.
#pragma once
#include <cublas_v2.h>

#include <string>

#include "cuda/raii.h"

namespace cuda {

class Context {
 public:
  // Selects `device` and creates streams and handles. Throws cuda::Error when the device is unusable.
  explicit Context(int device = 0, size_t cublas_workspace_bytes = 32u << 20);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  int device() const { return device_; }
  const cudaDeviceProp& props() const { return props_; }
  int sm_count() const { return props_.multiProcessorCount; }
  int arch() const { return props_.major * 10 + props_.minor; }  // 90 for sm_90
  ::std::string name() const { return props_.name; }

  cudaStream_t compute() const { return compute_.get(); }
  cudaStream_t copy() const { return copy_.get(); }
  cublasHandle_t cublas() const { return cublas_; }

  void synchronize() const { compute_.synchronize(); }

 private:
  int device_ = 0;
  cudaDeviceProp props_{};
  Stream compute_;
  Stream copy_;
  DeviceBuffer cublas_workspace_;  // given to cuBLAS so it never allocates (required inside graph capture)
  cublasHandle_t cublas_ = nullptr;
};

}  // namespace cuda
