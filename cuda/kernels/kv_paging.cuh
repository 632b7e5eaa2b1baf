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
  // ExecutorOptions::paged_run_bases: [T], device, or null: token t's slot of position 0 where its sequence's
  // blocks, through the highest position any of its tokens in the run reaches, are consecutive in the pool (block
  // b at block_table[row][0] + b; plan_run_bases), else -1. There slot = base + position: no table read after the
  // position's, as without paging.
  const int32_t* run_base = nullptr;
};

#ifdef __CUDACC__  // the device side; host code (the executor) only fills KvPaging in

// A token's way to its slots: its block-table row, or (row null) the slot of position 0: 0 without paging, its run
// base where its blocks are consecutive.
struct KvRow {
  const int32_t* row = nullptr;
  int64_t base = 0;
};

// Token t's block-table row alone (the run base left out): for kernels where the base's registers cost more than
// the table read (the quantized split kernel's group-of-8 instances spilled 16 bytes with it).
__device__ __forceinline__ KvRow kv_table_row(const KvPaging& pg, int64_t t) {
  return {pg.block_table ? pg.block_table + int64_t(pg.kv_seq[t]) * pg.max_blocks : nullptr, 0};
}

// Token t's KvRow. The run base and the row index are loaded together, neither waiting for the other.
__device__ __forceinline__ KvRow kv_row(const KvPaging& pg, int64_t t) {
  if (!pg.block_table) return {};
  const int64_t base = pg.run_base ? pg.run_base[t] : -1;
  const KvRow table = kv_table_row(pg, t);
  return base >= 0 ? KvRow{nullptr, base} : table;
}

// The slot of position pos (>= 0) of the sequence whose KvRow kv_row gave. The callers reach only positions whose
// blocks the host checked (Executor::write_inputs): [first of the window, pos] of a token.
__device__ __forceinline__ int64_t kv_slot(const KvRow& r, int32_t shift, int64_t pos) {
  if (!r.row) return r.base + pos;
  return (int64_t(__ldg(r.row + (pos >> shift))) << shift) | (pos & ((int64_t(1) << shift) - 1));
}

// The slot a writer stores token t's K/V in, or -1 for none: padding (position -1), or a slot outside the cache.
// The row (kv_seq[t], valid for every token) is read before pos is tested, so that its load goes out with the
// caller's load of pos instead of after it: one round trip fewer before the write.
__device__ __forceinline__ int64_t kv_write_slot(const KvPaging& pg, int64_t t, int64_t pos, int64_t n_ctx) {
  const KvRow row = kv_row(pg, t);
  if (pos < 0) return -1;
  if (!pg.block_table) return pos < n_ctx ? pos : -1;
  if (pos >= (int64_t(pg.max_blocks) << pg.block_shift)) return -1;
  const int64_t slot = kv_slot(row, pg.block_shift, pos);
  return slot >= 0 && slot < n_ctx ? slot : -1;
}

#endif  // __CUDACC__

}  // namespace cuda
