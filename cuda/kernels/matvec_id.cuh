// Decode products of the chosen experts (graph/ir.h MulMatId with few tokens): one launch over every (token, slot),
// each block reading its expert id from device memory and then only that expert's rows, so a step reads the k
// chosen experts' bytes and nothing else, and is capturable (no host round trip for the ids).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/types.h"

namespace cuda {

struct MatvecIdParams {
  const void* w = nullptr;      // [K, N, n_expert]: expert e's N rows of K elements of `type` start at row e * N
  quant::Type type = quant::Type::F32;
  const float* x = nullptr;     // [K, x_slots, T]: the input of slot j of token t at x + (t x_slots + j') K, j' = 0
                                // when x_slots is 1 (the token's input shared by its k experts), else j
  int64_t x_slots = 1;          // 1 or k
  const int32_t* ids = nullptr; // [k, T] device memory: the expert of slot j of token t; ids outside
                                // [0, n_expert) give zero rows
  const float* bias = nullptr;  // [N, n_expert] or null: expert e's bias at bias + e N
  float* y = nullptr;           // [N, k, T]
  int64_t K = 0, N = 0, n_expert = 0, k = 0, T = 0;
  bool recoded = false;         // MXFP4 experts recoded at upload (mxfp4_recode.cuh); also read by moe_gemm
};

// Throws cuda::InvalidArgument on bad params, quant::UnsupportedType for types without a device dequantizer.
void launch_matvec_id(const MatvecIdParams& p, cudaStream_t stream);

}  // namespace cuda
