// cp.async (sm_80+): 16-byte global -> shared copies that complete asynchronously, so a thread can keep several
// tiles or weight groups in flight without holding them in registers. Completion is per thread: commit_group after
// a batch, wait_group N until at most N of the thread's batches are pending; other threads' copies need a barrier.
// The 16-byte forms ask the L2 for the 256-byte sector group around a miss (KV tiles are contiguous runs of slots:
// 8B at 16k, tg128 309.5 -> 310.5 on the H100; docs/kernel-notes.md).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(unsigned(__cvta_generic_to_shared(smem))),
               "l"(gmem));
}

// cp.async with a source size: src_bytes below the copy's size fills the rest with zeros, and 0 reads nothing (so a
// slot past the end of a sequence needs no branch). The 4-byte form copies what is only 4-byte aligned (a q8_0 KV
// slot's scales). The wait carries a compiler memory barrier, for callers that follow it with __syncwarp rather
// than __syncthreads.
__device__ __forceinline__ void cp_async16_zfill(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(unsigned(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}
__device__ __forceinline__ void cp_async4_zfill(void* smem, const void* gmem, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(unsigned(__cvta_generic_to_shared(smem))),
               "l"(gmem), "r"(src_bytes)
               : "memory");
}
// The same copies to a shared-space address (a 32-bit offset from __cvta_generic_to_shared, computed once): loops
// that issue many copies then skip the generic-to-shared conversion per copy.
__device__ __forceinline__ void cp_async16_s(uint32_t saddr, const void* gmem) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16;" ::"r"(saddr), "l"(gmem));
}
__device__ __forceinline__ void cp_async16_zfill_s(uint32_t saddr, const void* gmem, int src_bytes) {
  asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(saddr), "l"(gmem), "r"(src_bytes)
               : "memory");
}
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace cuda
