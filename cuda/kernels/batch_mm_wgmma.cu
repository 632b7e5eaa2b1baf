// Q4_K and Q6_Kx8 products of up to 64 tokens on wgmma (batch_mm_wgmma.cuh), and prompts' in tiles of 128 tokens
// (Shape<128>, launch_prompt_wgmma; kernel notes, session 63). Compiled for sm_90a alone (cuda/CMakeLists.txt).
//
// Why. At 33..64 tokens the mma.sync kernels (batch_mm.cu, batch_mm_wide.cu) run at ~0.4 TB/s of W: every warp
// reads every token's x from shared memory for its own 16 rows (LDS instructions and bandwidth) and issues an
// HMMA per 16 x 8 x 16. A warpgroup's wgmma reads B (x) from shared memory once for 64 rows, inside the tensor
// cores, and one instruction covers 64 x 64 x 16.
//
// Form. A block of two warpgroups owns a tile of 128 rows by all (up to 64) tokens and walks K one super-block
// (256 elements) at a time, as the wide kernel does: warp w's lanes load and unpack rows 16 w + g, 16 w + g + 8 into
// A fragments in registers (q4k_lane.cuh; Q6_Kx8: q6kx8_lane.cuh, a Q6_K block for a super-block), two
// super-blocks ahead. A super-block is 16 k-steps; k-step 4 j + r takes the lane's word 2 j + (r & 1), low nibbles
// for r < 2 and high ones above, so its positions 2 t, 2 t + 1, 2 t + 8, 2 t + 9 stand for elements 64 t + 32 (r >> 1)
// + 4 (2 j + (r & 1)) + 0, 1, 2, 3 of a Q4_K super-block (Q4kFormat::element; Q6kx8Format::element for Q6_Kx8).
//
// x. wgmma needs B's 16 k positions of a step as 8-half rows of core matrices (8 tokens by 16 bytes), and the
// positions above are 4-byte pairs from four places: so a first launch writes x in half in exactly the order the
// stages need (the image: per super-block, k-step and half-step, 64 tokens of 8 halves; tokens past T zero), and a
// stage is then 32 KB copied straight, 16 bytes a copy, two super-blocks ahead into a ring of 4. The image is the
// launch's own, after the scratch's half x (which it leaves as it was: batch_mm_reads_float_x).
//
// Sync. A k-step group's A registers are written, fenced (wgmma::fence), used by four asynchronous products and
// committed; the next group writes the other set, and each group first waits until at most one group is pending
// (the one before it), across super-blocks too. A super-block's products are finished before the barrier after
// which its stage is refilled, two barriers later. Tiles are dealt to
// blocks as in batch_mm.cu (Work), the sums of a tile two blocks share added in block order: the same bits every run.
#include "cuda/kernels/batch_mm_wgmma.cuh"

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/batch_mm_work.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/prompt_image.cuh"
#include "cuda/kernels/q4k_lane.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/swiglu.cuh"
#include "cuda/kernels/wgmma.cuh"
#include "cuda/kernels/wgmma_formats.cuh"

namespace cuda {
namespace {

using namespace batch_mm_work;  // Work, Segment, for_each_segment, add_shared_tile_of, choose_blocks, matrix_of
using namespace wgmma_formats;  // Q4kFormat, Q6kx8Format
using prompt_image::image_bytes;
using prompt_image::token_tiles;
using q4k_lane::kSbElems;

constexpr int kSteps = kSbElems / 16;  // k-steps a super-block
// A tile's token columns: the small-batch launches' one tile of 64 (wgmma n = 64), the prompt launches' tiles of 128
// (n = 128: twice the products for each A fragment unpacked). x's stages are 32 KB either way: a super-block of 64
// tokens, or half a super-block of 128 (a whole one, 64 KB, would leave room for three stages, not four).
template <int kCols>
struct Shape {
  static constexpr int kStepBytes = 2 * kCols * 16;           // two core-matrix columns (k 0..7, 8..15) of the tokens
  static constexpr int kSbBytes = kSteps * kStepBytes;         // a super-block of x for kCols tokens (the image's unit)
  static constexpr int kStagesPerSb = kCols == 64 ? 1 : 2;
  static constexpr int kStageSteps = kSteps / kStagesPerSb;
  static constexpr int kStageBytes = kStageSteps * kStepBytes;  // 32 KB
  static constexpr int kGroups = kStageSteps / 4;               // groups of four k-steps a stage
};
constexpr int kStageBytes = Shape<64>::kStageBytes;
static_assert(Shape<128>::kStageBytes == kStageBytes, "one ring for both shapes");
constexpr int kPromptCols = 128;
// A ring of 4 x stages, filled two super-blocks ahead: the stage refilled after super-block i's barrier is that of
// i - 2, whose products every warp has finished (each waits for a group before refilling its A registers), so the
// products of i - 1 run on across the barrier. Three stages with every super-block's products finished before the
// next barrier measured 3-9% slower in the lab and 0.6-0.7% at B = 32 / 64; W three super-blocks ahead (230-244
// registers) 3-4% slower at B = 32 / 64 (docs/kernel-notes.md, session 41).
constexpr int kStages = 4;
// Warpgroups a block (two share each x stage: half the L2 reads of one) and how many super-blocks ahead a lane loads
// W. The H200 measured one warpgroup (two blocks an SM), one super-block ahead and two blocks of two warpgroups at
// 128 registers (spilling) no faster (docs/kernel-notes.md, session 36).
constexpr int kWarpgroups = 2, kAhead = 2;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kRows = 64 * kWarpgroups;  // a tile
constexpr int64_t kMaxWgmmaBlocks = 512;  // what the scratch's partial-sum slots are sized for
// The same for the prompt launches (a slot of 128 x 128 sums is 64 KB): two waves of a 132-SM GPU, a block an SM.
constexpr int64_t kMaxPromptBlocks = 264;

// The image (prompt_image.cuh's layout, kC = kCols): a stage is its next 32 KB. The small-batch launches' (one tile
// of 64 tokens, tt = 0) by x_image_kernel, a piece a thread, one float2 load each; the prompt launches' by
// prompt_image.cuh's kernel.
// Launched programmatically, as is the product after it, which it lets start at once: the product loads its first
// W while the image is written (pdl.cuh). Plain loads of x, the kernel before's output, after the wait.
// gate (BatchMmParams::x_gate): x is the SwiGLU silu(gate) * up of the up products at `x`, formed here as the
// element-wise launch it replaces forms it (swiglu.cuh's silu, then the product), so the image holds the same halves.
template <class F>
__global__ void x_image_kernel(const float* x, const float* gate, uint4* __restrict__ image, int64_t K, int T) {
  pdl_launch_dependents();
  pdl_wait();
  const int64_t piece = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (piece >= K / kSbElems * (kStageBytes / 16)) return;
  const int n = int(piece & 63), c = int((piece >> 6) & 1), s = int((piece >> 7) & (kSteps - 1));
  const int64_t sb = piece / (kStageBytes / 16);
  uint32_t h[4] = {0, 0, 0, 0};
  if (n < T) {
    const int64_t at = int64_t(n) * K + sb * kSbElems;  // the super-block's first element of token n
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int64_t e = at + F::element(s, 8 * c + 2 * u);
      float2 f = *reinterpret_cast<const float2*>(x + e);
      if (gate) {
        const float2 g = *reinterpret_cast<const float2*>(gate + e);
        f = make_float2(silu(g.x) * f.x, silu(g.y) * f.y);
      }
      const __half2 v = __floats2half2_rn(f.x, f.y);
      h[u] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  image[piece] = make_uint4(h[0], h[1], h[2], h[3]);
}
static_assert(Shape<64>::kSbBytes == kStageBytes, "a small-batch stage is a super-block of 64 tokens");


// acc += the warp's 16 rows of stage H of this super-block (k-steps from 4 kGroups H on) times the stage at `stage`
// (shared-window address); sc: the super-block's scales (F::scales).
template <class F, int kCols, int H>
__device__ __forceinline__ void multiply_stage(float (&acc)[kCols / 2], const typename F::Regs& r,
                                               const typename F::Scales& sc, uint32_t stage) {
  using S = Shape<kCols>;
  uint32_t a[2][4][4];  // two sets of four k-steps' A registers, used in turn
#pragma unroll
  for (int q = 0; q < S::kGroups; ++q) {
    const int jj = S::kGroups * H + q;
    uint32_t(&b)[4][4] = a[q & 1];
    // The group that last read this set, two groups back (in the previous stage for q < 2), is done.
    wgmma::wait<1>();
    group_fragments<F>(b, r, sc, jj);
    wgmma::fence();
#pragma unroll
    for (int rr = 0; rr < 4; ++rr)
      wgmma::m64nNk16<kCols>(acc, b[rr],
                             wgmma::k_major_desc(stage + (4 * q + rr) * S::kStepBytes, kCols * 16, 128));
    wgmma::commit();
  }
}

// A block's tiles: 128 rows (kRows) by kCols tokens, tile index row tile * token_tiles + token tile (Work): the
// token tiles of one row tile are neighbours, so their blocks read W's rows at about the same time and all but the
// first find them in L2.
template <class F, int kCols, bool kSegments, typename... Extra>
__global__ void __launch_bounds__(kThreads)
    wgmma_kernel(BatchMmParams p, const uint8_t* image, uint32_t rb, Work work, Extra... extra) {
  using S = Shape<kCols>;
  extern __shared__ __align__(128) uint8_t stages[];
  constexpr int kT = kThreads, kR = kRows, kPieces = kStageBytes / 16 / kT;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(stages));

  for_each_segment<kR, kCols / 8, kSegments>(work, [&](const Segment& sg) {
    // The small-batch launches have one token tile (T <= 64).
    const int64_t token_tile = kCols == 64 ? 0 : sg.tile % work.token_tiles;
    const int64_t n0 = int64_t(kCols == 64 ? sg.tile : sg.tile / work.token_tiles) * kR, t0 = token_tile * kCols;
    // The warp's rows lie in one matrix of a stack (each but the last a multiple of 32 rows). Rows past the end
    // read the last row (their sums are not stored).
    const int64_t wrow = ::std::min<int64_t>(n0 + 16 * warp, p.N - 1);
    const RowMatrix m = matrix_of(p, wrow, extra...);
    const uint8_t* row_of[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) row_of[i] = m.w + size_t(::std::min<int64_t>(m.row + g + 8 * i, m.N - 1)) * rb;
    typename F::Cursor cursor(row_of, sg.sl0, t);
    const int n = sg.sl_end - sg.sl0, n_stages = n * S::kStagesPerSb;
    const uint8_t* src = image + size_t(token_tile * (p.K / kSbElems) + sg.sl0) * S::kSbBytes + 16 * tid;
    auto issue = [&](int i, int stage) {  // stage i of the segment's image (the next 32 KB each) into `stage`
#pragma unroll
      for (int j = 0; j < kPieces; ++j)
        cp_async16_s(sbase + stage * kStageBytes + 16 * (tid + j * kT), src + size_t(i) * kStageBytes + 16 * j * kT);
    };
    float acc[kCols / 2] = {};
    // W's registers: super-block i in r[i % 3], loaded two super-blocks before it is multiplied. Launched
    // programmatically after x's image (pdl.cuh): the first two are loaded before the wait for it, the image's
    // copies after.
    static_assert(kAhead == 2, "the rotation below");
    typename F::Regs r[kAhead + 1];
    cursor.load(r[0]);
    if (n > 1) cursor.load(r[1]);
    pdl_wait();
    issue_first_stages(n_stages, issue);
    int stage = 0;
    // Stage i: wait for it, refill the one two back, whose products every warp has finished (each waits for a group
    // before refilling its A registers).
    auto begin_stage = [&](int i) {
      cp_async_wait<1>();
      // The copies were generic-proxy writes; the tensor cores read through the async proxy.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncthreads();  // stage i landed for every thread; every warp's products on i - 2 are finished
      if (i + 2 < n_stages) issue(i + 2, (stage + 2) % kStages);
      asm volatile("cp.async.commit_group;" ::: "memory");
    };
    auto next_stage = [&] { stage = stage == kStages - 1 ? 0 : stage + 1; };
    auto step = [&](int i, const typename F::Regs& cur, typename F::Regs& ahead) {
      begin_stage(i * S::kStagesPerSb);
      if (i + kAhead < n) cursor.load(ahead);
      const typename F::Scales sc = F::scales(cur, t);
      multiply_stage<F, kCols, 0>(acc, cur, sc, sbase + stage * kStageBytes);
      next_stage();
      if constexpr (S::kStagesPerSb == 2) {
        begin_stage(i * 2 + 1);
        multiply_stage<F, kCols, 1>(acc, cur, sc, sbase + stage * kStageBytes);
        next_stage();
      }
    };
    for (int i = 0; i < n; i += 3) {
      step(i, r[0], r[2]);
      if (i + 1 < n) step(i + 1, r[1], r[0]);
      if (i + 2 < n) step(i + 2, r[2], r[1]);
    }
    wgmma::wait<0>();  // the accumulators are read below
    __syncthreads();  // every warp is done with the stages: the next segment may refill them

    const int rows = int(::std::min<int64_t>(kR, p.N - n0)), cols = int(::std::min<int64_t>(kCols, p.T - t0));
    if (sg.whole) {
#pragma unroll
      for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int r = g + 8 * (c >> 1), tl = 8 * nt + 2 * t + (c & 1);  // r: within the warp's 16
          if (16 * warp + r >= rows || tl >= cols) continue;
          m.y[(t0 + tl) * m.N + m.row + r] = acc[4 * nt + c] + (m.bias ? m.bias[m.row + r] : 0.0f);
        }
      return;
    }
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        sg.slot[(8 * nt + 2 * t + (c & 1)) * kR + 16 * warp + g + 8 * (c >> 1)] = acc[4 * nt + c];
    add_shared_tile_of<kR, kCols, kT>(p, work, sg, rows, cols, tid, n0, t0, extra...);
  });
  pdl_wait();  // a block without work too: this grid ends only after the ones it depends on
}

template <class F, int kCols, bool kSegments, bool kStack>
constexpr auto kernel_for() {
  if constexpr (kStack) return wgmma_kernel<F, kCols, kSegments, ProductStack>;
  else return wgmma_kernel<F, kCols, kSegments>;
}

constexpr size_t kSmem = size_t(kStages) * kStageBytes;

// The shared memory opt-in of the instances and how many blocks the GPU holds at once, at the first launch (before
// any capture). The prompt launches have no stacked instances.
template <class F, int kCols>
int64_t prepare_instances() {
  for (auto* k : {kernel_for<F, kCols, true, false>(), kernel_for<F, kCols, false, false>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  if constexpr (kCols == 64)
    for (auto* k : {kernel_for<F, kCols, true, true>(), kernel_for<F, kCols, false, true>()})
      CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  const auto* k = reinterpret_cast<const void*>(kernel_for<F, kCols, true, false>());
  return ::std::max<int64_t>(1, int64_t(current_device_sm_count()) * kernel_blocks_per_sm(k, kThreads, kSmem));
}

size_t part_slots_bytes(int64_t blocks, int kCols) { return size_t(blocks) * 2 * kRows * kCols * 4; }

template <class F, int kCols>
void launch_tiles(const BatchMmParams& p, uint8_t* image, const ProductStack* stack, cudaStream_t stream,
                  bool programmatic, int64_t max_blocks, bool image_ready) {
  const int64_t tt = token_tiles(p.T, kCols), pieces = int64_t(image_bytes(p.K, p.T, kCols) / 16);
  if constexpr (kCols == 64) {
    launch_programmatic(programmatic, x_image_kernel<F>, dim3(unsigned((pieces + 255) / 256)), 256, 0, stream, p.x,
                        p.x_gate, reinterpret_cast<uint4*>(image), p.K, int(p.T));
  } else if (!image_ready) {
    prompt_image::launch_prompt_image<F, kCols>(p.x, p.x_gate, image, p.K, p.T, stream);
  }
  static const int64_t resident = prepare_instances<F, kCols>();
  const int64_t tiles = (p.N + kRows - 1) / kRows * tt, n_slices = p.K / kSbElems;
  const int64_t blocks = choose_blocks(tiles, n_slices, resident, true, max_blocks);
  const Work w = work_for(p, tiles, n_slices, tt, blocks, part_offset(p.K, p.T) + image_bytes(p.K, p.T, kCols));
  const uint32_t rb = uint32_t(quant::row_bytes(F::kType, p.K));  // Q6_Kx8: Q6_K's, regrouped in place
  const dim3 grid{unsigned(blocks)};
  if constexpr (kCols == 64) {
    if (stack) {
      const auto k = w.runs_stay_in_tiles() ? kernel_for<F, kCols, false, true>() : kernel_for<F, kCols, true, true>();
      launch_programmatic(programmatic, k, grid, kThreads, kSmem, stream, p, static_cast<const uint8_t*>(image), rb,
                          w, *stack);
      return;
    }
  }
  const auto k = w.runs_stay_in_tiles() ? kernel_for<F, kCols, false, false>() : kernel_for<F, kCols, true, false>();
  launch_programmatic(programmatic, k, grid, kThreads, kSmem, stream, p, static_cast<const uint8_t*>(image), rb, w);
}

template <int kCols>
void launch_format(const BatchMmParams& p, const ProductStack* stack, cudaStream_t stream, bool programmatic,
                   int64_t max_blocks, bool image_ready = false) {
  auto* image = static_cast<uint8_t*>(p.scratch) + part_offset(p.K, p.T);
  if (p.regrouped) launch_tiles<Q6kx8Format, kCols>(p, image, stack, stream, programmatic, max_blocks, image_ready);
  else launch_tiles<Q4kFormat, kCols>(p, image, stack, stream, programmatic, max_blocks, image_ready);
}

bool layout_served(quant::Type type, bool regrouped) {
  return regrouped ? type == quant::Type::Q6_K : type == quant::Type::Q4_K;
}

// The checks both launchers share (launch_batch_mm checked the rest for the small-batch one).
void check_params(const BatchMmParams& p, size_t scratch, const char* what) {
  LLM_REQUIRE(p.K % (p.regrouped ? 2048 : kSbElems) == 0, ::std::string(what) + ": K");
  LLM_REQUIRE(p.scratch_bytes >= scratch, ::std::string(what) + ": scratch");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.x) & 7) == 0 && (reinterpret_cast<uintptr_t>(p.x_gate) & 7) == 0,
              ::std::string(what) + ": x and its gate must be 8-byte aligned");
}

}  // namespace

bool batch_mm_wgmma_supports(quant::Type type, bool regrouped, int64_t T) {
  return layout_served(type, regrouped) && T > 8 && T <= kBatchMmMaxTokens;
}

size_t batch_mm_wgmma_scratch(int64_t K, int64_t T) {
  return part_offset(K, T) + image_bytes(K, T, 64) + part_slots_bytes(kMaxWgmmaBlocks, 64);
}

void launch_batch_mm_wgmma(const BatchMmParams& p, const ProductStack* stack, cudaStream_t stream,
                           bool programmatic) {
  LLM_REQUIRE(batch_mm_wgmma_supports(p.type, p.regrouped, p.T), "wgmma small-batch product: not served");
  check_params(p, batch_mm_wgmma_scratch(p.K, p.T), "wgmma small-batch product");
  launch_format<64>(p, stack, stream, programmatic, kMaxWgmmaBlocks);
}

bool prompt_wgmma_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T) {
  const int64_t tiles = (N + kRows - 1) / kRows * token_tiles(T, kPromptCols);
  return layout_served(type, regrouped) && T > kBatchMmMaxTokens && N > 0 && K > 0 &&
         K % (regrouped ? 2048 : kSbElems) == 0 && tiles <= int64_t(kBatchMmCounterBytes / 4) &&
         tiles * (K / kSbElems) < 0x7fffffff;
}

size_t prompt_wgmma_scratch(int64_t K, int64_t N, int64_t T) {
  // Partial-sum slots for the most blocks the grid may have: no more than units (a block takes one at least).
  const int64_t units = (N + kRows - 1) / kRows * token_tiles(T, kPromptCols) * (K / kSbElems);
  return part_offset(K, T) + image_bytes(K, T, kPromptCols) +
         part_slots_bytes(::std::min(kMaxPromptBlocks, units), kPromptCols);
}

void launch_prompt_wgmma(const BatchMmParams& p, cudaStream_t stream, bool image_ready) {
  LLM_REQUIRE(p.w && p.x && p.y && p.scratch && p.tile_counters, "wgmma prompt product: null pointer");
  LLM_REQUIRE(prompt_wgmma_supports(p.type, p.regrouped, p.K, p.N, p.T),
              "wgmma prompt product: type " + ::std::string(quant::type_name(p.type)) + (p.regrouped ? " (regrouped)" : "") +
                  ", K = " + ::std::to_string(p.K) + ", N = " + ::std::to_string(p.N) + ", T = " + ::std::to_string(p.T) +
                  " not served");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.w) & 15) == 0 && (reinterpret_cast<uintptr_t>(p.scratch) & 15) == 0,
              "wgmma prompt product: weights and scratch must be 16-byte aligned");
  if (p.regrouped) LLM_REQUIRE(q6_kx8_fits(p.w, p.K), "wgmma prompt product: Q6_Kx8 rows");
  check_params(p, prompt_wgmma_scratch(p.K, p.N, p.T), "wgmma prompt product");
  launch_format<kPromptCols>(p, nullptr, stream, true, kMaxPromptBlocks, image_ready);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
