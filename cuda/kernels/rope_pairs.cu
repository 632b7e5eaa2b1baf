// Rope pairs side by side at upload (rope_pairs.cuh).
#include "cuda/kernels/rope_pairs.cuh"

#include "cuda/check.h"
#include "graph/rope_pairs.h"

namespace cuda {
namespace {

constexpr int kThreads = 256;

// Row r of the chunk (head r / head_dim, position r % head_dim) from the row of its head that position holds after
// the reorder. A load-time copy: bytes, or words when the rows are word-aligned.
__global__ void gather_rows_kernel(const uint8_t* src, uint8_t* dst, int32_t head_dim, int32_t n_rot,
                                   size_t row_bytes) {
  const int64_t r = blockIdx.x, head = r / head_dim;
  const int32_t i = int32_t(r % head_dim);
  const uint8_t* s = src + size_t(head * head_dim + graph::rope_pair_source(i, n_rot)) * row_bytes;
  uint8_t* d = dst + size_t(r) * row_bytes;
  if (row_bytes % 4 == 0 && reinterpret_cast<uintptr_t>(src) % 4 == 0) {
    for (size_t b = threadIdx.x; b < row_bytes / 4; b += blockDim.x)
      reinterpret_cast<uint32_t*>(d)[b] = reinterpret_cast<const uint32_t*>(s)[b];
  } else {
    for (size_t b = threadIdx.x; b < row_bytes; b += blockDim.x) d[b] = s[b];
  }
}

}  // namespace

void launch_rope_pair_rows(uint8_t* rows, int64_t n_heads, int32_t head_dim, int32_t n_rot, size_t row_bytes,
                           uint8_t* scratch, size_t scratch_bytes, cudaStream_t stream) {
  LLM_REQUIRE(rows && head_dim > 0 && n_rot > 0 && n_rot % 2 == 0 && n_rot <= head_dim && row_bytes > 0,
              "rope pairs: a head of head_dim rows, an even n_rot of at most head_dim");
  const size_t head_bytes = size_t(head_dim) * row_bytes;
  LLM_REQUIRE(scratch && scratch_bytes >= head_bytes, "rope pairs: scratch for at least one head");
  const int64_t per_chunk = int64_t(scratch_bytes / head_bytes);
  for (int64_t h0 = 0; h0 < n_heads; h0 += per_chunk) {
    const int64_t n = n_heads - h0 < per_chunk ? n_heads - h0 : per_chunk;
    uint8_t* at = rows + size_t(h0) * head_bytes;
    gather_rows_kernel<<<unsigned(n * head_dim), kThreads, 0, stream>>>(at, scratch, head_dim, n_rot, row_bytes);
    CUDA_CHECK_LAUNCH(stream);
    CUDA_CHECK(cudaMemcpyAsync(at, scratch, size_t(n) * head_bytes, cudaMemcpyDeviceToDevice, stream));
  }
}

}  // namespace cuda
