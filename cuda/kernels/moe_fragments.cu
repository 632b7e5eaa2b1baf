// Expert-grouped prefill tiles whose weights go straight from the staged codes into mma A fragments (moe_tiles.cuh;
// moe_gemm.cu's half-tile kernel unpacks a half tile into shared memory and reads it back with ldmatrix, which with
// its x copies kept the shared-memory pipe the bound: docs/kernel-notes.md, session 31).
// The permutation: within each 16-element chunk of K the products are taken in the order c(2t + j) = 4t + j,
// c(2t + 8 + j) = 4t + 2 + j (t = lane % 4, j = 0, 1), the same for weights and x, so the same dot. It puts the four
// elements a lane's A fragment holds in four consecutive codes (one 32-bit word of Q4_K's group codes serves two
// chunks: its low nibbles and its high ones; one word of a recoded MXFP4 block serves the block's two chunks; a Q6_K
// chunk's word of low-bit codes and word of high-bit pairs give its four codes), and
// the lane's B fragment is four consecutive halves of x, one 8-byte load (no ldmatrix). Each output is still one
// user's dot, 16 products an mma in ascending chunks, whichever tile holds it (batch invariant).
// A block (256 threads) takes 128 rows of an expert against a tile of its users: warp w rows 16 w .. 16 w + 15
// against every user; thread (dr, dc) = (tid / 2, tid % 2) stages row dr's slices. x copies are issued for live
// users only (the products of the others are never stored).
#include <cuda_fp16.h>

#include <type_traits>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/moe_tiles.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "cuda/kernels/unpack_half.cuh"

namespace cuda::moe_tiles {
namespace {

constexpr int kXLd = 80;     // halves a staged x row: 160 bytes (40 words), so a fragment load's 8 rows x 4 lanes
                             // of 8 bytes fall on distinct banks in two wavefronts
constexpr int kWStages = 3;  // weight slices in flight

// Q4_K: a row's staged 256-element slice, 16-byte aligned in memory (144 = 9 x 16); 36 words a row: a code load's
// 8 rows x 4 lanes fall on distinct banks. Each row's eight (d sc, -dmin m) pairs are found once a slice into a
// table, rows of 10 pairs (80 bytes, 20 words: the 16-byte loads of 8 rows on distinct banks).
constexpr int kQ4kRawLd = 144;
constexpr int kQ4kScLd = 10;
// Recoded MXFP4: a row's staged 128-element slice of codes, 4 blocks x 16 bytes + 16 (20 words: distinct banks as
// above); the tile's 128 rows of scale bytes, one contiguous 16-byte aligned run (128 nb bytes, nb = K / 32), staged
// once a block, up to K = 3072.
constexpr int kMxRawLd = 80;
constexpr int kMxScaleBytes = kBN * 96;

template <int kBT>
constexpr size_t x_ring_bytes() { return size_t(kXStages) * kBT * kXLd * 2; }
template <int kBT>
constexpr size_t q4k_smem_bytes() {
  return size_t(kWStages) * kBN * kQ4kRawLd + x_ring_bytes<kBT>() + size_t(2) * kBN * kQ4kScLd * 8;
}
template <int kBT>
constexpr size_t mxfp4_smem_bytes() { return size_t(kWStages) * kBN * kMxRawLd + x_ring_bytes<kBT>() + kMxScaleBytes; }

// Q6_K: a row's staged 256-element slice, one 210-byte block (2-byte aligned in memory) with the 16-byte pieces
// around it: 240 bytes. Each row's sixteen (d sc) words, splatted, found once a slice into a table, rows of 20 words
// (a step's 16-byte loads of 8 rows on distinct banks). Two slices in flight: three would not leave two blocks an SM.
constexpr int kQ6kRawLd = 240;
constexpr int kQ6kScLd = 20;
constexpr int kQ6kWStages = 2;
template <int kBT>
constexpr size_t q6k_smem_bytes() {
  return size_t(kQ6kWStages) * kBN * kQ6kRawLd + x_ring_bytes<kBT>() + size_t(2) * kBN * kQ6kScLd * 4;
}

// This thread's x copies for a tile of users whose half-x rows are in xrow (load_tile_users; -1 past the count):
// user tid / 8 + 32 i, columns 8 (tid % 8) of each step, as 32-bit element offsets into xh (launch_moe_gemm checks
// the size).
template <int kBT>
struct XStaging {
  static constexpr int kCopies = kBT * (kStep / 8) / kThreads;
  static_assert(kBT * (kStep / 8) % kThreads == 0, "x pieces spread evenly");
  uint32_t off[kCopies];
  uint32_t live = 0;
  uint32_t dst;  // shared-space address of this thread's first piece in ring slot 0

  __device__ XStaging(const int32_t* xrow, int64_t kp, uint32_t s_x) {
    const int tid = int(threadIdx.x);
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const int32_t r = xrow[(tid >> 3) + i * (kThreads / 8)];
      off[i] = r < 0 ? 0u : uint32_t(r) * uint32_t(kp) + uint32_t(tid & 7) * 8u;
      live |= uint32_t(r >= 0) << i;
    }
    dst = s_x + uint32_t((tid >> 3) * kXLd + (tid & 7) * 8) * 2;
  }
  __device__ void issue(const uint16_t* xh, int s) const {
    const uint32_t d = dst + uint32_t(s % kXStages) * uint32_t(kBT * kXLd * 2);
#pragma unroll
    for (int i = 0; i < kCopies; ++i)
      if (live >> i & 1u) cp_async16_s(d + uint32_t(i * (kThreads / 8) * kXLd * 2), xh + off[i] + uint32_t(s) * kStep);
  }
};

// The copies of a tile's steps, one commit group a step: weight slices kStages - 1 ahead (issue_w(slice)), x two
// steps ahead. The waits then count the same every step.
template <int kBT, int kSubs, int kStages, class IssueW>
struct StepCopies {
  const XStaging<kBT>& x;
  const uint16_t* xh;
  int n_steps;
  IssueW issue_w;
  static __device__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
  // Before step 0: the first kStages - 1 slices with x of step 0, then x of step 1.
  __device__ void prologue() const {
    for (int sl = 0; sl < kStages - 1; ++sl) issue_w(sl);
    x.issue(xh, 0);
    commit();
    if (n_steps > 1) x.issue(xh, 1);
    commit();
  }
  // After step s's barrier: the ring slots they fill were last read by step s - 1.
  __device__ void ahead(int s) const {
    if (s % kSubs == 0) issue_w(s / kSubs + kStages - 1);
    if (s + 2 < n_steps) x.issue(xh, s + 2);
    commit();
  }
};

// The step's products of the first N 8-user columns (x fragments from xt: row g, halves 4 t of the step's first
// chunk). One straight block per column count: the mmas of different columns interleave instead of waiting on one
// accumulator's chain, as they did behind a per-column exit.
template <int N, int kN8>
__device__ __forceinline__ void products_of(float (&acc)[kN8][4], const uint32_t (&af)[4][4], const uint16_t* xt) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int n8 = 0; n8 < N; ++n8) {
      const uint2 b = *reinterpret_cast<const uint2*>(xt + 8 * n8 * kXLd + 16 * kk);
      mma::m16n8k16(acc[n8], af[kk], b.x, b.y);
    }
}
// A partial tile's (the last of an expert's): N = 1 .. kN8 - 1 columns.
template <int kN8, int N = 1>
__device__ __forceinline__ void partial_products(int n8s, float (&acc)[kN8][4], const uint32_t (&af)[4][4],
                                                 const uint16_t* xt) {
  if constexpr (N == kN8 - 1) {
    products_of<N>(acc, af, xt);
  } else {
    if (n8s == N) products_of<N>(acc, af, xt);
    else partial_products<kN8, N + 1>(n8s, acc, af, xt);
  }
}
// Full tiles first (every tile of an expert but its last): the count tests ahead of the full block were ~20 of a
// Q6_K step's instructions (Nsight, session 77).
template <int kN8>
__device__ __forceinline__ void fragment_products(int n8s, float (&acc)[kN8][4], const uint32_t (&af)[4][4],
                                                  const uint16_t* xt) {
  if (n8s == kN8) products_of<kN8>(acc, af, xt);
  else partial_products<kN8>(n8s, acc, af, xt);
}

// Row 16 w + g (+ 8) of the tile against user 8 n8 + 2 t (+ 1): the outputs (store_tile_outputs).
template <int kN8>
__device__ void store_outputs(const float (&acc)[kN8][4], const TileArgs& a, const int32_t* users, int64_t e,
                              int64_t n0) {
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  store_tile_outputs<kN8>(a, acc, users, e, n0 + 16 * warp + (lane >> 2), 2 * (lane & 3));
}

static_assert(kBN == 16 * (kThreads / 32) && kBN == kThreads / 2, "a warp's 16 rows; two threads a row");

// A fragment block's place: its expert e, the first user u0 of its first tile and the expert's count (first_tile;
// live false: no tile), the block's first row n0 (blockIdx.x), the thread's lane, warp, mma group g and
// thread-in-group tg, and the row dr it stages (half dc of it; row_live: below N).
struct BlockSpot {
  int32_t e;
  int32_t u0;
  int32_t count;
  bool live;
  int64_t n0;
  int tid, lane, warp, g, tg, dr, dc;
  bool row_live;
};

// kPair: the block's rows are kBN / 2 gate rows from n0, then the same up rows (store_pair_outputs).
template <int kBT, bool kPair = false>
__device__ __forceinline__ BlockSpot block_spot(const TileArgs& a) {
  const TilePlace at = first_tile<kBT>(a);
  const int64_t n0 = int64_t(blockIdx.x) * (kPair ? kBN / 2 : kBN);
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const int dr = tid >> 1, dc = tid & 1;
  return {at.e, at.u0, at.count, at.live, n0, tid, lane, warp, g, tg, dr, dc,
          n0 + (kPair ? dr % (kBN / 2) : dr) < a.p.N};
}

// A pair's outputs (MoeGluOut::up_w): every warp puts its products, plus its matrix's bias, into shared memory at ex
// (the gate rows' [kBT][kExLd] floats, then the up rows': a store's 8 rows x 4 users on distinct banks); then every
// thread forms act(gate, up) for one row against a quarter of the users, as the element-wise kernels do, and writes
// it as half, the down product's x (a warp's stores: 32 consecutive rows of one user). The gate rows' warps did the
// activations alone before, the up rows' warps waiting at the tile's last barrier (~7% of the launch's warp samples,
// Nsight, session 77); the same float operations on the same values, so the same bits.
constexpr int kExLd = kBN / 2 + 4;
template <int kN8>
__device__ void store_pair_outputs(const float (&acc)[kN8][4], const TileArgs& a, const int32_t* users, int64_t e,
                                   int64_t n0, float* ex) {
  constexpr int kBT = 8 * kN8, kRows = kBN / 2;
  const MatvecIdParams& p = a.p;
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const int r = 16 * (warp % 4) + g;  // of the block's kRows rows of each product
  const bool up_rows = warp >= 4;
  float* mine = ex + (up_rows ? kBT * kExLd : 0);
  const float* bias_of = up_rows ? a.glu.up_bias : p.bias;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int64_t n = n0 + r + 8 * h;
    const float bias = bias_of && n < p.N ? bias_of[e * p.N + n] : 0.0f;
#pragma unroll
    for (int i = 0; i < kN8; ++i)
#pragma unroll
      for (int j = 0; j < 2; ++j) mine[(8 * i + 2 * tg + j) * kExLd + r + 8 * h] = acc[i][2 * h + j] + bias;
  }
  __syncthreads();
  const int rr = tid % kRows;
  const int64_t n = n0 + rr;
  if (n >= p.N) return;
  static_assert(kThreads % kRows == 0, "every thread one row");
#pragma unroll 4
  for (int c = tid / kRows; c < kBT; c += kThreads / kRows) {
    const int32_t u = users[c];
    if (u < 0) continue;
    const float gate = ex[c * kExLd + rr], up = ex[(kBT + c) * kExLd + rr];
    a.glu.out[int64_t(u) * p.N + n] = __float2half_rn(activate(a.glu.act, gate, up, a.glu.alpha, a.glu.limit));
  }
}

// The fragment kernels' tile of users from u0: the copies (StepCopies), then per K step the barrier, the copies ahead,
// the next slice's scale table a step ahead where the format keeps one (Q4_K, Q6_K; its bytes landed: issued at
// least a slice before; NoTable for recoded MXFP4), and step(s, n8s, acc): the step's fragments and products; then
// the outputs (kPair: store_pair_outputs, through ex, the weight ring: free by then).
struct NoTable {};
template <int kBT, int kSubs, int kStages, bool kPair = false, class IssueW, class FindScales, class Step>
__device__ __forceinline__ void slice_tile(const TileArgs& a, const BlockSpot& b, int32_t u0, int32_t* xrow,
                                           uint32_t s_x, const int32_t* list, int n_steps, const IssueW& issue_w,
                                           const FindScales& find_scales, const Step& step, float* ex = nullptr) {
  constexpr bool kTable = !::std::is_same_v<FindScales, NoTable>;
  constexpr int kN8 = kBT / 8;
  const uint16_t* xh = reinterpret_cast<const uint16_t*>(a.xh);
  load_tile_users<kBT>(xrow, a.p, list, u0, b.count);
  const XStaging<kBT> xst(xrow, a.kp, s_x);
  const StepCopies<kBT, kSubs, kStages, IssueW> copies{xst, xh, n_steps, issue_w};
  float acc[kN8][4] = {};
  copies.prologue();
  const int64_t users = b.count - u0 < kBT ? b.count - u0 : kBT;
  const int n8s = int((users + 7) / 8);  // live 8-user columns, the same for every warp
  if constexpr (kTable) {
    cp_async_wait<1>();
    __syncthreads();  // slice 0 landed
    find_scales(0);
  }
  for (int s = 0; s < n_steps; ++s) {
    cp_async_wait<1>();
    __syncthreads();  // step s's copies (and slice s / kSubs + 1 at a slice's last step) landed; step s - 1 is done
    copies.ahead(s);
    if constexpr (kTable) {
      const int sl = s / kSubs;
      if (s % kSubs == kSubs - 1 && (sl + 1) * kSubs < n_steps) find_scales(sl + 1);
    }
    step(s, n8s, acc);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp's products are done with the rings (ex reuses the weight ring)
  if constexpr (kPair) store_pair_outputs<kN8>(acc, a, xrow + kBT, b.e, b.n0, ex);
  else store_outputs<kN8>(acc, a, xrow + kBT, b.e, b.n0);
}

// Lane (g, t): the A fragment of a chunk from code words w_g (row g) and w_g8 (row g + 8), low nibbles (the group's
// first sub-block) or high, with the rows' (scale, offset) words.
__device__ __forceinline__ void q4k_fragment(uint32_t w_g, uint32_t w_g8, uint2 sn_g, uint2 sn_g8, bool high,
                                             uint32_t (&a)[4]) {
  if (high) {
    unpack_half::q4_k_high4(w_g, sn_g, a[0], a[2]);
    unpack_half::q4_k_high4(w_g8, sn_g8, a[1], a[3]);
  } else {
    unpack_half::q4_k_low4(w_g, sn_g, a[0], a[2]);
    unpack_half::q4_k_low4(w_g8, sn_g8, a[1], a[3]);
  }
}

// Q4_K, 256-element slices (4 steps). Step s reads group s % 4 of the slice's block: code bytes 32 g + 4 t (chunks 0
// and 2: low and high nibbles) and 32 g + 16 + 4 t (chunks 1 and 3) of rows r and r + 8.
// kPair: a gate/up pair (MoeGluOut::up_w), kBN / 2 rows of each.
template <int kBT, bool kPair = false>
__global__ void __launch_bounds__(kThreads, 2) moe_q4k_fragment_kernel(TileArgs a) {
  constexpr int kN8 = kBT / 8;
  constexpr int kSubs = 4;
  constexpr uint32_t kRawStage = kBN * kQ4kRawLd;
  __shared__ int32_t xrow[2 * kBT];  // load_tile_users
  extern __shared__ __align__(16) uint8_t smem[];
  uint8_t* raw = smem;
  const uint16_t* xs = reinterpret_cast<const uint16_t*>(smem + kWStages * kRawStage);
  uint2* sc_table = reinterpret_cast<uint2*>(smem + kWStages * kRawStage + x_ring_bytes<kBT>());  // [2][kBN][10]
  const uint32_t s_raw = uint32_t(__cvta_generic_to_shared(smem));
  const MatvecIdParams& p = a.p;
  const BlockSpot spot = block_spot<kBT, kPair>(a);
  if (!spot.live) return;
  const auto [e, u0, count, live, n0, tid, lane, warp, g, tg, dr, dc, row_live] = spot;
  const void* w = kPair && dr >= kBN / 2 ? a.glu.up_w : p.w;
  const int64_t wr = n0 + (kPair ? dr % (kBN / 2) : dr);
  const uint8_t* wrow = static_cast<const uint8_t*>(w) + (size_t(e) * size_t(p.N) + size_t(wr)) * a.row_bytes;
  const int32_t* list = a.g.users + a.g.offsets[e];
  const int n_steps = int(p.K / kStep);  // K is a multiple of 256

  // Slice sl of this thread's row: pieces dc, dc + 2, ... of its nine (aligned, inside the tensor).
  auto issue_w = [&](int sl) {
    if (sl * kSubs >= n_steps || !row_live) return;
    const uint32_t rd = s_raw + uint32_t(sl % kWStages) * kRawStage + uint32_t(dr) * kQ4kRawLd;
    const uint8_t* src = wrow + size_t(sl) * 144;
#pragma unroll
    for (int q = dc; q < 9; q += 2) cp_async16_s(rd + 16 * q, src + 16 * q);
  };
  // Slice sl's (d sc, -dmin m) words for sub-blocks 4 dc .. 4 dc + 3 of this thread's row, into table sl % 2 (rows
  // past N read stale bytes: their outputs are never stored).
  auto find_scales = [&](int sl) {
    const uint8_t* blk = raw + (sl % kWStages) * kRawStage + dr * kQ4kRawLd;
    uint2* t = sc_table + (sl & 1) * (kBN * kQ4kScLd) + dr * kQ4kScLd + 4 * dc;
#pragma unroll
    for (int j = 0; j < 4; ++j) t[j] = unpack_half::q4_k_scales(blk, 4 * dc + j);
  };

  // Step s: group s % 4 of its slice's block, from the staged codes and the slice's table.
  auto step = [&](int s, int n8s, float (&acc)[kN8][4]) {
    const int sl = s / kSubs, grp = s % kSubs;
    const int r = 16 * warp + g;
    const uint8_t* q = raw + (sl % kWStages) * kRawStage + r * kQ4kRawLd + 16 + 32 * grp + 4 * tg;
    const uint32_t w0 = *reinterpret_cast<const uint32_t*>(q);       // row r, chunks 0 (low) and 2 (high)
    const uint32_t w1 = *reinterpret_cast<const uint32_t*>(q + 16);  // chunks 1 and 3
    const uint32_t v0 = *reinterpret_cast<const uint32_t*>(q + 8 * kQ4kRawLd);  // row r + 8
    const uint32_t v1 = *reinterpret_cast<const uint32_t*>(q + 8 * kQ4kRawLd + 16);
    const uint2* st = sc_table + (sl & 1) * (kBN * kQ4kScLd) + r * kQ4kScLd + 2 * grp;
    const uint4 sr = *reinterpret_cast<const uint4*>(st);
    const uint4 sr8 = *reinterpret_cast<const uint4*>(st + 8 * kQ4kScLd);
    const uint2 lo_g = make_uint2(sr.x, sr.y), hi_g = make_uint2(sr.z, sr.w);
    const uint2 lo_g8 = make_uint2(sr8.x, sr8.y), hi_g8 = make_uint2(sr8.z, sr8.w);
    uint32_t af[4][4];
    q4k_fragment(w0, v0, lo_g, lo_g8, false, af[0]);
    q4k_fragment(w1, v1, lo_g, lo_g8, false, af[1]);
    q4k_fragment(w0, v0, hi_g, hi_g8, true, af[2]);
    q4k_fragment(w1, v1, hi_g, hi_g8, true, af[3]);
    fragment_products<kN8>(n8s, acc, af, xs + (s % kXStages) * (kBT * kXLd) + g * kXLd + 4 * tg);
  };
  each_tile<kBT>(a, u0, count, [&](int32_t u) {
    slice_tile<kBT, kSubs, kWStages, kPair>(a, spot, u, xrow, s_raw + kWStages * kRawStage, list, n_steps, issue_w,
                                            find_scales, step, reinterpret_cast<float*>(raw));
  });
  static_assert(2 * kBT * kExLd * 4 <= kWStages * kRawStage, "a pair's exchange fits the weight ring");
}

// Q6_K, 256-element slices (one block, 4 steps). Step s' = s % 4 covers quarters 2 (s' % 2) and 2 (s' % 2) + 1 of
// half n = s' / 2 of the block: chunk kk is elements 128 n + 32 q + 16 (kk % 2) .. + 15, q = 2 (s' % 2) + kk / 2,
// whose codes lane t takes from ql bytes 64 n + 32 (kk / 2) + 16 (kk % 2) + 4 t (low nibbles in even steps, high
// in odd ones) and the bit pairs q of qh bytes 128 + 32 n + 16 (kk % 2) + 4 t, with scale 8 n + 2 q + kk % 2 =
// 4 s' + kk (quant/dequant.cuh's Q6_K layout). A staged block is only 2-byte aligned (its address mod 16 as in
// memory), so each word is two aligned loads and a funnel shift (unpack_half::load_words).
__device__ __forceinline__ uint32_t q6k_codes(uint32_t ql, uint32_t qh, int ls, int hs) {
  return ((ql >> ls) & 0x0F0F0F0Fu) | (((qh >> hs) << 4) & 0x30303030u);
}
template <int kBT>
__global__ void __launch_bounds__(kThreads, 2) moe_q6k_fragment_kernel(TileArgs a) {
  constexpr int kN8 = kBT / 8;
  constexpr int kSubs = 4;
  constexpr int kBlockBytes = 210;
  constexpr uint32_t kRawStage = kBN * kQ6kRawLd;
  __shared__ int32_t xrow[2 * kBT];  // load_tile_users
  extern __shared__ __align__(16) uint8_t smem[];
  const uint8_t* raw = smem;
  const uint16_t* xs = reinterpret_cast<const uint16_t*>(smem + kQ6kWStages * kRawStage);
  uint32_t* sc_table = reinterpret_cast<uint32_t*>(smem + kQ6kWStages * kRawStage + x_ring_bytes<kBT>());
  const uint32_t s_raw = uint32_t(__cvta_generic_to_shared(smem));
  const MatvecIdParams& p = a.p;
  const BlockSpot spot = block_spot<kBT>(a);
  if (!spot.live) return;
  const auto [e, u0, count, live, n0, tid, lane, warp, g, tg, dr, dc, row_live] = spot;
  const uint8_t* w0 = static_cast<const uint8_t*>(p.w);
  const uint8_t* w_end = w0 + size_t(p.n_expert) * size_t(p.N) * a.row_bytes;
  const size_t row0 = size_t(e) * size_t(p.N) + size_t(n0);
  const uint8_t* wrow = w0 + (row0 + size_t(dr)) * a.row_bytes;
  // Where slice 0 of rows r, r + 8 (the lane's) and dr (the thread's) starts in its staged window; slice sl 2 sl
  // further (210 = 13 x 16 + 2), mod 16.
  const int r = 16 * warp + g;
  const int mis_g = int(reinterpret_cast<uintptr_t>(w0 + (row0 + size_t(r)) * a.row_bytes) & 15);
  const int mis_g8 = int(reinterpret_cast<uintptr_t>(w0 + (row0 + size_t(r + 8)) * a.row_bytes) & 15);
  const int mis_dr = int(reinterpret_cast<uintptr_t>(wrow) & 15);
  const int32_t* list = a.g.users + a.g.offsets[e];
  const int n_steps = int(p.K / kStep);  // K is a multiple of 256

  // Slice sl of this thread's row: the 16-byte pieces around it (stage_slice_pieces).
  auto issue_w = [&](int sl) {
    if (sl * kSubs >= n_steps || !row_live) return;
    const uint32_t rd = s_raw + uint32_t(sl % kQ6kWStages) * kRawStage + uint32_t(dr) * kQ6kRawLd;
    stage_slice_pieces<kQ6kRawLd / 16>(rd, wrow + size_t(sl) * kBlockBytes, kBlockBytes, dc, w_end);
  };
  // Slice sl's (d sc) words 8 dc .. 8 dc + 7 of this thread's row, into table sl % 2 (rows past N read stale bytes:
  // their outputs are never stored).
  auto find_scales = [&](int sl) {
    const uint8_t* blk = raw + (sl % kQ6kWStages) * kRawStage + dr * kQ6kRawLd + ((mis_dr + 2 * sl) & 15);
    uint32_t v[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const uint2 w = unpack_half::q6_scales(blk + 192 + 8 * dc + 2 * j, blk + 208);
      v[2 * j] = w.x, v[2 * j + 1] = w.y;
    }
    uint4* t = reinterpret_cast<uint4*>(sc_table + (sl & 1) * (kBN * kQ6kScLd) + dr * kQ6kScLd + 8 * dc);
    t[0] = make_uint4(v[0], v[1], v[2], v[3]), t[1] = make_uint4(v[4], v[5], v[6], v[7]);
  };

  // Step s: from the staged block and the slice's table.
  auto step = [&](int s, int n8s, float (&acc)[kN8][4]) {
    const int sl = s / kSubs, sp = s % kSubs, n = sp >> 1, odd = sp & 1;
    const uint8_t* slot = raw + (sl % kQ6kWStages) * kRawStage;
    const uint8_t* bg = slot + r * kQ6kRawLd + ((mis_g + 2 * sl) & 15);
    const uint8_t* bg8 = slot + (r + 8) * kQ6kRawLd + ((mis_g8 + 2 * sl) & 15);
    const uint32_t* st = sc_table + (sl & 1) * (kBN * kQ6kScLd) + r * kQ6kScLd + 4 * sp;
    const uint4 sc = *reinterpret_cast<const uint4*>(st);
    const uint4 sc8 = *reinterpret_cast<const uint4*>(st + 8 * kQ6kScLd);
    const uint32_t s_g[4] = {sc.x, sc.y, sc.z, sc.w}, s_g8[4] = {sc8.x, sc8.y, sc8.z, sc8.w};
    const auto word = [](const uint8_t* p) {
      uint32_t w[1];
      unpack_half::load_words<1>(p, w);
      return w[0];
    };
    uint32_t qh[2][2];  // [row g, g + 8][kk % 2]
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      qh[0][h] = word(bg + 128 + 32 * n + 16 * h + 4 * tg);
      qh[1][h] = word(bg8 + 128 + 32 * n + 16 * h + 4 * tg);
    }
    uint32_t af[4][4];
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      const int o = 64 * n + 32 * (kk >> 1) + 16 * (kk & 1) + 4 * tg;
      const int ls = 4 * odd, hs = 2 * (2 * odd + (kk >> 1));
      unpack_half::q6_codes4(q6k_codes(word(bg + o), qh[0][kk & 1], ls, hs), s_g[kk], af[kk][0], af[kk][2]);
      unpack_half::q6_codes4(q6k_codes(word(bg8 + o), qh[1][kk & 1], ls, hs), s_g8[kk], af[kk][1], af[kk][3]);
    }
    fragment_products<kN8>(n8s, acc, af, xs + (s % kXStages) * (kBT * kXLd) + g * kXLd + 4 * tg);
  };
  each_tile<kBT>(a, u0, count, [&](int32_t u) {
    slice_tile<kBT, kSubs, kQ6kWStages>(a, spot, u, xrow, s_raw + kQ6kWStages * kRawStage, list, n_steps, issue_w,
                                        find_scales, step);
  });
}

// Recoded MXFP4 (mxfp4_recode.cuh), 128-element slices (4 blocks, 2 steps). Step s reads blocks 2 s and 2 s + 1:
// word t of each (its nibbles 0-3 chunk 2 b, 4-7 chunk 2 b + 1) of rows r and r + 8, and their scale bytes.
template <int kBT>
__global__ void __launch_bounds__(kThreads, 2) moe_mxfp4_fragment_kernel(TileArgs a) {
  constexpr int kN8 = kBT / 8;
  constexpr int kSubs = 2;
  constexpr uint32_t kRawStage = kBN * kMxRawLd;
  __shared__ int32_t xrow[2 * kBT];  // load_tile_users
  extern __shared__ __align__(16) uint8_t smem[];
  const uint8_t* raw = smem;
  const uint16_t* xs = reinterpret_cast<const uint16_t*>(smem + kWStages * kRawStage);
  const uint8_t* scales = smem + kWStages * kRawStage + x_ring_bytes<kBT>();  // [kBN][nb]
  const uint32_t s_raw = uint32_t(__cvta_generic_to_shared(smem));
  const uint32_t s_scales = s_raw + kWStages * kRawStage + uint32_t(x_ring_bytes<kBT>());
  const MatvecIdParams& p = a.p;
  const BlockSpot spot = block_spot<kBT>(a);
  if (!spot.live) return;
  const auto [e, u0, count, live, n0, tid, lane, warp, g, tg, dr, dc, row_live] = spot;
  const int nb = int(p.K / 32);
  const uint8_t* w_end = static_cast<const uint8_t*>(p.w) + size_t(p.n_expert) * size_t(p.N) * a.row_bytes;
  const Mxfp4Split split(static_cast<const uint8_t*>(p.w) + size_t(e) * size_t(p.N) * a.row_bytes, p.N, nb);
  const uint8_t* codes_row = split.codes + (n0 + dr) * nb * 16;
  const int32_t* list = a.g.users + a.g.offsets[e];
  const int n_steps = int(a.kp / kStep);

  // Slice sl of this thread's row: code pieces (blocks) dc and dc + 2 of its four, none past the row's blocks.
  auto issue_w = [&](int sl) {
    if (sl * kSubs >= n_steps || !row_live) return;
    const uint32_t rd = s_raw + uint32_t(sl % kWStages) * kRawStage + uint32_t(dr) * kMxRawLd;
#pragma unroll
    for (int q = dc; q < 4; q += 2)
      if (4 * sl + q < nb) cp_async16_s(rd + 16 * q, codes_row + 16 * (4 * sl + q));
  };
  // The tile's rows' scale bytes (with the first tile's first copies; the pieces past the expert's last row read the
  // next bytes of the tensor, never past it).
  {
    const uint8_t* src0 = split.scales + n0 * nb;
    const int64_t rows = p.N - n0 < kBN ? p.N - n0 : kBN;
    const int pieces = int((rows * nb + 15) / 16);
    for (int i = tid; i < pieces; i += kThreads) {
      const uint8_t* src = src0 + 16 * i;
      const int64_t left = w_end - src;
      cp_async16_zfill_s(s_scales + 16 * i, src, int(left >= 16 ? 16 : left));
    }
  }

  const int r = 16 * warp + g;
  // Step s: blocks 2 s and 2 s + 1 of rows r and r + 8, with their scale bytes.
  auto step = [&](int s, int n8s, float (&acc)[kN8][4]) {
    const uint8_t* q = raw + ((s / kSubs) % kWStages) * kRawStage + r * kMxRawLd + 32 * (s % kSubs) + 4 * tg;
    uint32_t af[4][4];
#pragma unroll
    for (int b = 0; b < 2; ++b) {
      const int blk = 2 * s + b;
      const bool live = blk < nb;  // past K's last block: zeros (the staged bytes there are stale)
      const uint32_t w = live ? *reinterpret_cast<const uint32_t*>(q + 16 * b) : 0u;
      const uint32_t w8 = live ? *reinterpret_cast<const uint32_t*>(q + 16 * b + 8 * kMxRawLd) : 0u;
      const uint32_t es = live ? scales[r * nb + blk] : 127u, es8 = live ? scales[(r + 8) * nb + blk] : 127u;
      uint32_t h[4], h8[4];
      unpack_half::mxfp4_recoded_word_any(w, es, h);
      unpack_half::mxfp4_recoded_word_any(w8, es8, h8);
      af[2 * b][0] = h[0], af[2 * b][1] = h8[0], af[2 * b][2] = h[1], af[2 * b][3] = h8[1];
      af[2 * b + 1][0] = h[2], af[2 * b + 1][1] = h8[2], af[2 * b + 1][2] = h[3], af[2 * b + 1][3] = h8[3];
    }
    fragment_products<kN8>(n8s, acc, af, xs + (s % kXStages) * (kBT * kXLd) + g * kXLd + 4 * tg);
  };
  each_tile<kBT>(a, u0, count, [&](int32_t u) {
    slice_tile<kBT, kSubs, kWStages>(a, spot, u, xrow, s_raw + kWStages * kRawStage, list, n_steps, issue_w,
                                     NoTable{}, step);
  });
}

}  // namespace

bool launch_fragment_tiles(const TileArgs& a, bool wide, cudaStream_t stream) {
  const MatvecIdParams& p = a.p;
  if (a.glu.up_w) {  // moe_gemm_pairs
    LLM_REQUIRE(p.type == quant::Type::Q4_K && !wide, "moe_gemm: a pair in one launch is Q4_K's, 64-user tiles");
    launch_tile_kernel<moe_q4k_fragment_kernel<64, true>, q4k_smem_bytes<64>(), 64, kBN / 2>(a, stream);
    return true;
  }
  if (p.type == quant::Type::Q4_K && !wide) {
    launch_tile_kernel<moe_q4k_fragment_kernel<64>, q4k_smem_bytes<64>(), 64>(a, stream);
    return true;
  }
  if (p.type == quant::Type::Q6_K && !wide) {
    launch_tile_kernel<moe_q6k_fragment_kernel<64>, q6k_smem_bytes<64>(), 64>(a, stream);
    return true;
  }
  // Recoded MXFP4 up to ~90 users an expert on average (gpt-oss-20b at T = 512: 64): 96-user tiles past 40, so that
  // one pass over an expert's rows serves nearly all of its users.
  if (p.type == quant::Type::MXFP4 && p.recoded && kBN * (p.K / 32) <= kMxScaleBytes && p.k * p.T <= 90 * p.n_expert) {
    if (wide) launch_tile_kernel<moe_mxfp4_fragment_kernel<96>, mxfp4_smem_bytes<96>(), 96>(a, stream);
    else launch_tile_kernel<moe_mxfp4_fragment_kernel<64>, mxfp4_smem_bytes<64>(), 64>(a, stream);
    return true;
  }
  return false;
}

}  // namespace cuda::moe_tiles
