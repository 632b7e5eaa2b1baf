// Out-of-line parts of the error-check family (cuda/check.h).
#include "cuda/check.h"

#include <sstream>

namespace cuda {

void throw_error(const char* library, const char* expr, const ::std::string& what, const char* func, const char* file,
                 int line) {
  int dev = -1;
  // The device query may itself fail (no driver); the message then says device -1.
  if (cudaGetDevice(&dev) != cudaSuccess) dev = -1;
  ::std::ostringstream os;
  os << library << " error: " << what << "\n  in " << expr << "\n  at " << func << " (" << file << ":" << line
     << "), device " << dev;
  throw Error(os.str());
}

const char* cublas_status_string(cublasStatus_t s) { return cublasLtGetStatusString(s); }

bool device_available() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" error so later calls start clean
    return false;
  }
  return n > 0;
}

void check_launch(cudaStream_t stream, const char* func, const char* file, int line) {
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) throw_error("CUDA", "kernel launch", cudaGetErrorString(e), func, file, line);
#ifndef NDEBUG
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) == cudaSuccess && cs == cudaStreamCaptureStatusNone) {
    const cudaError_t s = cudaStreamSynchronize(stream);
    if (s != cudaSuccess) throw_error("CUDA", "kernel execution", cudaGetErrorString(s), func, file, line);
  }
#else
  (void)stream;
#endif
}

}  // namespace cuda
