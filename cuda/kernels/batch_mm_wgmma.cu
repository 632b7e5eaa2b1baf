// Q4_K products of up to 64 tokens on wgmma (batch_mm_wgmma.cuh). Compiled for sm_90a alone (cuda/CMakeLists.txt).
//
// Why. At 33..64 tokens the mma.sync kernels (batch_mm.cu, batch_mm_wide.cu) run at ~0.4 TB/s of W: every warp
// reads every token's x from shared memory for its own 16 rows (LDS instructions and bandwidth) and issues an
// HMMA per 16 x 8 x 16. A warpgroup's wgmma reads B (x) from shared memory once for 64 rows, inside the tensor
// cores, and one instruction covers 64 x 64 x 16.
//
// Form. A block of WG warpgroups owns a tile of 64 WG rows by all (up to 64) tokens and walks K one super-block
// (256 elements) at a time, as the wide kernel does: warp w's lanes load and unpack rows 16 w + g, 16 w + g + 8 into
// A fragments in registers (q4k_lane.cuh), a super-block ahead. A super-block is 16 k-steps; k-step 4 j + r takes
// the lane's word 2 j + (r & 1), low nibbles for r < 2 and high ones above, so its positions 2 t, 2 t + 1, 2 t + 8,
// 2 t + 9 stand for elements 64 t + 32 (r >> 1) + 4 (2 j + (r & 1)) + 0, 1, 2, 3 (image_element).
//
// x. wgmma needs B's 16 k positions of a step as 8-half rows of core matrices (8 tokens by 16 bytes), and the
// positions above are 4-byte pairs from four places: so a first launch writes x in half in exactly the order the
// stages need (the image: per super-block, k-step and half-step, 64 tokens of 8 halves; tokens past T zero), and a
// stage is then 32 KB copied straight, 16 bytes a copy, two super-blocks ahead into a ring of 3. The image is the
// launch's own, after the scratch's half x (which it leaves as it was: batch_mm_reads_float_x).
//
// Sync. A k-step group's A registers are written, fenced (wgmma::fence), used by four asynchronous products and
// committed; the next group writes the other set, and the one after waits until at most one group is pending. A
// super-block's products are finished before the barrier after which its stage is refilled. Tiles are dealt to
// blocks as in batch_mm.cu (Work), the sums of a tile two blocks share added in block order: the same bits every run.
#include "cuda/kernels/batch_mm_wgmma.cuh"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/batch_mm_work.cuh"
#include "cuda/kernels/q4k_lane.cuh"
#include "cuda/kernels/wgmma.cuh"

namespace cuda {
namespace {

using namespace batch_mm_work;  // Work, Segment, for_each_segment, add_shared_tile, choose_blocks, matrix_of
using namespace q4k_lane;       // Scales, group_scales, Word, unpack_word, SbRegs, load_sb, kSbBytes, kSbElems

constexpr int kCols = 64;                 // tokens a tile (wgmma n = 64)
constexpr int kSteps = kSbElems / 16;     // k-steps a super-block
constexpr int kStepBytes = 2 * kCols * 16;  // two core-matrix columns (k 0..7, 8..15) of 8 token groups
constexpr int kStageBytes = kSteps * kStepBytes;  // 32 KB: a super-block of x for 64 tokens
constexpr int kStages = 3;
constexpr int64_t kMaxWgmmaBlocks = 512;  // what the scratch's partial-sum slots are sized for

template <int WG>
constexpr int kThreads = 128 * WG;
template <int WG>
constexpr int kRows = 64 * WG;

// The element of a super-block (0..255) that k-step s's position kk stands for (the file header).
__host__ __device__ constexpr int image_element(int s, int kk) {
  return 64 * ((kk & 7) >> 1) + 32 * ((s & 3) >> 1) + 4 * (2 * (s >> 2) + (s & 1)) + (kk & 1) + 2 * (kk >> 3);
}

// The image: 16-byte piece ((sb * kSteps + s) * 2 + c) * 64 + n holds token n's positions 8 c .. 8 c + 7 of k-step
// s of super-block sb, in half (rounded as launch_x_to_half rounds); zero for n >= T. Positions 8 c + 2 u, + 1 are
// elements image_element(s, 8 c + 2 u) and the next: one float2 load each.
__global__ void x_image_kernel(const float* __restrict__ x, uint4* __restrict__ image, int64_t K, int T) {
  const int64_t piece = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (piece >= K / kSbElems * (kStageBytes / 16)) return;
  const int n = int(piece & 63), c = int((piece >> 6) & 1), s = int((piece >> 7) & (kSteps - 1));
  const int64_t sb = piece / (kStageBytes / 16);
  uint32_t h[4] = {0, 0, 0, 0};
  if (n < T) {
    const float* src = x + int64_t(n) * K + sb * kSbElems + image_element(s, 8 * c);
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const float2 f = *reinterpret_cast<const float2*>(src + 64 * u);
      const __half2 v = __floats2half2_rn(f.x, f.y);
      h[u] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  image[piece] = make_uint4(h[0], h[1], h[2], h[3]);
}
static_assert(image_element(0, 8) == 2 && image_element(1, 0) == 4 && image_element(2, 0) == 32 &&
                  image_element(4, 0) == 8 && image_element(0, 2) == 64,
              "the lane mapping of q4k_lane.cuh");

// acc += this super-block's 16 rows (the warp's) times the stage at `stage` (shared-window address).
__device__ __forceinline__ void multiply_sb(float (&acc)[32], const SbRegs<1>& r, uint32_t stage, bool upper,
                                            uint32_t sel) {
  const Scales sc[2] = {group_scales(r.h[0], upper, sel), group_scales(r.h[1], upper, sel)};
  uint32_t a[2][4][4];  // two sets of four k-steps' A registers, used in turn
#pragma unroll
  for (int jj = 0; jj < 4; ++jj) {
    uint32_t(&b)[4][4] = a[jj & 1];
    if (jj >= 2) wgmma::wait<1>();  // the group that read this set (jj - 2) is done
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const uint4& q = r.q[h][jj >> 1];
      const Word w0 = unpack_word((jj & 1) ? q.z : q.x, sc[h]), w1 = unpack_word((jj & 1) ? q.w : q.y, sc[h]);
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

template <int WG, int kAhead, bool kSegments, typename... Extra>
__global__ void __launch_bounds__(kThreads<WG>)
    q4k_wgmma_kernel(BatchMmParams p, const uint8_t* image, uint32_t rb, Work work, Extra... extra) {
  extern __shared__ __align__(128) uint8_t stages[];
  constexpr int kT = kThreads<WG>, kR = kRows<WG>, kPieces = kStageBytes / 16 / kT;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const bool upper = t >= 2;
  const uint32_t sel = (t & 1) ? 0x4342u : 0x4140u;
  const uint32_t sbase = uint32_t(__cvta_generic_to_shared(stages));

  for_each_segment<kR, kCols / 8, kSegments>(work, [&](const Segment& sg) {
    const int64_t n0 = int64_t(sg.tile) * kR;  // one token tile: T <= 64
    // The warp's rows lie in one matrix of a stack (each but the last a multiple of 32 rows). Rows past the end
    // read the last row (their sums are not stored).
    const int64_t wrow = ::std::min<int64_t>(n0 + 16 * warp, p.N - 1);
    const RowMatrix m = matrix_of(p, wrow, extra...);
    const uint8_t* hrow[2];
    const uint8_t* qrow[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      hrow[i] = m.w + size_t(::std::min<int64_t>(m.row + g + 8 * i, m.N - 1)) * rb + size_t(sg.sl0) * kSbBytes;
      qrow[i] = hrow[i] + 16 + 32 * t;
    }
    auto advance = [&] {
#pragma unroll
      for (int i = 0; i < 2; ++i) hrow[i] += kSbBytes, qrow[i] += kSbBytes;
    };
    const int n = sg.sl_end - sg.sl0;
    const uint8_t* src = image + size_t(sg.sl0) * kStageBytes + 16 * tid;
    auto issue = [&](int i, int stage) {  // super-block sl0 + i of the image into `stage`
#pragma unroll
      for (int j = 0; j < kPieces; ++j)
        cp_async16_s(sbase + stage * kStageBytes + 16 * (tid + j * kT), src + size_t(i) * kStageBytes + 16 * j * kT);
    };
    float acc[32] = {};
    issue(0, 0);
    asm volatile("cp.async.commit_group;" ::: "memory");
    if (n > 1) issue(1, 1);
    asm volatile("cp.async.commit_group;" ::: "memory");
    // W's registers: super-block i in r[i % (kAhead + 1)], loaded kAhead super-blocks before it is multiplied.
    SbRegs<1> r[kAhead + 1];
    load_sb<1>(r[0], hrow, qrow);
    if constexpr (kAhead == 2) {
      if (n > 1) {
        advance();
        load_sb<1>(r[1], hrow, qrow);
      }
    }
    int stage = 0;
    auto step = [&](int i, const SbRegs<1>& cur, SbRegs<1>& ahead) {
      cp_async_wait<1>();
      // The copies were generic-proxy writes; the tensor cores read through the async proxy.
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      __syncthreads();  // super-block i landed for every thread; every warp's products on i - 1 are finished
      if (i + 2 < n) issue(i + 2, stage == 0 ? 2 : stage - 1);
      asm volatile("cp.async.commit_group;" ::: "memory");
      if (i + kAhead < n) {
        advance();
        load_sb<1>(ahead, hrow, qrow);
      }
      multiply_sb(acc, cur, sbase + stage * kStageBytes, upper, sel);
      wgmma::wait<0>();
      stage = stage == kStages - 1 ? 0 : stage + 1;
    };
    if constexpr (kAhead == 1) {
      for (int i = 0; i < n; i += 2) {
        step(i, r[0], r[1]);
        if (i + 1 < n) step(i + 1, r[1], r[0]);
      }
    } else {
      for (int i = 0; i < n; i += 3) {
        step(i, r[0], r[2]);
        if (i + 1 < n) step(i + 1, r[1], r[0]);
        if (i + 2 < n) step(i + 2, r[2], r[1]);
      }
    }
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
    add_shared_tile<kR, kCols, kT>(
        work, sg, rows, cols, tid,
        [&](int r) {
          const RowMatrix o = matrix_of(p, n0 + r, extra...);
          return o.bias ? o.bias[o.row] : 0.0f;
        },
        [&](int r, int tl, float s) {
          const RowMatrix o = matrix_of(p, n0 + r, extra...);
          o.y[tl * o.N + o.row] = s;
        });
  });
}

template <int WG, int kAhead, bool kSegments, bool kStack>
constexpr auto kernel_for() {
  if constexpr (kStack) return q4k_wgmma_kernel<WG, kAhead, kSegments, ProductStack>;
  else return q4k_wgmma_kernel<WG, kAhead, kSegments>;
}

constexpr size_t kSmem = size_t(kStages) * kStageBytes;

// The shared memory opt-in of the instances and how many blocks the GPU holds at once, at the first launch (before
// any capture).
template <int WG, int kAhead>
int64_t prepare_instances() {
  for (auto* k : {kernel_for<WG, kAhead, true, false>(), kernel_for<WG, kAhead, false, false>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  for (auto* k : {kernel_for<WG, kAhead, true, true>(), kernel_for<WG, kAhead, false, true>()})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
  const auto* k = reinterpret_cast<const void*>(kernel_for<WG, kAhead, true, false>());
  return ::std::max<int64_t>(1, int64_t(current_device_sm_count()) * kernel_blocks_per_sm(k, kThreads<WG>, kSmem));
}

size_t image_bytes(int64_t K) { return size_t(K / kSbElems) * kStageBytes; }

template <int WG, int kAhead>
void launch_wg(const BatchMmParams& p, const uint8_t* image, const ProductStack* stack, cudaStream_t stream) {
  static const int64_t resident = prepare_instances<WG, kAhead>();
  const int64_t tiles = (p.N + kRows<WG> - 1) / kRows<WG>, n_slices = p.K / kSbElems;
  const int64_t blocks = choose_blocks(tiles, n_slices, resident, true, kMaxWgmmaBlocks);
  const Work w = work_for(p, tiles, n_slices, 1, blocks, part_offset(p.K, p.T) + image_bytes(p.K));
  const uint32_t rb = uint32_t(quant::row_bytes(quant::Type::Q4_K, p.K));
  const dim3 grid{unsigned(blocks)};
  if (stack) {
    const auto k =
        w.runs_stay_in_tiles() ? kernel_for<WG, kAhead, false, true>() : kernel_for<WG, kAhead, true, true>();
    k<<<grid, kThreads<WG>, kSmem, stream>>>(p, image, rb, w, *stack);
  } else {
    const auto k =
        w.runs_stay_in_tiles() ? kernel_for<WG, kAhead, false, false>() : kernel_for<WG, kAhead, true, false>();
    k<<<grid, kThreads<WG>, kSmem, stream>>>(p, image, rb, w);
  }
}

// Lab switches, read once, until one shape wins: warpgroups a block (LLM_CUDA_WGMMA_WG=1|2) and how many
// super-blocks ahead a lane loads W (LLM_CUDA_WGMMA_AHEAD=1|2).
int lab_switch(const char* name, int fallback) {
  const char* e = ::std::getenv(name);
  return e && *e ? ::std::atoi(e) : fallback;
}
int warpgroups() {
  static const int wg = lab_switch("LLM_CUDA_WGMMA_WG", 2) == 1 ? 1 : 2;
  return wg;
}
int ahead() {
  static const int a = lab_switch("LLM_CUDA_WGMMA_AHEAD", 2) == 1 ? 1 : 2;
  return a;
}

}  // namespace

bool batch_mm_wgmma_takes(quant::Type type, bool regrouped, int64_t T) {
  return type == quant::Type::Q4_K && !regrouped && T > 8 && T <= kBatchMmMaxTokens;
}

size_t batch_mm_wgmma_scratch(int64_t K, int64_t T) {
  return part_offset(K, T) + image_bytes(K) + size_t(kMaxWgmmaBlocks) * 2 * kRows<2> * kCols * 4;
}

void launch_batch_mm_wgmma(const BatchMmParams& p, const ProductStack* stack, cudaStream_t stream) {
  LLM_REQUIRE(batch_mm_wgmma_takes(p.type, p.regrouped, p.T), "wgmma small-batch product: not served");
  LLM_REQUIRE(p.K % kSbElems == 0, "wgmma small-batch product: K");
  LLM_REQUIRE(p.scratch_bytes >= batch_mm_wgmma_scratch(p.K, p.T), "wgmma small-batch product: scratch");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.x) & 7) == 0, "wgmma small-batch product: x must be 8-byte aligned");
  auto* image = static_cast<uint8_t*>(p.scratch) + part_offset(p.K, p.T);
  const int64_t pieces = p.K / kSbElems * (kStageBytes / 16);
  x_image_kernel<<<unsigned((pieces + 255) / 256), 256, 0, stream>>>(p.x, reinterpret_cast<uint4*>(image), p.K,
                                                                      int(p.T));
  if (warpgroups() == 1) {
    if (ahead() == 1) launch_wg<1, 1>(p, image, stack, stream);
    else launch_wg<1, 2>(p, image, stack, stream);
  } else {
    if (ahead() == 1) launch_wg<2, 1>(p, image, stack, stream);
    else launch_wg<2, 2>(p, image, stack, stream);
  }
}

}  // namespace cuda
