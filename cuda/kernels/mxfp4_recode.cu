// MXFP4 blocks recoded in place (mxfp4_recode.cuh): a thread per block, byte loads and stores (blocks are 17 bytes;
// load time only).
#include "cuda/kernels/mxfp4_recode.cuh"

#include "cuda/check.h"
#include "cuda/kernels/mxfp4_codes.cuh"

namespace cuda {
namespace {

__global__ void mxfp4_recode_kernel(uint8_t* blocks, int64_t n_blocks) {
  const int64_t b = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (b >= n_blocks) return;
  uint8_t* qs = blocks + 17 * b + 1;
  uint8_t file[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) file[j] = qs[j];
  uint32_t w[4];
  mx::recode_block_codes(file, w);
#pragma unroll
  for (int j = 0; j < 16; ++j) qs[j] = uint8_t(w[j / 4] >> (8 * (j % 4)));
}

}  // namespace

void launch_mxfp4_recode(uint8_t* blocks, int64_t n_blocks, cudaStream_t stream) {
  LLM_REQUIRE(blocks && n_blocks >= 0, "mxfp4_recode: null blocks");
  if (n_blocks == 0) return;
  constexpr int kThreads = 256;
  const int64_t grid = (n_blocks + kThreads - 1) / kThreads;
  LLM_REQUIRE(grid <= 0x7fffffff, "mxfp4_recode: too many blocks");
  mxfp4_recode_kernel<<<unsigned(grid), kThreads, 0, stream>>>(blocks, n_blocks);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
