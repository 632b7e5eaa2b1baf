// Q4_K and Q6_Kx8 products of up to 64 tokens on wgmma (batch_mm_wgmma.cuh). Compiled for sm_90a alone
// (cuda/CMakeLists.txt).
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
#include "cuda/kernels/q4k_lane.cuh"
#include "cuda/kernels/q6kx8_lane.cuh"
#include "cuda/kernels/swiglu.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace cuda {
namespace {

using namespace batch_mm_work;  // Work, Segment, for_each_segment, add_shared_tile_of, choose_blocks, matrix_of
using q4k_lane::kSbElems;
using q4k_lane::Word;

constexpr int kCols = 64;                 // tokens a tile (wgmma n = 64)
constexpr int kSteps = kSbElems / 16;     // k-steps a super-block
constexpr int kStepBytes = 2 * kCols * 16;  // two core-matrix columns (k 0..7, 8..15) of 8 token groups
constexpr int kStageBytes = kSteps * kStepBytes;  // 32 KB: a super-block of x for 64 tokens
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

// The formats: how a lane loads its rows' part of a super-block (256 elements) and unpacks word j (0..7) of it into
// A values (q4k_lane::Word), and which element of the super-block k-step s's position kk stands for (the image).
struct Q4kFormat {
  static constexpr quant::Type kType = quant::Type::Q4_K;
  using Regs = q4k_lane::SbRegs<1>;
  struct Scales {
    q4k_lane::Scales s[2];
  };
  __host__ __device__ static constexpr int element(int s, int kk) {
    return 64 * ((kk & 7) >> 1) + 32 * ((s & 3) >> 1) + 4 * (2 * (s >> 2) + (s & 1)) + (kk & 1) + 2 * (kk >> 3);
  }
  struct Cursor {  // rows g, g + 8 from super-block sb0 on
    const uint8_t* hrow[2];
    const uint8_t* qrow[2];
    __device__ Cursor(const uint8_t* const (&row)[2], int sb0, int t) {
#pragma unroll
      for (int i = 0; i < 2; ++i)
        hrow[i] = row[i] + size_t(sb0) * q4k_lane::kSbBytes, qrow[i] = hrow[i] + 16 + 32 * t;
    }
    __device__ void load(Regs& r) {  // the next super-block
      q4k_lane::load_sb<1>(r, hrow, qrow);
#pragma unroll
      for (int i = 0; i < 2; ++i) hrow[i] += q4k_lane::kSbBytes, qrow[i] += q4k_lane::kSbBytes;
    }
  };
  __device__ static Scales scales(const Regs& r, int t) {
    const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;
    return {{q4k_lane::group_scales(r.h[0], t >= 2, sel), q4k_lane::group_scales(r.h[1], t >= 2, sel)}};
  }
  __device__ static Word word(const Regs& r, const Scales& sc, int i, int j) {
    const uint4& q = r.q[i][j >> 2];
    return q4k_lane::unpack_word((j & 3) == 0 ? q.x : (j & 3) == 1 ? q.y : (j & 3) == 2 ? q.z : q.w, sc.s[i]);
  }
};

struct Q6kx8Format {
  static constexpr quant::Type kType = quant::Type::Q6_K;
  using Regs = q6kx8_lane::BlockRegs;
  struct Scales {
    q6kx8_lane::RowScales s[2];
  };
  __host__ __device__ static constexpr int element(int s, int kk) {
    return q6kx8_lane::first_run_base((kk & 7) >> 1) + 64 * ((s & 3) >> 1) + 4 * (2 * (s >> 2) + (s & 1)) +
           (kk & 1) + 2 * (kk >> 3);
  }
  struct Cursor {
    const uint8_t* row[2];
    int sb, t;
    __device__ Cursor(const uint8_t* const (&r)[2], int sb0, int lane_t) : row{r[0], r[1]}, sb(sb0), t(lane_t) {}
    __device__ void load(Regs& r) { q6kx8_lane::load_block(r, row, sb++, t); }
  };
  __device__ static Scales scales(const Regs& r, int) {
    return {{q6kx8_lane::row_scales(r.sc[0], r.d[0]), q6kx8_lane::row_scales(r.sc[1], r.d[1])}};
  }
  __device__ static Word word(const Regs& r, const Scales& sc, int i, int j) {
    return q6kx8_lane::block_word(r, sc.s[i], i, j);
  }
};

// Both formats' words put values 0 and 1 (2, 3) of a k-step's lane side by side: one float2 of x each.
static_assert(Q4kFormat::element(0, 8) == 2 && Q4kFormat::element(1, 0) == 4 && Q4kFormat::element(2, 0) == 32 &&
                  Q4kFormat::element(4, 0) == 8 && Q4kFormat::element(0, 2) == 64,
              "the lane mapping of q4k_lane.cuh");
static_assert(Q6kx8Format::element(2, 0) == 64 && Q6kx8Format::element(0, 2) == 32 &&
                  Q6kx8Format::element(0, 4) == 128 && Q6kx8Format::element(5, 9) == 12 + 1 + 2,
              "the lane mapping of q6kx8_lane.cuh");

// The image: 16-byte piece ((sb * kSteps + s) * 2 + c) * 64 + n holds token n's positions 8 c .. 8 c + 7 of k-step
// s of super-block sb, in half (rounded as launch_x_to_half rounds); zero for n >= T. Positions 8 c + 2 u, + 1 are
// elements F::element(s, 8 c + 2 u) and the next: one float2 load each.
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

// acc += this super-block's 16 rows (the warp's) times the stage at `stage` (shared-window address).
template <class F>
__device__ __forceinline__ void multiply_sb(float (&acc)[32], const typename F::Regs& r, uint32_t stage, int t) {
  const typename F::Scales sc = F::scales(r, t);
  uint32_t a[2][4][4];  // two sets of four k-steps' A registers, used in turn
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    uint32_t(&b)[4][4] = a[jj & 1];
    // The group that last read this set, two groups back (in the previous super-block for jj < 2), is done.
    wgmma::wait<1>();
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const Word w0 = F::word(r, sc, h, 2 * jj), w1 = F::word(r, sc, h, 2 * jj + 1);
      b[0][h] = w0.lo01, b[0][2 + h] = w0.lo23;
      b[1][h] = w1.lo01, b[1][2 + h] = w1.lo23;
      b[2][h] = w0.hi01, b[2][2 + h] = w0.hi23;
      b[3][h] = w1.hi01, b[3][2 + h] = w1.hi23;
    }
    wgmma::fence();
#pragma unroll
    for (int rr = 0; rr < 4; ++rr)
      wgmma::m64n64k16(acc, b[rr], wgmma::k_major_desc(stage + (4 * jj + rr) * kStepBytes, kCols * 16, 128));
    wgmma::commit();
  }
}

template <class F, bool kSegments, typename... Extra>
__global__ void __launch_bounds__(kThreads)
    wgmma_kernel(BatchMmParams p, const uint8_t* image, uint32_t rb, Work work, Extra... extra) {
  extern __shared__ __align__(128) uint8_t stages[];
  constexpr int kT = kThreads, kR = kRows, kPieces = kStageBytes / 16 / kT;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(stages));

  for_each_segment<kR, kCols / 8, kSegments>(work, [&](const Segment& sg) {
    const int64_t n0 = int64_t(sg.tile) * kR;  // one token tile: T <= 64
    // The warp's rows lie in one matrix of a stack (each but the last a multiple of 32 rows). Rows past the end
    // read the last row (their sums are not stored).
    const int64_t wrow = ::std::min<int64_t>(n0 + 16 * warp, p.N - 1);
    const RowMatrix m = matrix_of(p, wrow, extra...);
    const uint8_t* row_of[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) row_of[i] = m.w + size_t(::std::min<int64_t>(m.row + g + 8 * i, m.N - 1)) * rb;
    typename F::Cursor cursor(row_of, sg.sl0, t);
    const int n = sg.sl_end - sg.sl0;
    const uint8_t* src = image + size_t(sg.sl0) * kStageBytes + 16 * tid;
    auto issue = [&](int i, int stage) {  // super-block sl0 + i of the image into `stage`
#pragma unroll
      for (int j = 0; j < kPieces; ++j)
        cp_async16_s(sbase + stage * kStageBytes + 16 * (tid + j * kT), src + size_t(i) * kStageBytes + 16 * j * kT);
    };
    float acc[32] = {};
    // W's registers: super-block i in r[i % 3], loaded two super-blocks before it is multiplied. Launched
    // programmatically after x's image (pdl.cuh): the first two are loaded before the wait for it, the image's
    // copies after.
    static_assert(kAhead == 2, "the rotation below");
    typename F::Regs r[kAhead + 1];
    cursor.load(r[0]);
    if (n > 1) cursor.load(r[1]);
    pdl_wait();
    issue_first_stages(n, issue);
    int stage = 0;
    auto step = [&](int i, const typename F::Regs& cur, typename F::Regs& ahead) {
      cp_async_wait<1>();
      // The copies were generic-proxy writes; the tensor cores read through the async proxy.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncthreads();  // super-block i landed for every thread; every warp's products on i - 2 are finished
      if (i + 2 < n) issue(i + 2, (stage + 2) % kStages);
      asm volatile("cp.async.commit_group;" ::: "memory");
      if (i + kAhead < n) cursor.load(ahead);
      multiply_sb<F>(acc, cur, sbase + stage * kStageBytes, t);
      stage = stage == kStages - 1 ? 0 : stage + 1;
    };
    for (int i = 0; i < n; i += 3) {
      step(i, r[0], r[2]);
      if (i + 1 < n) step(i + 1, r[1], r[0]);
      if (i + 2 < n) step(i + 2, r[2], r[1]);
    }
    wgmma::wait<0>();  // the accumulators are read below
    __syncthreads();  // every warp is done with the stages: the next segment may refill them

    const int rows = int(::std::min<int64_t>(kR, p.N - n0)), cols = int(::std::min<int64_t>(kCols, p.T));
    if (sg.whole) {
#pragma unroll
      for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          const int r = g + 8 * (c >> 1), tl = 8 * nt + 2 * t + (c & 1);  // r: within the warp's 16
          if (16 * warp + r >= rows || tl >= cols) continue;
          m.y[tl * m.N + m.row + r] = acc[4 * nt + c] + (m.bias ? m.bias[m.row + r] : 0.0f);
        }
      return;
    }
#pragma unroll
    for (int nt = 0; nt < kCols / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c)
        sg.slot[(8 * nt + 2 * t + (c & 1)) * kR + 16 * warp + g + 8 * (c >> 1)] = acc[4 * nt + c];
    add_shared_tile_of<kR, kCols, kT>(p, work, sg, rows, cols, tid, n0, 0, extra...);
  });
  pdl_wait();  // a block without work too: this grid ends only after the ones it depends on
}

template <class F, bool kSegments, bool kStack>
constexpr auto kernel_for() {
  if constexpr (kStack) return wgmma_kernel<F, kSegments, ProductStack>;
  else return wgmma_kernel<F, kSegments>;
}

constexpr size_t kSmem = size_t(kStages) * kStageBytes;

// The shared memory opt-in of the instances and how many blocks the GPU holds at once, at the first launch (before
// any capture).
template <class F>
int64_t prepare_instances() {
  for (auto* k : {kernel_for<F, true, false>(), kernel_for<F, false, false>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  for (auto* k : {kernel_for<F, true, true>(), kernel_for<F, false, true>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  const auto* k = reinterpret_cast<const void*>(kernel_for<F, true, false>());
  return ::std::max<int64_t>(1, int64_t(current_device_sm_count()) * kernel_blocks_per_sm(k, kThreads, kSmem));
}

size_t image_bytes(int64_t K) { return size_t(K / kSbElems) * kStageBytes; }

template <class F>
void launch_tiles(const BatchMmParams& p, uint8_t* image, const ProductStack* stack, cudaStream_t stream,
                  bool programmatic) {
  const int64_t pieces = p.K / kSbElems * (kStageBytes / 16);
  launch_programmatic(programmatic, x_image_kernel<F>, dim3(unsigned((pieces + 255) / 256)), 256, 0, stream, p.x,
                      p.x_gate, reinterpret_cast<uint4*>(image), p.K, int(p.T));
  static const int64_t resident = prepare_instances<F>();
  const int64_t tiles = (p.N + kRows - 1) / kRows, n_slices = p.K / kSbElems;
  const int64_t blocks = choose_blocks(tiles, n_slices, resident, true, kMaxWgmmaBlocks);
  const Work w = work_for(p, tiles, n_slices, 1, blocks, part_offset(p.K, p.T) + image_bytes(p.K));
  const uint32_t rb = uint32_t(quant::row_bytes(F::kType, p.K));  // Q6_Kx8: Q6_K's, regrouped in place
  const dim3 grid{unsigned(blocks)};
  if (stack) {
    const auto k = w.runs_stay_in_tiles() ? kernel_for<F, false, true>() : kernel_for<F, true, true>();
    launch_programmatic(programmatic, k, grid, kThreads, kSmem, stream, p, static_cast<const uint8_t*>(image), rb, w,
                        *stack);
  } else {
    const auto k = w.runs_stay_in_tiles() ? kernel_for<F, false, false>() : kernel_for<F, true, false>();
    launch_programmatic(programmatic, k, grid, kThreads, kSmem, stream, p, static_cast<const uint8_t*>(image), rb,
                        w);
  }
}

}  // namespace

bool batch_mm_wgmma_supports(quant::Type type, bool regrouped, int64_t T) {
  const bool layout = regrouped ? type == quant::Type::Q6_K : type == quant::Type::Q4_K;
  return layout && T > 8 && T <= kBatchMmMaxTokens;
}

size_t batch_mm_wgmma_scratch(int64_t K, int64_t T) {
  return part_offset(K, T) + image_bytes(K) + size_t(kMaxWgmmaBlocks) * 2 * kRows * kCols * 4;
}

void launch_batch_mm_wgmma(const BatchMmParams& p, const ProductStack* stack, cudaStream_t stream,
                           bool programmatic) {
  LLM_REQUIRE(batch_mm_wgmma_supports(p.type, p.regrouped, p.T), "wgmma small-batch product: not served");
  LLM_REQUIRE(p.K % (p.regrouped ? 2048 : kSbElems) == 0, "wgmma small-batch product: K");
  LLM_REQUIRE(p.scratch_bytes >= batch_mm_wgmma_scratch(p.K, p.T), "wgmma small-batch product: scratch");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.x) & 7) == 0 && (reinterpret_cast<uintptr_t>(p.x_gate) & 7) == 0,
              "wgmma small-batch product: x and its gate must be 8-byte aligned");
  auto* image = static_cast<uint8_t*>(p.scratch) + part_offset(p.K, p.T);
  if (p.regrouped) launch_tiles<Q6kx8Format>(p, image, stack, stream, programmatic);
  else launch_tiles<Q4kFormat>(p, image, stack, stream, programmatic);
}

}  // namespace cuda
