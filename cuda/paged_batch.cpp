// Checks and prefill tiles of a paged batch (cuda/paged_batch.h).
#include "cuda/paged_batch.h"

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/kernels/attention_prefill.cuh"

namespace cuda {

namespace {

constexpr int64_t kTileTokens = 64;  // the prefill kernel's query rows per block

// Per block-table row, the first and last positions its tokens of a run reach (from the first position the widest
// window sees, `reach` 0 meaning position 0, to the highest token's); hi -1 for a row no token uses. Positions and
// rows checked before (padding, -1, skipped).
struct RowSpans {
  ::std::vector<int64_t> lo, hi;
};
RowSpans row_spans(const graph::KvCacheSpec& kv, int32_t reach, const graph::RunInputs& in) {
  RowSpans r{::std::vector<int64_t>(size_t(kv.n_seq), ::std::numeric_limits<int64_t>::max()),
             ::std::vector<int64_t>(size_t(kv.n_seq), -1)};
  for (size_t t = 0; t < in.positions.size(); ++t) {
    const int64_t pos = in.positions[t];
    if (pos < 0) continue;
    const size_t row = size_t(in.kv_seq[t]);
    r.lo[row] = ::std::min(r.lo[row], reach > 0 ? ::std::max<int64_t>(0, pos - reach + 1) : int64_t(0));
    r.hi[row] = ::std::max(r.hi[row], pos);
  }
  return r;
}

}  // namespace

int32_t PagedTiles::max_tiles(int64_t T) { return int32_t(::std::max<int64_t>(1, T / kPrefillMinTokens)); }

void check_paged_inputs(const graph::KvCacheSpec& kv, int32_t reach, const graph::RunInputs& in) {
  const auto fail = [](size_t t, const ::std::string& what) {
    throw InvalidArgument("paged batch: token " + ::std::to_string(t) + ": " + what);
  };
  if (in.kv_seq.size() != in.positions.size() || int64_t(in.block_table.size()) != int64_t(kv.n_seq) * kv.max_blocks)
    throw InvalidArgument("paged batch: " + ::std::to_string(in.positions.size()) + " positions need as many kv_seq "
                          "values and a block table of " + ::std::to_string(int64_t(kv.n_seq) * kv.max_blocks) +
                          " entries, got " + ::std::to_string(in.kv_seq.size()) + " and " +
                          ::std::to_string(in.block_table.size()));
  const int64_t capacity = kv.seq_capacity(), bs = kv.block_size, n_blocks = kv.n_blocks();
  for (size_t t = 0; t < in.positions.size(); ++t) {
    const int32_t pos = in.positions[t];
    if (pos == -1) continue;  // padding: no cache write, no read
    if (pos < 0 || pos >= capacity)
      fail(t, "position " + ::std::to_string(pos) + " is outside [-1, " + ::std::to_string(capacity) + ")");
    const int32_t row = in.kv_seq[t];
    if (row < 0 || row >= kv.n_seq)
      fail(t, "block-table row " + ::std::to_string(row) + " is outside [0, " + ::std::to_string(kv.n_seq) + ")");
  }
  // The blocks a row's tokens reach, checked once per row.
  const RowSpans spans = row_spans(kv, reach, in);
  for (int64_t r = 0; r < kv.n_seq; ++r) {
    if (spans.hi[size_t(r)] < 0) continue;
    for (int64_t b = spans.lo[size_t(r)] / bs; b <= spans.hi[size_t(r)] / bs; ++b) {
      const int32_t block = in.block_table[size_t(r * kv.max_blocks + b)];
      if (block < 0 || block >= n_blocks)
        throw InvalidArgument("paged batch: block-table row " + ::std::to_string(r) + ", entry " +
                              ::std::to_string(b) + ": block " + ::std::to_string(block) +
                              " is outside the pool of " + ::std::to_string(n_blocks) + " blocks");
    }
  }
  const int64_t T = int64_t(in.positions.size());
  for (size_t i = 0; i < in.output_rows.size(); ++i)
    if (in.output_rows[i] < 0 || in.output_rows[i] >= T)
      throw InvalidArgument("paged batch: output row " + ::std::to_string(in.output_rows[i]) + " (entry " +
                            ::std::to_string(i) + ") is outside [0, " + ::std::to_string(T) + ")");
}

void plan_paged_tiles(::std::span<const int32_t> positions, ::std::span<const int32_t> kv_seq,
                      ::std::span<int32_t> out) {
  const int64_t T = int64_t(positions.size());
  const int32_t max_tiles = PagedTiles::max_tiles(T);
  LLM_REQUIRE(kv_seq.size() == positions.size() && int64_t(out.size()) == PagedTiles::ints(T), "paged tiles: sizes");
  ::std::fill(out.begin(), out.end(), 0);
  int32_t* tiles = out.data() + 1;
  int32_t* tiled = tiles + 2 * int64_t(max_tiles);
  int32_t n = 0;
  for (int64_t a = 0; a < T;) {
    if (positions[size_t(a)] < 0) {
      ++a;
      continue;
    }
    int64_t b = a + 1;  // the run [a, b): one row, no padding
    while (b < T && positions[size_t(b)] >= 0 && kv_seq[size_t(b)] == kv_seq[size_t(a)]) ++b;
    if (b - a >= kPrefillMinTokens) {
      for (int64_t t0 = a; t0 < b; t0 += kTileTokens) {
        LLM_REQUIRE(n < max_tiles, "paged tiles: more tiles than the bound");
        tiles[2 * n] = int32_t(t0), tiles[2 * n + 1] = int32_t(::std::min(kTileTokens, b - t0));
        ++n;
      }
      ::std::fill(tiled + a, tiled + b, 1);
    }
    a = b;
  }
  out[0] = n;
}

bool tokens_of_distinct_sequences(::std::span<const int32_t> positions, ::std::span<const int32_t> kv_seq) {
  if (positions.size() != kv_seq.size()) return false;
  // Asked every step of a graph with the fused variant (steps of 2-8 tokens, and of 32 and more): pairs, no
  // allocation; it returns at the first repeated sequence, so a step costs at most (its sequences + 1)^2 / 2.
  for (size_t t = 0; t < positions.size(); ++t)
    for (size_t u = 0; u < t && positions[t] >= 0; ++u)
      if (positions[u] >= 0 && kv_seq[u] == kv_seq[t]) return false;
  return true;
}

void plan_run_bases(const graph::KvCacheSpec& kv, const graph::RunInputs& in, ::std::span<int32_t> out) {
  LLM_REQUIRE(out.size() == in.positions.size() && in.kv_seq.size() == in.positions.size(), "run bases: sizes");
  const ::std::vector<int64_t> hi = row_spans(kv, 0, in).hi;  // per row, the highest position its tokens reach
  ::std::vector<int32_t> base(size_t(kv.n_seq), -1);
  for (int64_t r = 0; r < kv.n_seq; ++r) {
    if (hi[size_t(r)] < 0) continue;
    const int32_t* row = in.block_table.data() + r * kv.max_blocks;
    bool consecutive = row[0] >= 0;
    for (int64_t b = 1; consecutive && b <= hi[size_t(r)] / kv.block_size; ++b) consecutive = row[b] == row[0] + b;
    if (consecutive) base[size_t(r)] = int32_t(int64_t(row[0]) * kv.block_size);
  }
  for (size_t t = 0; t < in.positions.size(); ++t) out[t] = in.positions[t] >= 0 ? base[size_t(in.kv_seq[t])] : -1;
}

}  // namespace cuda
