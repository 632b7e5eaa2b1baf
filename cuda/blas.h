// Half-precision matrix products for the prefill GEMM through cuBLASLt: one handle, a preallocated workspace, and
// the algorithm cuBLASLt's heuristic picks for each shape, looked up once per shape (a 512-token prefill calls ~128
// products of a few shapes, so the heuristic's host cost would otherwise recur on every call). cuBLASLt rather than
// the cuBLAS handle: creating a cuBLAS handle takes 66 MiB of device memory on an H100 (CUDA 13), a cuBLASLt handle
// 2 MiB, and `bench` reports device memory against weights + KV cache.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

#include "cuda/raii.h"

namespace cuda {

class Blas {
 public:
  explicit Blas(size_t workspace_bytes);
  ~Blas();
  Blas(const Blas&) = delete;
  Blas& operator=(const Blas&) = delete;

  // Column-major D (m x n, ldd, float32) = op(A) B with op(A) = A^T for A stored k x m (lda k) and B k x n (ldb k),
  // both binary16, float32 accumulation. Never allocates device memory: safe inside CUDA graph capture once the
  // shape has been seen (the first call of a shape creates its descriptors on the host).
  void gemm_tn_f16_f32(int64_t m, int64_t n, int64_t k, const void* a, const void* b, float* d, int64_t ldd,
                       cudaStream_t stream) const {
    gemm_tn_f16_f32_batched(m, n, k, a, 0, b, d, ldd, 0, 1, stream);
  }
  // `count` such products in one call: A of product i at a + i * stride_a halves, D at d + i * stride_d floats, the
  // same B for all. Two small products of one x (a layer's k and v) fill more of the GPU as one call than in turn.
  // stride_d >= ldd * n (the outputs apart) where count > 1.
  void gemm_tn_f16_f32_batched(int64_t m, int64_t n, int64_t k, const void* a, int64_t stride_a, const void* b,
                               float* d, int64_t ldd, int64_t stride_d, int count, cudaStream_t stream) const;

  size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  struct Shape;  // descriptors and the chosen algorithm of one (m, n, k, ldd, count, stride_a, stride_d)
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
  mutable ::std::map<::std::tuple<int64_t, int64_t, int64_t, int64_t, int, int64_t, int64_t>, ::std::unique_ptr<Shape>>
      shapes_;
};

}  // namespace cuda
