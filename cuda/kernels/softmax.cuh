// Row-wise softmax and argmax over rows of ne0 elements.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct SoftmaxParams {
  const float* x = nullptr;  // [ne0, rows]
  float* out = nullptr;      // [ne0, rows]; may equal x
  int64_t ne0 = 0;
  int64_t rows = 0;
};
void launch_softmax(const SoftmaxParams& p, cudaStream_t stream);

struct ArgmaxParams {
  const float* x = nullptr;  // [ne0, rows]
  int32_t* out = nullptr;    // [rows]: index of the largest value, lower index on exact ties (NaN never wins)
  int64_t ne0 = 0;
  int64_t rows = 0;
  // When set, the same indices also to host_out + *host_slot * host_stride (page-locked host memory as the device
  // addresses it; host_slot device memory read at run time): a paged step's ids reach the host and the next step's
  // token gather without a copy after the graph.
  int32_t* host_out = nullptr;
  const int32_t* host_slot = nullptr;
  int64_t host_stride = 0;
  // Up to kArgmaxPartsRows rows (a decode step's): argmax_parts_scratch_bytes() of device memory, zeroed once before
  // the first launch (its counters end every launch at zero), for the launch that cuts each row over kArgmaxParts
  // blocks, the last of which merges their results. Null: a block a row.
  void* scratch = nullptr;
};
inline constexpr int64_t kArgmaxPartsRows = 16;
size_t argmax_parts_scratch_bytes();
void launch_argmax(const ArgmaxParams& p, cudaStream_t stream);

}  // namespace cuda
