// The per-run side of a paged batch (graph/ir.h, Op::Attention) on the CUDA path: the checks of its inputs that the
// kernels rely on (they read block tables without bounds checks), and the plan of the prefill kernel's query tiles,
// both computed on the host from the values Executor::write_inputs receives, before the run's first step copies them.
#pragma once
#include <cstdint>
#include <span>

#include "graph/ir.h"

namespace cuda {

// The query tiles of a paged batch's prefill launch (AttentionKernelParams::tiles, ::tiled), as int32 values:
// {n_tiles, (t0, n) x max_tiles(T), tiled[T]}. Each run of at least kPrefillMinTokens consecutive tokens of one
// sequence (a prompt chunk) is cut into tiles of at most 64 tokens that the tensor-core prefill kernel attends;
// every other token (decode tokens, short runs, padding) is left to the split kernels (tiled[t] = 0). Why: a query
// tile must read one sequence's blocks, and a decode token is served best by the split kernels, which cut its
// context over many blocks; a ragged batch has both.
struct PagedTiles {
  // A tile holds a whole run of >= 16 tokens or 64 of one, so T tokens never give more than T / 16 tiles.
  static int32_t max_tiles(int64_t T);
  static int64_t ints(int64_t T) { return 1 + 2 * int64_t(max_tiles(T)) + T; }
  // The staged and device buffer: the tiles, then the tokens' run bases (KvPaging::run_base, plan_run_bases).
  static int64_t staged_ints(int64_t T) { return ints(T) + T; }
};

// Throws InvalidArgument when a paged batch's inputs would take a kernel outside the block table or the cache: a
// position outside [-1, kv.seq_capacity()), a token's row outside [0, kv.n_seq), a block it reaches outside the
// pool (from the first position the widest attention window sees, `reach` 0 meaning position 0, to the token's
// own), or an output row outside [0, T). Sizes are the caller's to check.
void check_paged_inputs(const graph::KvCacheSpec& kv, int32_t reach, const graph::RunInputs& in);

// The tiles of these tokens (PagedTiles' layout, PagedTiles::ints(T) values into out).
void plan_paged_tiles(std::span<const int32_t> positions, std::span<const int32_t> kv_seq, std::span<int32_t> out);

// Whether no two real tokens (position >= 0; padding aside) belong to one sequence (kv_seq row): then no token of
// the step attends another one's new slot, and the attention launch may write each token's K/V itself while other
// blocks of it read the cache (Executor::attend_new_tokens). False when the sizes differ.
bool tokens_of_distinct_sequences(std::span<const int32_t> positions, std::span<const int32_t> kv_seq);

// KvPaging::run_base of every token (out: T values): for a token of row r, when the entries of r from block 0
// through the block of the highest position any token of r in this run reaches are consecutive block ids
// (block_table[r][b] = block_table[r][0] + b), the slot of position 0, block_table[r][0] * block_size; else, and
// for padding, -1. Every position a token of r reads or writes in the run then lies at that base plus the position.
// Inputs checked by check_paged_inputs first.
void plan_run_bases(const graph::KvCacheSpec& kv, const graph::RunInputs& in, std::span<int32_t> out);

}  // namespace cuda
