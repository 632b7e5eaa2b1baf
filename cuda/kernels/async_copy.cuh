// cp.async (sm_80+): 16-byte global -> shared copies that complete asynchronously, so a thread can keep several
// tiles or weight groups in flight without holding them in registers. Completion is per thread: commit_group after
// a batch, wait_group N until at most N of the thread's batches are pending; other threads' copies need a barrier.
#pragma once
#include <cuda_runtime.h>

namespace cuda {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(unsigned(__cvta_generic_to_shared(smem))),
               "l"(gmem));
}

}  // namespace cuda
