// Q4_K and Q6_Kx8 prompt products on a warp-specialised wgmma GEMM (prompt_gemm.cuh). Compiled for sm_90a alone
// (cuda/CMakeLists.txt). A lab kernel (ExecutorOptions::prompt_gemm, off by default): docs/kernel-notes.md, session 64.
//
// Form. A block is two consumer warpgroups and a producer warpgroup, one block an SM, walking its run of (tile, slice)
// units as the small-batch kernels deal them (batch_mm_work.cuh: whole tiles, equal splits or stream-K runs). A tile
// is 128 rows of W by 256 tokens; a slice is a super-block (256 of K). Registers move from the producers to the
// consumers (setmaxnreg) for the consumers' 128 accumulators.
// - Producer warp 8 bulk-copies the super-blocks' x stages (32 KB each: 4 k-steps of 256 tokens of the half image,
//   prompt_image.cuh; a ring of 5, 4 for Q6_Kx8); warps 9..11 copy each super-block of the tile's 128 rows into a W
//   stage (18 KB for Q4_K as the file holds it, 30 KB for Q6_Kx8's parts; a ring of 3) in 16-byte cp.async pieces.
//   Each stage has a full and an empty mbarrier. The producers run ahead across segments, so a run's next tile loads
//   under the last one's products and sums.
// - Consumer warp w (0..7; warpgroup w / 4) owns tile rows 16 w + g, + 8 (lane 4 g + t): it reads its rows' part of
//   the super-block from the W stage (bank-conflict-free 16-byte loads), frees the stage, and unpacks the four groups
//   of four k-steps into A fragments as batch_mm_wgmma.cu does (wgmma_formats.cuh); each group is four m64n256k16
//   products on an x stage (m64n128k16 where a prompt's last token tile has 128 tokens or fewer). After committing
//   group i it waits for group i - 1, then frees that one's x stage and may rewrite its A set.
// Sums: a whole tile is stored from the accumulators (plus the bias); a partial segment's go to the block's slot and
// the tile's last contributor adds the slots in block order (batch_mm_work.cuh's add_shared_tile, over the consumers'
// named barrier): the same bits every run.
// Pairs (kRanks 2, launch_prompt_gemm's pairs): clusters of two blocks on the halves of 256-row tiles share each x
// stage (prompt_gemm_kernel's comment).
#include "cuda/kernels/prompt_gemm.cuh"

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/batch_mm_work.cuh"
#include "cuda/kernels/bulk_copy.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/prompt_image.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/wgmma.cuh"
#include "cuda/kernels/wgmma_formats.cuh"

namespace cuda {
namespace {

using namespace batch_mm_work;  // Work, Segment, for_each_segment, add_shared_tile, choose_blocks, work_for
using q4k_lane::kSbElems;

constexpr int kCols = 256, kRows = 128;                      // a tile
// Two consumer warpgroups and a producer warpgroup (one warp copies x, three W). Registers are allocated by
// warpgroup: the producers give theirs up (setmaxnreg) for the consumers' 128 accumulators, A fragments and W words.
constexpr int kConsumers = 256, kThreads = kConsumers + 128;
// The launch gives every thread 168 (65536 / 384, rounded down to 8); setmaxnreg moves registers within that block's
// allocation only: a consumer's increase waits for them (more than the producers free would wait for ever).
constexpr int kLaunchRegs = 168, kProducerRegs = 56, kConsumerRegs = 224;
static_assert(128 * kProducerRegs + kConsumers * kConsumerRegs <= kThreads * kLaunchRegs, "the block's registers");
constexpr int kConsumerWarps = kConsumers / 32;
constexpr int kWThreads = 96;  // the producer warpgroup's last three warps copy W
constexpr int kSteps = kSbElems / 16;
constexpr int kStepBytes = 2 * kCols * 16;                     // x of a k-step: 8 KB
constexpr int kGroupSteps = 4, kGroups = kSteps / kGroupSteps;  // a group: the k-steps of words 2 j, 2 j + 1
constexpr int kXStageBytes = kGroupSteps * kStepBytes;          // a group's x: 32 KB
constexpr int kBarriers = 2 * 9;  // full and empty barriers of at most 9 stages in all

// The formats' W stages: a super-block of the tile's 128 rows, each row's part kRowBytes apart, in kPieces 16-byte
// pieces (piece: where piece i of a row's part of super-block sb lies in the row; load: the consumer lane's
// registers from the stage).
// Q4_K: the row's 144-byte super-block as it is (16-byte loads of rows 36 words apart: no bank conflicts).
struct Q4kStage {
  using F = wgmma_formats::Q4kFormat;
  static constexpr int kRowBytes = q4k_lane::kSbBytes, kPieces = q4k_lane::kSbBytes / 16;
  static constexpr int kXStages = 5, kWStages = 3;
  __device__ static const uint8_t* piece(const uint8_t* row, int sb, int i) {
    return row + size_t(sb) * q4k_lane::kSbBytes + 16 * i;
  }
  __device__ static void load(typename F::Regs& r, const uint8_t* const (&rows)[2], int, int t) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      r.h[i] = *reinterpret_cast<const uint4*>(rows[i]);
      r.q[i][0] = *reinterpret_cast<const uint4*>(rows[i] + 16 + 32 * t);
      r.q[i][1] = *reinterpret_cast<const uint4*>(rows[i] + 32 + 32 * t);
    }
  }
};
// Q6_Kx8 (q6_kx8.cuh): block sb's parts of its run, ql (128 bytes), qh (64), scales (16), and the run's 16 bytes of d,
// laid out ql | qh | scales | d with 16 bytes of padding (rows 60 words apart: the ql loads conflict-free).
struct Q6kx8Stage {
  using F = wgmma_formats::Q6kx8Format;
  static constexpr int kRowBytes = 240, kPieces = 14;
  static constexpr int kXStages = 4, kWStages = 3;
  __device__ static const uint8_t* piece(const uint8_t* row, int sb, int i) {
    const uint8_t* run = row + size_t(sb >> 3) * kQ6_Kx8Run;
    const int b = sb & 7;
    return i < 8 ? run + 128 * b + 16 * i : i < 12 ? run + 1024 + 64 * b + 16 * (i - 8) : i == 12 ? run + 1536 + 16 * b
                                                                                                   : run + 1664;
  }
  __device__ static void load(typename F::Regs& r, const uint8_t* const (&rows)[2], int sb, int t) {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      r.ql[i][0] = *reinterpret_cast<const uint4*>(rows[i] + 32 * t);
      r.ql[i][1] = *reinterpret_cast<const uint4*>(rows[i] + 32 * t + 16);
      r.qh[i] = *reinterpret_cast<const uint4*>(rows[i] + 128 + 16 * t);
      r.sc[i] = *reinterpret_cast<const uint32_t*>(rows[i] + 192 + 4 * t);
      r.d[i] = *reinterpret_cast<const uint16_t*>(rows[i] + 208 + 2 * (sb & 7));
    }
  }
};
template <class S>
constexpr size_t smem_of() {
  static_assert(S::kXStages + S::kWStages <= kBarriers / 2, "the barriers");
  return size_t(S::kXStages) * kXStageBytes + size_t(S::kWStages) * kRows * S::kRowBytes + kBarriers * sizeof(uint64_t);
}
static_assert(smem_of<Q4kStage>() <= 227 * 1024 && smem_of<Q6kx8Stage>() <= 227 * 1024, "an SM's shared memory");
static_assert(prompt_image::sb_bytes(kCols) == size_t(kGroups) * kXStageBytes, "a super-block of the image");
// Partial-sum slots (2 x 128 KB a block) for one block an SM of a 132-SM GPU; a bigger one deals runs to that many.
constexpr int64_t kMaxGemmBlocks = 132;

// A position in a ring of N stages and the parity of its round (the mbarrier phase a wait names).
template <int N>
struct Ring {
  int i = 0;
  uint32_t phase = 0;
  __device__ __forceinline__ void next() {
    if (++i == N) i = 0, phase ^= 1;
  }
};

// The shared-memory rings of a block: x stages, W stages, and a full and an empty barrier for each.
template <class S>
struct Rings {
  uint8_t* xs;
  uint8_t* ws;
  uint64_t *x_full, *x_empty, *w_full, *w_empty;
  __device__ explicit Rings(uint8_t* smem)
      : xs(smem), ws(smem + S::kXStages * kXStageBytes),
        x_full(reinterpret_cast<uint64_t*>(ws + S::kWStages * kRows * S::kRowBytes)),
        x_empty(x_full + S::kXStages), w_full(x_empty + S::kXStages), w_empty(w_full + S::kWStages) {}
};

// A consumer warp frees the x stage of barrier `bar` in every block of the cluster (their producers refill it
// together: each waits for both blocks' consumers).
template <int kRanks>
__device__ __forceinline__ void release_x(uint64_t* bar) {
  if constexpr (kRanks == 1) bulk::mbar_arrive(bar);
  else
#pragma unroll
    for (int r = 0; r < kRanks; ++r) bulk::mbar_arrive_in(bar, uint32_t(r));
}

// A consumer thread's part of one segment: kN of the tile's token columns (256, or fewer for the last token tile of a
// prompt: m64nNk16 on the first kN of the stage's 256) over its slices, then its sums stored or added up.
template <class S, int kN, int kRanks>
__device__ __forceinline__ void consume_segment(const BatchMmParams& p, const Work& work, const Segment& sg,
                                                const Rings<S>& st, Ring<S::kXStages>& x, Ring<S::kWStages>& w,
                                                int64_t n0, int64_t t0, int tid) {
  using F = typename S::F;
  const int lane = tid & 31, g = lane >> 2, t = lane & 3, r0 = 16 * (tid >> 5) + g;  // rows r0, r0 + 8 of the tile
  const uint32_t xbase = bulk::smem_addr(st.xs);
  float acc[kN / 2];
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) acc[i] = 0.0f;
  uint32_t a[2][4][4];  // two groups' A registers, used in turn
  int prev = -1;        // the x stage of the group before
  for (int sb = sg.sl0; sb < sg.sl_end; ++sb) {
    bulk::mbar_wait(&st.w_full[w.i], w.phase);
    typename F::Regs r;
    const uint8_t* const stage = st.ws + w.i * kRows * S::kRowBytes;
    S::load(r, {stage + r0 * S::kRowBytes, stage + (r0 + 8) * S::kRowBytes}, sb, t);
    __syncwarp();  // every lane's loads are in registers: the stage may be refilled
    if (lane == 0) bulk::mbar_arrive(&st.w_empty[w.i]);
    w.next();
    const typename F::Scales sc = F::scales(r, t);
#pragma unroll
    for (int jj = 0; jj < kGroups; ++jj) {
      uint32_t(&b)[4][4] = a[jj & 1];  // last read by group jj - 2, finished
      wgmma_formats::group_fragments<F>(b, r, sc, jj);
      bulk::mbar_wait(&st.x_full[x.i], x.phase);
      wgmma::fence();
#pragma unroll
      for (int rr = 0; rr < kGroupSteps; ++rr)
        wgmma::m64nNk16<kN>(acc, b[rr],
                            wgmma::k_major_desc(xbase + x.i * kXStageBytes + rr * kStepBytes, kCols * 16, 128));
      wgmma::commit();
      wgmma::wait<1>();  // the group before is done: its x stage may be refilled
      if (prev >= 0) {
        __syncwarp();
        if (lane == 0) release_x<kRanks>(&st.x_empty[prev]);
      }
      prev = x.i;
      x.next();
    }
  }
  wgmma::wait<0>();  // the accumulators are read below
  __syncwarp();
  if (lane == 0) release_x<kRanks>(&st.x_empty[prev]);

  const int rows = int(::std::min<int64_t>(kRows, p.N - n0)), cols = int(::std::min<int64_t>(kN, p.T - t0));
  if (sg.whole) {
#pragma unroll
    for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int rr = r0 + 8 * (c >> 1), tl = 8 * nt + 2 * t + (c & 1);
        if (rr >= rows || tl >= cols) continue;
        p.y[(t0 + tl) * p.N + n0 + rr] = acc[4 * nt + c] + (p.bias ? p.bias[n0 + rr] : 0.0f);
      }
    return;
  }
#pragma unroll
  for (int nt = 0; nt < kN / 8; ++nt)
#pragma unroll
    for (int c = 0; c < 4; ++c) sg.slot[(8 * nt + 2 * t + (c & 1)) * kRows + r0 + 8 * (c >> 1)] = acc[4 * nt + c];
  // Eight outputs a thread at a time (the accumulators are dead by then): a tile of 32 768 sums waits for L2 16
  // times a thread instead of 32.
  add_shared_tile<kRows, kCols, kConsumers, 8>(
      work, sg, rows, cols, tid, [&](int rr) { return p.bias ? p.bias[n0 + rr] : 0.0f; },
      [&](int rr, int tl, float s) { p.y[(t0 + tl) * p.N + n0 + rr] = s; }, ConsumerSync<1, kConsumers>{});
}

// kRanks 2: a cluster of two blocks on the two row halves of a 256-row pair tile, dealt the same segments (the
// cluster's run of the Work), shares each x stage: each block's warp 8 copies half of it into both blocks
// (multicast), so x is read from L2 once per 256 rows. A stage is free once both blocks' consumers have let it go
// (each consumer warp arrives on both blocks' empty barrier). Each block keeps its own W ring, partial-sum slots and
// tile counters (its rank's half of them).
template <class S, bool kSegments, int kRanks>
__global__ void __launch_bounds__(kThreads, 1)
    prompt_gemm_kernel(BatchMmParams p, const uint8_t* image, uint32_t rb, Work work) {
  constexpr int kXStages = S::kXStages, kWStages = S::kWStages, kWStageBytes = kRows * S::kRowBytes;
  extern __shared__ __align__(128) uint8_t smem[];
  const Rings<S> st(smem);
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int rank = kRanks > 1 ? int(bulk::cluster_rank()) : 0;
  const int32_t run = int32_t(blockIdx.x) / kRanks;  // this block's run of the Work (its cluster's)
  if (tid == 0) {
    for (int i = 0; i < kXStages; ++i)
      bulk::mbar_init(&st.x_full[i], 1), bulk::mbar_init(&st.x_empty[i], kRanks * kConsumerWarps);
    for (int i = 0; i < kWStages; ++i)
      bulk::mbar_init(&st.w_full[i], kWThreads), bulk::mbar_init(&st.w_empty[i], kConsumerWarps);
    bulk::mbar_init_fence();
  }
  if constexpr (kRanks > 1) bulk::cluster_sync();  // the other block's barriers exist before any copy lands there
  else __syncthreads();
  const int64_t n_sb = p.K / kSbElems;
  // Tile `tile` of the Work (a pair tile when kRanks is 2): this block's first row.
  const auto first_row = [&](int32_t tile) { return (int64_t(tile / work.token_tiles) * kRanks + rank) * kRows; };

  if (warp >= kConsumerWarps) {  // the producer warpgroup: warp 8 copies x's stages, warps 9..11 W's
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kProducerRegs));
    if (warp == kConsumerWarps) {
      Ring<kXStages> x;
      pdl_wait();  // x's image is the launch before's output
      constexpr uint32_t kPart = kXStageBytes / kRanks;  // this block's part of a stage, copied into every block
      for_each_segment<kRows, kCols / 8, kSegments>(
          work,
          [&](const Segment& sg) {
            const uint8_t* src =
                image + size_t((sg.tile % work.token_tiles) * n_sb + sg.sl0) * (kGroups * kXStageBytes);
            for (int i = 0; i < (sg.sl_end - sg.sl0) * kGroups; ++i) {
              bulk::mbar_wait(&st.x_empty[x.i], x.phase ^ 1);
              if (lane == 0) {
                bulk::mbar_arrive_expect_tx(&st.x_full[x.i], kXStageBytes);
                uint8_t* const dst = st.xs + x.i * kXStageBytes + rank * kPart;
                if constexpr (kRanks > 1)
                  bulk::copy_to_cluster(dst, src + rank * kPart, kPart, &st.x_full[x.i], (1u << kRanks) - 1);
                else bulk::copy_to_shared_nohint(dst, src, kPart, &st.x_full[x.i]);
              }
              src += kXStageBytes;
              x.next();
            }
          },
          run);
    } else {
      // W: each of the 96 threads copies every 96th 16-byte piece of the stage (cp.async: bulk copies of 144 bytes
      // a row measured half the speed, session 64), then arrives on the stage's full barrier once its copies land.
      const int wt = tid - kConsumers - 32;
      Ring<kWStages> w;
      for_each_segment<kRows, kCols / 8, kSegments>(
          work,
          [&](const Segment& sg) {
            const int64_t n0 = first_row(sg.tile);
            for (int sb = sg.sl0; sb < sg.sl_end; ++sb) {
              bulk::mbar_wait(&st.w_empty[w.i], w.phase ^ 1);
              uint8_t* const dst = st.ws + w.i * kWStageBytes;
              for (int c = wt; c < kRows * S::kPieces; c += kWThreads) {
                const int r = c / S::kPieces, i = c - r * S::kPieces;  // past the end: the last row (not stored)
                const uint8_t* row =
                    static_cast<const uint8_t*>(p.w) + size_t(::std::min<int64_t>(n0 + r, p.N - 1)) * rb;
                cp_async16(dst + r * S::kRowBytes + 16 * i, S::piece(row, sb, i));
              }
              asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(
                               bulk::smem_addr(&st.w_full[w.i]))
                           : "memory");
              w.next();
            }
          },
          run);
      pdl_wait();  // every thread: this grid ends only after the ones it depends on
    }
  } else {
    // The consumers; with kRanks 2 their sums go to this rank's half of the slots and counters.
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kConsumerRegs));
    Work mine = work;
    if constexpr (kRanks > 1) {
      mine.part += size_t(rank) * (gridDim.x / kRanks) * 2 * (kRows * kCols);
      mine.counters += rank * (work.units / work.n_slices);
    }
    Ring<kXStages> x;
    Ring<kWStages> w;
    pdl_wait();  // y, the slots and the counters are written below
    for_each_segment<kRows, kCols / 8, kSegments>(
        mine,
        [&](const Segment& sg) {
          const int64_t n0 = first_row(sg.tile), t0 = (sg.tile % work.token_tiles) * kCols;
          if (p.T - t0 > 128) consume_segment<S, 256, kRanks>(p, mine, sg, st, x, w, n0, t0, tid);
          else consume_segment<S, 128, kRanks>(p, mine, sg, st, x, w, n0, t0, tid);
        },
        run);
  }
  if constexpr (kRanks > 1) bulk::cluster_sync();  // no block exits while the other may still write into it
}

// The Work's tiles: 128 rows (one block) or 256 (a cluster of two) by a token tile.
int64_t tiles_of(int64_t N, int64_t T, int ranks = 1) {
  return (N + ranks * kRows - 1) / (ranks * kRows) * prompt_image::token_tiles(T, kCols);
}
size_t slots_bytes(int64_t blocks) { return size_t(blocks) * 2 * kRows * kCols * sizeof(float); }

// Runs (blocks, or clusters of kRanks blocks) the GPU holds at once.
template <class S, int kRanks>
int64_t prepare_instances() {
  for (auto* k : {prompt_gemm_kernel<S, true, kRanks>, prompt_gemm_kernel<S, false, kRanks>})
    CUDA_CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_of<S>())));
  const auto* k = reinterpret_cast<const void*>(prompt_gemm_kernel<S, true, kRanks>);
  if constexpr (kRanks == 1) {
    return ::std::max<int64_t>(1,
                               int64_t(current_device_sm_count()) * kernel_blocks_per_sm(k, kThreads, smem_of<S>()));
  } else {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(kRanks), cfg.blockDim = dim3(kThreads), cfg.dynamicSmemBytes = smem_of<S>();
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = kRanks, cluster.val.clusterDim.y = 1, cluster.val.clusterDim.z = 1;
    cfg.attrs = &cluster, cfg.numAttrs = 1;
    int clusters = 0;
    CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, k, &cfg));
    return ::std::max(1, clusters);
  }
}

template <class S, int kRanks>
void launch_stage(const BatchMmParams& p, uint8_t* image, bool image_ready, cudaStream_t stream) {
  if (!image_ready) prompt_image::launch_prompt_image<typename S::F, kCols>(p.x, p.x_gate, image, p.K, p.T, stream);
  static const int64_t resident = prepare_instances<S, kRanks>();
  const int64_t tiles = tiles_of(p.N, p.T, kRanks), n_slices = p.K / kSbElems;
  const int64_t runs = choose_blocks(tiles, n_slices, resident, true, kMaxGemmBlocks / kRanks);
  const Work w = work_for(p, tiles, n_slices, prompt_image::token_tiles(p.T, kCols), runs,
                          part_offset(p.K, p.T) + prompt_image::image_bytes(p.K, p.T, kCols));
  const uint32_t rb = uint32_t(quant::row_bytes(p.type, p.K));  // Q6_Kx8: Q6_K's, regrouped in place
  const auto k = w.runs_stay_in_tiles() ? prompt_gemm_kernel<S, false, kRanks> : prompt_gemm_kernel<S, true, kRanks>;
  launch_programmatic_clusters(true, kRanks, k, dim3(unsigned(runs * kRanks)), kThreads, smem_of<S>(), stream, p,
                      static_cast<const uint8_t*>(image), rb, w);
}

}  // namespace

bool prompt_gemm_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T) {
  const bool served = regrouped ? type == quant::Type::Q6_K : type == quant::Type::Q4_K;
  if (!served || T <= kBatchMmMaxTokens || N <= 0 || K <= 0 || K % (regrouped ? 2048 : kSbElems)) return false;
  // A cluster's two blocks count their halves of a pair tile apart: 2 x pair tiles counters, at least tiles_of.
  const int64_t tiles = 2 * tiles_of(N, T, 2);
  return tiles <= int64_t(kBatchMmCounterBytes / 4) && tiles * (K / kSbElems) < 0x7fffffff;
}

size_t prompt_gemm_scratch(int64_t K, int64_t N, int64_t T) {
  const int64_t units = 2 * tiles_of(N, T, 2) * (K / kSbElems);  // a block takes one at least (clusters: two)
  return part_offset(K, T) + prompt_image::image_bytes(K, T, kCols) + slots_bytes(::std::min(kMaxGemmBlocks, units));
}

void launch_prompt_gemm(const BatchMmParams& p, cudaStream_t stream, bool image_ready, bool pairs) {
  LLM_REQUIRE(p.w && p.x && p.y && p.scratch && p.tile_counters, "prompt GEMM: null pointer");
  LLM_REQUIRE(prompt_gemm_supports(p.type, p.regrouped, p.K, p.N, p.T),
              "prompt GEMM: type " + ::std::string(quant::type_name(p.type)) + (p.regrouped ? " (regrouped)" : "") +
                  ", K = " + ::std::to_string(p.K) + ", N = " + ::std::to_string(p.N) + ", T = " +
                  ::std::to_string(p.T) + " not served");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.w) & 15) == 0 && (reinterpret_cast<uintptr_t>(p.scratch) & 15) == 0,
              "prompt GEMM: weights and scratch must be 16-byte aligned");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.x) & 7) == 0 && (reinterpret_cast<uintptr_t>(p.x_gate) & 7) == 0,
              "prompt GEMM: x and its gate must be 8-byte aligned");
  LLM_REQUIRE(p.scratch_bytes >= prompt_gemm_scratch(p.K, p.N, p.T), "prompt GEMM: scratch");
  if (p.regrouped) LLM_REQUIRE(q6_kx8_fits(p.w, p.K), "prompt GEMM: Q6_Kx8 rows");
  uint8_t* const image = static_cast<uint8_t*>(p.scratch) + part_offset(p.K, p.T);
  if (p.regrouped) {
    if (pairs) launch_stage<Q6kx8Stage, 2>(p, image, image_ready, stream);
    else launch_stage<Q6kx8Stage, 1>(p, image, image_ready, stream);
  } else {
    if (pairs) launch_stage<Q4kStage, 2>(p, image, image_ready, stream);
    else launch_stage<Q4kStage, 1>(p, image, image_ready, stream);
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
