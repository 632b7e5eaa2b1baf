// Q4_K products of 2..8 tokens on integer tensor cores (mma.sync m16n8k32 on s8), for launch_batch_mm; regrouped
// Q6_K too where asked (q6kx8_i8_lane.cuh).
//
// Why. At <= 8 tokens the half-fragment kernel (batch_mm.cu) spends ~6.4 instructions a weight turning every code
// into a scaled half (session 38's count), whatever the token count, and runs at ~1.5 TB/s. Here the codes go into
// the products as they are (a nibble masked, 4 codes an instruction) and the scales are applied once per 32 weights
// and output: ~1.8 instructions a weight at up to 4 tokens, about what the one-token int16 matvec spends.
//
// x. Each token's x is held per run of 32 as int16 steps (scale max|x| / 32639, each element rounded once) and split
// into a high and a low signed byte, v = 256 hi + lo, lo in [-128, 127]; a token's hi and lo bytes are two of the
// mma's 8 columns, so one product serves 4 tokens exactly (int32 sums). A first launch writes that image once for
// all blocks (batch_mm_i8_scratch); the product is a programmatic dependent of it. Left out (wrong results), the
// image launches bounded +5.7% at B = 4 with a first image kernel of one thread a run; four threads a run took
// +2.5% of it. The norms and the SwiGLU writing the image themselves is the next step (docs/kernel-notes.md).
// The executor sends Q4_K products of 2 tokens to matvec_cols.cuh first (B = 2: 692 tok/s, against 587 with the
// few-column kernel off for every type).
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/batch_mm.cuh"

namespace cuda {

// Tokens (kBatchMmI8MaxTokens, batch_mm.cuh): one group of 4 (one product's 8 columns) or two (5..8 tokens, each
// group its own products with the same A registers). Session 43's first form of 5..8 tokens (x loaded whole a
// super-block) measured slower than the half-fragment kernel (bench --parallel 8 1 945 -> 1 820 tok/s). The groups'
// form (the weights' scales and nibbles unpacked once for both groups, x a pair of sub-blocks and a group at a time)
// is slower than it alone too (KernelLab.BatchMm, H100, the 8B's gate|up at 8 tokens: 53 against 45 us) but faster
// in the model, where it brings the norm and SwiGLU folds: bench --parallel 8 1 902 / 1 908 -> 1 965 / 1 969 (+3.3%,
// session 58). Four groups (9..16 tokens) lost: gate|up 83 us against the wide kernel's 41, B = 16 3 498 -> 2 566.
// Regrouped Q6_K only up to 4 tokens: at B = 8 it cost ~2% (session 58).
//
// True when launch_batch_mm_i8 can take the product: 2 <= T <= kBatchMmI8MaxTokens of Q4_K in the file's layout, or
// 2 <= T <= kBatchMmI8Q6x8MaxTokens of regrouped Q6_K (Q6_Kx8, K % 2048 == 0) where q6_kx8 (BatchMmChoices::i8_q6x8).
bool batch_mm_i8_serves(quant::Type type, bool regrouped, int64_t T, bool q6_kx8 = false);

// A residual Add and the RMSNorm after it around i8 products (the executor's norm_images), so that the norm runs no
// launch of its own. Producer side (the product before the Add): y = W x (+ bias) + residual, and per tile of 16
// rows and token the sum of the squares of its outputs, sumsq_out[t * tiles + tile] (tiles: the launch's, N / 16
// rounded up; the launch's token columns written, T rounded up to a group of 4, zeros past T). Reader side (a
// product of the norm): its image launch normalises x, the Add's sum, as the norm launch would (x scale w, scale =
// rsqrt(sum of the parts' sums / K + eps)), K a multiple of 512 (batch_mm_i8_norm_fits). Either side may be left
// out (null).
struct I8NormLink {
  const float* residual = nullptr;  // [N, T]: producer, added to the product (not with a SwiGLU epilogue or a stack)
  float* sumsq_out = nullptr;       // [kBatchMmI8MaxTokens, tiles]: producer
  const float* norm_w = nullptr;    // [K]: reader, the norm's weight
  const float* sumsq_in = nullptr;  // [kBatchMmI8MaxTokens, parts]: reader, the producer's sumsq_out
  int32_t parts = 0;
  float eps = 0.0f;
};

// True when a reader's image can normalise x of K elements (each image block's runs lie in one token).
bool batch_mm_i8_norm_fits(int64_t K);

// The floats of a producer's sumsq_out for N rows.
size_t batch_mm_i8_sumsq_floats(int64_t N);

// Bytes of the image of x (any T up to kBatchMmI8MaxTokens) the launch writes at `image`.
size_t batch_mm_i8_scratch(int64_t K);

// Runs on `stream`: the image launch, then the product (programmatic where `programmatic`, pdl.cuh); never
// allocates. launch_batch_mm has checked the params; image: batch_mm_i8_scratch(K) bytes, 16-byte aligned.
// warps_per_sm: the grid's warps a tile are chosen for about this many warps an SM (BatchMmChoices).
void launch_batch_mm_i8(const BatchMmParams& p, void* image, const GluEpilogue& glu, const ProductStack* stack,
                        cudaStream_t stream, bool programmatic, const I8NormLink& link = {}, int warps_per_sm = 8);

}  // namespace cuda
