// Prefill attention on tensor cores (flash-attention style): a block takes 64 query tokens of one head, its four
// warps 16 tokens each, and streams the KV head's cache in tiles of 64 slots through shared memory; S = Q K^T and
// O += P V are mma.sync m16n8k16 products (f16 in, f32 accumulate) with the online softmax kept in registers, so K/V
// are read once per 64 queries instead of once per query (the split kernel's prefill cost, docs/kernel-notes.md).
// Rounding: Q x scale and the softmax weights P enter the products as f16 (K and V already are); the running max,
// the normaliser and O stay f32. A tile of slots past the block's last position is zero-filled, and slot s counts
// for query t only when s <= positions[t]. A q8_0 cache: the tile loads read 16 int8 quants and their scale per
// item and store 16 halves q x scale (each rounded to f16 once); a q4_0 cache: a whole block's 16 bytes of nibbles
// and its scale per item, 32 halves (q - 8) x scale; the rest unchanged.
// Head_dim 256: a thread's O is 128 floats (its 16 rows x 256 of the warp) and Q's fragments in registers would be
// 64 more, past the 255 a thread has beside the rest; so Q x scale waits in dynamic shared memory as f16 rows
// (ldmatrix per 16 dimensions, mma::qk_slots_q_shared) and the tiles hold 32 slots: K and V 2 x 16.9 KB static, Q
// 33.8 KB dynamic. With an f16 cache the tiles are double-buffered by cp.async (the second stage after Q in the
// dynamic memory), the next tile's copies in flight while this one is computed: one block a SM at a 512-token
// prefill leaves no other block to hide the loads (Gemma-3-12B's heads, H100: 52.2 -> 41.9 us). The quantized
// caches' tiles are converted on the way in, through registers, one stage. 64 and 128 keep Q in registers, 64-slot
// tiles, and with an f16 cache double-buffered tiles too. Those lost their A/B in session 51 (pp512 within +-1%),
// when every 16-byte item's slot was looked up in 64-bit arithmetic and staged through registers; since session 73
// a tile's copies take one lookup and constant offsets (issue below): 249 -> 168 registers at head_dim 128, and
// with two stages Llama-3-8B pp2048 +2.6%, pp512 and Qwen3-30B-A3B's level, Gemma-3-4B pp512 +2.6% (its head_dim
// 256 had the two stages already), H100, BENCHMARKS.md. A block of two warp groups taking every other tile of its
// slots, merged at the end (the last query tile's chain halved), lost in session 51 too and was removed.
// A paged batch (AttentionKernelParams::tiles): block x takes the per-run tile x of up to 64 tokens of one sequence
// (blocks past the run's tile count exit at once, so a captured graph serves any batch) and reads that sequence's
// slots through its block-table row; a sliding-window tile reads no slot before its rows' earliest window, whose
// blocks a runtime may have freed.
#include "cuda/kernels/attention_prefill.cuh"

#include <cstdint>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/attention_splits.cuh"
#include "cuda/kernels/kv_quant.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

constexpr int kBM = 64;        // query tokens per block (16 per warp)
constexpr int kThreads = 128;  // four warps

// An f16 cache: the K/V tiles in two stages, the next tile's cp.async copies in flight while this one is computed
// (the quantized caches' instances load a tile, then compute it).
template <graph::KvType KV>
constexpr bool async_tiles() { return KV == graph::KvType::F16; }
// Query rows in dynamic shared memory (head_dim 256), before the second stage.
template <int HD>
constexpr int q_shared_rows() { return HD == 256 ? kBM : 0; }
// Cache slots a tile.
template <int HD>
constexpr int tile_slots() { return HD == 256 ? 32 : 64; }
// Dynamic shared memory of an instance: head_dim 256's Q rows, and with async_tiles the second stage's K and V.
template <int HD, graph::KvType KV>
constexpr size_t dynamic_smem() {
  return size_t(q_shared_rows<HD>() + (async_tiles<KV>() ? 2 * tile_slots<HD>() : 0)) * (HD + 8) * 2;
}

using mma::pack_half2;

// kWindow: a sliding-window layer (p.window > 0), its own instance so that the causal-only kernel keeps its mask loop.
template <int HD, graph::KvType KV, bool kWindow>
__global__ void __launch_bounds__(kThreads) attention_prefill_kernel(AttentionKernelParams p) {
  constexpr int kLd = HD + 8;  // shared row stride in halves: 16-byte rows, conflict-free fragment reads
  constexpr int kBN = tile_slots<HD>();     // cache slots per tile
  constexpr bool kQShared = HD == 256;      // Q in shared memory (qs), not in registers (qf)
  constexpr int kQRows = q_shared_rows<HD>();
  __shared__ __align__(16) uint16_t ks[kBN * kLd];
  __shared__ __align__(16) uint16_t vs[kBN * kLd];
  extern __shared__ __align__(16) uint16_t qs[];  // kQShared: [kBM][kLd]; then kAsync: stage 1's K and V tiles
  constexpr bool kAsync = async_tiles<KV>();  // stage 0: ks, vs
  __shared__ int32_t pos_s[kBM];
  // After the split launch (AttentionKernelParams::tiles_after_split): the launch after this one may start on its
  // weights, and block (0, 0) ends only once the split grid has (pdl_wait), so this grid ends after it. Everything
  // read here was written before the split launch, a plain one, began.
  const bool holds_grid = p.tiles_after_split && blockIdx.x == 0 && blockIdx.y == 0;
  if (p.tiles_after_split) pdl_launch_dependents();
  const int64_t h = blockIdx.y;
  int64_t t0 = int64_t(blockIdx.x) * kBM, rows = min(int64_t(kBM), p.T - t0);  // this block's tokens
  if (p.tiles) {  // a paged batch: the run's tile blockIdx.x
    if (int32_t(blockIdx.x) >= p.tiles[0]) {
      if (holds_grid) pdl_wait();
      return;
    }
    t0 = p.tiles[1 + 2 * blockIdx.x], rows = p.tiles[2 + 2 * blockIdx.x];
  }
  const int64_t kvh = h / (p.n_head / p.n_head_kv);
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const KvRow table = kv_row(p.paging, t0);  // the tile's sequence; no row: slot = base + position
  const int32_t shift = p.paging.block_shift;

  if (tid < kBM) pos_s[tid] = tid < rows ? p.positions[t0 + tid] : -1;
  __syncthreads();
  int32_t last = -1;  // the block's last slot
  for (int i = 0; i < kBM; ++i) last = max(last, pos_s[i]);
  if (!p.paging.block_table && last >= p.n_ctx) last = int32_t(p.n_ctx - 1);

  // This thread's rows: r0 = 16 warp + g and r1 = r0 + 8 of the block.
  const int r0 = warp * 16 + g, r1 = r0 + 8;
  const int32_t pos0 = pos_s[r0], pos1 = pos_s[r1];
  // A sliding-window layer: each row sees only the slots after its position minus the window.
  const int64_t lo0 = kWindow ? int64_t(pos0) - p.window + 1 : 0;
  const int64_t lo1 = kWindow ? int64_t(pos1) - p.window + 1 : 0;
  uint32_t qf[kQShared ? 1 : HD / 16][4];
  if constexpr (kQShared) {
    // The block's rows of Q x scale as f16, zeros past its tokens; the first tile's barrier publishes them.
    for (int i = tid; i < kBM * HD / 8; i += kThreads) {
      const int r = i / (HD / 8), c = (i % (HD / 8)) * 8;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (r < rows) {
        const float2* q = reinterpret_cast<const float2*>(p.q + ((t0 + r) * p.n_head + h) * HD + c);
        const float2 a = q[0], b = q[1], e = q[2], f = q[3];
        x = make_uint4(pack_half2(a.x * p.scale, a.y * p.scale), pack_half2(b.x * p.scale, b.y * p.scale),
                       pack_half2(e.x * p.scale, e.y * p.scale), pack_half2(f.x * p.scale, f.y * p.scale));
      }
      *reinterpret_cast<uint4*>(qs + r * kLd + c) = x;
    }
  } else {
    const float* q0 = p.q + ((t0 + r0) * p.n_head + h) * HD;
    const float* q1 = p.q + ((t0 + r1) * p.n_head + h) * HD;
    const bool in0 = r0 < rows, in1 = r1 < rows;
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) {
      const int c = kc * 16 + tg * 2;
      const float2 a = in0 ? *reinterpret_cast<const float2*>(q0 + c) : make_float2(0.f, 0.f);
      const float2 b = in1 ? *reinterpret_cast<const float2*>(q1 + c) : make_float2(0.f, 0.f);
      const float2 e = in0 ? *reinterpret_cast<const float2*>(q0 + c + 8) : make_float2(0.f, 0.f);
      const float2 f = in1 ? *reinterpret_cast<const float2*>(q1 + c + 8) : make_float2(0.f, 0.f);
      qf[kc][0] = pack_half2(a.x * p.scale, a.y * p.scale);
      qf[kc][1] = pack_half2(b.x * p.scale, b.y * p.scale);
      qf[kc][2] = pack_half2(e.x * p.scale, e.y * p.scale);
      qf[kc][3] = pack_half2(f.x * p.scale, f.y * p.scale);
    }
  }

  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
  constexpr float kLog2e = 1.4426950408889634f;
  constexpr bool kQ8 = KV == graph::KvType::Q8_0, kQ4 = KV == graph::KvType::Q4_0;
  // f16 values, q8_0 quants, or q4_0 bytes of two nibbles: a slot's row is kRow of them.
  using Elem = ::std::conditional_t<kQ8, int8_t, ::std::conditional_t<kQ4, uint8_t, uint16_t>>;
  constexpr int kRow = kQ4 ? int(kv_row_bytes<graph::KvType::Q4_0>(HD)) : HD;
  const Elem* kbase = static_cast<const Elem*>(p.k_cache) + kvh * p.n_ctx * kRow;
  const Elem* vbase = static_cast<const Elem*>(p.v_cache) + kvh * p.n_ctx * kRow;
  // q8_0, q4_0: [HD / 32] scales per slot
  const uint16_t* kscale = kQ8 || kQ4 ? p.k_scales + kvh * p.n_ctx * (HD / 32) : nullptr;
  const uint16_t* vscale = kQ8 || kQ4 ? p.v_scales + kvh * p.n_ctx * (HD / 32) : nullptr;

  // A sliding-window layer starts at the tile of the earliest window start among the block's rows, and reads no
  // slot before that start (from).
  int64_t first = 0, from = 0;
  if constexpr (kWindow) {
    int64_t lo = INT64_MAX;
    for (int i = 0; i < kBM; ++i)
      if (pos_s[i] >= 0) lo = min(lo, int64_t(pos_s[i]) - p.window + 1);
    from = lo == INT64_MAX ? 0 : max(int64_t(0), lo);
    first = from / kBN * kBN;
  }
  // An f16 cache's tile of slots [n0, n0 + kBN) into stage st by cp.async; slots past the last position (and before
  // the window's start) as zeros. Thread tid copies the 16-byte column c8 of rows rr, rr + kRowStep, .. of K and V.
  // Where a tile's slots lie in one cache block (tiles start at multiples of kBN; blocks of kBN slots or more, or no
  // table), its rows are its first slot's plus the row: one table lookup a tile and constant offsets, as the split
  // kernel's copies (session 61). With a lookup and 64-bit arithmetic a 16-byte item, loaded into registers and then
  // stored, the loads held half of a 512-token launch's stall samples (Nsight, session 73).
  constexpr int kCols = HD / 8, kRowStep = kThreads / kCols;
  static_assert(kThreads % kCols == 0 && kBN % kRowStep == 0, "whole rows a pass");
  const int rr = tid / kCols, c8 = tid % kCols;
  const bool whole_tiles = !table.row || (1 << shift) >= kBN;
  const auto issue = [&](int64_t n0, int st) {
    uint16_t* const kd = (st ? qs + kQRows * kLd : ks) + rr * kLd + c8 * 8;
    uint16_t* const vd = (st ? qs + (kQRows + kBN) * kLd : vs) + rr * kLd + c8 * 8;
    const int64_t slot0 = whole_tiles && n0 <= last ? kv_slot(table, shift, n0) : 0;  // no table read past the end
    if (whole_tiles && n0 + kBN - 1 <= last && (!kWindow || n0 >= from)) {
      const Elem* const kp = kbase + (slot0 + rr) * HD + c8 * 8;
      const Elem* const vp = vbase + (slot0 + rr) * HD + c8 * 8;
#pragma unroll
      for (int k = 0; k < kBN / kRowStep; ++k) {
        cp_async16(kd + k * kRowStep * kLd, kp + k * kRowStep * HD);
        cp_async16(vd + k * kRowStep * kLd, vp + k * kRowStep * HD);
      }
    } else {
#pragma unroll 1
      for (int row = rr; row < kBN; row += kRowStep) {
        const int64_t slot = n0 + row;
        const int so = (row - rr) * kLd;
        if (slot <= last && (!kWindow || slot >= from)) {
          const int64_t at = whole_tiles ? slot0 + row : kv_slot(table, shift, slot);
          cp_async16(kd + so, kbase + at * HD + c8 * 8);
          cp_async16(vd + so, vbase + at * HD + c8 * 8);
        } else {
          *reinterpret_cast<uint4*>(kd + so) = make_uint4(0, 0, 0, 0);
          *reinterpret_cast<uint4*>(vd + so) = make_uint4(0, 0, 0, 0);
        }
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  int stage = 0;  // kAsync: the stage of the tile computed
  if constexpr (kAsync) issue(first, 0);
  for (int64_t n0 = first; n0 <= last; n0 += kBN) {
    __syncthreads();  // the previous tile is consumed
    if constexpr (kAsync) {
      if (n0 + kBN <= last) {
        issue(n0 + kBN, stage ^ 1);  // into the stage the previous iteration computed
        cp_async_wait<1>();
      } else {
        cp_async_wait<0>();
      }
    } else {  // a q8_0 or q4_0 cache
      static_assert(kQ8 || kQ4, "an f16 cache takes the two stages");
      // Items of 16 quant bytes (one 16-byte load, one scale): half a q8_0 block (16 values) or a whole q4_0 block
      // (32). Every thread's loads are issued before any of them is converted and stored (8-quant q8_0 items with
      // the conversion in the loop held a 16k-deep 512-token prefill at 64% of the f16 cache's speed).
      constexpr int kVals = kQ4 ? 32 : 16, kItemsPerRow = HD / kVals;
      constexpr int kPer = kBN * kItemsPerRow / kThreads;
      static_assert(kBN * kItemsPerRow % kThreads == 0, "whole items per thread");
      uint4 kq[kPer], vq[kPer];
      uint16_t kd[kPer], vd[kPer];
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int i = tid + j * kThreads, row = i / kItemsPerRow, c = i % kItemsPerRow;
        const int64_t slot = n0 + row;
        kq[j] = vq[j] = make_uint4(0, 0, 0, 0), kd[j] = vd[j] = 0;  // zero scale: 0 whatever the quants, never NaN
        if (slot <= last && (!kWindow || slot >= from)) {
          const int64_t at = kv_slot(table, shift, slot);
          kq[j] = __ldg(reinterpret_cast<const uint4*>(kbase + at * kRow) + c);
          vq[j] = __ldg(reinterpret_cast<const uint4*>(vbase + at * kRow) + c);
          kd[j] = __ldg(kscale + at * (HD / 32) + c * kVals / 32);
          vd[j] = __ldg(vscale + at * (HD / 32) + c * kVals / 32);
        }
      }
      // An item's values as f16 q x scale at dst: q8_0 its 16 bytes in order; q4_0 the low nibbles (values 0..15 of
      // the block), then the high ones (16..31).
      const auto store = [](uint16_t* dst, uint4 q, __half d) {
#pragma unroll
        for (int half = 0; half < (kQ4 ? 2 : 1); ++half) {
          uint4* out = reinterpret_cast<uint4*>(dst + 16 * half);
          out[0] = kQ4 ? dequant8_q4_0(make_uint2(q.x, q.y), half, d) : dequant8_q8_0(make_uint2(q.x, q.y), d);
          out[1] = kQ4 ? dequant8_q4_0(make_uint2(q.z, q.w), half, d) : dequant8_q8_0(make_uint2(q.z, q.w), d);
        }
      };
#pragma unroll
      for (int j = 0; j < kPer; ++j) {
        const int i = tid + j * kThreads, row = i / kItemsPerRow, c = i % kItemsPerRow;
        store(ks + row * kLd + c * kVals, kq[j], __ushort_as_half(kd[j]));
        store(vs + row * kLd + c * kVals, vq[j], __ushort_as_half(vd[j]));
      }
    }
    __syncthreads();
    const uint16_t* const kt = kAsync && stage ? qs + kQRows * kLd : ks;  // this tile's K and V
    const uint16_t* const vt = kAsync && stage ? qs + (kQRows + kBN) * kLd : vs;
    if constexpr (kAsync) stage ^= 1;

    float s[kBN / 8][4];
    if constexpr (kQShared) {
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
      mma::qk_slots_q_shared<HD, kBN / 8>(s, qs + warp * 16 * kLd, kt, kLd, lane);
    } else {
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        mma::qk_8slots<HD>(s[j], qf, kt + j * 8 * kLd, kLd, lane);
      }
    }
    // Causal mask, then the online softmax of rows r0 (values 0, 1) and r1 (2, 3); a row's 64 values lie in the
    // four threads of a quad.
    float mx0 = -INFINITY, mx1 = -INFINITY;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const int64_t a = n0 + j * 8 + tg * 2;
      if (a > pos0 || (kWindow && a < lo0)) s[j][0] = -INFINITY;
      if (a + 1 > pos0 || (kWindow && a + 1 < lo0)) s[j][1] = -INFINITY;
      if (a > pos1 || (kWindow && a < lo1)) s[j][2] = -INFINITY;
      if (a + 1 > pos1 || (kWindow && a + 1 < lo1)) s[j][3] = -INFINITY;
      mx0 = fmaxf(mx0, fmaxf(s[j][0], s[j][1]));
      mx1 = fmaxf(mx1, fmaxf(s[j][2], s[j][3]));
    }
#pragma unroll
    for (int o_ = 1; o_ <= 2; o_ <<= 1) {
      mx0 = fmaxf(mx0, __shfl_xor_sync(0xffffffffu, mx0, o_));
      mx1 = fmaxf(mx1, __shfl_xor_sync(0xffffffffu, mx1, o_));
    }
    const float mn0 = fmaxf(m0, mx0), mn1 = fmaxf(m1, mx1);
    // A row with no slot yet (every value masked) keeps a finite base so exp gives 0, not NaN.
    const float b0 = mn0 == -INFINITY ? 0.0f : mn0 * kLog2e, b1 = mn1 == -INFINITY ? 0.0f : mn1 * kLog2e;
    const float c0 = exp2f(m0 * kLog2e - b0), c1 = exp2f(m1 * kLog2e - b1);
    m0 = mn0, m1 = mn1;
    float sum0 = 0.0f, sum1 = 0.0f;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      s[j][0] = exp2f(s[j][0] * kLog2e - b0), s[j][1] = exp2f(s[j][1] * kLog2e - b0);
      s[j][2] = exp2f(s[j][2] * kLog2e - b1), s[j][3] = exp2f(s[j][3] * kLog2e - b1);
      sum0 += s[j][0] + s[j][1], sum1 += s[j][2] + s[j][3];
    }
    l0 = l0 * c0 + sum0, l1 = l1 * c1 + sum1;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) o[n][0] *= c0, o[n][1] *= c0, o[n][2] *= c1, o[n][3] *= c1;

    // O += P V: P's accumulator layout is the A operand's, 16 slots (two 8-slot chunks) per product.
#pragma unroll
    for (int kk = 0; kk < kBN / 16; ++kk) {
      const uint32_t a[4] = {pack_half2(s[2 * kk][0], s[2 * kk][1]), pack_half2(s[2 * kk][2], s[2 * kk][3]),
                             pack_half2(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                             pack_half2(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      mma::pv_16slots<HD>(o, a, vt + kk * 16 * kLd, kLd, lane);
    }
  }

#pragma unroll
  for (int o_ = 1; o_ <= 2; o_ <<= 1) {
    l0 += __shfl_xor_sync(0xffffffffu, l0, o_);
    l1 += __shfl_xor_sync(0xffffffffu, l1, o_);
  }
  if (p.sinks) {  // the sink's column: exp(s_h - m) beside the rows' sums (m is in the scores' units)
    const float sink = p.sinks[h];
    l0 += m0 == -INFINITY ? 0.0f : expf(sink - m0), l1 += m1 == -INFINITY ? 0.0f : expf(sink - m1);
  }
  const float inv0 = l0 > 0.0f ? 1.0f / l0 : 0.0f, inv1 = l1 > 0.0f ? 1.0f / l1 : 0.0f;
  const int64_t out0 = ((t0 + r0) * p.n_head + h) * HD + tg * 2;
  const int64_t out1 = ((t0 + r1) * p.n_head + h) * HD + tg * 2;
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) {
    if (r0 < rows) store_out2(p, out0 + n * 8, make_float2(o[n][0] * inv0, o[n][1] * inv0));
    if (r1 < rows) store_out2(p, out1 + n * 8, make_float2(o[n][2] * inv1, o[n][3] * inv1));
  }
  if (holds_grid) pdl_wait();
}

template <int HD, graph::KvType KV, bool kWindow>
void launch_instance(const AttentionKernelParams& p, dim3 grid, cudaStream_t stream) {
  constexpr size_t smem = dynamic_smem<HD, KV>();
  constexpr auto kernel = attention_prefill_kernel<HD, KV, kWindow>;
  if constexpr (smem > 0) {  // static and dynamic above 48 KiB: an opt-in, once per instance
    static const bool opted = [] {
      CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
      return true;
    }();
    (void)opted;
  }
  launch_programmatic(p.tiles_after_split, kernel, grid, kThreads, smem, stream, p);
}

template <graph::KvType KV>
void launch_kv(const AttentionKernelParams& p, dim3 grid, cudaStream_t stream) {
  const bool w = p.window > 0;
  if (p.hd == 64 && w) launch_instance<64, KV, true>(p, grid, stream);
  else if (p.hd == 64) launch_instance<64, KV, false>(p, grid, stream);
  else if (p.hd == 128 && w) launch_instance<128, KV, true>(p, grid, stream);
  else if (p.hd == 128) launch_instance<128, KV, false>(p, grid, stream);
  else if (w) launch_instance<256, KV, true>(p, grid, stream);
  else launch_instance<256, KV, false>(p, grid, stream);
}

}  // namespace

bool attention_prefill_applies(const AttentionKernelParams& p) {
  const bool type_ok = p.kv_type == graph::KvType::F16 ||
                       (graph::kv_quantized(p.kv_type) && p.k_scales && p.v_scales &&
                        reinterpret_cast<uintptr_t>(p.k_scales) % 2 == 0 &&
                        reinterpret_cast<uintptr_t>(p.v_scales) % 2 == 0);
  return type_ok && p.T >= kPrefillMinTokens && p.hd == p.hd_v && (p.hd == 64 || p.hd == 128 || p.hd == 256) &&
         p.n_head_kv > 0 &&
         p.n_head % p.n_head_kv == 0 && reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(p.q) % 8 == 0 &&
         reinterpret_cast<uintptr_t>(p.out) % 8 == 0;
}

void launch_attention_prefill(const AttentionKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(attention_prefill_applies(p), "prefill attention: unsupported shape or alignment");
  LLM_REQUIRE(!p.tiles || p.max_tiles > 0, "prefill attention: tiles without max_tiles");
  LLM_REQUIRE(!p.tiles_after_split || p.tiles, "prefill attention: tiles_after_split without tiles");
  const dim3 grid(unsigned(p.tiles ? p.max_tiles : (p.T + kBM - 1) / kBM), unsigned(p.n_head));
  if (p.kv_type == graph::KvType::F16) launch_kv<graph::KvType::F16>(p, grid, stream);
  else if (p.kv_type == graph::KvType::Q8_0) launch_kv<graph::KvType::Q8_0>(p, grid, stream);
  else launch_kv<graph::KvType::Q4_0>(p, grid, stream);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
