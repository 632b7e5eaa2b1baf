// Per-run inputs read straight from page-locked host memory by one kernel at the head of a run (token ids,
// positions, the sampler's state and penalty window), instead of one cudaMemcpyAsync each: on the decode path four
// small copies cost ~18 us of stream time per token on an H100 (8B: 0.8% of a token, 1B: 3%), one kernel reading a
// few hundred bytes over PCIe costs one round trip (docs/kernel-notes.md).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// n int32 values from host to dst. src is page-locked host memory as the device addresses it
// (device_address_of_pinned); when n_at is set (also page-locked host memory), min(n, *n_at) values are copied,
// *n_at read at run time (a window whose length changes between replays of one captured graph). When use_alt_at is
// set and *use_alt_at is non-zero at run time, the values come from alt_src instead (any memory the device can read:
// the decode session takes the next token from where the previous run's sampler wrote it). When gather_rows is set
// (page-locked host memory, n values), value i is gather_src[gather_rows[i]] where that index is >= 0, and src[i]
// where it is negative: a paged step takes some of its tokens from the argmax rows of the step before it, which
// that step copied to gather_src (page-locked) and the host has not seen yet.
struct HostCopy {
  const int32_t* src = nullptr;
  int32_t* dst = nullptr;
  int32_t n = 0;
  const int32_t* n_at = nullptr;
  const int32_t* alt_src = nullptr;
  const int32_t* use_alt_at = nullptr;
  const int32_t* gather_src = nullptr;
  const int32_t* gather_rows = nullptr;
  // Blocks of 256 threads the copy takes: a long one (a paged step's block table) reads its host values in one or
  // two round trips instead of one a 256 values.
  int32_t blocks = 1;
};

struct HostCopies {
  // A paged graph's tokens, positions, kv_seq, output rows and prefill tiles (its block table is one copy of its own
  // or, ExecutorOptions::paged_host_io, one of these too) and its argmax ring's slot, and the decode session's
  // sampler state and penalty window. The set is a kernel parameter: 8 copies are ~600 bytes of the 4 KiB a launch
  // may pass.
  static constexpr int kMax = 8;
  HostCopy c[kMax];
  int n = 0;
};

// The device's address of page-locked host memory p (cudaHostGetDevicePointer; the same address under unified
// addressing); kernels may read and write through it.
void* device_address_of_pinned(const void* p);

// HostCopy::blocks blocks per copy; nothing is launched for an empty set.
void launch_copy_from_host(const HostCopies& copies, cudaStream_t stream);

}  // namespace cuda
