// One error-check family for CUDA runtime, cuBLASLt and NVRTC calls. Every failure throws cuda::Error naming the
// expression, the function, file and line, the current device, and the library's own error string.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <stdexcept>
#include <string>

namespace cuda {

// A failed CUDA / cuBLAS / NVRTC call. Typed so that app/ can tell device failures from model or usage errors.
class Error : public ::std::runtime_error {
 public:
  using ::std::runtime_error::runtime_error;
};

// Launcher preconditions that fail (shape, pointer, type mismatches): a programming error in the caller.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// A model (or a setting) the CUDA path does not run yet, refused before anything is allocated.
class Unsupported : public Error {
 public:
  using Error::Error;
};

// Builds the message and throws; out of line so the macros stay small at every call site.
[[noreturn]] void throw_error(const char* library, const char* expr, const ::std::string& what, const char* func,
                              const char* file, int line);

const char* cublas_status_string(cublasStatus_t s);

// True when at least one CUDA device is usable (false, never throwing, on machines without a driver or GPU).
bool device_available();

// After every kernel launch: launch-configuration errors always; in debug builds also a stream synchronize (skipped
// while the stream is being captured) so that a faulting kernel is reported at its own launch site.
void check_launch(cudaStream_t stream, const char* func, const char* file, int line);

}  // namespace cuda

// The generic check: OK is the library's success value, TO_STRING turns the status into text.
#define LLM_CHECK_GEN(LIB, EXPR, OK, TO_STRING)                                                     \
  do {                                                                                            \
    const auto llm_check_status_ = (EXPR);                                                        \
    if (llm_check_status_ != (OK))                                                                \
      ::cuda::throw_error(LIB, #EXPR, TO_STRING(llm_check_status_), __func__, __FILE__, __LINE__); \
  } while (0)

#define CUDA_CHECK(EXPR) LLM_CHECK_GEN("CUDA", EXPR, cudaSuccess, cudaGetErrorString)
#define CUBLAS_CHECK(EXPR) LLM_CHECK_GEN("cuBLAS", EXPR, CUBLAS_STATUS_SUCCESS, ::cuda::cublas_status_string)
#define NVRTC_CHECK(EXPR) LLM_CHECK_GEN("NVRTC", EXPR, NVRTC_SUCCESS, nvrtcGetErrorString)
#define CUDA_CHECK_LAUNCH(STREAM) ::cuda::check_launch((STREAM), __func__, __FILE__, __LINE__)

// Launcher precondition check: throws cuda::InvalidArgument naming the launcher, the message and the condition.
#define LLM_REQUIRE(COND, MSG)                                                                          \
  do {                                                                                                  \
    if (!(COND)) throw ::cuda::InvalidArgument(::std::string(__func__) + ": " + (MSG) + " (" #COND ")"); \
  } while (0)
