// Context setup and teardown (cuda/context.h).
#include "cuda/context.h"

namespace cuda {

Context::Context(int device, size_t blas_workspace_bytes) : device_(device) {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    throw Error("CUDA device " + ::std::to_string(device) + " does not exist (" + ::std::to_string(n) + " present)");
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaGetDeviceProperties(&props_, device));
  compute_ = Stream::create();
  copy_ = Stream::create();
  blas_ = ::std::make_unique<Blas>(blas_workspace_bytes);
}

Context::~Context() = default;

}  // namespace cuda
