// Decode attention in wide blocks: one block of kWarps<HD> warps a (KV head, token), each warp streaming its own
// 16-slot chunks of K and V through a private two-stage cp.async ring and attending them on tensor cores (the split
// kernel's warp parts, attention_tc_warp.cuh), the warps' states merged in shared memory. Why: the split kernel's
// blocks of four warps share one 64-slot tile behind a block barrier, so a block streams ~35 KB a microsecond in turn
// (each tile waits on the last one's copies), and a token of 5+ tiles is cut into one-tile splits whose partials,
// counter and last-block merge cost ~3 us a layer at a served stream's 256-600 positions (docs/kernel-notes.md,
// session 68) — the attention's whole fixed cost past depth 0. Here a block keeps 2 x kWarps chunks in flight and
// needs no global merge until a token holds more than AttentionKernelParams::wide_rounds rounds of kWarps chunks;
// past that its rounds are dealt to splits (round r to split r % n_active: one front moving through the cache) that
// merge as the split kernel's do (attention_splits.cuh).
// f16 caches of head_dim 64 and 128 (the query-row products), paged or not, sliding windows and sinks; not the new
// token's form (attention_new_token.cuh), which stays with the split kernel.
#include "cuda/kernels/attention_wide_tc.cuh"

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/attention_splits.cuh"
#include "cuda/kernels/attention_tc_warp.cuh"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

using namespace attention_tc;

constexpr int kChunk = 16;   // slots a warp attends at a time: a 16-aligned run lies in one cache block of 16+ slots
constexpr int kStages = 2;   // chunks in flight a warp (the next while one is attended)
// Warps a block: as many as two stages of their chunks leave room for in shared memory (head_dim 128: 12 x 17 KB of
// sm_90's 227 KB a block) and the register file holds (12 x 32 threads at up to 168 registers).
template <int HD>
constexpr int kWarps = HD == 128 ? 12 : 16;
template <int HD>
constexpr int ring_halves() { return kStages * 2 * kChunk * row_stride<HD>(); }  // [stage][K, V][slot][HD + 8]
template <int HD>
constexpr size_t smem_bytes() { return size_t(kWarps<HD>) * ring_halves<HD>() * sizeof(uint16_t); }

template <int HD, int G, bool kPaged>
__global__ void __launch_bounds__(kWarps<HD> * 32, 1) attention_wide_tc_kernel(AttentionKernelParams p) {
  constexpr int W = kWarps<HD>, kLd = row_stride<HD>(), kRing = ring_halves<HD>();
  // After its last chunk a warp's ring holds its outputs for the merge (G x HD floats): no other warp's bytes.
  static_assert(G * HD * sizeof(float) <= kRing * sizeof(uint16_t), "a warp's merge buffer exceeds its ring");
  extern __shared__ __align__(16) uint16_t smem[];
  pdl_launch_dependents();  // the o projection after it may launch and start on its weights (pdl.cuh)
  const int64_t kvh = blockIdx.x, t = blockIdx.y, split = blockIdx.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tg = lane & 3;
  // Position, block-table row and prefill flag read together, as in the split kernel.
  const int64_t pos = p.positions[t];
  const KvRow table = kPaged ? kv_row(p.paging, t) : KvRow{};  // no row: slot = base + position
  if (kPaged && split_block_skips(p, pos, kvh, t, split, G, HD)) return;
  // Chunks from the one holding the window's first slot (a local layer costs its window); round r is chunks
  // [r W, r W + W), one a warp, and goes to split r % n_active.
  const int64_t end = pos + 1, start = p.window > 0 ? max(int64_t(0), pos - p.window + 1) : 0;
  const int64_t first = start / kChunk * kChunk;
  const int64_t rounds = ((end - first + kChunk - 1) / kChunk + W - 1) / W;
  const int64_t want = (rounds + p.wide_rounds - 1) / p.wide_rounds;
  const int n_active = int(min(int64_t(gridDim.z), max(int64_t(1), want)));
  if (split >= n_active) return;  // the whole block: n_active <= rounds, so every active split's first chunk exists
  const int64_t stride = int64_t(n_active) * W * kChunk, w_first = first + (split * W + warp) * kChunk;

  uint16_t* const ring = smem + warp * kRing;
  const uint16_t* const kbase = static_cast<const uint16_t*>(p.k_cache) + kvh * p.n_ctx * HD;
  const uint16_t* const vbase = static_cast<const uint16_t*>(p.v_cache) + kvh * p.n_ctx * HD;
  // The chunk at slots [w0, w0 + 16) into ring stage `stage`, lane i copying the 16-byte pieces i + 32 k of K and of
  // V. Its slots are one cache block's (blocks of 16+ slots, attention_wide_tc_applies), so one table lookup a chunk;
  // slots outside [start, end) are zero-filled without a read (never NaN from stale bytes; a paged block before the
  // window may be gone). A chunk past the end commits an empty group, so that every wait counts the same.
  constexpr int kPieces = kChunk * HD / 8;
  static_assert(kPieces % 32 == 0, "whole pieces a lane");
  const auto issue = [&](int64_t w0, int stage) {
    if (w0 < end) {  // warp-uniform; w0 + kChunk > start for every chunk from `first` on
      const int64_t at = kv_slot(table, p.paging.block_shift, w0);
      uint16_t* const dk = ring + stage * 2 * kChunk * kLd;
#pragma unroll
      for (int k = 0; k < kPieces / 32; ++k) {
        const int piece = lane + 32 * k, row = piece / (HD / 8), c8 = piece % (HD / 8);
        const int bytes = w0 + row < end && w0 + row >= start ? 16 : 0;
        const int64_t src = (at + (bytes ? row : 0)) * HD + c8 * 8;
        cp_async16_zfill(dk + row * kLd + c8 * 8, kbase + src, bytes);
        cp_async16_zfill(dk + (kChunk + row) * kLd + c8 * 8, vbase + src, bytes);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };
  // Both stages' chunks before q: their copies and q's loads are in flight together.
#pragma unroll
  for (int k = 0; k < kStages; ++k) issue(w_first + k * stride, k);
  uint32_t qf[HD / 16][4];
  load_q<HD, G>(p, p.q + (t * p.n_head + kvh * G) * HD, g, tg, qf);
  OFrags<HD> o;
#pragma unroll
  for (auto& f : o) f[0] = f[1] = f[2] = f[3] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // row g's running max and this thread's part of its sum
  int stage = 0;
  for (int64_t w0 = w_first; w0 < end; w0 += stride, stage = stage + 1 == kStages ? 0 : stage + 1) {
    cp_async_wait<kStages - 1>();
    __syncwarp();  // every lane's copies of this chunk have landed and are visible to the warp
    const uint16_t* const ks = ring + stage * 2 * kChunk * kLd;
    attend_16slots<HD>(qf, ks, ks + kChunk * kLd, kLd, w0, start, end, lane, m, l, o);
    __syncwarp();  // the lanes are done with this stage before it is refilled
    issue(w0 + kStages * stride, stage);
  }
  // Only this warp ever touches its ring, and nothing is in flight into it after this wait.
  cp_async_wait<0>();
  __syncwarp();
  finish_split<HD, G, W>(p, kvh, t, split, n_active, m, l, o, reinterpret_cast<float*>(smem),
                         kRing / 2);  // a ring's floats
}

template <int HD, int G, bool kPaged>
void launch(const AttentionKernelParams& p, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes<HD>();
  // Dynamic shared memory above the 48 KiB default needs an opt-in, once per kernel; all of the SM's carveout, for
  // one block a SM.
  static const bool opted = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_wide_tc_kernel<HD, G, kPaged>,
                                    cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
    CUDA_CHECK(cudaFuncSetAttribute(attention_wide_tc_kernel<HD, G, kPaged>,
                                    cudaFuncAttributePreferredSharedMemoryCarveout, 100));
    return true;
  }();
  (void)opted;
  const dim3 grid(unsigned(p.n_head_kv), unsigned(p.T), unsigned(p.wide_max_splits));
  attention_wide_tc_kernel<HD, G, kPaged><<<grid, kWarps<HD> * 32, smem, stream>>>(p);
}

template <int HD, bool kPaged>
void launch_hd(const AttentionKernelParams& p, cudaStream_t stream) {
  switch (p.n_head / p.n_head_kv) {
    case 1: launch<HD, 1, kPaged>(p, stream); break;
    case 2: launch<HD, 2, kPaged>(p, stream); break;
    case 4: launch<HD, 4, kPaged>(p, stream); break;
    default: launch<HD, 8, kPaged>(p, stream); break;
  }
}

}  // namespace

bool attention_wide_tc_applies(const AttentionKernelParams& p) {
  if (p.wide_rounds <= 0 || p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0) return false;
  const int64_t G = p.n_head / p.n_head_kv;
  return p.kv_type == graph::KvType::F16 && !p.new_token.k && p.hd == p.hd_v && (p.hd == 64 || p.hd == 128) &&
         (G == 1 || G == 2 || G == 4 || G == 8) && p.wide_max_splits >= 1 && p.wide_max_splits <= p.max_splits &&
         p.max_splits <= kMaxSplitsGqa && (!p.paging.block_table || p.paging.block_shift >= 4) &&
         reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.q) % 8 == 0;
}

void launch_attention_wide_tc(const AttentionKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(attention_wide_tc_applies(p), "wide attention: unsupported shape, alignment or paging");
  const bool paged = p.paging.block_table != nullptr;
  if (p.hd == 64) paged ? launch_hd<64, true>(p, stream) : launch_hd<64, false>(p, stream);
  else paged ? launch_hd<128, true>(p, stream) : launch_hd<128, false>(p, stream);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
