// Embedding lookup: out[:, t] = dequantized row ids[t] of a weight table of any type.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/types.h"

namespace cuda {

struct GetRowsParams {
  const void* table = nullptr;  // [K, n_rows] of `type`
  quant::Type type = quant::Type::F32;
  const int32_t* ids = nullptr; // [T], device memory; ids outside [0, n_rows) produce rows of NaN (validated on the
                                // host before upload, so a NaN row means a bug, loudly)
  float* out = nullptr;         // [K, T]
  int64_t K = 0;
  int64_t n_rows = 0;
  int64_t T = 0;
};

void launch_get_rows(const GetRowsParams& p, cudaStream_t stream);

}  // namespace cuda
