// Prefill products of the chosen experts (graph/ir.h MulMatId with many tokens), grouped by expert on the device:
// a grouping launch lists each expert's (token, slot) users from the ids, then one launch of tiles (64 rows of an
// expert x 32 of its users) reads each chosen expert's rows once per 32 users instead of once per user, and
// experts nobody chose not at all. The ids never leave the device, so a prefill step is capturable too.
// Float32 tiles (no tensor cores yet): the first correct form, a later lab variant may take the GEMM path's mma.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/matvec_id.cuh"

namespace cuda {

// Device scratch of the grouping for n_expert experts and k x T users (int32 counts, offsets, user lists).
inline size_t moe_group_scratch_bytes(int64_t n_expert, int64_t k, int64_t T) {
  return size_t(2 * n_expert + k * T) * 4;
}

// p as for launch_matvec_id (any T); scratch holds moe_group_scratch_bytes(n_expert, k, T) bytes, 4-byte aligned.
void launch_moe_gemm(const MatvecIdParams& p, void* scratch, size_t scratch_bytes, cudaStream_t stream);

}  // namespace cuda
