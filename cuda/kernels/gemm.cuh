// Prefill matrix-matrix products Y = W X for every weight type: rows of W are dequantized to half precision into a
// scratch buffer in slices, X is rounded to half once, and cuBLASLt multiplies with float32 accumulation and output.
// (Q4_K and Q6_Kx8 prompts of up to ExecutorOptions::prompt_wgmma_max_tokens take batch_mm_wgmma.cuh's
// launch_prompt_wgmma instead, which unpacks W in registers.)
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/blas.h"
#include "quant/types.h"

namespace cuda {

struct GemmParams {
  const void* w = nullptr;     // [K, N]: N rows of K elements of `type`
  quant::Type type = quant::Type::F32;
  const float* x = nullptr;    // [K, T]
  const float* bias = nullptr; // [N] or null
  float* y = nullptr;          // [N, T]
  int64_t K = 0;
  int64_t N = 0;
  int64_t T = 0;
  void* scratch = nullptr;     // device scratch of scratch_bytes; >= gemm_min_scratch(K, N, T)
  size_t scratch_bytes = 0;
  bool x_in_scratch = false;   // the previous launch on this stream converted this same x (K, T) into scratch:
                               // siblings reading one input (q/k/v, gate/up) skip the conversion
  bool regrouped = false;      // regrouped at upload: Q6_K into Q6_Kx8 (q6_kx8.cuh), Q4_0 by columns (q4_0_cols.cuh)
  // A second matrix of the same K and N that reads the same x (a layer's v beside its k; the executor's
  // pair_gemm_siblings), of its own type and layout (Q4_K_M's v is Q6_K in some layers): both dequantized into the
  // scratch and multiplied in one batched cuBLAS call where the scratch holds both (gemm_pair_scratch), else one
  // after the other. Its own bias and output.
  const void* w2 = nullptr;
  quant::Type type2 = quant::Type::F32;
  bool regrouped2 = false;
  const float* bias2 = nullptr;
  float* y2 = nullptr;
  // W already in half precision (the executor's DequantAhead made it off the chain): no dequantization here, the
  // scratch holds x alone. A pair's two matrices are both there, gemm_half_bytes(K, N) apart, the one whose output
  // lies lower in memory first (the batched call's order), and always run as one batched call.
  const uint16_t* w_half = nullptr;
};

// Smallest scratch for which the launcher can proceed (X in half plus a slice of min(N, 128) rows of W); more
// scratch means fewer, larger GEMM calls. gemm_full_scratch is the size that converts all of W in one slice.
size_t gemm_min_scratch(int64_t K, int64_t N, int64_t T);
size_t gemm_full_scratch(int64_t K, int64_t N, int64_t T);
// What a pair (GemmParams::w2) needs to be one batched call: X in half and both matrices whole.
size_t gemm_pair_scratch(int64_t K, int64_t N, int64_t T);
// What a product of F16 weights (or of GemmParams::w_half) needs: X in half alone.
size_t gemm_x_scratch(int64_t K, int64_t T);
// Bytes of one matrix in half, as the scratch and GemmParams::w_half hold it (256-byte aligned, for cuBLASLt).
size_t gemm_half_bytes(int64_t K, int64_t N);

// Runs on `stream`. Never allocates device memory: safe inside CUDA graph capture (cuda/blas.h).
void launch_gemm(const GemmParams& p, const Blas& blas, cudaStream_t stream);

// x's n floats rounded to half (round to nearest) into `out`: the copy at the scratch's start that the GEMM and the
// small-batch products (batch_mm.cuh) both read, so either may reuse the other's (x_in_scratch). programmatic:
// launched to overlap the kernel before it (pdl.cuh), reading x after waiting for it.
void launch_x_to_half(const float* x, void* out, int64_t n, cudaStream_t stream, bool programmatic = false);

// Rows [row0, row0 + rows) of W as half precision, row-major with leading dimension K: out[(r - row0) * K + k].
struct DequantF16Params {
  const void* w = nullptr;     // [K, N] of `type`
  quant::Type type = quant::Type::F32;
  int64_t K = 0;
  int64_t row0 = 0;
  int64_t rows = 0;
  uint16_t* out = nullptr;     // [K, rows] binary16
  bool regrouped = false;      // regrouped at upload: Q6_K into Q6_Kx8 (q6_kx8.cuh), Q4_0 by columns (q4_0_cols.cuh)
  int64_t N = 0;               // the matrix's rows, all of them (Q4_0 by columns addresses blocks by them)
};
void launch_dequant_f16(const DequantF16Params& p, cudaStream_t stream);

// Matrix i (0, 1) of p as its batched call takes it: a pair's (GemmParams::w2) in the order of their outputs, the
// lower first (so the batch's output stride is positive; GemmParams::w_half holds the copies made ahead in this
// order too), each whole as one dequantisation to half (out left null); without w2, matrix 0 is p.w.
bool gemm_pair_swapped(const GemmParams& p);
DequantF16Params gemm_member_dequant(const GemmParams& p, int i);

}  // namespace cuda
