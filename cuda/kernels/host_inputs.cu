#include "cuda/kernels/host_inputs.cuh"

#include "cuda/check.h"

namespace cuda {
namespace {

__global__ void copy_from_host_kernel(HostCopies copies) {
  int k = 0, part = int(blockIdx.x);  // this block: part `part` of copy k
  while (k + 1 < copies.n && part >= copies.c[k].blocks) part -= copies.c[k++].blocks;
  const HostCopy c = copies.c[k];
  const int32_t n = c.n_at ? min(c.n, max(*c.n_at, 0)) : c.n;
  const int32_t* src = c.use_alt_at && *c.use_alt_at ? c.alt_src : c.src;
  const int32_t step = int32_t(blockDim.x) * c.blocks;
  for (int32_t i = part * int32_t(blockDim.x) + int32_t(threadIdx.x); i < n; i += step) {
    const int32_t row = c.gather_rows ? c.gather_rows[i] : -1;
    // Volatile: gather_src is host memory that a copy after the previous step wrote (never a stale cached line).
    c.dst[i] = row >= 0 ? *static_cast<const volatile int32_t*>(c.gather_src + row) : src[i];
  }
}

}  // namespace

void* device_address_of_pinned(const void* p) {
  void* d = nullptr;
  CUDA_CHECK(cudaHostGetDevicePointer(&d, const_cast<void*>(p), 0));
  return d;
}

void launch_copy_from_host(const HostCopies& copies, cudaStream_t stream) {
  LLM_REQUIRE(copies.n >= 0 && copies.n <= HostCopies::kMax, "too many host copies");
  if (copies.n == 0) return;
  int64_t blocks = 0;
  for (int i = 0; i < copies.n; ++i) {
    const HostCopy& c = copies.c[i];
    LLM_REQUIRE(c.src && c.dst && c.n >= 0 && (!c.use_alt_at || c.alt_src) && (!c.gather_rows || c.gather_src),
                "host copy: null pointer or negative size");
    LLM_REQUIRE(c.blocks >= 1 && c.blocks <= 1024, "host copy: blocks out of [1, 1024]");
    blocks += c.blocks;
  }
  copy_from_host_kernel<<<unsigned(blocks), 256, 0, stream>>>(copies);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
