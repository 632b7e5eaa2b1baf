// Split-sequence attention on tensor cores, for decode and short batches: one block per (KV head, token, split) as
// in the GQA split kernel, but the group's G query heads are the rows of mma.sync m16n8k16 products (padded to 16)
// instead of per-slot dot products with warp reductions. The block streams its split in tiles of 64 slots (K and V,
// cp.async 16-byte copies by all four warps, two stages: the next tile is in flight while this one is computed;
// a split's tiles are every n_active-th tile of the token's prefix; a token of at most kSerialTiles tiles has one
// split);
// each warp takes 16 slots of a tile: S = Q K^T (2 products per 16 dims), online softmax over its 16 slots,
// O += P V; the warps' states merge in shared memory into the split's partial, and the last split block merges the
// splits (attention_splits.cuh). Why: the GQA kernel's per-slot chain of G shuffle reductions held a 16k-context
// decode at about a third of the memory bandwidth; here a slot costs two tensor-core products per warp and the loads
// are what remains. Rounding as the prefill kernel: Q x scale and P enter the products as f16.
// Head_dim 256 (Gemma 3) takes the products the other way round: a warp's 16 slots are the mma's 16 rows and the
// G <= 8 query heads its 8 columns (S^T = K Q^T, O^T += V^T P^T, P^T from S^T by movmatrix), so no row is padding:
// half the products of the query-row form, Q in 32 registers instead of 64 (half of them zeros) and O^T in 64
// instead of 128, which is what lets the loop fit in registers at all (the query-row form needed 235-255 and spilled
// in the quantized kernel). 64 and 128 keep the query-row form.
// A q8_0 or q4_0 cache (attention_split_tc_quant_kernel): the same tiles and products, but each warp copies its own
// 16 slots of quantized K and V and their scales (two stages, cp.async); K goes from that ring straight into the
// QK^T fragments, its scales applied after the products (kv_quant_fragments.cuh; 8B shape at 16k, one layer: q4_0
// 18.0 -> 16.8 us), and V becomes f16 rows of the warp's own (q x scale, rounded to f16 once) right before P V, so
// the warps meet only at __syncwarp inside the loop; a half (q8_0) or a quarter (q4_0) of the bytes of f16 per slot,
// plus 2 bytes of scale per 32 values.
// A paged cache (kv_paging.cuh; the kernels' kPaged instances): a token's tile rows are mapped to slots through its
// block-table row, the f16 kernel per row, the quantized one per warp's 16 slots (a 16-aligned run of positions lies
// in one block: blocks of 16+ slots); rows before a sliding window's first slot are not read (a runtime may have
// freed their blocks); padding tokens and tokens a prefill tile attends are skipped. Instances of their own, so the
// one-sequence decode keeps its code: with the table lookups and guards as run-time branches, 8B Q4_K_M tg128 was
// 0.7% slower (H100, 445.2 -> 442.0).
#include "cuda/kernels/attention_split_tc.cuh"

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/attention_new_token.cuh"
#include "cuda/kernels/attention_splits.cuh"
#include "cuda/kernels/kv_quant.cuh"
#include "cuda/kernels/kv_quant_fragments.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

constexpr int kTile = 64;      // slots per shared tile, 16 per warp
constexpr int kTileShift = 6;  // log2(kTile)
static_assert(kTile == 1 << kTileShift, "kTileShift");
constexpr int kThreads = 128;  // four warps

template <int HD>
constexpr int row_stride() { return HD + 8; }  // halves: 16-byte rows, conflict-free fragment reads

// Whether the products take slots as rows (head_dim 256, above) or query heads (64, 128).
template <int HD>
constexpr bool slot_rows() { return HD == 256; }
// A thread's O fragments: query-row form [HD / 8][4] (rows g and g + 8 of each 16 x 8 block of O, the second all
// padding), slot-row form [HD / 16][4] (dimensions g and g + 8, heads 2 tg and 2 tg + 1 of a 16 x 8 block of O^T).
template <int HD>
using OFrags = float[slot_rows<HD>() ? HD / 16 : HD / 8][4];
// Blocks a SM the launch bounds ask ptxas for: head_dim 256 two (up to 255 registers), which lets it take the
// registers it needs (left to itself it stops at 168 and spills a few bytes); 0 leaves 64 and 128 to ptxas as
// before.
template <int HD>
constexpr int kMinBlocks = HD == 256 ? 2 : 0;
// Q's fragments: the A operand's four registers a 16-dimension chunk (two of them zero), or the B operand's two.
template <int HD>
constexpr int q_regs() { return slot_rows<HD>() ? 2 : 4; }

// Two stages of (K tile, V tile): the next tile's cp.async copies are in flight while this one is computed. At head_dim
// 256 that is 135 KB, one block a SM where the grid is sized for two (attention_max_splits); one stage (67.6 KB, two
// blocks a SM) measured 2% faster at 16k but 9-11% slower at 1k and in a 1024-slot window (kernel notes), and five of
// Gemma 3's six layers are such windows.
template <int HD>
constexpr size_t smem_bytes() { return size_t(2) * 2 * kTile * row_stride<HD>() * sizeof(uint16_t); }

// q8_0 / q4_0, per warp: S stages of its 16 slots' quantized K and V rows (HD or HD / 2 bytes) and their scales,
// and the f16 rows V becomes. Two stages: three and four measured slower for q8_0 (8B shape at 16k: 26.7, 28.5,
// 28.9 us; kernel notes) and for q4_0 (8B at 16k, tg128: 362.6, 350.6, 349.0 tok/s).
constexpr int kQuantStages = 2;
template <graph::KvType KV, int HD, int S>
struct QuantLayout {
  static constexpr int kRowBytes = int(kv_row_bytes<KV>(HD));
  static constexpr int kRing = S * 2 * 16 * kRowBytes;           // quants [stage][K, V][16 slots][kRowBytes]
  static constexpr int kScales = S * 2 * 16 * (HD / 32) * 2;     // binary16 [stage][K, V][16 slots][HD / 32]
  static constexpr int kHalves = 16 * row_stride<HD>() * 2;  // V as f16 [16 slots][HD + 8] (K: qk_8slots_quant)
  static constexpr int kWarpBytes = kRing + kScales + kHalves;
  static_assert(kRing % 16 == 0 && kScales % 16 == 0 && kHalves % 16 == 0, "16-byte aligned parts");
};

constexpr float kLog2e = 1.4426950408889634f;

// A token with at most this many tiles streams them in one split: the merge of several (a fence, the counter, the
// last block's second pass over L2) costs more than four tiles in turn (kernel notes: 1B tg128 +3%, 8B Q4_0 +1%).
constexpr int64_t kSerialTiles = 4;
__device__ __forceinline__ int active_splits(int64_t n_tiles, int32_t max_splits) {
  return n_tiles <= kSerialTiles ? 1 : int(min(n_tiles, int64_t(max_splits)));
}

// Q x scale as the A operand: row g is head kvh G + g, read from qg (the group's first head: of p.q, or the new
// token's heads in shared memory) (rows >= G and rows g + 8 are zero). Chunk kc's fragment
// positions (2 tg, 2 tg + 1) hold dimensions 16 kc + 2 tg + (0, 1) and (2 tg + 8, 2 tg + 9) 16 kc + 2 tg + (8, 9);
// in kQuantOrder (qk_8slots_quant's) 16 kc + 4 tg + (0, 2) and 16 kc + 4 tg + (1, 3). In the slot-row form (R = 2)
// the same two registers a chunk are the B operand's: column g is head kvh G + g.
template <int HD, int G, bool kQuantOrder = false, int R>
__device__ __forceinline__ void load_q(const AttentionKernelParams& p, const float* qg, int g, int tg,
                                       uint32_t (&qf)[HD / 16][R]) {
  static_assert(R == 4 || R == 2, "A or B fragments");
  const bool in = g < G;
  const float* q = qg + (in ? g : 0) * HD + tg * (kQuantOrder ? 4 : 2);
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    const float2 a = in ? *reinterpret_cast<const float2*>(q + kc * 16) : make_float2(0.f, 0.f);
    const float2 b =
        in ? *reinterpret_cast<const float2*>(q + kc * 16 + (kQuantOrder ? 2 : 8)) : make_float2(0.f, 0.f);
    const float2 lo = kQuantOrder ? make_float2(a.x, b.x) : a, hi = kQuantOrder ? make_float2(a.y, b.y) : b;
    qf[kc][0] = mma::pack_half2(lo.x * p.scale, lo.y * p.scale);
    if constexpr (R == 4) {
      qf[kc][1] = 0u;
      qf[kc][2] = mma::pack_half2(hi.x * p.scale, hi.y * p.scale);
      qf[kc][3] = 0u;
    } else {
      qf[kc][1] = mma::pack_half2(hi.x * p.scale, hi.y * p.scale);
    }
  }
}

// A warp's 16 slots [w0, w0 + 16) of a tile (w0 < end, w0 + 16 > start; slots from end on and before start, the
// sliding window's first slot, are masked), their scores S = Q K^T
// given (s[j]: slots w0 + 8 j.., rows g as C fragments): the online softmax of row g (running max m, this thread's
// part of the sum l), O += P V. vs points at the warp's first slot in a row-major [slot][dim] f16 tile of stride ld
// halves.
template <int HD>
__device__ __forceinline__ void softmax_pv_16slots(float (&s)[2][4], const uint16_t* vs, int ld, int64_t w0,
                                                   int64_t start, int64_t end, int lane, float& m, float& l,
                                                   float (&o)[HD / 8][4]) {
  const int tg = lane & 3;
  float mx = -INFINITY;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    const int64_t a = w0 + j * 8 + tg * 2;
    if (a >= end || a < start) s[j][0] = -INFINITY;
    if (a + 1 >= end || a + 1 < start) s[j][1] = -INFINITY;
    mx = fmaxf(mx, fmaxf(s[j][0], s[j][1]));
  }
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
  mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
  const float mn = fmaxf(m, mx);  // finite: some slot of [w0, w0 + 16) lies in [start, end) for every row
  const float c = exp2f((m - mn) * kLog2e);
  m = mn;
  float sum = 0.0f;
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    s[j][0] = exp2f((s[j][0] - mn) * kLog2e), s[j][1] = exp2f((s[j][1] - mn) * kLog2e);
    sum += s[j][0] + s[j][1];
  }
  l = l * c + sum;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] *= c, o[n][1] *= c;
  const uint32_t a[4] = {mma::pack_half2(s[0][0], s[0][1]), 0u, mma::pack_half2(s[1][0], s[1][1]), 0u};
  mma::pv_16slots<HD>(o, a, vs, ld, lane);
}

// The same with K from a row-major [slot][dim] f16 tile too (ks, of stride ld halves).
template <int HD>
__device__ __forceinline__ void attend_16slots(const uint32_t (&qf)[HD / 16][4], const uint16_t* ks,
                                               const uint16_t* vs, int ld, int64_t w0, int64_t start, int64_t end,
                                               int lane, float& m, float& l, float (&o)[HD / 8][4]) {
  float s[2][4];
#pragma unroll
  for (int j = 0; j < 2; ++j) {
    s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
    mma::qk_8slots<HD>(s[j], qf, ks + j * 8 * ld, ld, lane);
  }
  softmax_pv_16slots<HD>(s, vs, ld, w0, start, end, lane, m, l, o);
}

// Slot-row form: the same for a warp's 16 slots given st = S^T (values 0, 1: slot w0 + g, heads 2 tg, 2 tg + 1;
// 2, 3: slot w0 + g + 8), the online softmax of heads 2 tg and 2 tg + 1 (m, l: their running maxima and this
// thread's parts of their sums), O^T += V^T P^T.
template <int HD>
__device__ __forceinline__ void softmax_pv_16slots_t(float (&st)[4], const uint16_t* vs, int ld, int64_t w0,
                                                     int64_t start, int64_t end, int lane, float (&m)[2],
                                                     float (&l)[2], float (&o)[HD / 16][4]) {
  const int64_t a = w0 + (lane >> 2);
  if (a >= end || a < start) st[0] = st[1] = -INFINITY;
  if (a + 8 >= end || a + 8 < start) st[2] = st[3] = -INFINITY;
  float mx[2] = {fmaxf(st[0], st[2]), fmaxf(st[1], st[3])};
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], x));
  float c[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float mn = fmaxf(m[h], mx[h]);  // finite: some slot of [w0, w0 + 16) lies in [start, end)
    c[h] = exp2f((m[h] - mn) * kLog2e);
    m[h] = mn;
    st[h] = exp2f((st[h] - mn) * kLog2e), st[h + 2] = exp2f((st[h + 2] - mn) * kLog2e);
    l[h] = l[h] * c[h] + st[h] + st[h + 2];
  }
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) o[n][0] *= c[0], o[n][1] *= c[1], o[n][2] *= c[0], o[n][3] *= c[1];
  // P^T's B registers: the two 8 x 8 blocks of P (slots g, g + 8 by heads 2 tg..) transposed.
  const uint32_t b[2] = {mma::movmatrix_trans(mma::pack_half2(st[0], st[1])),
                         mma::movmatrix_trans(mma::pack_half2(st[2], st[3]))};
  mma::pv_16slots_t<HD>(o, b, vs, ld, lane);
}

template <int HD>
__device__ __forceinline__ void attend_16slots_t(const uint32_t (&qb)[HD / 16][2], const uint16_t* ks,
                                                 const uint16_t* vs, int ld, int64_t w0, int64_t start, int64_t end,
                                                 int lane, float (&m)[2], float (&l)[2], float (&o)[HD / 16][4]) {
  float st[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  mma::kq_16slots<HD>(st, qb, ks, ld, lane);
  softmax_pv_16slots_t<HD>(st, vs, ld, w0, start, end, lane, m, l, o);
}

// After the loop: the four warps' states of each head, merged into this split's partial {max, sum, acc} (with one
// split, the result itself), then the splits merged by the last block. Query-row form: m, l are row g's running max
// and this thread's part of its sum; slot-row form (m, l: float[2]): heads 2 tg and 2 tg + 1's (m the same in every
// lane of a column). o_s: shared floats that no thread reads any more, warp w's [G][HD] block at o_s + w *
// warp_stride. Every thread of the block must call it.
template <int HD, int G, class State>
__device__ __forceinline__ void finish_split(const AttentionKernelParams& p, int64_t kvh, int64_t t, int64_t split,
                                             int n_active, State& m, State& l, const OFrags<HD>& o, float* o_s,
                                             int warp_stride) {
  __shared__ float m_s[4][G], l_s[4][G];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  if constexpr (slot_rows<HD>()) {
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int x = 4; x < 32; x <<= 1) l[h] += __shfl_xor_sync(0xffffffffu, l[h], x);
    float* const ow = o_s + warp * warp_stride;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int head = 2 * tg + h;
      if (head >= G) continue;
      if (g == 0) m_s[warp][head] = m[h], l_s[warp][head] = l[h];
#pragma unroll
      for (int n = 0; n < HD / 16; ++n)
        ow[head * HD + n * 16 + g] = o[n][h], ow[head * HD + n * 16 + g + 8] = o[n][h + 2];
    }
  } else {
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    if (g < G) {
      if (tg == 0) m_s[warp][g] = m, l_s[warp][g] = l;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n)
        *reinterpret_cast<float2*>(o_s + warp * warp_stride + g * HD + n * 8 + tg * 2) =
            make_float2(o[n][0], o[n][1]);
    }
  }
  __syncthreads();
  // Each head's max, sum and per-warp factors once (G threads), not once for each of its HD outputs (that took
  // ~400 instructions a thread on a decode step's critical path; kernel notes, session 44). A warp with no slot in
  // this split (m = -inf) gets factor 0, and its outputs are zeros (its O fragments were never touched), so the loop
  // adds every term without a test: the same sums in the same order as before, the same bits.
  __shared__ float e_s[4][G], L_s[G], M_s[G];
  if (tid < G) {
    const int gg = tid;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < 4; ++w) M = fmaxf(M, m_s[w][gg]);
    float L = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const bool empty = m_s[w][gg] == -INFINITY;
      const float e = empty ? 0.0f : exp2f((m_s[w][gg] - M) * kLog2e);
      if (!empty) L += l_s[w][gg] * e;
      e_s[w][gg] = e;
    }
    if (n_active == 1) {
      const float sink = sink_of(p, kvh * G + gg);
      if (sink != -INFINITY) L += expf(sink - M);
    }
    L_s[gg] = L, M_s[gg] = M;
  }
  __syncthreads();
  const int64_t head0 = t * p.n_head + kvh * G;
#pragma unroll
  for (int i = tid; i < G * HD / 4; i += kThreads) {  // four outputs of one head a thread an iteration
    const int gg = 4 * i / HD, d = 4 * i % HD;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float e = e_s[w][gg];
      const float4 ow = *reinterpret_cast<const float4*>(o_s + w * warp_stride + gg * HD + d);
      acc.x += ow.x * e, acc.y += ow.y * e, acc.z += ow.z * e, acc.w += ow.w * e;
    }
    if (n_active == 1) {  // the result itself, no partial
      const float L = L_s[gg];
      store_out4(p, (head0 + gg) * HD + d, make_float4(acc.x / L, acc.y / L, acc.z / L, acc.w / L));
      continue;
    }
    float* out = p.partial + ((head0 + gg) * p.max_splits + split) * (HD + 2);
    if (d == 0) out[0] = M_s[gg], out[1] = L_s[gg];
    out[2 + d] = acc.x, out[3 + d] = acc.y, out[4 + d] = acc.z, out[5 + d] = acc.w;
  }
  if (n_active > 1 && last_split_block(p, kvh, t, n_active, HD)) {
    if (n_active <= OneRoundMerge<G, HD, kThreads>::kMaxSplits)
      merge_splits_one_round<G, HD, kThreads>(p, kvh, t, n_active);
    else
      merge_splits<G>(p, kvh, t, n_active, HD);
  }
}

// kNewToken: each token's q, k and v formed by the launch (attention_new_token.cuh): one unpaged token, or paged
// tokens each of its own sequence (a decode step's). Its instances, and the
// unpaged head_dim-128 group-of-8 one, tell ptxas to expect two blocks a SM (all the carveout holds), which still
// allows 255 registers a thread: without it, ptxas stopped at 168 registers and spilled 20 bytes in the head_dim-128
// group-of-8 instances (the new token's; since session 61's copies, the unpaged one's too). The same hint on the
// unpaged group-of-4 instance (no spill either way, 168 registers) made 8B tg128 at depth 512 0.6% slower (H100,
// session 62): ptxas schedules it otherwise.
template <int HD, int G, bool kPaged, bool kNewToken>
__global__ void __launch_bounds__(kThreads, kNewToken || (!kPaged && HD == 128 && G == 8) ? 2 : kMinBlocks<HD>)
    attention_split_tc_kernel(AttentionKernelParams p) {
  constexpr int kLd = row_stride<HD>();
  static_assert(sizeof(NewTokenWork<HD, 8>) <= smem_bytes<HD>() / 2, "the new token's work exceeds a stage");
  // The new k and v rows (binary16), until the owner's last tile takes them.
  __shared__ __align__(16) uint16_t new_kv[kNewToken ? 2 : 1][kNewToken ? HD : 8];
  // After the last tile the same bytes hold the warps' outputs for the merge (4 x G x HD floats).
  extern __shared__ __align__(16) uint16_t tiles[];
  static_assert(4 * G * HD * sizeof(float) <= smem_bytes<HD>(), "merge buffer exceeds the tiles");
  pdl_launch_dependents();  // the o projection after it may launch and start on its weights (pdl.cuh)
  // group: the block's G query heads (group G .. group G + G - 1); the new token's launch may spread a KV head's
  // heads over 2^q_split_shift blocks (AttentionNewToken::q_split_shift), otherwise group is the KV head.
  const int64_t group = blockIdx.x, t = blockIdx.y, split = blockIdx.z;
  const int64_t kvh = kNewToken ? group >> p.new_token.q_split_shift : group;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  // The token's position, its block-table row and its prefill flag are read together: the first tile's copies wait
  // on one round trip for them and one for the table's entry (the paged step's extra ~0.8 us a layer was these
  // loads one after another, kernel notes session 55).
  const int64_t pos = p.positions[t];
  const KvRow table = kPaged ? kv_row(p.paging, t) : KvRow{};  // no row: slot = base + position
  if (kPaged && split_block_skips(p, pos, group, t, split, G, HD)) return;
  // The token's tiles dealt round-robin to the splits (tile k to split k % n_active), at most max_splits of them:
  // at any moment the blocks of a step stream neighbouring tiles, one front moving through the cache, instead of
  // each block its own distant stretch (kernel notes: that held a 16k-context layer at ~1.7 TB/s). A token within
  // its first kSerialTiles tiles has one split and needs no merge.
  // A sliding-window layer reads the tiles from the one holding its window's first slot, and masks the slots before
  // that slot in it: a local layer costs its window, not the context.
  const int64_t end = pos + 1, start = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t first = start / kTile * kTile, n_tiles = (end - first + kTile - 1) / kTile;
  const int n_active = active_splits(n_tiles, p.max_splits);
  if (split >= n_active) return;  // the whole block: this split holds no tile
  const int64_t begin = first + split * kTile, stride = int64_t(n_active) * kTile;
  // The block whose split holds the token's own slot forms its k and v (tile k goes to split k % n_active) and
  // writes them to the cache at the position's slot (paged: where its block-table row or run base puts it).
  const bool owns_slot = kNewToken && split == (pos - first) / kTile % n_active;
  const int64_t new_slot = !owns_slot ? -1 : kPaged ? kv_slot(table, p.paging.block_shift, pos) : pos;
  const bool owner = owns_slot && new_slot >= 0 && new_slot < p.n_ctx;

  const uint16_t* kbase = static_cast<const uint16_t*>(p.k_cache) + kvh * p.n_ctx * HD;
  const uint16_t* vbase = static_cast<const uint16_t*>(p.v_cache) + kvh * p.n_ctx * HD;

  // The split's k-th tile into stage k % 2; slots past the token's position (and before its window) read as zeros
  // (never NaN from stale cache bytes). Thread tid copies the 16-byte column c8 of rows r0, r0 + kRowStep, .. of K
  // and V. Where a tile's slots lie in one cache block (tiles start at multiples of kTile; blocks of kTile slots or
  // more, or no paging), its rows are its first slot's plus the row: one table lookup a tile, done an iteration
  // ahead, and the rows' addresses are constant offsets. A lookup and 64-bit arithmetic a row were a third of the
  // kernel's instructions at 16 sequences, and each pass of the copies waited on its lookup (kernel notes,
  // session 61). Smaller blocks keep a lookup a row.
  constexpr int kCols = HD / 8, kRowStep = kThreads / kCols;
  static_assert(kThreads % kCols == 0 && kTile % kRowStep == 0, "whole rows a pass");
  const int r0 = tid / kCols, c8 = tid % kCols;
  const bool whole_tiles = !table.row || p.paging.block_shift >= kTileShift;
  const auto tile_slot = [&](int64_t n0) { return whole_tiles ? kv_slot(table, p.paging.block_shift, n0) : n0; };
  const uint32_t s_first = unsigned(__cvta_generic_to_shared(tiles)) + unsigned(r0 * kLd + c8 * 8) * 2u;
  // A tile past the split's last (n0 >= end) commits an empty group, so that the loop always waits with one pending.
  const auto issue = [&](int64_t n0, int stage, int64_t slot0) {
    if (n0 >= end) {
      asm volatile("cp.async.commit_group;");
      return;
    }
    const uint32_t sk = s_first + unsigned(stage * 2 * kTile * kLd) * 2u, sv = sk + unsigned(kTile * kLd) * 2u;
    if (whole_tiles && n0 + kTile <= end && (!kPaged || n0 >= start) && !(kNewToken && pos < n0 + kTile)) {
      // Every row: constant offsets from the thread's first.
      const uint16_t* const kp = kbase + (slot0 + r0) * HD + c8 * 8;
      const uint16_t* const vp = vbase + (slot0 + r0) * HD + c8 * 8;
#pragma unroll
      for (int k = 0; k < kTile / kRowStep; ++k) {
        cp_async16_s(sk + unsigned(k * kRowStep * kLd) * 2u, kp + k * kRowStep * HD);
        cp_async16_s(sv + unsigned(k * kRowStep * kLd) * 2u, vp + k * kRowStep * HD);
      }
    } else {
#pragma unroll 1
      for (int row = r0; row < kTile; row += kRowStep) {
        const int64_t slot = n0 + row;
        const uint32_t so = unsigned((row - r0) * kLd) * 2u;
        if (slot < end && (!kPaged || slot >= start) && !(kNewToken && slot == pos)) {  // the new slot: patched below
          const int64_t at = whole_tiles ? slot0 + row : kv_slot(table, p.paging.block_shift, slot);
          cp_async16_s(sk + so, kbase + at * HD + c8 * 8);
          cp_async16_s(sv + so, vbase + at * HD + c8 * 8);
        } else {
          uint16_t* const zk = tiles + (stage * 2 * kTile + row) * kLd + c8 * 8;
          *reinterpret_cast<uint4*>(zk) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(zk + kTile * kLd) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    asm volatile("cp.async.commit_group;");
  };
  // The first two tiles before q (the new token's launch keeps its second stage for its work until the loop's first
  // iteration): two tiles are in flight from the start, and q's loads overlap theirs. Three stages (104 KB a block,
  // two blocks an SM) lost: B = 4 -11%, B = 16 -0.5% (kernel notes, session 61).
  const int64_t slot_a = tile_slot(begin), slot_b = begin + stride < end ? tile_slot(begin + stride) : 0;  // together
  issue(begin, 0, slot_a);
  if (!kNewToken) issue(begin + stride, 1, slot_b);
  constexpr bool kSlotRows = slot_rows<HD>();
  uint32_t qf[HD / 16][q_regs<HD>()];
  const float* qg = p.q + (t * p.n_head + group * G) * HD;
  // The new token's q heads in the second stage, which the loop's first copies refill after a barrier.
  auto* const work = reinterpret_cast<NewTokenWork<HD, G>*>(tiles + 2 * kTile * kLd);
  if constexpr (kNewToken) {
    form_new_token<HD, G, kThreads>(p, t, group, kvh, pos, new_slot, owner, *work, new_kv);
    qg = &work->heads[0][0];
  }
  load_q<HD, G>(p, qg, g, tg, qf);
  if constexpr (kNewToken) __syncthreads();  // every warp has its q before the second stage is refilled
  OFrags<HD> o;
#pragma unroll
  for (auto& f : o) f[0] = f[1] = f[2] = f[3] = 0.0f;
  // Query-row form: row g's running max and this thread's part of its sum; slot-row form: heads 2 tg and 2 tg + 1's.
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  int stage = 0;
  for (int64_t n0 = begin; n0 < end; n0 += stride, stage ^= 1) {
    // Tile k + 1 is in flight (from the prologue or iteration k - 1), tile k + 2's lookup goes out now and its copies
    // after this tile's products, into this stage.
    // (Unpaged, a tile's first slot is its first position: nothing to look up or keep across the products.)
    const int64_t slot_after = kPaged && n0 + 2 * stride < end ? tile_slot(n0 + 2 * stride) : 0;
    if (kNewToken && n0 == begin) issue(n0 + stride, 1, kPaged ? slot_b : n0 + stride);  // q has left stage 1
    asm volatile("cp.async.wait_group 1;");
    __syncthreads();  // every thread's copies of this tile have landed
    const uint16_t* ks = tiles + stage * 2 * kTile * kLd;
    const uint16_t* vs = ks + kTile * kLd;
    if constexpr (kNewToken) {
      if (owner && pos < n0 + kTile) {  // block-uniform: the owner's last tile holds the new slot
        for (int i = tid; i < 2 * HD / 8; i += kThreads) {
          uint16_t* row = tiles + (stage * 2 + i / (HD / 8)) * kTile * kLd + (pos - n0) * kLd;
          *reinterpret_cast<uint4*>(row + i % (HD / 8) * 8) =
              *reinterpret_cast<const uint4*>(&new_kv[i / (HD / 8)][i % (HD / 8) * 8]);
        }
        __syncthreads();
      }
    }
    const int64_t w0 = n0 + warp * 16;  // this warp's 16 slots
    if (w0 < end && w0 + 16 > start) {  // warp-uniform: a warp past the split or before the window idles this tile
      if constexpr (kSlotRows)
        attend_16slots_t<HD>(qf, ks + warp * 16 * kLd, vs + warp * 16 * kLd, kLd, w0, start, end, lane, m, l, o);
      else
        attend_16slots<HD>(qf, ks + warp * 16 * kLd, vs + warp * 16 * kLd, kLd, w0, start, end, lane, m[0], l[0], o);
    }
    __syncthreads();  // every warp has read this stage
    issue(n0 + 2 * stride, stage, kPaged ? slot_after : n0 + 2 * stride);
  }
  // The loop's last barrier freed the tiles: they hold the warps' outputs [warp][G][HD] for the merge.
  if constexpr (kSlotRows)
    finish_split<HD, G>(p, group, t, split, n_active, m, l, o, reinterpret_cast<float*>(tiles), G * HD);
  else
    finish_split<HD, G>(p, group, t, split, n_active, m[0], l[0], o, reinterpret_cast<float*>(tiles), G * HD);
}

template <int HD, int G, int S, graph::KvType KV, bool kPaged>
__global__ void __launch_bounds__(kThreads, kMinBlocks<HD>) attention_split_tc_quant_kernel(AttentionKernelParams p) {
  using L = QuantLayout<KV, HD, S>;
  constexpr int kRowBytes = L::kRowBytes;
  constexpr int kLd = row_stride<HD>(), kBlocks = HD / 32;  // scales per slot
  extern __shared__ __align__(16) uint8_t smem[];             // [warp][QuantLayout]
  // After the loop a warp's quant ring holds its outputs for the merge (G x HD floats).
  static_assert(G * HD * sizeof(float) <= size_t(L::kRing), "a warp's merge buffer exceeds its quant ring");
  pdl_launch_dependents();
  const int64_t kvh = blockIdx.x, t = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
  // Position, block-table row and prefill flag read together, as in the f16 kernel.
  const int64_t pos = p.positions[t];
  const KvRow table = kPaged ? kv_table_row(p.paging, t) : KvRow{};  // no row: slot = position
  if (kPaged && split_block_skips(p, pos, kvh, t, split, G, HD)) return;
  // Tiles dealt as in the f16 kernel, from the sliding window's first tile.
  const int64_t end = pos + 1, start = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t first = start / kTile * kTile, n_tiles = (end - first + kTile - 1) / kTile;
  const int n_active = active_splits(n_tiles, p.max_splits);
  if (split >= n_active) return;
  const int64_t begin = first + split * kTile, stride = int64_t(n_active) * kTile;

  uint8_t* const mine = smem + warp * L::kWarpBytes;
  int8_t* const ring = reinterpret_cast<int8_t*>(mine);
  uint16_t* const scales = reinterpret_cast<uint16_t*>(mine + L::kRing);
  uint16_t* const vh = reinterpret_cast<uint16_t*>(mine + L::kRing + L::kScales);
  const int8_t* const kq = static_cast<const int8_t*>(p.k_cache) + kvh * p.n_ctx * kRowBytes;
  const int8_t* const vq = static_cast<const int8_t*>(p.v_cache) + kvh * p.n_ctx * kRowBytes;
  const uint16_t* const ksc = p.k_scales + kvh * p.n_ctx * kBlocks;
  const uint16_t* const vsc = p.v_scales + kvh * p.n_ctx * kBlocks;

  // The warp's slots [w0, w0 + 16) into ring stage `stage`. They are 16 x kRowBytes contiguous bytes of quants and
  // 16 x HD / 32 contiguous scales in the cache, kept in the same order in the ring: lane i copies the 16-byte
  // chunks i + 32 k and the scale words i + 32 k. Slots from the token's end on are zero-filled (no read), so their
  // f16 rows come out as zeros (never NaN from stale bytes); a tile wholly past the end copies nothing.
  const auto issue = [&](int64_t w0, int stage) {
    // Warp-uniform. A paged run of 16 wholly before the window is not read: its block may be gone.
    const int valid = kPaged && w0 + 16 <= start ? 0 : int(max(int64_t(0), min(end - w0, int64_t(16))));
    if (valid > 0) {
      const int64_t at = kv_slot(table, p.paging.block_shift, w0);  // the 16 slots' first: they are contiguous
      int8_t* const kr = ring + stage * 2 * 16 * kRowBytes;
      const int8_t* const kt = kq + at * kRowBytes;
      const int8_t* const vt = vq + at * kRowBytes;
#pragma unroll
      for (int k = 0; k < 16 * kRowBytes / 16 / 32; ++k) {
        const int off = 16 * (lane + 32 * k), bytes = off < valid * kRowBytes ? 16 : 0;
        cp_async16_zfill(kr + off, kt + (bytes ? off : 0), bytes);
        cp_async16_zfill(kr + 16 * kRowBytes + off, vt + (bytes ? off : 0), bytes);
      }
      constexpr int kWords = 16 * kBlocks / 2;  // 4-byte scale words of one matrix's 16 slots
      uint16_t* const sr = scales + stage * 2 * 16 * kBlocks;
#pragma unroll
      for (int k = 0; k < 2 * kWords / 32; ++k) {
        const int i = lane + 32 * k, mtx = i / kWords, w = i % kWords;
        const int bytes = w / (kBlocks / 2) < valid ? 4 : 0;  // the word's slot is before the end
        const uint16_t* const src = (mtx ? vsc : ksc) + at * kBlocks;
        cp_async4_zfill(sr + mtx * 16 * kBlocks + 2 * w, src + (bytes ? 2 * w : 0), bytes);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  // Ring stage `stage`'s V as f16 rows q x scale into vh: lane i converts the 8-value chunks i + 32 k, chunk c of
  // the tile being row c / (HD / 8), columns 8 (c % (HD / 8)) onwards, under scale c / 4 of the ring's scales.
  // q8_0: the chunk's 8 bytes; q4_0: the low (first half of the block) or high nibbles of 8 bytes of its block.
  constexpr int kRowsPerStep = 32 / (HD / 8);
  const int crow = lane / (HD / 8), ccol = lane % (HD / 8);
  // All loads first: the compiler cannot tell the f16 rows' stores from the ring's loads apart, and would otherwise
  // wait for each load's latency in turn.
  constexpr int kSteps = 16 / kRowsPerStep;
  const auto convert = [&](int stage) {
    uint2 q[kSteps];
    uint16_t sc[kSteps];
    const int8_t* const src =
        ring + (stage * 2 + 1) * 16 * kRowBytes +
        (KV == graph::KvType::Q4_0 ? crow * kRowBytes + (ccol / 4) * 16 + (ccol % 2) * 8 : 8 * lane);
    const uint16_t* const ss = scales + (stage * 2 + 1) * 16 * kBlocks + crow * kBlocks + ccol / 4;
#pragma unroll
    for (int k = 0; k < kSteps; ++k) {
      q[k] = *reinterpret_cast<const uint2*>(src + k * kRowsPerStep * kRowBytes);
      sc[k] = ss[k * kRowsPerStep * kBlocks];
    }
    uint16_t* const dst = vh + crow * kLd + ccol * 8;
#pragma unroll
    for (int k = 0; k < kSteps; ++k)
      *reinterpret_cast<uint4*>(dst + k * kRowsPerStep * kLd) =
          KV == graph::KvType::Q4_0 ? dequant8_q4_0(q[k], ccol % 4 >= 2, __ushort_as_half(sc[k]))
                                    : dequant8_q8_0(q[k], __ushort_as_half(sc[k]));
  };

  // The warp's k-th tile of the split goes to stage k % S, S - 1 tiles ahead of the one converted; every iteration
  // commits one group (empty past the end), so every wait counts the same.
#pragma unroll
  for (int k = 0; k < S - 1; ++k) issue(begin + k * stride + warp * 16, k);
  // q after the first copies are in flight: its loads overlap theirs.
  constexpr bool kSlotRows = slot_rows<HD>();
  uint32_t qf[HD / 16][q_regs<HD>()];
  load_q<HD, G, true>(p, p.q + (t * p.n_head + kvh * G) * HD, g, tg, qf);
  OFrags<HD> o;
#pragma unroll
  for (auto& f : o) f[0] = f[1] = f[2] = f[3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // as in the f16 kernel
  int stage = 0;
  for (int64_t n0 = begin; n0 < end; n0 += stride, stage = stage + 1 == S ? 0 : stage + 1) {
    const int64_t w0 = n0 + warp * 16;  // this warp's 16 slots
    // The stage read in the previous iteration (before the __syncwarp ending it) takes the tile S - 1 ahead.
    issue(w0 + (S - 1) * stride, stage == 0 ? S - 1 : stage - 1);
    cp_async_wait<S - 1>();
    __syncwarp();  // every lane's copies of this stage have landed and are visible to the warp
    if (w0 < end && w0 + 16 > start) {  // warp-uniform: a warp past the split or before the window idles this tile
      convert(stage);
      __syncwarp();
      if constexpr (kSlotRows) {
        float st[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        kq_16slots_quant<HD, KV>(st, qf, ring + stage * 2 * 16 * kRowBytes, scales + stage * 2 * 16 * kBlocks, lane);
        softmax_pv_16slots_t<HD>(st, vh, kLd, w0, start, end, lane, m, l, o);
      } else {
        float scores[2][4];
#pragma unroll
        for (int j = 0; j < 2; ++j) {
          scores[j][0] = scores[j][1] = scores[j][2] = scores[j][3] = 0.0f;
          qk_8slots_quant<HD, KV>(scores[j], qf, ring + (stage * 2 * 16 + j * 8) * kRowBytes,
                                  scales + (stage * 2 * 16 + j * 8) * kBlocks, lane);
        }
        softmax_pv_16slots<HD>(scores, vh, kLd, w0, start, end, lane, m[0], l[0], o);
      }
    }
    __syncwarp();  // the lanes are done with this stage and with vh before they are refilled
  }
  // Only this warp ever touches its ring, and nothing is in flight into it after this wait.
  cp_async_wait<0>();
  __syncwarp();
  if constexpr (kSlotRows)
    finish_split<HD, G>(p, kvh, t, split, n_active, m, l, o, reinterpret_cast<float*>(smem),
                        L::kWarpBytes / int(sizeof(float)));
  else
    finish_split<HD, G>(p, kvh, t, split, n_active, m[0], l[0], o, reinterpret_cast<float*>(smem),
                        L::kWarpBytes / int(sizeof(float)));
}

// The share of the SM's unified L1 / shared memory these kernels ask for, in percent of the largest: 58% of the
// H100's 228 KB, which the driver rounds up to a split that still holds two blocks of the f16 head_dim-128 kernel
// (the grid is sized for two a SM; less, 26-34%, costs blocks: 8B at 16k -6%). Without it the driver sizes the
// split for the most resident blocks (for the f16 kernel three, 28 KB of L1 left; its documented default, not
// observed here). Asked for 58%, decode with an f16 cache runs 3-6% faster (H100, tg128: 7B Q4_0 456 -> 476,
// 8B Q4_0 430 -> 454, 8B Q4_K_M 427 -> 442; at 16k 314 -> 320), the 1B and the quantized caches unchanged:
// measured, the mechanism not (docs/kernel-notes.md, session 10).
constexpr int kCarveoutPercent = 58;

// Head_dim 256's blocks are larger (f16 135 KB, q8_0 103.4 KB, q4_0 70.7 KB): the share that holds the two a SM the
// grid is sized for (attention_max_splits), of sm_90's 228 KB with 1 KB reserved a block, at least kCarveoutPercent
// and at most all of it (q4_0 62%, q8_0 90%; f16 100%, where one fits).
constexpr size_t kSmemPerSm = size_t(228) << 10;
template <int HD>
constexpr int carveout_percent(size_t smem) {
  if (HD < 256) return kCarveoutPercent;
  const size_t percent = (2 * (smem + 1024) * 100 + kSmemPerSm - 1) / kSmemPerSm;
  return int(percent < size_t(kCarveoutPercent) ? kCarveoutPercent : percent > 100 ? 100 : percent);
}

// Dynamic shared memory above the 48 KiB default needs an opt-in, once per kernel; the carveout with it.
bool opt_in(void (*kernel)(AttentionKernelParams), size_t smem, int carveout) {
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout));
  return true;
}

template <int HD, int G, graph::KvType KV, bool kPaged>
void launch_quant(const AttentionKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = size_t(4) * QuantLayout<KV, HD, kQuantStages>::kWarpBytes;
  static const bool opted =
      opt_in(attention_split_tc_quant_kernel<HD, G, kQuantStages, KV, kPaged>, smem, carveout_percent<HD>(smem));
  (void)opted;
  attention_split_tc_quant_kernel<HD, G, kQuantStages, KV, kPaged><<<grid, kThreads, smem, stream>>>(p);
}

template <int HD, int G, bool kPaged, bool kNewToken>
void launch_f16(const AttentionKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes<HD>();
  static const bool opted =
      opt_in(attention_split_tc_kernel<HD, G, kPaged, kNewToken>, smem, carveout_percent<HD>(smem));
  (void)opted;
  launch_programmatic(kNewToken && p.new_token.programmatic, attention_split_tc_kernel<HD, G, kPaged, kNewToken>, grid,
                      dim3(kThreads), smem, stream, p);
}

template <int HD, int G, bool kPaged>
void launch_g(const AttentionKernelParams& p, cudaStream_t stream) {
  const dim3 grid(unsigned(p.n_head_kv), unsigned(p.T), unsigned(p.max_splits));
  if (p.kv_type == graph::KvType::F16) {
    if constexpr (kPaged)  // the new tokens' paged instances: a KV head's heads in one block (launch_attention)
      if (p.new_token.k) return launch_f16<HD, G, true, true>(p, grid, stream);
    if constexpr (!kPaged)
      if (p.new_token.k) {
        // A KV head's q heads over 2^shift blocks of G >> shift heads each (AttentionNewToken::q_split_shift).
        const int shift = p.new_token.q_split_shift;
        const dim3 spread(grid.x << shift, grid.y, grid.z);
        if constexpr (G >= 2)
          if (shift == 1) return launch_f16<HD, G / 2, false, true>(p, spread, stream);
        if constexpr (G >= 4)
          if (shift == 2) return launch_f16<HD, G / 4, false, true>(p, spread, stream);
        LLM_REQUIRE(shift == 0, "split attention: a q split wider than the group");
        return launch_f16<HD, G, false, true>(p, grid, stream);
      }
    launch_f16<HD, G, kPaged, false>(p, grid, stream);
  } else if (p.kv_type == graph::KvType::Q8_0) {
    launch_quant<HD, G, graph::KvType::Q8_0, kPaged>(p, grid, stream);
  } else {
    launch_quant<HD, G, graph::KvType::Q4_0, kPaged>(p, grid, stream);
  }
}

template <int HD, bool kPaged>
void launch_hd(const AttentionKernelParams& p, cudaStream_t stream) {
  switch (p.n_head / p.n_head_kv) {
    case 1: launch_g<HD, 1, kPaged>(p, stream); break;
    case 2: launch_g<HD, 2, kPaged>(p, stream); break;
    case 4: launch_g<HD, 4, kPaged>(p, stream); break;
    default: launch_g<HD, 8, kPaged>(p, stream); break;
  }
}

}  // namespace

bool attention_split_tc_applies(const AttentionKernelParams& p) {
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0) return false;
  const int64_t G = p.n_head / p.n_head_kv;
  // q8_0, q4_0: the quant rows in 16-byte copies, the scales in 4-byte copies (4-byte aligned).
  const bool type_ok = p.kv_type == graph::KvType::F16 ||
                       (graph::kv_quantized(p.kv_type) && p.k_scales && p.v_scales &&
                        reinterpret_cast<uintptr_t>(p.k_scales) % 4 == 0 &&
                        reinterpret_cast<uintptr_t>(p.v_scales) % 4 == 0);
  return type_ok && p.hd == p.hd_v && (p.hd == 64 || p.hd == 128 || p.hd == 256) &&
         (G == 1 || G == 2 || G == 4 || G == 8) &&
         p.max_splits <= kMaxSplitsGqa && reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(p.q) % 8 == 0;
}

void launch_attention_split_tc(const AttentionKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(attention_split_tc_applies(p), "split attention (tensor cores): unsupported shape or alignment");
  const bool paged = p.paging.block_table != nullptr;
  switch (p.hd) {
    case 64: paged ? launch_hd<64, true>(p, stream) : launch_hd<64, false>(p, stream); break;
    case 128: paged ? launch_hd<128, true>(p, stream) : launch_hd<128, false>(p, stream); break;
    default: paged ? launch_hd<256, true>(p, stream) : launch_hd<256, false>(p, stream); break;
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
