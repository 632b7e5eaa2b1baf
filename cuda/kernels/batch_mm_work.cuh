// The small-batch products' division of a launch's work among its blocks (batch_mm.cu): which (tile, slice) units
// each block takes (Work, chosen on the host by choose_blocks), the segments of one tile a block's run falls into,
// and where a segment's sums go: the output, or a per-block slot that the tile's last contributor adds up in block
// order (the same bits whichever block finishes last). Included by the small-batch kernels' files (batch_mm.cu,
// batch_mm_wide.cu, batch_mm_wgmma.cu) only.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/block_arrival.cuh"

namespace cuda::batch_mm_work {

// The launch's work (stream-K): every tile (R rows by one token tile) is n_slices slices of K, and the units
// (tile, slice), tile-major, are dealt to the grid's blocks in equal runs of consecutive units: block b takes units
// [first_unit(b), first_unit(b + 1)). The grid is what the GPU holds at once, so there is no partial last wave,
// and each block's prologue serves a run of slices instead of one tile's share. A run covers a tile whole (the block
// stores it) or in part: the block's partial sums go to one of its two slots in `part` (its first segment's, slot
// 0, or its last's, slot 1: any segment between is a whole tile), and the tile's last contributor to finish adds
// every contributor's slot in block order, then the bias: the same bits whichever block comes last.
struct Work {
  int32_t units;        // tiles * n_slices (below 2^31: launch_batch_mm checks)
  int32_t n_slices;     // slices a tile
  int32_t token_tiles;  // tiles a row tile (consecutive tiles share their rows: the second reads them from L2)
  int32_t run, extra;   // units / gridDim.x, units % gridDim.x: the first `extra` blocks take run + 1 units
  float* part;          // [gridDim.x][2][kCols][R] partial sums
  uint32_t* counters;   // per tile: contributors finished (BatchMmParams::tile_counters)
  __device__ __forceinline__ int32_t first_unit(int32_t b) const { return b * run + ::std::min(b, extra); }
  // Whether every block's run lies in one tile (whole tiles, or a tile's equal splits): the kernel instance
  // without the segment loop serves such a launch (for_each_segment's kSegments false).
  __host__ __device__ bool runs_stay_in_tiles() const { return extra == 0 && n_slices % run == 0; }
  // The block whose run holds unit u.
  __device__ __forceinline__ int32_t block_of(int32_t u) const {
    const int32_t big = extra * (run + 1);  // units of the longer runs
    return u < big ? u / (run + 1) : extra + (u - big) / run;
  }
};

// One block's segment of one tile: its slices [sl0, sl_end), and where its sums go.
struct Segment {
  int32_t tile;
  int sl0, sl_end;
  bool whole;    // the tile's every slice: the block stores it
  float* slot;   // partial sums [kCols][R] otherwise
};

// Runs seg(segment) for each segment of this block's run, in order.
// kSegments false: the launch's runs never cross a tile (each block one tile, or one of a tile's equal splits), and
// the kernel has no segment loop, whose state otherwise stays in registers through the slice loop (T <= 8: 28 -> 31
// us in the lab with it).
template <int R, int NT, bool kSegments, class Fn>
__device__ __forceinline__ void for_each_segment(const Work& w, Fn&& seg) {
  const int32_t begin = w.first_unit(blockIdx.x), end = w.first_unit(blockIdx.x + 1);
  if constexpr (!kSegments) {
    const int32_t tile = begin / w.n_slices;
    const int s0 = begin - tile * w.n_slices, s1 = s0 + (end - begin);
    const bool whole = s1 - s0 == w.n_slices;
    seg(Segment{tile, s0, s1, whole, whole ? nullptr : w.part + int64_t(blockIdx.x) * 2 * (R * NT * 8)});
  } else {
    for (int32_t u = begin; u < end;) {
      const int32_t tile = u / w.n_slices;
      const int s0 = u - tile * w.n_slices;
      const int s1 = ::std::min(w.n_slices, s0 + (end - u));
      const bool whole = s0 == 0 && s1 == w.n_slices;
      float* slot = whole ? nullptr : w.part + (int64_t(blockIdx.x) * 2 + (u == begin ? 0 : 1)) * (R * NT * 8);
      seg(Segment{tile, s0, s1, whole, slot});
      u += s1 - s0;
    }
  }
}

// The epilogue a kernel was given (its one-n-tile instances take one as a last argument), or none.
template <typename... Extra>
__device__ __forceinline__ GluEpilogue glu_of(const Extra&... extra) {
  if constexpr ((::std::is_same_v<Extra, GluEpilogue> || ...)) return (extra, ...);
  else return {};
}

// The matrix that holds the launch's row `row` (stacked numbering): a stacked launch's (a ProductStack argument), or
// the launch's own, and the row within it.
struct RowMatrix {
  const uint8_t* w;
  const float* bias;
  float* y;
  int64_t N, row;
};
template <typename... Extra>
__device__ __forceinline__ RowMatrix matrix_of(const BatchMmParams& p, int64_t row, const Extra&... extra) {
  if constexpr ((::std::is_same_v<Extra, ProductStack> || ...)) {
    const StackedMatrix m = stacked_matrix((extra, ...), row);
    return {static_cast<const uint8_t*>(m.w), m.bias, m.y, m.N, row - m.row0};
  } else {
    return {static_cast<const uint8_t*>(p.w), p.bias, p.y, p.N, row};
  }
}

// fn(params, rows, end of rows, row0 within the matrix) for the matrix of the launch that holds rows row0 on: in a
// stacked launch the stack's matrix (matrix_of; params with its w, bias, y and N); else the launch's.
template <class Fn, typename... Extra>
__device__ __forceinline__ void with_matrix(const BatchMmParams& p, const uint8_t* w, const uint8_t* w_end,
                                            size_t row_bytes, int64_t row0, Fn&& fn, const Extra&... extra) {
  if constexpr ((::std::is_same_v<Extra, ProductStack> || ...)) {
    const RowMatrix m = matrix_of(p, row0, extra...);
    BatchMmParams q = p;
    q.w = m.w, q.bias = m.bias, q.y = m.y, q.N = m.N;
    fn(q, m.w, m.w + size_t(m.N) * row_bytes, m.row);
  } else {
    fn(p, w, w_end, row0);
  }
}

// A final output value: through the SwiGLU epilogue in the one-n-tile instances (T <= 8, the launches the executor
// gives one), as computed in the others, whose code stays without it (with it they measured 1% slower at 16 and 32
// tokens even where no launch had one).
template <int NT>
__device__ __forceinline__ float finish(const GluEpilogue& glu, float v, int64_t i) {
  if constexpr (NT == 1) return glu_finish(glu, v, i);
  else return v;
}

// After a partial segment's sums are in its slot ([token][row], kCols x R floats): counts the block in, and in the
// tile's last contributor to finish calls emit(r, tl, sum) for each row r < rows and token tl < cols, the sum being
// start(r) (the bias) and every contributor's slot added in block order: the same bits whichever block comes last.
// Every thread of the block must call it.
template <int R, int kCols, int kThreads, class Start, class Emit>
__device__ __forceinline__ void add_shared_tile(const Work& w, const Segment& sg, int rows, int cols, int tid,
                                                Start&& start, Emit&& emit) {
  // The barrier orders the block's partial sums before thread 0's count (block_arrival.cuh: its release makes them
  // visible with the count; in the last contributor its acquire orders the others' sums before the reads below,
  // which bypass L1).
  __syncthreads();
  const int32_t tile_u0 = sg.tile * w.n_slices;
  const int32_t first = w.block_of(tile_u0);
  const int n_contrib = int(w.block_of(tile_u0 + w.n_slices - 1) - first) + 1;
  const bool last = __syncthreads_or(tid == 0 && arrive_acq_rel(&w.counters[sg.tile]) == uint32_t(n_contrib - 1));
  if (!last) return;
  // Block first + j's slot for this tile: the first one's last slot unless its run starts at the tile, every later
  // one's first (their runs start inside the tile).
  const bool first_starts = w.first_unit(first) == tile_u0;
  const float* slots = w.part + (int64_t(first) * 2 + (first_starts ? 0 : 1)) * (R * kCols);
  const int64_t next = (first_starts ? 2 : 1) * (R * kCols);  // block first + 1's first slot, from the first's
  // Four outputs a thread at a time, each with eight slots' loads in flight, so the last contributor's tail waits
  // for L2 about R * kCols / (4 kThreads) times, not once an output (each output's sum in block order as before).
  constexpr int kOut = 4;
  for (int i0 = tid; i0 < R * kCols; i0 += kOut * kThreads) {
    float s[kOut];
    const float* at[kOut];
    bool ok[kOut];
#pragma unroll
    for (int b = 0; b < kOut; ++b) {
      const int i = i0 + b * kThreads, r = i % R, tl = i / R;
      ok[b] = i < R * kCols && r < rows && tl < cols;
      at[b] = slots + (ok[b] ? tl * R + r : 0);
      s[b] = ok[b] ? start(r) : 0.0f;
    }
    float v0[kOut];
#pragma unroll
    for (int b = 0; b < kOut; ++b) v0[b] = ok[b] ? __ldcg(at[b]) : 0.0f;
#pragma unroll
    for (int b = 0; b < kOut; ++b) s[b] += v0[b], at[b] += next;
    for (int j = 1; j < n_contrib; j += 8) {
      float v[kOut][8];
#pragma unroll
      for (int b = 0; b < kOut; ++b)
#pragma unroll
        for (int k = 0; k < 8; ++k) v[b][k] = ok[b] && j + k < n_contrib ? __ldcg(at[b] + k * 2 * (R * kCols)) : 0.0f;
#pragma unroll
      for (int b = 0; b < kOut; ++b) {
#pragma unroll
        for (int k = 0; k < 8; ++k) s[b] += v[b][k];
        at[b] += 8 * 2 * (R * kCols);
      }
    }
#pragma unroll
    for (int b = 0; b < kOut; ++b) {
      const int i = i0 + b * kThreads;
      if (ok[b]) emit(i % R, i / R, s[b]);
    }
  }
  if (tid == 0) w.counters[sg.tile] = 0;  // zero again for the next launch
}

// The first two stages of a ring of three (the wide and wgmma kernels' x): issue(0, 0), and issue(1, 1) when a second
// super-block exists, each its own commit group, so that cp_async_wait<1> before super-block i finds it landed.
template <class Issue>
__device__ __forceinline__ void issue_first_stages(int n, Issue&& issue) {
  issue(0, 0);
  asm volatile("cp.async.commit_group;" ::: "memory");
  if (n > 1) issue(1, 1);
  asm volatile("cp.async.commit_group;" ::: "memory");
}

// add_shared_tile for kernels whose rows may lie in a stack's matrices: each sum starts at its row's bias in that
// matrix (matrix_of) and goes to that matrix's y, token t0 + tl.
template <int R, int kCols, int kThreads, typename... Extra>
__device__ __forceinline__ void add_shared_tile_of(const BatchMmParams& p, const Work& w, const Segment& sg, int rows,
                                                   int cols, int tid, int64_t n0, int64_t t0, const Extra&... extra) {
  add_shared_tile<R, kCols, kThreads>(
      w, sg, rows, cols, tid,
      [&](int r) {
        const RowMatrix o = matrix_of(p, n0 + r, extra...);
        return o.bias ? o.bias[o.row] : 0.0f;
      },
      [&](int r, int tl, float s) {
        const RowMatrix o = matrix_of(p, n0 + r, extra...);
        o.y[(t0 + tl) * o.N + o.row] = s;
      });
}

// Y for the block's R rows and tokens t0..: accumulator c of n-tile nt is row 16 wr + g + 8 (c >> 1), token
// t0 + 8 nt + 2 tg + (c & 1). With k groups their partial sums go through `red` ([kWarps][16][NT * 8] floats, the
// tiles' dead memory after the last barrier) and are added in group order: the same bits every run. A partial
// segment's sums go to its slot instead ([token][row], bias left out); the tile's last contributor adds them up.
// A final value passes the SwiGLU epilogue (finish) where the launch has one.
// Every thread of the block must call it; the stages may be refilled once it returns.
template <int R, int NT, int KG, int kThreads>
__device__ __forceinline__ void store_tile(const BatchMmParams& p, const GluEpilogue& glu, const Work& w, const Segment& sg,
                                           const float (&acc)[NT][4], float* red, int64_t n0, int64_t t0, int warp,
                                           int wr, int g, int tg, int tid) {
  constexpr int kCols = NT * 8, kRowGroups = R / 16;
  const float* bias = sg.whole ? p.bias + (p.bias ? n0 : 0) : nullptr;
  // (row r, token tl) of the tile goes to out[tl * stride + r], when n0 + r < N and t0 + tl < T.
  float* const out = sg.whole ? p.y + t0 * p.N + n0 : sg.slot;
  const int64_t stride = sg.whole ? p.N : R;
  const int rows = int(::std::min<int64_t>(R, p.N - n0)), cols = int(::std::min<int64_t>(kCols, p.T - t0));
  if constexpr (KG == 1) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int r = wr * 16 + g + 8 * (c >> 1), tl = nt * 8 + 2 * tg + (c & 1);
        if (r < rows && tl < cols) {
          const float v = acc[nt][c] + (bias ? bias[r] : 0.0f);
          out[tl * stride + r] = sg.whole ? finish<NT>(glu, v, (t0 + tl) * p.N + n0 + r) : v;
        }
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[(warp * 16 + g + 8 * (c >> 1)) * kCols + nt * 8 + 2 * tg + (c & 1)] = acc[nt][c];
    __syncthreads();
    for (int i = tid; i < R * kCols; i += kThreads) {
      const int r = i % R, tl = i / R;  // consecutive threads on consecutive rows: coalesced stores
      if (r >= rows || tl >= cols) continue;
      float s = bias ? bias[r] : 0.0f;
#pragma unroll
      for (int k = 0; k < KG; ++k) s += red[((k * kRowGroups + r / 16) * 16 + r % 16) * kCols + tl];
      out[tl * stride + r] = sg.whole ? finish<NT>(glu, s, (t0 + tl) * p.N + n0 + r) : s;
    }
  }
  if (sg.whole) {
    __syncthreads();  // `red` read: the next segment may refill the stages
    return;
  }
  add_shared_tile<R, kCols, kThreads>(
      w, sg, rows, cols, tid, [&](int r) { return p.bias ? p.bias[n0 + r] : 0.0f; },
      [&](int r, int tl, float s) { p.y[(t0 + tl) * p.N + n0 + r] = finish<NT>(glu, s, (t0 + tl) * p.N + n0 + r); });
}

// The scratch of a launch: x in half at its start (as gemm.cuh lays it out, so the two can share a conversion), then
// the partial-sum slots of the tiles blocks share, from this offset.
inline size_t part_offset(int64_t K, int64_t T) { return (size_t(K) * size_t(T) * 2 + 255) & ~size_t(255); }

// The Work of a grid of `blocks` blocks over tiles x n_slices units (token_tiles consecutive tiles a row tile), its
// partial-sum slots at byte part_at of the scratch (a kernel that keeps more there than x's half copy passes its own).
inline Work work_for(const BatchMmParams& p, int64_t tiles, int64_t n_slices, int64_t token_tiles, int64_t blocks,
                     size_t part_at = 0) {
  const int64_t units = tiles * n_slices;
  if (part_at == 0) part_at = part_offset(p.K, p.T);
  float* part = reinterpret_cast<float*>(static_cast<uint8_t*>(p.scratch) + part_at);
  return {int32_t(units),          int32_t(n_slices), int32_t(token_tiles), int32_t(units / blocks),
          int32_t(units % blocks), part,              p.tile_counters};
}

// The grid (Work). A run of slices costs its slices plus, for each tile it touches, about kSegmentCost slices of
// pipeline fill, drain and store (and a tile shared by two runs is added up once more), so runs should not cross
// tiles without need: the grid is the cheapest of (a) whole tiles or each tile in k equal splits (the grid then may
// take several waves) and (b) as many blocks as the GPU holds at once, each a run of equal length wherever it falls
// (stream-K: one wave, no partial last one), the latter above 8 tokens only: the 16-row tiles' short blocks, five an
// SM, measured slower in runs (H200 lab, Q4_K ffn_up at T = 4: 28 us whole tiles, 30 us in runs). What measured the
// rest: docs/kernel-notes.md, "Small-batch products".
// kMaxBlocks: what the scratch's partial-sum slots are sized for, whatever the device; kMinUnits: no run shorter.
inline constexpr int64_t kMaxBlocks = 1024, kMinUnits = 2, kSegmentCost = 3, kMaxSplits = 8;

inline int64_t choose_blocks(int64_t tiles, int64_t n_slices, int64_t resident, bool stream_k,
                             int64_t max_blocks = kMaxBlocks) {
  const int64_t units = tiles * n_slices;
  // Waves times the longest run's slices and segments.
  const auto cost = [&](int64_t g) {
    const int64_t run = (units + g - 1) / g;
    const bool aligned = units % g == 0 && (run % n_slices == 0 || n_slices % run == 0);
    const int64_t segments = (run + n_slices - 1) / n_slices + (aligned ? 0 : 1);
    return (g + resident - 1) / resident * (run + kSegmentCost * segments);
  };
  int64_t best = tiles, best_cost = cost(tiles);  // whole tiles
  for (int64_t k = 2; k <= ::std::min(n_slices, kMaxSplits) && tiles * k <= max_blocks; ++k)
    if (const int64_t c = cost(tiles * k); c < best_cost) best = tiles * k, best_cost = c;
  const int64_t g = ::std::clamp<int64_t>(::std::min(resident, (units + kMinUnits - 1) / kMinUnits), 1, max_blocks);
  return stream_k && cost(g) < best_cost ? g : best;
}

}  // namespace cuda::batch_mm_work
