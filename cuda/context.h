// The per-device context: one compute stream, one copy stream, the cuBLASLt products of the prefill GEMM (with a
// preallocated workspace), and the device properties kernels size themselves by.
#pragma once
#include <memory>
#include <string>

#include "cuda/blas.h"
#include "cuda/raii.h"

namespace cuda {

class Context {
 public:
  // cuBLASLt's algorithms for our products (half precision, float32 accumulation, K up to ~16k) need little or no
  // workspace; the heuristic only picks algorithms that fit in it.
  static constexpr size_t kBlasWorkspaceBytes = size_t(4) << 20;
  // Selects `device` and creates streams and handles. Throws cuda::Error when the device is unusable.
  explicit Context(int device = 0, size_t blas_workspace_bytes = kBlasWorkspaceBytes);
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
  const Blas& blas() const { return *blas_; }

  void synchronize() const { compute_.synchronize(); }

 private:
  int device_ = 0;
  cudaDeviceProp props_{};
  Stream compute_;
  Stream copy_;
  ::std::unique_ptr<Blas> blas_;
};

}  // namespace cuda
