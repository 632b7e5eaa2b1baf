// MXFP4 expert tensors regrouped and recoded at upload (cuda/weight_layouts.cpp). Each expert (N rows of nb = K / 32
// blocks, 17 nb bytes a row in the file) keeps its bytes and its place in the tensor, laid out as
//   [0, 16 N nb)            its codes: block b of row r at 16 (r nb + b), the four words of mx::recode_block_codes
//                           (mxfp4_codes.cuh: elements in the order the int16 units dot them, each code's sign among
//                           prmt's index bits);
//   [16 N nb, 17 N nb)      its scale bytes: block b of row r at 16 N nb + r nb + b.
// Why: a block's codes are then one aligned 16-byte load and its scale one byte, where the file's 17-byte blocks took
// five word loads and four funnel shifts, and four codes decode in two table permutes and an xor. Same values (-0 is
// recoded +0). Expert e starts at e 17 N nb, 16-byte aligned where N nb % 16 == 0 (mxfp4_split_fits) and the tensor
// is. Read by expert_matvec.cu, matvec_id.cu and moe_gemm.cu when their params say `recoded`; no other kernel may
// read such a tensor.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// Whether experts of N rows of K elements take the layout: whole blocks, and every expert's codes 16-byte aligned.
inline bool mxfp4_split_fits(int64_t K, int64_t N) { return K > 0 && K % 32 == 0 && N > 0 && (N * (K / 32)) % 16 == 0; }

// Where block b of row r of one expert lies (expert: its first byte; nb blocks a row, N rows).
struct Mxfp4Split {
  const uint8_t* codes;   // row 0's codes
  const uint8_t* scales;  // row 0's scales
  __host__ __device__ Mxfp4Split(const uint8_t* expert, int64_t N, int64_t nb)
      : codes(expert), scales(expert + 16 * N * nb) {}
};

// Regroups and recodes the n_expert experts of N rows of K elements at `tensor` (16-byte aligned, mxfp4_split_fits),
// in place, through `scratch` (at least one expert's 17 N K / 32 bytes), on `stream`.
void launch_mxfp4_recode(uint8_t* tensor, int64_t K, int64_t N, int64_t n_expert, uint8_t* scratch,
                         size_t scratch_bytes, cudaStream_t stream);

}  // namespace cuda
