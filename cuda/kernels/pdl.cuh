// Programmatic dependent launch (Hopper): a kernel launched with launch_pdl may start while the kernel before it
// on the stream is still running — its blocks become resident as the earlier kernel's blocks retire, and stream
// the weights they own (which no kernel writes) before pdl_wait() — so the launch gap and the first memory round
// trip of each decode matvec overlap the previous kernel's tail. Everything the previous kernels wrote is read
// only after pdl_wait(), and with plain loads: an __ldg is a read-only (non-coherent) load that the compiler may
// schedule above the wait (the race of the first attempt, docs/kernel-notes.md).
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.h"

namespace cuda {

// Lets the next kernel on the stream launch now (its pdl_wait still waits for this whole grid to finish).
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the kernels this one depends on have finished and their writes are visible; returns at once when the
// kernel was launched without the attribute. Every thread must pass it before reading their outputs.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// kernel<<<grid, block, smem, stream>>>(args...), allowed to overlap the previous kernel on `stream` where
// `programmatic` (a plain launch otherwise, and on the legacy default stream, where the tests launch).
template <class... Params, class... Args>
void launch_programmatic(bool programmatic, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                         cudaStream_t stream, Args&&... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = stream && programmatic ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, ::std::forward<Args>(args)...));
}

// launch_programmatic, always allowed to overlap.
template <class... Params, class... Args>
void launch_pdl(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args&&... args) {
  launch_programmatic(true, kernel, grid, block, smem, stream, ::std::forward<Args>(args)...);
}

}  // namespace cuda
