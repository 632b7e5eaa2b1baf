// Small-batch products on tensor cores. A block of 4 warps owns R rows of W and walks K in slices: each slice's
// quantized blocks are dequantized (quant/dequant.cuh) into a half tile in shared memory beside the slice of X
// (already half, converted once per launch), and warps multiply with mma.m16n8k16 (W rows as A, tokens as B, float32
// accumulators in registers). W is read from memory once for all tokens; every tile of X is read from L2 by N / R
// blocks, so R grows with T (X's L2 traffic is 3.6 T / R times W's for Q4_K): R = 16 rows for T <= 8, 32 up to 32
// tokens, 64 above. Two kernels: the staged one copies raw blocks ahead with cp.async (aligned rows), the direct one
// dequantizes from global memory (Q6_Kx8, unaligned rows). Matrices of few row tiles split K over blocks. Every
// partial sum (warps' k groups, K splits) is added in a fixed order: the same bits every run. Measurements and what
// bounds it (the dequantization's conversions): docs/kernel-notes.md, "Small-batch products".
#include "cuda/kernels/batch_mm.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kChunksPerThread = 2;  // 32-element chunks of W a thread dequantizes per slice
constexpr int kWarpK = 128;          // k per warp per slice: 8 mma steps

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

template <int R, int NT>
struct Tile {
  static constexpr int kRowGroups = R / 16;                          // warps along rows
  static constexpr int kKGroups = kWarps / kRowGroups;               // warps along k
  static constexpr int kSlice = kThreads * kChunksPerThread * 32 / R;  // k per slice: every thread dequantizes
  static constexpr int kLd = kSlice + 8;  // halves a shared row: 16 more bytes make ldmatrix and B loads conflict-free
  static constexpr int kCols = NT * 8;    // tokens, padded to whole mma n-tiles
  static constexpr int kChunksPerRow = kSlice / 32;
  static_assert(kSlice == kKGroups * kWarpK, "a slice is split evenly over the k groups");
  static constexpr int kSmemHalves = (R + kCols) * kLd;
  static_assert(kWarps * 16 * kCols * 4 <= kSmemHalves * 2, "the k-group partial sums fit in the tiles' memory");
};

__device__ __forceinline__ uint4 pack8(const float* v) {
  return make_uint4(mma::pack_half2(v[0], v[1]), mma::pack_half2(v[2], v[3]), mma::pack_half2(v[4], v[5]),
                    mma::pack_half2(v[6], v[7]));
}

// Split K over gridDim.y (matrices of few row blocks, so every SM has blocks): split y takes slices
// [y * per_split, (y + 1) * per_split) and writes partial sums to part; no split: part is null.
struct Split {
  int64_t per_split;  // slices a split takes
  float* part;        // [splits][T][N] or null
};

// Y for the block's R rows: accumulator c of n-tile nt is row 16 wr + g + 8 (c >> 1), token 8 nt + 2 tg + (c & 1).
// With k groups their partial sums go through `red` ([kWarps][16][NT * 8] floats, the tiles' dead memory after the
// last barrier) and are added in group order: the same bits every run.
template <int R, int NT, int KG>
__device__ __forceinline__ void store_tile(const BatchMmParams& p, const Split& sp, const float (&acc)[NT][4],
                                           float* red, int64_t n0, int warp, int wr, int g, int tg, int tid) {
  constexpr int kCols = NT * 8, kRowGroups = R / 16;
  // Split K: this split's partial sums into its own [T][N] slab, added (with the bias) by split_sum_kernel.
  float* y = sp.part ? sp.part + int64_t(blockIdx.y) * p.N * p.T : p.y;
  const float* bias = sp.part ? nullptr : p.bias;
  if constexpr (KG == 1) {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const int64_t n = n0 + wr * 16 + g + 8 * (c >> 1);
        const int t = nt * 8 + 2 * tg + (c & 1);
        if (n < p.N && t < p.T) y[t * p.N + n] = acc[nt][c] + (bias ? bias[n] : 0.0f);
      }
  } else {
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
#pragma unroll
      for (int c = 0; c < 4; ++c) red[(warp * 16 + g + 8 * (c >> 1)) * kCols + nt * 8 + 2 * tg + (c & 1)] = acc[nt][c];
    __syncthreads();
    for (int i = tid; i < R * kCols; i += kThreads) {
      const int r = i % R, t = i / R;  // consecutive threads on consecutive rows: coalesced stores of y
      const int64_t n = n0 + r;
      if (n >= p.N || t >= p.T) continue;
      float s = bias ? bias[n] : 0.0f;
#pragma unroll
      for (int k = 0; k < KG; ++k) s += red[((k * kRowGroups + r / 16) * 16 + r % 16) * kCols + t];
      y[t * p.N + n] = s;
    }
  }
}

template <quant::Type Q, bool kX8>
__device__ __forceinline__ void dequant(const uint8_t* row, int64_t c, float (&v)[32]) {
  if constexpr (kX8) q6_kx8_dequant_chunk(row, c, v);
  else quant::dev::dequant_chunk<Q>(row, c, 32, v);
}

template <quant::Type Q, bool kX8, int R, int NT>
__global__ void __launch_bounds__(kThreads) batch_mm_kernel(BatchMmParams p, const __half* xh, size_t row_bytes,
                                                            Split sp) {
  using Tl = Tile<R, NT>;
  __shared__ __align__(16) uint16_t smem[Tl::kSmemHalves];
  uint16_t* ws = smem;                // [R][kLd]: this slice of W, half
  uint16_t* xs = smem + R * Tl::kLd;  // [kCols][kLd]: this slice of X, half; tokens >= T are zero
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wr = warp % Tl::kRowGroups, wk = warp / Tl::kRowGroups;
  const int g = lane >> 2, tg = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * R;
  const int64_t n_chunks = p.K / 32;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  float acc[NT][4] = {};

  const int64_t k_end = ::std::min<int64_t>(p.K, (int64_t(blockIdx.y) + 1) * sp.per_split * Tl::kSlice);
  for (int64_t k0 = int64_t(blockIdx.y) * sp.per_split * Tl::kSlice; k0 < k_end; k0 += Tl::kSlice) {
    // X: 16-byte copies from the half copy (K % 32 == 0, so a copy is wholly inside or outside the row).
    constexpr int kVecs = Tl::kSlice / 8;
    for (int i = tid; i < Tl::kCols * kVecs; i += kThreads) {
      const int t = i / kVecs, v8 = i % kVecs;
      const int64_t k = k0 + 8 * v8;
      uint4 val = make_uint4(0u, 0u, 0u, 0u);
      if (t < p.T && k < p.K) val = __ldg(reinterpret_cast<const uint4*>(xh + t * p.K + k));
      *reinterpret_cast<uint4*>(xs + t * Tl::kLd + 8 * v8) = val;
    }
    // W: both chunks' loads first, then the stores. Consecutive threads take consecutive chunks of a row (coalesced);
    // rows past N re-read row N - 1 (never stored); chunks past K are zero.
    float v[kChunksPerThread][32];
#pragma unroll
    for (int j = 0; j < kChunksPerThread; ++j) {
      const int i = tid + j * kThreads, r = i / Tl::kChunksPerRow;
      const int64_t c = k0 / 32 + i % Tl::kChunksPerRow;
      const int64_t row = ::std::min<int64_t>(n0 + r, p.N - 1);
      if (c < n_chunks) {
        dequant<Q, kX8>(w + row * row_bytes, c, v[j]);
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) v[j][e] = 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kChunksPerThread; ++j) {
      const int i = tid + j * kThreads, r = i / Tl::kChunksPerRow, cl = i % Tl::kChunksPerRow;
      uint4 h[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) h[q] = pack8(v[j] + 8 * q);
      // A thread's 64 bytes start every 64 bytes across the warp: rotating which 16 bytes go first by lane spreads
      // each 8-lane phase over all banks (selects, not a dynamic register index).
      uint4* dst = reinterpret_cast<uint4*>(ws + r * Tl::kLd + 32 * cl);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int qq = (q + (lane >> 1)) & 3;
        dst[qq] = qq == 0 ? h[0] : qq == 1 ? h[1] : qq == 2 ? h[2] : h[3];
      }
    }
    __syncthreads();
    const uint16_t* wa = ws + (wr * 16 + (lane & 15)) * Tl::kLd + wk * kWarpK + 8 * (lane >> 4);
    const uint16_t* xb = xs + g * Tl::kLd + wk * kWarpK + 2 * tg;
#pragma unroll
    for (int kk = 0; kk < kWarpK; kk += 16) {
      uint32_t a[4];
      mma::ldmatrix_x4(wa + kk, a);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint16_t* b = xb + nt * 8 * Tl::kLd + kk;
        mma::m16n8k16(acc[nt], a, *reinterpret_cast<const uint32_t*>(b), *reinterpret_cast<const uint32_t*>(b + 8));
      }
    }
    __syncthreads();
  }

  store_tile<R, NT, Tl::kKGroups>(p, sp, acc, reinterpret_cast<float*>(smem), n0, warp, wr, g, tg, tid);
}

// The staged form (what the aligned Q4_0 / Q8_0 / Q4_K / Q6_K matrices take). The direct kernel above keeps one
// slice of W in flight per block and waits for it: ~0.5 TB/s. Here each slice's raw blocks are copied by cp.async
// into a ring of kStages buffers, kStages - 1 slices ahead of the one being dequantized (from shared memory, by the
// same dequant_chunk: a slice starts on a block boundary, so a row's staged bytes are a row of their own).
constexpr int kStages = 3;

template <quant::Type Q, int R>
struct Staged {
  using L = quant::dev::Layout<Q>;
  static constexpr int kChunksPerThread = R == 64 ? 4 : 2;
  static constexpr int kSlice = kThreads * kChunksPerThread * 32 / R;  // 512, 256, 256
  static_assert(kSlice % L::kBlockElems == 0, "slices of whole blocks");
  static constexpr int kRawBytes = kSlice / L::kBlockElems * L::kBlockBytes;  // a row's blocks in one slice
  static constexpr int kRawLd = (kRawBytes + 15) / 16 * 16;
  static constexpr int kRowGroups = R / 16, kKGroups = kWarps / kRowGroups;
  static constexpr int kWarpK = kSlice / kKGroups;
  static constexpr int kLd = kSlice + 8;
  static constexpr int kChunksPerRow = kSlice / 32;
};

template <quant::Type Q, int R, int NT>
constexpr size_t staged_smem_bytes() {
  using S = Staged<Q, R>;
  return size_t(kStages) * R * S::kRawLd + size_t(R + NT * 8) * S::kLd * 2;
}

// gran: 16 or 4, the cp.async size every row's slice start and length are multiples of (host-checked).
template <quant::Type Q, int R, int NT>
__global__ void __launch_bounds__(kThreads) batch_mm_staged_kernel(BatchMmParams p, const __half* xh, size_t row_bytes,
                                                                    int gran, Split sp) {
  using S = Staged<Q, R>;
  using L = typename S::L;
  constexpr int kCols = NT * 8;
  extern __shared__ __align__(16) uint8_t dyn[];
  uint8_t* raw = dyn;                                                             // [kStages][R][kRawLd]
  uint16_t* ws = reinterpret_cast<uint16_t*>(dyn + size_t(kStages) * R * S::kRawLd);  // [R][kLd]
  uint16_t* xs = ws + R * S::kLd;                                                 // [kCols][kLd]
  const int tid = int(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wr = warp % S::kRowGroups, wk = warp / S::kRowGroups;
  const int g = lane >> 2, tg = lane & 3;
  const int64_t n0 = int64_t(blockIdx.x) * R;
  const int64_t sl0 = int64_t(blockIdx.y) * sp.per_split;
  const int64_t n_slices = ::std::min<int64_t>((p.K + S::kSlice - 1) / S::kSlice, sl0 + sp.per_split);  // end
  const uint8_t* w = static_cast<const uint8_t*>(p.w);

  auto issue = [&](int64_t sl) {  // slice sl's raw blocks into its ring buffer; always a group, maybe empty
    if (sl < n_slices) {
      const int64_t k0 = sl * S::kSlice;
      const int bytes = int((::std::min<int64_t>(S::kSlice, p.K - k0)) / L::kBlockElems * L::kBlockBytes);
      uint8_t* dst = raw + (sl % kStages) * R * S::kRawLd;
      const int per_row = bytes / gran;
      for (int i = tid; i < R * per_row; i += kThreads) {
        const int r = i / per_row, o = (i % per_row) * gran;
        const int64_t row = ::std::min<int64_t>(n0 + r, p.N - 1);
        const uint8_t* src = w + row * row_bytes + k0 / L::kBlockElems * L::kBlockBytes + o;
        if (gran == 16) cp_async16(dst + r * S::kRawLd + o, src);
        else cp_async4_zfill(dst + r * S::kRawLd + o, src, 4);
      }
    }
    asm volatile("cp.async.commit_group;" ::: "memory");
  };

  float acc[NT][4] = {};
  for (int st = 0; st < kStages - 1; ++st) issue(sl0 + st);
  for (int64_t sl = sl0; sl < n_slices; ++sl) {
    issue(sl + kStages - 1);
    const int64_t k0 = sl * S::kSlice;
    // X from L2 (all loads, then all stores: one round trip a slice), while the staged copies land.
    constexpr int kVecs = S::kSlice / 8, kXPer = (kCols * kVecs + kThreads - 1) / kThreads;
    uint4 xv[kXPer];
#pragma unroll
    for (int j = 0; j < kXPer; ++j) {
      const int i = tid + j * kThreads, t = i / kVecs;
      const int64_t k = k0 + 8 * (i % kVecs);
      xv[j] = make_uint4(0u, 0u, 0u, 0u);
      if (i < kCols * kVecs && t < p.T && k < p.K) xv[j] = __ldg(reinterpret_cast<const uint4*>(xh + t * p.K + k));
    }
#pragma unroll
    for (int j = 0; j < kXPer; ++j) {
      const int i = tid + j * kThreads;
      if (i < kCols * kVecs) *reinterpret_cast<uint4*>(xs + (i / kVecs) * S::kLd + 8 * (i % kVecs)) = xv[j];
    }
    cp_async_wait<kStages - 1>();
    __syncthreads();  // every thread's copies of slice sl landed
    const uint8_t* rs = raw + (sl % kStages) * R * S::kRawLd;
    const int64_t chunks_left = (p.K - k0) / 32;
#pragma unroll
    for (int j = 0; j < S::kChunksPerThread; ++j) {
      const int i = tid + j * kThreads, r = i / S::kChunksPerRow, cl = i % S::kChunksPerRow;
      float v[32];
      if (cl < chunks_left) {
        quant::dev::dequant_chunk<Q>(rs + r * S::kRawLd, cl, 32, v);
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) v[e] = 0.0f;
      }
      uint4 h[4];
#pragma unroll
      for (int q = 0; q < 4; ++q) h[q] = pack8(v + 8 * q);
      uint4* dst = reinterpret_cast<uint4*>(ws + r * S::kLd + 32 * cl);
#pragma unroll
      for (int q = 0; q < 4; ++q) {
        const int qq = (q + (lane >> 1)) & 3;
        dst[qq] = qq == 0 ? h[0] : qq == 1 ? h[1] : qq == 2 ? h[2] : h[3];
      }
    }
    __syncthreads();
    const uint16_t* wa = ws + (wr * 16 + (lane & 15)) * S::kLd + wk * S::kWarpK + 8 * (lane >> 4);
    const uint16_t* xb = xs + g * S::kLd + wk * S::kWarpK + 2 * tg;
#pragma unroll
    for (int kk = 0; kk < S::kWarpK; kk += 16) {
      uint32_t a[4];
      mma::ldmatrix_x4(wa + kk, a);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const uint16_t* b = xb + nt * 8 * S::kLd + kk;
        mma::m16n8k16(acc[nt], a, *reinterpret_cast<const uint32_t*>(b), *reinterpret_cast<const uint32_t*>(b + 8));
      }
    }
    __syncthreads();  // ws, xs and this slice's ring buffer are rewritten next
  }
  cp_async_wait<0>();
  store_tile<R, NT, S::kKGroups>(p, sp, acc, reinterpret_cast<float*>(dyn), n0, warp, wr, g, tg, tid);
}

// y = the splits' partial sums in split order (+ bias): the same bits every run.
__global__ void split_sum_kernel(const float* part, const float* bias, float* y, int64_t N, int64_t n, int splits) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float s = bias ? bias[i % N] : 0.0f;
  for (int k = 0; k < splits; ++k) s += part[k * n + i];
  y[i] = s;
}

// Splits for a matrix of `row_blocks` blocks: enough for ~4 blocks per SM of a 132-SM H100/H200 (a constant, so the
// scratch bound below does not depend on the device), at most kMaxSplits.
constexpr int64_t kTargetBlocks = 528, kMaxSplits = 8;
int64_t wanted_splits(int64_t row_blocks) {
  return row_blocks >= kTargetBlocks ? 1 : ::std::min(kMaxSplits, (kTargetBlocks + row_blocks - 1) / row_blocks);
}
int rows_for_tokens(int64_t T) { return T <= 8 ? 16 : T <= 32 ? 32 : 64; }  // as launch_for_tokens

// The launch's split plan for slices of `slice` elements (slices a split takes; part null without splits), and the
// grid. part: the scratch after x's half copy.
struct SplitPlan {
  Split split;
  dim3 grid;
};
SplitPlan plan_split(const BatchMmParams& p, int R, int slice) {
  const int64_t row_blocks = (p.N + R - 1) / R;
  const int64_t n_slices = (p.K + slice - 1) / slice;
  const int64_t want = ::std::min(wanted_splits(row_blocks), n_slices);
  const int64_t per = (n_slices + want - 1) / want;
  const int64_t splits = (n_slices + per - 1) / per;
  float* part = splits > 1 ? reinterpret_cast<float*>(static_cast<uint8_t*>(p.scratch) +
                                                      align256(size_t(p.K) * size_t(p.T) * 2))
                           : nullptr;
  return {{per, part}, dim3(unsigned(row_blocks), unsigned(splits))};
}

void launch_split_sum(const BatchMmParams& p, const SplitPlan& sp, cudaStream_t stream) {
  if (!sp.split.part) return;
  const int64_t n = p.N * p.T;
  split_sum_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(sp.split.part, p.bias, p.y, p.N, n, int(sp.grid.y));
}

__global__ void x_to_half_kernel(const float* x, __half* out, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

// The staged kernel when every row's slices start and end on cp.async sizes (16 bytes, else 4); false: not aligned.
template <quant::Type Q, int R, int NT>
bool launch_staged(const BatchMmParams& p, const __half* xh, size_t rb, cudaStream_t stream) {
  using S = Staged<Q, R>;
  using L = typename S::L;
  const size_t tail = size_t(p.K % S::kSlice) / L::kBlockElems * L::kBlockBytes;  // the last, partial slice's bytes
  const auto fits = [&](size_t a) {
    return reinterpret_cast<uintptr_t>(p.w) % a == 0 && rb % a == 0 && S::kRawBytes % a == 0 && tail % a == 0;
  };
  const int gran = fits(16) ? 16 : fits(4) ? 4 : 0;
  if (gran == 0) return false;
  constexpr size_t smem = staged_smem_bytes<Q, R, NT>();
  const SplitPlan sp = plan_split(p, R, S::kSlice);
  static const bool attr = [] {  // once per instance, at its first launch (before any graph capture)
    CUDA_CHECK(cudaFuncSetAttribute(batch_mm_staged_kernel<Q, R, NT>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
    return true;
  }();
  (void)attr;
  batch_mm_staged_kernel<Q, R, NT><<<sp.grid, kThreads, smem, stream>>>(p, xh, rb, gran, sp.split);
  launch_split_sum(p, sp, stream);
  return true;
}

template <quant::Type Q, bool kX8, int R, int NT>
void launch_tile(const BatchMmParams& p, const __half* xh, size_t rb, cudaStream_t stream) {
  if constexpr (!kX8) {
    if (p.staged && launch_staged<Q, R, NT>(p, xh, rb, stream)) return;
  }
  const SplitPlan sp = plan_split(p, R, Tile<R, NT>::kSlice);
  batch_mm_kernel<Q, kX8, R, NT><<<sp.grid, kThreads, 0, stream>>>(p, xh, rb, sp.split);
  launch_split_sum(p, sp, stream);
}

// The one place T picks the tile (see the file comment): rows per block and 8-token n-tiles.
template <quant::Type Q, bool kX8>
void launch_for_tokens(const BatchMmParams& p, const __half* xh, size_t rb, cudaStream_t stream) {
  if (p.T <= 8) launch_tile<Q, kX8, 16, 1>(p, xh, rb, stream);
  else if (p.T <= 16) launch_tile<Q, kX8, 32, 2>(p, xh, rb, stream);
  else if (p.T <= 32) launch_tile<Q, kX8, 32, 4>(p, xh, rb, stream);
  else launch_tile<Q, kX8, 64, 8>(p, xh, rb, stream);
}

}  // namespace

bool batch_mm_supports(quant::Type type, bool regrouped, int64_t K, int64_t T) {
  using quant::Type;
  if (T < 1 || T > kBatchMmMaxTokens || K <= 0 || K % quant::traits(type).block_elems != 0) return false;
  if (regrouped) return type == Type::Q6_K && K % 2048 == 0;
  return type == Type::Q4_0 || type == Type::Q8_0 || type == Type::Q4_K || type == Type::Q6_K;
}

size_t batch_mm_scratch(int64_t K, int64_t N, int64_t T) {
  const int64_t splits = wanted_splits((N + rows_for_tokens(T) - 1) / rows_for_tokens(T));
  return align256(size_t(K) * size_t(T) * 2) + (splits > 1 ? size_t(splits) * size_t(N) * size_t(T) * 4 : 0);
}

void launch_batch_mm(const BatchMmParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.y, "null pointer");
  LLM_REQUIRE(p.N > 0 && p.N <= int64_t(64) * 0x7fffffff, "rows out of range");
  LLM_REQUIRE(batch_mm_supports(p.type, p.regrouped, p.K, p.T),
              "small-batch product: type " + ::std::string(quant::type_name(p.type)) +
                  (p.regrouped ? " (regrouped)" : "") + ", K = " + ::std::to_string(p.K) +
                  ", T = " + ::std::to_string(p.T) + " not served");
  LLM_REQUIRE(p.scratch && p.scratch_bytes >= batch_mm_scratch(p.K, p.N, p.T) &&
                  (reinterpret_cast<uintptr_t>(p.scratch) & 15) == 0,
              "scratch below batch_mm_scratch or not 16-byte aligned");
  LLM_REQUIRE(p.type != quant::Type::Q4_K || (reinterpret_cast<uintptr_t>(p.w) & 15) == 0,
              "Q4_K weights must be 16-byte aligned");
  if (p.regrouped) LLM_REQUIRE(q6_kx8_fits(p.w, p.K), "Q6_Kx8 rows: K % 2048 == 0, 16-byte aligned");
  const size_t rb = quant::row_bytes(p.type, p.K);
  auto* xh = static_cast<__half*>(p.scratch);
  if (!p.x_in_scratch) {
    const int64_t n = p.K * p.T;
    x_to_half_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(p.x, xh, n);
    CUDA_CHECK_LAUNCH(stream);
  }
  using quant::Type;
  switch (p.type) {
    case Type::Q4_0: launch_for_tokens<Type::Q4_0, false>(p, xh, rb, stream); break;
    case Type::Q8_0: launch_for_tokens<Type::Q8_0, false>(p, xh, rb, stream); break;
    case Type::Q4_K: launch_for_tokens<Type::Q4_K, false>(p, xh, rb, stream); break;
    case Type::Q6_K:
      if (p.regrouped) launch_for_tokens<Type::Q6_K, true>(p, xh, rb, stream);
      else launch_for_tokens<Type::Q6_K, false>(p, xh, rb, stream);
      break;
    default: throw InvalidArgument(::std::string("small-batch product: no kernel for ") + quant::type_name(p.type));
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
