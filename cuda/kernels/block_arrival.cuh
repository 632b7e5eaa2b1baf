// The count by which the last of a grid's blocks to finish a shared piece of work (a split attention's splits, a
// product tile's contributors) learns that it is last, and then reads what the others wrote.
// One thread of each block adds to the counter with acquire-release semantics at gpu scope, after a barrier that
// orders the whole block's writes before its addition: a release that covers those writes (the barrier puts them
// before it), and in the last block an acquire that covers the others' writes for the reads after the next barrier.
// This is the fence CUTLASS's block semaphores and cooperative groups' grid barrier use. The kernels had a
// sequentially consistent fence (__threadfence, fence.sc.gpu) before a relaxed addition, and another after it in the
// last block, in every thread where a tile's sums were shared; a sequentially consistent fence orders more than this
// handoff needs, on the path of the launch's last block.
#pragma once
#include <cuda_runtime.h>

namespace cuda {

// *counter + 1, acquire-release at gpu scope; returns the count before. Call from one thread, between two barriers.
__device__ __forceinline__ unsigned arrive_acq_rel(unsigned* counter) {
  unsigned before;
  asm volatile("atom.add.acq_rel.gpu.global.u32 %0, [%1], 1;" : "=r"(before) : "l"(counter) : "memory");
  return before;
}

// Thread 0's count for its block, one of n: true in the last, which also zeroes the counter for the next launch (the
// launch's end publishes the store; no block of this launch counts on it again).
__device__ __forceinline__ bool last_to_arrive(unsigned* counter, unsigned n) {
  const bool last = arrive_acq_rel(counter) == n - 1;
  if (last) *counter = 0u;
  return last;
}

}  // namespace cuda
