// Context setup and teardown (cuda/context.h).
#include "cuda/context.h"

namespace cuda {

Context::Context(int device, size_t cublas_workspace_bytes) : device_(device) {
  int n = 0;
  CUDA_CHECK(cudaGetDeviceCount(&n));
  if (device < 0 || device >= n)
    throw Error("CUDA device " + ::std::to_string(device) + " does not exist (" + ::std::to_string(n) + " present)");
  CUDA_CHECK(cudaSetDevice(device));
  CUDA_CHECK(cudaGetDeviceProperties(&props_, device));
  compute_ = Stream::create();
  copy_ = Stream::create();
  cublas_workspace_ = DeviceBuffer(cublas_workspace_bytes);
  CUBLAS_CHECK(cublasCreate(&cublas_));
  try {
    CUBLAS_CHECK(cublasSetStream(cublas_, compute_.get()));
    CUBLAS_CHECK(cublasSetWorkspace(cublas_, cublas_workspace_.get(), cublas_workspace_.bytes()));
    CUBLAS_CHECK(cublasSetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  } catch (...) {
    (void)cublasDestroy(cublas_);
    throw;
  }
}

Context::~Context() {
  if (cublas_) (void)cublasDestroy(cublas_);
}

}  // namespace cuda
