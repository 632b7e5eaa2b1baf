// Small-batch matrix products Y = W X for 2..64 tokens (B sequences decoding together): every weight byte is read
// once per launch for all T columns, unpacked to half in shared memory and multiplied on tensor cores, instead of
// once per column (matvec) or through a dequantized copy of the whole matrix (gemm.cuh).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/glu_epilogue.cuh"
#include "cuda/kernels/product_stack.cuh"
#include "quant/types.h"

namespace cuda {

inline constexpr int64_t kBatchMmMaxTokens = 64;
inline constexpr int64_t kBatchMmGluMaxTokens = 8;  // the launches that take a SwiGLU epilogue (launch_batch_mm)
// batch_mm_i8.cuh's s8 kernel takes Q4_K products of 2..kBatchMmI8MaxTokens tokens and regrouped Q6_K ones of up to
// kBatchMmI8Q6x8MaxTokens (BatchMmChoices; measurements there).
inline constexpr int64_t kBatchMmI8MaxTokens = 8;
inline constexpr int64_t kBatchMmI8Q6x8MaxTokens = 4;
// Q4_K and Q6_Kx8 launches run batch_mm_wgmma.cuh's kernel (launch_batch_mm) from kBatchMmWgmmaMinTokens tokens on,
// and those of at least kBatchMmWgmmaLargeWeights weights (the launch's rows x K: the feed-forward matrices and the
// output matrix of a 7-8B model, not its q/k/v or o) from their format's large bound when that is lower. At 17..32
// tokens half the kernel's 64 token columns are idle: large Q4_K took it from 17 against the wide kernel's two
// register sets (sessions 36-37: ~25%), and lost it to the wide kernel's three (session 60, H100: B = 20..32 +5.3-6.1%,
// 4096x28672 at 24 tokens 60 -> 54 us), so its bound is the general one now (docs/kernel-notes.md).
inline constexpr int64_t kBatchMmWgmmaMinTokens = 33;
inline constexpr int64_t kBatchMmWgmmaLargeMinTokens = 33;
inline constexpr int64_t kBatchMmWgmmaLargeWeights = int64_t(32) << 20;
// Large regrouped Q6_K (Q6_Kx8) launches take the wgmma kernel from 17 tokens. At 9..16 the fragment kernel read them at
// ~1 TB/s and wgmma (one block an SM, three quarters of its columns idle) gained 1.5-1.8% over it (session 59); the
// wide kernel in two register sets (BatchMmChoices::wide_q6x8) gains 3.3-3.5% over wgmma there, and loses 2.4% at 32
// tokens (session 62, H100, B = 12 / 16 / 32; docs/kernel-notes.md).
inline constexpr int64_t kBatchMmWgmmaQ6x8LargeMinTokens = 17;
// The wide kernel (batch_mm_wide.cuh) holds W in three register sets in turn, two super-blocks loading, at three
// blocks an SM, from 17 tokens to 32 (one m-tile a warp): H100 lab at 32 tokens 4096x28672 59 -> 53 us, 14336x4096
// 39 -> 35, B = 32 +2.8%; at 16 tokens it lost (40 -> 43 us), so 9..16 keep two sets (docs/kernel-notes.md, session 60).
inline constexpr int64_t kBatchMmWideThreeSetsMinTokens = 17;

// Where launch_batch_mm sends a launch to the wgmma kernel: from min_tokens on, a large one from the lower of min_tokens
// and its format's large bound. All three above kBatchMmMaxTokens turn that path off (A/B runs: ExecutorOptions).
struct WgmmaRoute {
  int64_t min_tokens = kBatchMmWgmmaMinTokens;
  int64_t large_min_tokens = kBatchMmWgmmaLargeMinTokens;
  // A large regrouped Q6_K launch's own bound (large_min_tokens is Q4_K's).
  int64_t q6x8_large_min_tokens = kBatchMmWgmmaQ6x8LargeMinTokens;
};

// A launch deals its tiles' slices to its blocks in equal runs (stream-K); a tile two blocks share is counted in one
// of these words, and the last of its blocks to finish adds the partial sums in block order. The owner zeroes them
// once; every launch leaves them zero again. One word a tile of 16 or 32 rows: 32 768 tiles, a 512k-row matrix (a
// 128k vocabulary's output matrix has 8 016); batch_mm_supports refuses larger ones.
inline constexpr size_t kBatchMmCounterBytes = 128 << 10;

struct BatchMmParams {
  const void* w = nullptr;      // [K, N]: N rows of K elements of `type`, quant::row_bytes(type, K) bytes apart
  quant::Type type = quant::Type::F32;
  const float* x = nullptr;     // [K, T]: column t at x + t*K
  const float* bias = nullptr;  // [N] or null, added to every column
  float* y = nullptr;           // [N, T]: column t at y + t*N
  int64_t K = 0;
  int64_t N = 0;
  int64_t T = 0;                // 1..kBatchMmMaxTokens
  void* scratch = nullptr;      // >= batch_mm_scratch(K, N, T) bytes: x as half, [K, T], at its start (as gemm.cuh)
  size_t scratch_bytes = 0;
  bool x_in_scratch = false;    // the previous launch on this stream left this same x (K, T) in scratch as half
                                // (ignored where batch_mm_reads_float_x)
  bool regrouped = false;       // Q6_K regrouped at upload into Q6_Kx8 (q6_kx8.cuh)
  uint32_t* tile_counters = nullptr;  // kBatchMmCounterBytes of zeroed words (above); every launch needs them
  // Non-null: x is the SwiGLU silu(x_gate) * x ([K, T] as x), formed by the launch as it reads x: the element-wise
  // launch before the product and its float output are left out. Only where batch_mm_forms_glu_x (the wgmma and i8
  // kernels' images of x apply it).
  const float* x_gate = nullptr;
};

// True when launch_batch_mm takes this matrix: Q4_0, Q8_0, Q4_K, Q6_K (Q6_K also regrouped), in the file's layout,
// 1 <= T <= kBatchMmMaxTokens, N rows whose tiles the counters hold. Other types, layouts and sizes keep the matvec
// / GEMM paths.
bool batch_mm_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T);

// True when the launch takes the wgmma kernel (batch_mm_wgmma.cuh), which writes its own image of x first and so
// can form x from a SwiGLU's gate and up (BatchMmParams::x_gate). N: the launch's rows (a stack's in all); route:
// as launch_batch_mm's.
bool batch_mm_takes_wgmma(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                          const WgmmaRoute& route = {});

// How launch_batch_mm picks and launches its kernels. The defaults are the measured best; the executor's options
// (ExecutorOptions) turn each off for A/B runs.
struct BatchMmChoices {
  bool wide = true;          // Q4_K products of 9..48 tokens on batch_mm_wide.cuh's kernel (false: the fragment kernel)
  WgmmaRoute wgmma;          // which Q4_K and Q6_Kx8 products take batch_mm_wgmma.cuh's kernel
  bool programmatic = true;  // launched to overlap the kernel before (pdl.cuh): W's first loads, x's conversion
  bool i8 = true;            // Q4_K products of 2..8 tokens on batch_mm_i8.cuh's kernel (false: the fragment kernel)
  int i8_warps_per_sm = 8;   // the i8 kernel's grid: warps a tile chosen for about this many warps an SM
  bool i8_q6x8 = true;       // regrouped Q6_K (Q6_Kx8) of 2..4 tokens on the i8 kernel too (false: the fragment kernel)
  int64_t i8_max_tokens = kBatchMmI8MaxTokens;  // the i8 kernel's Q4_K products of up to this many tokens
  // The wide kernel's W in three register sets from this many tokens to 32 (two below; above 32 never).
  int64_t wide_three_sets_min_tokens = kBatchMmWideThreeSetsMinTokens;
  // The wide kernel's 17..24-token products in three n-tiles of 8 tokens, not four, and a paged session's steps of
  // 17..24 tokens in a bucket of 24, not 32 (session 60, H100: B = 17 / 20 / 24 +8.8-8.9%).
  bool wide_three_tiles = true;
  // Large regrouped Q6_K (Q6_Kx8, kBatchMmWgmmaLargeWeights) where the wgmma kernel does not take it (9..16 tokens by
  // default) on the wide kernel too, not the fragment kernel. Small ones (v) stay: 0.3-0.4% slower on it at B = 12 /
  // 16 (session 62, H100).
  bool wide_q6x8 = true;
  int64_t wide_q6x8_min_weights = kBatchMmWgmmaLargeWeights;  // K x N from which a Q6_Kx8 launch is large (tests: 0)
};

// True when the launch reads x as float itself (Q4_K and Q6_Kx8 at T <= 8, and wherever the wgmma or the i8 kernel
// takes it): it neither converts x into the scratch nor reads a copy there, so a launch after it finds the scratch's
// half x as the one before it left it. N: the launch's rows (a stack's in all); choices: as launch_batch_mm's.
bool batch_mm_reads_float_x(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                            const BatchMmChoices& choices = {});

// True when launch_batch_mm takes batch_mm_wide.cuh's kernel for these choices (without a SwiGLU epilogue).
bool batch_mm_takes_wide(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                         const BatchMmChoices& choices);

// True when launch_batch_mm takes batch_mm_i8.cuh's kernel for these choices (the executor plans its folds on it).
bool batch_mm_takes_i8(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                       const BatchMmChoices& choices);

// True when the launch takes a kernel that writes its own image of x (the wgmma kernel, or batch_mm_i8.cuh's with
// choices.i8) and so can form x from a SwiGLU's gate and up (BatchMmParams::x_gate).
bool batch_mm_forms_glu_x(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T,
                          const BatchMmChoices& choices);

// Scratch the launch needs: x as half, laid out as launch_gemm lays it out (so the two can share a conversion), then
// the partial sums of the tiles its blocks share.
size_t batch_mm_scratch(int64_t K, int64_t N, int64_t T);

// Runs on `stream`; never allocates (safe inside CUDA graph capture). Throws cuda::InvalidArgument on bad params
// (weights must be 16-byte aligned). glu: the SwiGLU as the launch's epilogue (W the up matrix, y the activation's
// output), T <= kBatchMmGluMaxTokens. A kernel argument of its own, not a field of BatchMmParams: with the fields,
// the 16- and 32-token instances, which never take it, compiled differently and decoded 1% slower.
// stack: the matrices of a stacked launch (product_stack.cuh), or null; not with glu. choices: which kernels, and how
// they are launched (BatchMmChoices).
// i8_link: a residual Add and a norm around the launch (batch_mm_i8.cuh's I8NormLink), only where it takes the i8
// kernel.
struct I8NormLink;
void launch_batch_mm(const BatchMmParams& p, cudaStream_t stream, const GluEpilogue& glu = {},
                     const ProductStack* stack = nullptr, const BatchMmChoices& choices = {},
                     const I8NormLink* i8_link = nullptr);

}  // namespace cuda
