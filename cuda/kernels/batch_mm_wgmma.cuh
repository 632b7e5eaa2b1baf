// Small-batch products of Q4_K in the file's layout and of regrouped Q6_K (Q6_Kx8) at up to 64 tokens on the warpgroup
// tensor cores (wgmma, sm_90a): a warpgroup multiplies 64 rows of W, unpacked by its lanes into A fragments in
// registers (q4k_lane.cuh, q6kx8_lane.cuh), by x's 64 token columns, which the tensor cores read from shared memory
// themselves. launch_batch_mm routes products here by their tokens and size (WgmmaRoute, batch_mm.cuh). Prompt
// products take the same kernel in tiles of 128 tokens (launch_prompt_wgmma, below).
// Measurements: docs/kernel-notes.md, sessions 36, 37 and 63.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/batch_mm.cuh"

namespace cuda {

// True when launch_batch_mm_wgmma can take this product: Q4_K in the file's layout or Q6_K regrouped (Q6_Kx8),
// 8 < T <= kBatchMmMaxTokens.
bool batch_mm_wgmma_supports(quant::Type type, bool regrouped, int64_t T);

// Scratch it needs. The first part_offset bytes (x in half, batch_mm.cuh) it leaves alone: it reads x as float and
// writes its own copy of it (in the order its shared-memory stages need) after them, then its partial sums.
size_t batch_mm_wgmma_scratch(int64_t K, int64_t T);

// y = W x for p (validated by launch_batch_mm; batch_mm_wgmma_supports); converts x itself. stack: a stacked
// launch's matrices (product_stack.cuh) or null. programmatic: as BatchMmChoices'. Never allocates.
void launch_batch_mm_wgmma(const BatchMmParams& p, const ProductStack* stack, cudaStream_t stream,
                           bool programmatic = true);

// Prompt products (more than kBatchMmMaxTokens tokens) on the same kernel in tiles of 128 rows by 128 tokens: W is
// unpacked in registers as it is read, instead of dequantized to half through memory for cuBLAS (gemm.cuh), which
// wrote and read back 2 bytes a weight for every product. True for Q4_K in the file's layout and Q6_Kx8 of whole
// super-blocks (runs of 2048) with tiles the counters hold.
bool prompt_wgmma_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T);

// Scratch it needs: the first part_offset bytes (x in half) left alone, then its image of x and its partial sums
// (for at most 264 blocks, fewer for small products).
size_t prompt_wgmma_scratch(int64_t K, int64_t N, int64_t T);

// y = W x (+ bias) for p: T > kBatchMmMaxTokens, p.tile_counters as for launch_batch_mm, p.x_gate allowed; converts
// x itself (programmatic launches, pdl.cuh). image_ready: the launch before on this stream was one of these with the
// same x, x_gate, K, T, format and scratch, so its image of x is still in the scratch (q and k, gate and up). Throws
// cuda::InvalidArgument where prompt_wgmma_supports is false or the scratch, pointers or alignment do not fit. Never
// allocates.
void launch_prompt_wgmma(const BatchMmParams& p, cudaStream_t stream, bool image_ready = false);

}  // namespace cuda
