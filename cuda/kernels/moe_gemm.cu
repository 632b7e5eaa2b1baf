// Expert-grouped prefill products on tensor cores (moe_gemm.cuh).
// - group kernel (one block): counts each expert's users u = t k + j, their offsets (a scan) and the lists. The
//   order inside a list depends on atomics, the results do not: each output is one user's dot over K, summed in
//   the same order (k ascending, 16 at a time in one mma) whichever tile and column hold it. Users whose id is out
//   of range get zero rows there (as the matvec).
// - x pass: the inputs rounded to half once (as the dense GEMM path does), rows padded with zeros to a multiple of
//   64, so every tile copies whole 16-byte pieces and the last k step needs no bounds.
// - tile kernel: grid (row tiles of 128, live (expert, user tile) pairs), one tile a block (moe_tiles.cuh), so
//   experts nobody chose are never read; with MoeGemmOptions::compact_tiles false, (row tiles, experts, user
//   tiles), block (tile, e, z) taking expert e's users BT z .. BT z + BT - 1, BT gridDim.z further on, ... (blocks
//   past an expert's count exit at once). K goes in steps of 64: cp.async copies the step's x rows (half)
//   into a ring two steps ahead and, a whole number of quant blocks at a time, the rows' raw bytes into a ring of
//   slices (up to two slices ahead); each step every thread unpacks 32 elements into a half tile (Q4_0 / Q8_0 / Q4_K
//   / Q6_K / MXFP4 straight to half pairs, unpack_half.cuh; every other format by quant/dequant.cuh's float
//   dequantizer), and 8 warps (16 rows each, every user of the tile) multiply with mma.m16n8k16, float32
//   accumulators in registers, skipping 16-user column pairs past the expert's count. Q4_K and Q6_K with 64-user
//   tiles and recoded MXFP4 take moe_fragments.cu's kernels instead: their weights go straight from the staged codes
//   into mma fragments (no half tile).
// Why this shape (Qwen3-30B-A3B: ~32 users an expert at T = 512, gpt-oss-20b: ~64): per step a block dequantizes
// 128 x 64 weights (one chunk a thread) and does up to 128 x BT x 64 multiply-adds; the dequantization is a fixed
// cost per expert row, so BT follows the mean users per expert (64 or 128) and a block covers them in one pass.
// x is read from L2 by N / 128 blocks per expert: in half, 128 rows keep that traffic near the weights'.
#include "cuda/kernels/moe_gemm.cuh"

#include <cuda_fp16.h>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/moe_tiles.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "cuda/kernels/unpack_half.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

using namespace moe_tiles;

constexpr int kLd = kStep + 8;  // halves a shared row: 16 more bytes make ldmatrix conflict-free
constexpr int kGroupThreads = 1024;

Groups groups_in(void* scratch, int64_t n_expert) {
  auto* s = static_cast<int32_t*>(scratch);
  return {s, s + n_expert, s + 2 * n_expert};
}

// How the weights travel. Quant formats: raw bytes, a slice of whole blocks (256 elements for the K-quants, 128 for
// the 32-element formats) every kSubs steps into a ring (WStages); a row's slice lands at the same address modulo 16 as
// in memory (a 16-byte aligned copy around it), so the dequantizers' aligned loads stay aligned. Float formats
// (F32 / F16 / BF16: any K, no blocks) are dequantized from memory directly; they are test and fallback shapes.
template <quant::Type Q>
struct WeightPath {
  using L = quant::dev::Layout<Q>;
  static constexpr bool kStaged = !quant::dev::kIsFloat<Q>;
  static constexpr int kSlice = !kStaged ? kStep : L::kBlockElems > 128 ? L::kBlockElems : 128;
  static constexpr int kSubs = kSlice / kStep;  // steps a slice serves
  static constexpr int kRawBytes = kStaged ? kSlice / L::kBlockElems * L::kBlockBytes : 0;
  static constexpr int kRawLd = kStaged ? (kRawBytes + 15 + 15) / 16 * 16 : 0;  // + the copy's misalignment
  static_assert(kSlice % kStep == 0 && kSubs >= 2 || !kStaged, "a slice is issued at least two steps ahead");
};

template <quant::Type Q, int NT>
constexpr size_t tile_smem_bytes(int w_stages, int w_tiles) {
  return size_t(w_stages) * kBN * WeightPath<Q>::kRawLd + (size_t(kXStages) * 2 * NT * 8 + w_tiles * kBN) * kLd * 2;
}

// Weight slices in flight: slice S + stages - 1 is issued when slice S starts, so the memory latency is covered by
// (stages - 1) slices of work. Three where two blocks still fit an SM (Q4_K, Q8_0, MXFP4: ~110 KB), else two
// (Q6_K's 210-byte blocks).
//
// Half tiles of weights (kWTiles): two where they fit beside two weight slices at two blocks an SM (Q4_K with 64
// users): then a step has one barrier instead of two — a warp unpacks step s + 1 into the other tile while the
// others still multiply step s, so the unpacking's ALU work and the tensor-core work of different warps overlap.
// That needs step s + 1's weight slice landed by the wait of step s: (stages - 1) x steps a slice >= 3.
template <quant::Type Q, int NT>
constexpr bool kTwoTiles =
    WeightPath<Q>::kStaged && WeightPath<Q>::kSubs >= 3 && tile_smem_bytes<Q, NT>(2, 2) <= 110 * 1024;
template <quant::Type Q, int NT>
constexpr int kWTiles = kTwoTiles<Q, NT> ? 2 : 1;
template <quant::Type Q, int NT>
constexpr int kWStages = tile_smem_bytes<Q, NT>(3, kWTiles<Q, NT>) <= 110 * 1024 ? 3 : 2;

__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(MatvecIdParams p, Groups g) {
  extern __shared__ int32_t sh[];  // counts, then fill positions, [n_expert] each
  int32_t* cnt = sh;
  int32_t* fill = sh + p.n_expert;
  const int64_t n_users = p.k * p.T;
  for (int64_t e = threadIdx.x; e < p.n_expert; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int64_t u = threadIdx.x; u < n_users; u += blockDim.x) {
    const int32_t e = p.ids[u];
    if (e >= 0 && e < p.n_expert) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t run = 0;
    for (int64_t e = 0; e < p.n_expert; ++e) {
      g.offsets[e] = fill[e] = run;
      g.counts[e] = cnt[e];
      run += cnt[e];
    }
  }
  __syncthreads();
  for (int64_t u = threadIdx.x; u < n_users; u += blockDim.x) {
    const int32_t e = p.ids[u];
    if (e >= 0 && e < p.n_expert) {
      g.users[atomicAdd(&fill[e], 1)] = int32_t(u);
    } else {
      for (int64_t n = 0; n < p.N; ++n) p.y[u * p.N + n] = 0.0f;  // as the matvec; no router gives such ids
    }
  }
}

// xh[r][c] = half(x[r][c]) for c < K, 0 up to kp (a multiple of 64): grid (rows of x_slots T inputs, 1024-column
// pieces), four columns a thread, from one 16-byte load where x's rows allow (vec4) and into one 8-byte store. One
// column a thread took 7 us a launch, 2.3% of a Qwen3-30B-A3B pp512 (session 32).
__global__ void moe_x_half_kernel(const float* x, __half* xh, int64_t K, int64_t kp, bool vec4) {
  const int64_t r = blockIdx.x, c = (int64_t(blockIdx.y) * blockDim.x + threadIdx.x) * 4;
  if (c >= kp) return;
  float v[4];
  if (vec4 && c + 3 < K) {
    const float4 q = *reinterpret_cast<const float4*>(x + r * K + c);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = c + i < K ? x[r * K + c + i] : 0.0f;
  }
  const __half2 lo = __halves2half2(__float2half_rn(v[0]), __float2half_rn(v[1]));
  const __half2 hi = __halves2half2(__float2half_rn(v[2]), __float2half_rn(v[3]));
  uint2 o;
  o.x = *reinterpret_cast<const uint32_t*>(&lo), o.y = *reinterpret_cast<const uint32_t*>(&hi);
  *reinterpret_cast<uint2*>(xh + r * kp + c) = o;
}

// Per step a warp spends its issue slots on the unpacking, the copies and the products; everything else is hoisted
// out of the step loop: the row each thread stages and unpacks is its own (dr), shared memory is addressed by
// 32-bit shared-space offsets computed once (a generic pointer's conversion reloads the window base every use), x's
// sources are 32-bit element offsets found once a tile of users, and step and slice counters are 32-bit.
template <quant::Type Q, int NT, bool kRecoded>
__global__ void __launch_bounds__(kThreads, 2) moe_tile_kernel(TileArgs a) {
  using W = WeightPath<Q>;
  constexpr int kBT = 2 * NT * 8;  // users of a tile
  constexpr int kPairs = kBT / 16;  // 16-user column pairs of a tile
  constexpr int kXCopies = kBT * (kStep / 8) / kThreads;  // 16-byte x pieces a thread copies per step
  static_assert(kBT * (kStep / 8) % kThreads == 0, "x pieces spread evenly");
  static_assert(kBN == 16 * (kThreads / 32) && kBN == kThreads / 2, "a warp multiplies 16 rows; two threads a row");
  __shared__ int32_t xrow[2 * kBT];  // load_tile_users
  extern __shared__ __align__(16) uint8_t smem[];
  constexpr int kWS = kWStages<Q, NT>;
  constexpr bool kTwo = kTwoTiles<Q, NT>;
  constexpr uint32_t kRawStage = kBN * W::kRawLd;  // bytes of a weight slice's ring slot: [kBN][kRawLd]
  constexpr uint32_t kXStage = kBT * kLd * 2;       // bytes of an x ring slot: [kBT][kLd] halves
  constexpr uint32_t kWTile = kBN * kLd * 2;        // bytes of a half tile of weights: [kBN][kLd] halves
  uint8_t* raw = smem;
  uint16_t* ws0 = reinterpret_cast<uint16_t*>(smem + kWS * kRawStage + kXStages * kXStage);
  const uint32_t s_raw = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t s_x = s_raw + kWS * kRawStage, s_w = s_x + kXStages * kXStage;
  const MatvecIdParams& p = a.p;
  const TilePlace at = first_tile<kBT>(a);
  if (!at.live) return;
  const int64_t e = at.e;
  const int32_t count = at.count;
  const int64_t n0 = int64_t(blockIdx.x) * kBN;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, tg = lane & 3;
  const int dr = tid >> 1, dc = tid & 1;  // the row this thread stages and unpacks, and its chunk of each step
  const bool row_live = n0 + dr < p.N;
  const uint8_t* w0 = static_cast<const uint8_t*>(p.w);
  const uint8_t* w_end = w0 + size_t(p.n_expert) * size_t(p.N) * a.row_bytes;
  const uint8_t* wrow = w0 + (size_t(e) * size_t(p.N) + size_t(n0 + dr)) * a.row_bytes;  // file layout: the row
  // Recoded MXFP4 (mxfp4_recode.cuh): the row's codes (16 bytes a block) and its scale bytes.
  const int nb = int(p.K / 32);
  const uint8_t* codes_row = nullptr;
  const uint8_t* scales_row = nullptr;
  if constexpr (kRecoded) {
    const Mxfp4Split split(w0 + size_t(e) * size_t(p.N) * a.row_bytes, p.N, nb);
    codes_row = split.codes + (n0 + dr) * nb * 16;
    scales_row = split.scales + (n0 + dr) * nb;
  }
  const int32_t* list = a.g.users + a.g.offsets[e];
  const int n_steps = int(a.kp / kStep);
  const int n_chunks = int((p.K + 31) / 32);
  const uint16_t* xh = reinterpret_cast<const uint16_t*>(a.xh);

  // Weight slice sl's raw bytes of this thread's row: the 16-byte pieces around it, pieces dc, dc + 2, ... (the
  // other thread of the row takes the rest), none past the slice or the tensor.
  auto issue_w = [&](int sl) {
    if (sl * W::kSubs >= n_steps || !row_live) return;
    const uint32_t rd = s_raw + uint32_t(sl % kWS) * kRawStage + uint32_t(dr) * W::kRawLd;
    if constexpr (kRecoded) {  // a slice's 4 blocks of codes, 64 aligned bytes, then the pieces around their 4 scale
                               // bytes (two at most): pieces 0-3 and 4-5 of kRawLd = 96
      static_assert(W::kSlice == 128 && W::kRawLd >= 96, "recoded MXFP4 slices: 4 blocks");
      const int b0 = 4 * sl, blocks = nb - b0 < 4 ? nb - b0 : 4;
#pragma unroll
      for (int q = dc; q < 6; q += 2) {
        if (q < 4) {
          if (q < blocks) cp_async16_s(rd + 16 * q, codes_row + 16 * (b0 + q));
          continue;
        }
        const uint8_t* sa = scales_row + b0;
        const uint8_t* src =
            reinterpret_cast<const uint8_t*>(reinterpret_cast<uintptr_t>(sa) & ~uintptr_t(15)) + 16 * (q - 4);
        if (src >= sa + blocks) continue;  // past this row's scales
        const int64_t left = w_end - src;
        cp_async16_zfill_s(rd + 16 * q, src, int(left >= 16 ? 16 : left));
      }
    } else if constexpr (W::kStaged) {
      stage_slice_pieces<W::kRawLd / 16>(rd, wrow + size_t(sl) * W::kRawBytes, W::kRawBytes, dc, w_end);
    }
  };
  auto commit = [] { asm volatile("cp.async.commit_group;" ::: "memory"); };

  each_tile<kBT>(a, at.u0, count, [&](const int32_t tile_u0) {
    const int64_t u0 = tile_u0;
    load_tile_users<kBT>(xrow, p, list, u0, count);
    // This thread's x pieces: user (tid / 8) + 32 i, columns 8 (tid % 8) of each step; where they come from (element
    // offsets into xh, 32-bit: launch_moe_gemm checks the size) and whether the user exists (else zeros).
    uint32_t xoff[kXCopies];
    uint32_t xlive = 0;
#pragma unroll
    for (int i = 0; i < kXCopies; ++i) {
      const int32_t r = xrow[(tid >> 3) + i * (kThreads / 8)];
      xoff[i] = r < 0 ? 0u : uint32_t(r) * uint32_t(a.kp) + uint32_t(tid & 7) * 8u;
      xlive |= uint32_t(r >= 0) << i;
    }
    const uint32_t xdst = s_x + uint32_t((tid >> 3) * kLd + (tid & 7) * 8) * 2;
    auto issue_x = [&](int s) {
      if (s >= n_steps) return;
      const uint32_t d = xdst + uint32_t(s % kXStages) * kXStage;
#pragma unroll
      for (int i = 0; i < kXCopies; ++i)
        cp_async16_zfill_s(d + uint32_t(i * (kThreads / 8) * kLd * 2), xh + xoff[i] + uint32_t(s) * kStep,
                           (xlive >> i & 1u) ? 16 : 0);
    };

    float acc[2 * kPairs][4] = {};
    // One commit group per step (x of step s, with the weight slice issued then): the waits count the same every
    // step. The prologue's first group also holds the first kWS - 1 weight slices.
    for (int sl = 0; sl < kWS - 1; ++sl) issue_w(sl);
    issue_x(0);
    commit();
    issue_x(1);
    commit();
    const int64_t users = count - u0 < kBT ? count - u0 : kBT;  // of this tile, the same for every warp
    const int pairs = int((users + 15) / 16);
    // Issued after the barrier of step s: the ring slots they fill were last read by step s - 1.
    auto issue_ahead = [&](int s) {
      if (s % W::kSubs == 0) issue_w(s / W::kSubs + kWS - 1);
      issue_x(s + 2);
      commit();
    };
    if constexpr (kTwo) {
      cp_async_wait<1>();
      __syncthreads();  // step 0's x and the first weight slices landed everywhere
    }
    for (int s = 0; s < n_steps; ++s) {
      const int wt = kTwo ? (s & 1) : 0;  // the half tile of weights this step fills and reads
      uint16_t* ws = ws0 + wt * (kBN * kLd);
      if constexpr (!kTwo) {
        cp_async_wait<1>();
        __syncthreads();  // step s's copies landed everywhere; step s - 1's products are done with ws and the rings
        issue_ahead(s);
      }
      // This thread's 32 halves of the step (h) and where their four 8-element pieces go in the row (unpack_half.cuh).
      uint4 h[4];
      const int c = 2 * s + dc;
      const uint8_t* srow = nullptr;  // the row's staged slice
      int cl = 0;                     // chunk c within it
      int sc = 0;                     // recoded MXFP4: where the slice's scale bytes start in it
      if constexpr (W::kStaged) {
        const int sl = s / W::kSubs;
        srow = raw + (sl % kWS) * kRawStage + dr * W::kRawLd;
        if constexpr (kRecoded) sc = 64 + int(reinterpret_cast<uintptr_t>(scales_row + 4 * sl) & 15);
        else srow += (reinterpret_cast<uintptr_t>(wrow) + uintptr_t(sl) * W::kRawBytes) & 15;
        cl = c - sl * (W::kSlice / 32);
      }
      const bool live = row_live && c < n_chunks;
      if constexpr (unpack_half::kFast<Q>) {
        uint32_t u[16];
        if (live) {
          const uint8_t* blk = srow + cl * W::L::kBlockBytes;  // the 32-element formats' block
          if constexpr (Q == quant::Type::Q4_K) unpack_half::q4_k(srow, s & 3, dc, u);
          else if constexpr (Q == quant::Type::Q6_K) unpack_half::q6_k(srow, cl, u);
          else if constexpr (Q == quant::Type::Q8_0) unpack_half::q8_0(blk, u);
          else if constexpr (Q == quant::Type::Q4_0) unpack_half::q4_0(blk, u);
          else if constexpr (kRecoded) unpack_half::mxfp4_recoded(srow + 16 * cl, srow[sc + cl], u);
          else unpack_half::mxfp4(blk, u);
        } else {
#pragma unroll
          for (int i = 0; i < 16; ++i) u[i] = 0;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) h[q] = make_uint4(u[4 * q], u[4 * q + 1], u[4 * q + 2], u[4 * q + 3]);
      } else {
        float v[32];
        if (live) {
          if constexpr (W::kStaged) {
            quant::dev::dequant_chunk<Q>(srow, cl, 32, v);
          } else {
            const int valid = int(p.K - int64_t(c) * 32 < 32 ? p.K - int64_t(c) * 32 : 32);
            quant::dev::dequant_chunk<Q>(wrow, c, valid, v);
          }
        } else {
#pragma unroll
          for (int i = 0; i < 32; ++i) v[i] = 0.0f;
        }
#pragma unroll
        for (int q = 0; q < 4; ++q)
          h[q] = make_uint4(mma::pack_half2(v[8 * q], v[8 * q + 1]), mma::pack_half2(v[8 * q + 2], v[8 * q + 3]),
                            mma::pack_half2(v[8 * q + 4], v[8 * q + 5]), mma::pack_half2(v[8 * q + 6], v[8 * q + 7]));
      }
      // Piece q's place: 32 dc + 8 q, or for Q4_K's two 16-element runs 16 dc + 8 q, 32 + 16 dc + 8 (q - 2). An
      // 8-lane phase of 16-byte stores covers rows r..r+3 (144 bytes = 36 words apart: banks 4 apart) and both dc:
      // distinct banks for 32 dc + 8 q, two ways for Q4_K's pieces.
      uint16_t* dst = ws + dr * kLd;
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int at = Q == quant::Type::Q4_K ? 32 * (q >> 1) + 16 * dc + 8 * (q & 1) : 32 * dc + 8 * q;
        *reinterpret_cast<uint4*>(dst + at) = h[q];
      }
      if constexpr (kTwo) {
        // Step s's x and step s + 1's weight slice landed everywhere (kTwoTiles), this tile of weights is written,
        // and every warp is done with step s - 1's products (the other tile, the ring slots issued next).
        cp_async_wait<1>();
        __syncthreads();
        issue_ahead(s);
      } else {
        __syncthreads();
      }
      // Warp w: rows 16 w .. 16 w + 15 against every user of the tile, 16 users (two n8 columns) at a time up to
      // the tile's count (the same for every warp, so the warps share the tensor work evenly). A fragments of the
      // step first (16 registers), then per pair the x fragments; each output's products stay in ascending K.
      const uint32_t wa = s_w + uint32_t(wt) * kWTile + uint32_t((16 * warp + (lane & 15)) * kLd + 8 * (lane >> 4)) * 2;
      const uint32_t xb = s_x + uint32_t(s % kXStages) * kXStage +
                          uint32_t(((lane & 7) + 8 * (lane >> 4)) * kLd + 8 * ((lane >> 3) & 1)) * 2;
      uint32_t af[kStep / 16][4];
#pragma unroll
      for (int kk = 0; kk < kStep / 16; ++kk) mma::ldmatrix_x4(wa + 32 * kk, af[kk]);
#pragma unroll
      for (int np = 0; np < kPairs; ++np) {
        if (np >= pairs) break;
#pragma unroll
        for (int kk = 0; kk < kStep / 16; ++kk) {
          uint32_t b[4];
          mma::ldmatrix_x4(xb + uint32_t(16 * np * kLd * 2 + 32 * kk), b);
          mma::m16n8k16(acc[2 * np], af[kk], b[0], b[1]);
          mma::m16n8k16(acc[2 * np + 1], af[kk], b[2], b[3]);
        }
      }
    }
    cp_async_wait<0>();
    __syncthreads();  // every warp's products are done with the rings and ws
    store_tile_outputs<2 * kPairs>(a, acc, xrow + kBT, e, n0 + 16 * warp + g, 2 * tg);
  });
}

template <quant::Type Q, int NT, bool kRecoded = false>
void launch_tiles(const TileArgs& a, cudaStream_t stream) {
  launch_tile_kernel<moe_tile_kernel<Q, NT, kRecoded>, tile_smem_bytes<Q, NT>(kWStages<Q, NT>, kWTiles<Q, NT>),
                     2 * NT * 8>(a, stream);
}

}  // namespace

void launch_moe_gemm(const MatvecIdParams& p, void* scratch, size_t scratch_bytes, cudaStream_t stream,
                     MoeGemmOptions options) {
  LLM_REQUIRE(p.w && p.x && p.ids && p.y && scratch, "moe_gemm: null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.n_expert > 0 && p.k > 0 && p.T > 0, "moe_gemm: empty shape");
  LLM_REQUIRE(p.x_slots == 1 || p.x_slots == p.k, "moe_gemm: x_slots must be 1 or k");
  LLM_REQUIRE(p.n_expert <= 4096 && p.n_expert <= 65535, "moe_gemm: at most 4096 experts");
  LLM_REQUIRE(p.k * p.T <= 0x7fffffff, "moe_gemm: too many users");
  LLM_REQUIRE(p.x_slots * p.T * moe_gemm_padded_k(p.K) <= 0xffffffffLL, "moe_gemm: x too large for 32-bit offsets");
  LLM_REQUIRE(scratch_bytes >= moe_gemm_scratch_bytes(p.n_expert, p.k, p.T, p.K, p.x_slots),
              "moe_gemm: scratch too small");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(scratch) & 15) == 0, "moe_gemm: scratch must be 16-byte aligned");
  // The staged copies take the 16-byte aligned piece around a row's slice, which must not start before the tensor.
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.w) & 15) == 0, "moe_gemm: weights must be 16-byte aligned");
  LLM_REQUIRE(!p.recoded || (p.type == quant::Type::MXFP4 && mxfp4_split_fits(p.K, p.N)),
              "moe_gemm: only MXFP4 experts of whole 16-byte code groups are recoded");
  const size_t rb = quant::row_bytes(p.type, p.K);
  const Groups g = groups_in(scratch, p.n_expert);
  if (!options.reuse_groups) {
    moe_group_kernel<<<1, kGroupThreads, size_t(2 * p.n_expert) * 4, stream>>>(p, g);
    CUDA_CHECK_LAUNCH(stream);
  }
  const MoeGluOut& glu = options.glu;
  LLM_REQUIRE(!glu.out || ((glu.other || glu.up_w) && p.N % 64 == 0 && p.T * p.k * p.N <= 0x7fffffffLL),
              "moe_gemm: an activation output needs the other product and N a multiple of 64");
  LLM_REQUIRE(!glu.up_w || (glu.out && !options.half_tiles && moe_gemm_pairs(p.type, p.n_expert, p.k, p.T) &&
                            (reinterpret_cast<uintptr_t>(glu.up_w) & 15) == 0),
              "moe_gemm: this pair does not run in one launch (moe_gemm_pairs)");
  LLM_REQUIRE(!options.x_half || (p.K % 64 == 0 && !options.reuse_x), "moe_gemm: a half x needs K a multiple of 64");
  const int64_t kp = moe_gemm_padded_k(p.K);
  auto* xh = reinterpret_cast<__half*>(static_cast<uint8_t*>(scratch) + moe_gemm_x_offset(p.n_expert, p.k, p.T));
  if (options.x_half) xh = const_cast<__half*>(options.x_half);  // read only
  if (!options.reuse_x && !options.x_half) {
    const bool vec4 = p.K % 4 == 0 && reinterpret_cast<uintptr_t>(p.x) % 16 == 0;
    moe_x_half_kernel<<<dim3(unsigned(p.x_slots * p.T), unsigned((kp + 1023) / 1024)), 256, 0, stream>>>(
        p.x, xh, p.K, kp, vec4);
    CUDA_CHECK_LAUNCH(stream);
  }
  // Tiles of 64 users while experts average up to 40 (Qwen3-30B-A3B at T = 512: 32), else 128 (gpt-oss-20b: 64):
  // one pass over an expert's rows serves nearly all of its users.
  const bool wide = p.k * p.T > 40 * p.n_expert;
  const TileArgs args{p, g, xh, kp, rb, glu, options.compact_tiles};
  if (!options.half_tiles && launch_fragment_tiles(args, wide, stream)) {
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  dispatch_qtype(p.type, "moe_gemm", [&](auto tag) {
    constexpr quant::Type Q = decltype(tag)::value;
    if constexpr (Q == quant::Type::MXFP4) {
      if (p.recoded) {
        if (wide) launch_tiles<Q, 8, true>(args, stream);
        else launch_tiles<Q, 4, true>(args, stream);
        return;
      }
    }
    if (wide) launch_tiles<Q, 8>(args, stream);
    else launch_tiles<Q, 4>(args, stream);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
