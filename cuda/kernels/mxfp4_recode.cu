// MXFP4 experts regrouped and recoded (mxfp4_recode.cuh): each expert copied to scratch, then a thread per block
// writes its recoded codes (one 16-byte store) and its scale byte into place. Load time only.
#include "cuda/kernels/mxfp4_recode.cuh"

#include "cuda/check.h"
#include "cuda/kernels/mxfp4_codes.cuh"

namespace cuda {
namespace {

__global__ void mxfp4_split_kernel(const uint8_t* file, uint8_t* expert, int64_t N, int64_t nb) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;  // block b of row r: i = r nb + b
  if (i >= N * nb) return;
  const uint8_t* blk = file + 17 * i;  // the file's rows are nb blocks of 17 bytes, back to back
  uint8_t qs[16];
#pragma unroll
  for (int j = 0; j < 16; ++j) qs[j] = blk[1 + j];
  uint32_t w[4];
  mx::recode_block_codes(qs, w);
  reinterpret_cast<uint4*>(expert)[i] = make_uint4(w[0], w[1], w[2], w[3]);
  expert[16 * N * nb + i] = blk[0];
}

}  // namespace

void launch_mxfp4_recode(uint8_t* tensor, int64_t K, int64_t N, int64_t n_expert, uint8_t* scratch,
                         size_t scratch_bytes, cudaStream_t stream) {
  LLM_REQUIRE(tensor && scratch && n_expert >= 1, "mxfp4_recode: null pointer or no experts");
  LLM_REQUIRE(mxfp4_split_fits(K, N) && reinterpret_cast<uintptr_t>(tensor) % 16 == 0,
              "mxfp4_recode: experts whose codes would not be 16-byte aligned");
  const int64_t nb = K / 32, blocks = N * nb;
  const size_t expert_bytes = size_t(17 * blocks);
  LLM_REQUIRE(scratch_bytes >= expert_bytes, "mxfp4_recode: scratch smaller than an expert");
  constexpr int kThreads = 256;
  const int64_t grid = (blocks + kThreads - 1) / kThreads;
  LLM_REQUIRE(grid <= 0x7fffffff, "mxfp4_recode: too many blocks");
  for (int64_t e = 0; e < n_expert; ++e) {
    uint8_t* expert = tensor + size_t(e) * expert_bytes;
    CUDA_CHECK(cudaMemcpyAsync(scratch, expert, expert_bytes, cudaMemcpyDeviceToDevice, stream));
    mxfp4_split_kernel<<<unsigned(grid), kThreads, 0, stream>>>(scratch, expert, N, nb);
    CUDA_CHECK_LAUNCH(stream);
  }
}

}  // namespace cuda
