// Small-batch products of 9..48 tokens on Q4_K in the file's layout, and of 9..32 on large regrouped Q6_K
// (launch_batch_mm routes here those the wgmma kernel does not take: WgmmaRoute, batch_mm_takes_wide). The weights
// go from global memory straight into registers, are unpacked to half A fragments there and multiplied on tensor
// cores against x staged once per block in shared memory: no staging of W, about 1.75 instructions a weight a lane
// (Q4_K), reused for every token of the tile. Measurements: docs/kernel-notes.md, "Session 29" and "Session 62".
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/batch_mm.cuh"

namespace cuda {

// Above 48 tokens the fragment kernel of batch_mm.cu measured as fast or faster (H200 lab, T = 64: ffn_up 80 / 82
// us, down 82 / 76, 4096 x 4096 61 / 41): the wide kernel's two m-tiles a warp run at 255 registers, 8 warps an SM.
inline constexpr int64_t kBatchMmWideMaxTokens = 48;

// Regrouped Q6_K (Q6_Kx8) on it, one m-tile a warp (BatchMmChoices::wide_q6x8; launch_batch_mm sends large ones only).
inline constexpr int64_t kBatchMmWideQ6x8MaxTokens = 32;

// True when launch_batch_mm_wide takes this product: Q4_K in the file's layout, 8 < T <= kBatchMmWideMaxTokens; with
// q6x8, Q6_Kx8 of 8 < T <= kBatchMmWideQ6x8MaxTokens too.
bool batch_mm_wide_serves(quant::Type type, bool regrouped, int64_t T, bool q6x8 = false);

// Scratch it needs: x as half [T][K] at the start (as batch_mm.cuh), then the partial sums of tiles blocks share.
size_t batch_mm_wide_scratch(int64_t K, int64_t T);

// y = W x for p (validated by launch_batch_mm), x already in half at xh = p.scratch. stack: a stacked launch's
// matrices (product_stack.cuh) or null. choices: launch_batch_mm's (programmatic, wide_three_sets_min_tokens,
// wide_three_tiles). Never allocates.
void launch_batch_mm_wide(const BatchMmParams& p, const __half* xh, const ProductStack* stack, cudaStream_t stream,
                          const BatchMmChoices& choices = {});

}  // namespace cuda
