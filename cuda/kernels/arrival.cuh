// The last block to arrive among n blocks that share a counter (the threadFenceReduction pattern): the split
// attention's merge (attention_splits.cuh) and the attention tail of a q/k/v launch (matvec_attend.cuh).
#pragma once
#include <cuda_runtime.h>

namespace cuda {

// Every thread of the block must call it, after the block's writes that the last block will read: true in the
// n-th block to arrive at *counter, which resets it to zero (ready for the next launch). One thread fences for the
// block, as cooperative groups' grid barrier does: the barrier orders every thread's writes before its fence, which
// makes them visible device-wide before the count (and, in the last block, every other block's before the reads
// that follow the second barrier; those must not come from a cache that can be stale, e.g. __ldcg).
__device__ __forceinline__ bool last_to_arrive(unsigned* counter, unsigned n) {
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    last = atomicAdd(counter, 1u) == n - 1;
    if (last) {
      *counter = 0u;
      __threadfence();
    }
  }
  __syncthreads();
  return last;
}

}  // namespace cuda
