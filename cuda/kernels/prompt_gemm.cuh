// Prompt products of Q4_K (the file's layout) and Q6_Kx8 on a warp-specialised warpgroup GEMM (sm_90a): producer warps
// copy each tile's raw super-blocks of W and the stages of x's half image into shared-memory rings with mbarriers,
// and two consumer warpgroups unpack W from shared memory into wgmma A fragments against 256 token columns of x read
// by the tensor cores from shared memory. Against launch_prompt_wgmma (batch_mm_wgmma.cuh: W loaded by the consumers
// into registers two super-blocks ahead, tiles of 128 tokens) no W registers wait on DRAM, the next segment's stages
// load under the current one's products and sums, and each x byte read from L2 serves twice the flops. A lab kernel,
// off by default (ExecutorOptions::prompt_gemm): docs/kernel-notes.md, sessions 64-65.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/batch_mm.cuh"

namespace cuda {

// True for Q4_K in the file's layout (K a multiple of 256) and Q6_Kx8 (of 2048), T > kBatchMmMaxTokens, tiles the
// counters hold.
bool prompt_gemm_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T);

// Scratch it needs: the first part_offset bytes (x in half, batch_mm.cuh) left alone, then its image of x and its
// partial sums.
size_t prompt_gemm_scratch(int64_t K, int64_t N, int64_t T);

// y = W x (+ bias) for p: p.tile_counters as for launch_batch_mm, p.x_gate allowed (the image forms the SwiGLU).
// image_ready: the launch before on this stream was one of these with the same x, x_gate, K and T, so its image of
// x is still in the scratch. Throws cuda::InvalidArgument where prompt_gemm_supports is false or the scratch,
// pointers or alignment do not fit. Never allocates. pairs: clusters of two blocks on 256 rows share each stage of x
// (read from L2 once per 256 rows instead of 128; a lab choice, ExecutorOptions::prompt_gemm_pairs).
void launch_prompt_gemm(const BatchMmParams& p, cudaStream_t stream, bool image_ready = false, bool pairs = false);

}  // namespace cuda
