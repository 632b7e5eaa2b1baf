// Q4_K products of 9..48 tokens, and regrouped Q6_K (Q6_Kx8) ones of 9..32 (batch_mm_wide.cuh). A block of 4 warps
// owns a tile of rows by NT n-tiles of 8 tokens and walks K one super-block (256 elements, a slice) at a time; each
// warp owns MT 16-row m-tiles (Shape: one up to 32 tokens, 64 rows a tile; two above, 128, Q4_K only). Lane 4 g + t
// loads its share of a super-block of its rows g and g + 8 of each m-tile (Q4_K: the 16-byte header and the 32 code
// bytes of qs group t, a row's four lanes reading its 128 code bytes, one line; Q6_Kx8: q6kx8_lane.cuh's), a
// super-block ahead into a second set of registers. Nothing of W goes through shared memory.
//
// Fragments and unpacking: the format's lane header (batch_mm_wide_formats.cuh). A lane's B values for two k-steps
// are 8 consecutive halves of x, one 16-byte shared load that every m-tile of the warp uses.
//
// x: the launch's half copy [T][K] (batch_mm.cuh). A stage holds a super-block's 256 elements of each token of the
// tile, copied by cp.async two super-blocks ahead into a ring of 3. Column c's 16-byte piece P lands at piece
// P ^ F::lane_of(P) of a 576-byte column: a quarter warp's eight B loads (two columns, four lanes t) fall in
// distinct banks. Tiles are dealt to blocks as in batch_mm.cu (Work: whole tiles, k splits or stream-K runs), the
// sums of a tile two blocks share added in block order by the last of them: the same bits every run.
#include "cuda/kernels/batch_mm_wide.cuh"

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/batch_mm_wide_formats.cuh"
#include "cuda/kernels/batch_mm_work.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/q4k_lane.cuh"

namespace cuda {
namespace {

using namespace batch_mm_work;  // Work, Segment, for_each_segment, add_shared_tile_of, choose_blocks, matrix_of
using q4k_lane::kSbElems;
using q4k_lane::Word;

constexpr int kWarps = 4, kThreads = 32 * kWarps;
constexpr int kStages = 3;          // super-block s multiplied, s + 1 landing, s + 2 being issued
constexpr int kColHalves = 288;     // a staged token: 256 halves and 64 bytes (576 = 64 mod 128 bytes)
constexpr int64_t kMaxWideBlocks = 512;  // what the scratch's partial-sum slots are sized for

// A tile's shape for T tokens: NT n-tiles of 8 tokens, MT 16-row m-tiles a warp. One m-tile a warp keeps the
// registers at 128 and four blocks an SM; above 32 tokens two m-tiles share each B load (the shared-memory reads
// would otherwise bound the kernel), at 8 warps an SM. Above 48 tokens batch_mm.cu's kernel runs
// (kBatchMmWideMaxTokens).
struct Shape {
  int nt, mt;
};
// three_tiles (BatchMmChoices::wide_three_tiles): 17..24 tokens in three n-tiles instead of four.
Shape shape_for(int64_t T, bool three_tiles = false) {
  return T <= 16 ? Shape{2, 1} : (three_tiles && T <= 24) ? Shape{3, 1} : T <= 32 ? Shape{4, 1} : Shape{6, 2};
}
template <int MT>
constexpr int kRows = 16 * MT * kWarps;  // rows a tile

template <int NT>
constexpr size_t smem_bytes() {
  return size_t(kStages) * NT * 8 * kColHalves * 2;
}

// acc += this super-block's rows times the staged x (st: the stage; boff[jj]: the lane's low piece jj of token g in
// it, the high piece F::kHiHalves on).
template <class F, int NT, int MT>
__device__ __forceinline__ void multiply_sb(float (&acc)[MT][NT][4], const typename F::template Regs<MT>& r,
                                            const __half* st, const uint32_t (&boff)[4], bool upper, uint32_t sel) {
  typename F::Scales sc[2 * MT];
#pragma unroll
  for (int i = 0; i < 2 * MT; ++i) sc[i] = F::template scales<MT>(r, i, upper, sel);
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    // Words 2 jj and 2 jj + 1: k-steps (lo, 2 jj), (lo, 2 jj + 1), (hi, 2 jj), (hi, 2 jj + 1).
    uint32_t a[MT][4][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int i = 2 * mt + h;
        const Word w0 = F::template word<MT>(r, sc[i], i, 2 * jj), w1 = F::template word<MT>(r, sc[i], i, 2 * jj + 1);
        a[mt][0][h] = w0.lo01, a[mt][0][2 + h] = w0.lo23;
        a[mt][1][h] = w1.lo01, a[mt][1][2 + h] = w1.lo23;
        a[mt][2][h] = w0.hi01, a[mt][2][2 + h] = w0.hi23;
        a[mt][3][h] = w1.hi01, a[mt][3][2 + h] = w1.hi23;
      }
#pragma unroll
    for (int nt = 0; nt < NT; ++nt) {
      const uint4 blo = *reinterpret_cast<const uint4*>(st + nt * 8 * kColHalves + boff[jj]);
      const uint4 bhi = *reinterpret_cast<const uint4*>(st + nt * 8 * kColHalves + boff[jj] + F::kHiHalves);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma::m16n8k16(acc[mt][nt], a[mt][0], blo.x, blo.y);
        mma::m16n8k16(acc[mt][nt], a[mt][1], blo.z, blo.w);
        mma::m16n8k16(acc[mt][nt], a[mt][2], bhi.x, bhi.y);
        mma::m16n8k16(acc[mt][nt], a[mt][3], bhi.z, bhi.w);
      }
    }
  }
}

// kSets: W's register sets in turn. 2: a super-block loading while one is multiplied (128 registers, four blocks
// an SM). 3 (kBatchMmWideThreeSetsMinTokens, one m-tile only): two loading, at three blocks an SM, for the
// long-scoreboard stalls Nsight put first (docs/kernel-notes.md, sessions 29, 59 and 60).
template <class F, int NT, int MT, int kSets, bool kSegments, typename... Extra>
__global__ void __launch_bounds__(kThreads, MT == 1 ? (kSets == 3 ? 3 : 4) : 2)
    wide_kernel(BatchMmParams p, const __half* xh, uint32_t rb, Work work, Extra... extra) {
  static_assert(kSets == 2 || (kSets == 3 && MT == 1), "two register sets, or three at one m-tile");
  static_assert(MT <= F::kMaxMt, "m-tiles a warp");
  using Regs = typename F::template Regs<MT>;
  extern __shared__ uint4 dyn[];
  __half* const stages = reinterpret_cast<__half*>(dyn);
  constexpr int kCols = NT * 8, kStageHalves = kCols * kColHalves, kR = kRows<MT>, kWarpRows = 16 * MT;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bool upper = t >= 2;
  const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;
  uint32_t boff[4];
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) boff[jj] = uint32_t(g * kColHalves + (F::lo_piece(t) + (jj ^ t)) * 8);
  // This thread's x copies: piece P of tokens c0, c0 + 4, ... (2 NT of them), to the same place in every stage.
  const int P = tid & 31, c0 = tid >> 5;
  __half* const xdst = stages + c0 * kColHalves + (P ^ F::lane_of(P)) * 8;

  for_each_segment<kR, NT, kSegments>(work, [&](const Segment& sg) {
    const int32_t rt = sg.tile / work.token_tiles;
    const int64_t n0 = int64_t(rt) * kR, t0 = int64_t(sg.tile - rt * work.token_tiles) * kCols;
    // The warp's rows lie in one matrix of a stack (each but the last a multiple of 32 rows). Rows past the end
    // read the last row (their sums are not stored).
    const int64_t wrow = ::std::min<int64_t>(n0 + kWarpRows * warp, p.N - 1);
    const RowMatrix m = matrix_of(p, wrow, extra...);
    const uint8_t* row_of[2 * MT];
#pragma unroll
    for (int i = 0; i < 2 * MT; ++i)
      row_of[i] = m.w + size_t(::std::min<int64_t>(m.row + 16 * (i >> 1) + g + 8 * (i & 1), m.N - 1)) * rb;
    typename F::template Cursor<MT> cursor(row_of, sg.sl0, t);

    const int n = sg.sl_end - sg.sl0;
    const int64_t cols_left = p.T - t0;
    // x of this thread's tokens from super-block sl0 on; a copy past the tokens reads nothing (zero fill).
    const __half* xsrc = xh + (t0 + ::std::min<int64_t>(c0, cols_left - 1)) * p.K + int64_t(sg.sl0) * kSbElems + 8 * P;
    const int64_t xstride = 4 * p.K;
    auto issue = [&](int i, int stage) {  // super-block sl0 + i of x into `stage`
      const __half* src = xsrc + i * kSbElems;
#pragma unroll
      for (int j = 0; j < 2 * NT; ++j) {
        const bool ok = c0 + 4 * j < cols_left;
        cp_async16_zfill(xdst + stage * kStageHalves + 4 * j * kColHalves, ok ? src + j * xstride : xh, ok ? 16 : 0);
      }
    };
    float acc[MT][NT][4] = {};
    // Launched programmatically (pdl.cuh): W's first super-block, which no kernel writes, is loaded before the wait
    // for the kernels this one depends on; x's copies come after it.
    Regs ra, rb2, rc;  // rc: kSets == 3 only
    cursor.load(ra);
    if (kSets == 3 && n > 1) {
      cursor.advance();
      cursor.load(rb2);
    }
    pdl_wait();
    issue_first_stages(n, issue);
    int stage = 0;
    // Super-block i multiplied from `cur`; super-block i + kSets - 1 loaded into `nxt` (the set i - 1 used).
    auto step = [&](int i, const Regs& cur, Regs& nxt) {
      cp_async_wait<1>();
      __syncthreads();  // super-block i landed for every thread; every warp is done with i - 1's stage
      if (i + 2 < n) issue(i + 2, stage == 0 ? 2 : stage - 1);
      asm volatile("cp.async.commit_group;" ::: "memory");
      if (i + kSets - 1 < n) {
        cursor.advance();
        cursor.load(nxt);
      }
      multiply_sb<F, NT, MT>(acc, cur, stages + stage * kStageHalves, boff, upper, sel);
      stage = stage == kStages - 1 ? 0 : stage + 1;
    };
    if constexpr (kSets == 2) {
      for (int i = 0; i < n; i += 2) {
        step(i, ra, rb2);
        if (i + 1 < n) step(i + 1, rb2, ra);
      }
    } else {
      for (int i = 0; i < n; i += 3) {
        step(i, ra, rc);
        if (i + 1 < n) step(i + 1, rb2, ra);
        if (i + 2 < n) step(i + 2, rc, rb2);
      }
    }
    __syncthreads();  // every warp is done with the stages: the next segment may refill them

    const int rows = int(::std::min<int64_t>(kR, p.N - n0)), cols = int(::std::min<int64_t>(kCols, cols_left));
    if (sg.whole) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt)
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int c = 0; c < 4; ++c) {
            const int r = 16 * mt + g + 8 * (c >> 1), tl = 8 * nt + 2 * t + (c & 1);  // r: within the warp
            if (kWarpRows * warp + r >= rows || tl >= cols) continue;
            m.y[(t0 + tl) * m.N + m.row + r] = acc[mt][nt][c] + (m.bias ? m.bias[m.row + r] : 0.0f);
          }
      return;
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c)
          sg.slot[(8 * nt + 2 * t + (c & 1)) * kR + kWarpRows * warp + 16 * mt + g + 8 * (c >> 1)] = acc[mt][nt][c];
    add_shared_tile_of<kR, kCols, kThreads>(p, work, sg, rows, cols, tid, n0, t0, extra...);
  });
  pdl_wait();  // a block without work too: this grid ends only after the ones it depends on
}

template <class F, int NT, int MT, int kSets, bool kSegments, bool kStack>
constexpr auto kernel_for() {
  if constexpr (kStack) return wide_kernel<F, NT, MT, kSets, kSegments, ProductStack>;
  else return wide_kernel<F, NT, MT, kSets, kSegments>;
}

// The shared memory opt-in of the instances and how many blocks the GPU holds at once, at the first launch (before
// any capture).
template <class F, int NT, int MT, int kSets>
int64_t prepare_instances() {
  constexpr size_t smem = smem_bytes<NT>();
  for (auto* k : {kernel_for<F, NT, MT, kSets, true, false>(), kernel_for<F, NT, MT, kSets, false, false>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  for (auto* k : {kernel_for<F, NT, MT, kSets, true, true>(), kernel_for<F, NT, MT, kSets, false, true>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const auto* k = reinterpret_cast<const void*>(kernel_for<F, NT, MT, kSets, true, false>());
  return ::std::max<int64_t>(1, int64_t(current_device_sm_count()) * kernel_blocks_per_sm(k, kThreads, smem));
}

template <class F, int NT, int MT, int kSets>
void launch_shape(const BatchMmParams& p, const __half* xh, const ProductStack* stack, cudaStream_t stream,
                  bool programmatic) {
  constexpr size_t smem = smem_bytes<NT>();
  static const int64_t resident = prepare_instances<F, NT, MT, kSets>();
  const int64_t token_tiles = (p.T + NT * 8 - 1) / (NT * 8);
  const int64_t tiles = (p.N + kRows<MT> - 1) / kRows<MT> * token_tiles, n_slices = p.K / kSbElems;
  const int64_t blocks = choose_blocks(tiles, n_slices, resident, true, kMaxWideBlocks);
  const Work w = work_for(p, tiles, n_slices, token_tiles, blocks);
  const uint32_t rb = uint32_t(quant::row_bytes(F::kType, p.K));  // Q6_Kx8: Q6_K's, regrouped in place
  const dim3 grid{unsigned(blocks)};
  if (stack) {
    const auto k = w.runs_stay_in_tiles() ? kernel_for<F, NT, MT, kSets, false, true>()
                                          : kernel_for<F, NT, MT, kSets, true, true>();
    launch_programmatic(programmatic, k, grid, kThreads, smem, stream, p, xh, rb, w, *stack);
  } else {
    const auto k = w.runs_stay_in_tiles() ? kernel_for<F, NT, MT, kSets, false, false>()
                                          : kernel_for<F, NT, MT, kSets, true, false>();
    launch_programmatic(programmatic, k, grid, kThreads, smem, stream, p, xh, rb, w);
  }
}

// One m-tile a warp (up to 32 tokens): three register sets or two.
template <class F>
void launch_one_m_tile(const BatchMmParams& p, const __half* xh, const ProductStack* stack, cudaStream_t stream,
                       bool programmatic, bool three_sets, int nt) {
  switch (nt) {
    case 2:
      if (three_sets) return launch_shape<F, 2, 1, 3>(p, xh, stack, stream, programmatic);
      return launch_shape<F, 2, 1, 2>(p, xh, stack, stream, programmatic);
    case 3:
      if (three_sets) return launch_shape<F, 3, 1, 3>(p, xh, stack, stream, programmatic);
      return launch_shape<F, 3, 1, 2>(p, xh, stack, stream, programmatic);
    default:
      if (three_sets) return launch_shape<F, 4, 1, 3>(p, xh, stack, stream, programmatic);
      return launch_shape<F, 4, 1, 2>(p, xh, stack, stream, programmatic);
  }
}

}  // namespace

bool batch_mm_wide_serves(quant::Type type, bool regrouped, int64_t T, bool q6x8) {
  if (regrouped) return q6x8 && type == quant::Type::Q6_K && T > 8 && T <= kBatchMmWideQ6x8MaxTokens;
  return type == quant::Type::Q4_K && T > 8 && T <= kBatchMmWideMaxTokens;
}

size_t batch_mm_wide_scratch(int64_t K, int64_t T) {
  const Shape s = shape_for(T);  // four n-tiles at 17..24 tokens: room for three too
  return part_offset(K, T) + size_t(kMaxWideBlocks) * 2 * (16 * s.mt * kWarps) * size_t(s.nt) * 8 * 4;
}

void launch_batch_mm_wide(const BatchMmParams& p, const __half* xh, const ProductStack* stack, cudaStream_t stream,
                          const BatchMmChoices& choices) {
  const bool programmatic = choices.programmatic;
  LLM_REQUIRE(batch_mm_wide_serves(p.type, p.regrouped, p.T, choices.wide_q6x8), "wide small-batch product: not served");
  const bool three = p.T >= choices.wide_three_sets_min_tokens;  // two m-tiles (above 32 tokens) keep two sets below
  LLM_REQUIRE(p.K % (p.regrouped ? 2048 : kSbElems) == 0, "wide small-batch product: K");
  LLM_REQUIRE(p.scratch_bytes >= batch_mm_wide_scratch(p.K, p.T), "wide small-batch product: scratch");
  const Shape shape = shape_for(p.T, choices.wide_three_tiles);
  if (p.regrouped) return launch_one_m_tile<wide_formats::Q6kx8>(p, xh, stack, stream, programmatic, three, shape.nt);
  if (shape.mt == 1) return launch_one_m_tile<wide_formats::Q4k>(p, xh, stack, stream, programmatic, three, shape.nt);
  launch_shape<wide_formats::Q4k, 6, 2, 2>(p, xh, stack, stream, programmatic);  // two m-tiles: two sets at 255
}

}  // namespace cuda
