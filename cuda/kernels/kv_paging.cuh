// Paged KV-cache addressing on the device (graph/ir.h, Op::Attention): token t belongs to block-table row
// kv_seq[t], and its sequence's position p lives in cache slot block_table[row][p >> shift] << shift | p % block_size.
// A null table is one sequence whose position p is slot p, so every kernel that takes a KvPaging keeps its
// single-sequence addressing when the graph is not paged. Shared by the KV writers (kv_write, rope_kv) and the
// attention kernels.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct KvPaging {
  const int32_t* kv_seq = nullptr;       // [T], device: each token's block-table row
  const int32_t* block_table = nullptr;  // [n_seq][max_blocks], device: each row's blocks; null: not paged
  int32_t max_blocks = 0;                // entries per row
  int32_t block_shift = 0;               // log2(block_size)
};

#ifdef __CUDACC__  // the device side; host code (the executor) only fills KvPaging in

// Token t's block-table row; null when the cache is not paged.
__device__ __forceinline__ const int32_t* kv_row(const KvPaging& pg, int64_t t) {
  return pg.block_table ? pg.block_table + int64_t(pg.kv_seq[t]) * pg.max_blocks : nullptr;
}

// The slot of position pos (>= 0) of the sequence whose row kv_row gave; pos itself for a null row. The callers
// reach only positions whose blocks the host checked (Executor::write_inputs): [first of the window, pos] of a token.
__device__ __forceinline__ int64_t kv_slot(const int32_t* row, int32_t shift, int64_t pos) {
  if (!row) return pos;
  return (int64_t(__ldg(row + (pos >> shift))) << shift) | (pos & ((int64_t(1) << shift) - 1));
}

// The slot a writer stores token t's K/V in, or -1 for none: padding (position -1), or a slot outside the cache.
// The row (kv_seq[t], valid for every token) is read before pos is tested, so that its load goes out with the
// caller's load of pos instead of after it: one round trip fewer before the write.
__device__ __forceinline__ int64_t kv_write_slot(const KvPaging& pg, int64_t t, int64_t pos, int64_t n_ctx) {
  const int32_t* const row = kv_row(pg, t);
  if (pos < 0) return -1;
  if (!pg.block_table) return pos < n_ctx ? pos : -1;
  if (pos >= (int64_t(pg.max_blocks) << pg.block_shift)) return -1;
  const int64_t slot = kv_slot(row, pg.block_shift, pos);
  return slot >= 0 && slot < n_ctx ? slot : -1;
}

#endif  // __CUDACC__

}  // namespace cuda
