// The image of a prompt's x that the warpgroup prompt kernel reads (batch_mm_wgmma.cu's launch_prompt_wgmma, in tiles
// of kC = 128 tokens): x in half, in exactly the order its shared-memory stages need, so that a stage is a contiguous
// run of it. 16-byte piece ((tt * n_sb + sb) * 16 + s) * 2 + c) * kC + n holds token
// tt kC + n's positions 8 c .. 8 c + 7 of k-step s of super-block sb (n_sb = K / 256), rounded as launch_x_to_half
// rounds; zero for tokens from T on. Positions 8 c + 2 u, + 1 are elements F::element(s, 8 c + 2 u) and the next
// (wgmma_formats.cuh). Included by the sm_90a kernels' files only.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/swiglu.cuh"

namespace cuda::prompt_image {

inline constexpr int kSbElems = 256, kSteps = kSbElems / 16;  // a super-block's elements and k-steps

inline int64_t token_tiles(int64_t T, int kC) { return (T + kC - 1) / kC; }
// A super-block of x for kC tokens, and the whole image.
inline constexpr size_t sb_bytes(int kC) { return size_t(kSteps) * 2 * kC * 16; }
inline size_t image_bytes(int64_t K, int64_t T, int kC) {
  return size_t(token_tiles(T, kC)) * size_t(K / kSbElems) * sb_bytes(kC);
}

// Written by blocks of kImageTokens tokens of one token tile and one super-block: each token's 256 floats read whole
// (a warp a token, coalesced), rounded to half into shared memory in element order, then the pieces gathered from
// there and written in the image's order (consecutive threads, consecutive tokens: coalesced). One piece a thread
// (the small-batch image's form) read 8 bytes from each of 4 places a token's row apart: a quarter of every 32-byte
// sector, which at 512-2048 tokens cost more than the product.
// Launched programmatically, as is the product after it, which it lets start at once: the product loads its first
// W while the image is written (pdl.cuh). Plain loads of x, the kernel before's output, after the wait.
// gate: x is the SwiGLU silu(gate) * x, formed here as the element-wise launch it replaces forms it (swiglu.cuh's
// silu, then the product), so the image holds the same halves.
// 16 tokens a block: 32 blocks a super-block at 512 tokens.
inline constexpr int kImageTokens = 16, kImageThreads = 128;
template <class F, int kC>
__global__ void __launch_bounds__(kImageThreads)
    prompt_image_kernel(const float* x, const float* gate, uint4* __restrict__ image, int64_t K, int64_t T) {
  static_assert(kC % kImageTokens == 0, "whole blocks a token tile");
  pdl_launch_dependents();
  pdl_wait();
  constexpr int kLd = kSbElems / 2 + 1;  // words (half pairs) a row; the odd stride spreads a column over the banks
  __shared__ uint32_t rows[kImageTokens][kLd];
  const int64_t n_sb = K / kSbElems, sb = blockIdx.x % n_sb, part = blockIdx.x / n_sb;  // part: kImageTokens tokens
  const int64_t t0 = part * kImageTokens;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  for (int n = warp; n < kImageTokens; n += kImageThreads / 32) {
    const int64_t token = t0 + n;
#pragma unroll
    for (int h = 0; h < 4; ++h) {  // word w = lane + 32 h: floats 2 w, 2 w + 1 of the super-block (8-byte aligned x)
      const int w = lane + 32 * h;
      float2 f = make_float2(0.f, 0.f);
      if (token < T) {
        const int64_t at = token * K + sb * kSbElems + 2 * w;
        f = *reinterpret_cast<const float2*>(x + at);
        if (gate) {
          const float2 g = *reinterpret_cast<const float2*>(gate + at);
          f = make_float2(silu(g.x) * f.x, silu(g.y) * f.y);
        }
      }
      const __half2 v = __floats2half2_rn(f.x, f.y);
      rows[n][w] = *reinterpret_cast<const uint32_t*>(&v);
    }
  }
  __syncthreads();
  // Piece (s, c, n) of this block: the image's ((tile * n_sb + sb) * kSteps + s) * 2 + c) * kC + t0 % kC + n.
  uint4* const out = image + ((part * kImageTokens / kC) * n_sb + sb) * (sb_bytes(kC) / 16) + t0 % kC;
  for (int i = tid; i < kSteps * 2 * kImageTokens; i += kImageThreads) {
    const int n = i % kImageTokens, c = i / kImageTokens % 2, st = i / (2 * kImageTokens);
    uint32_t h[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) h[u] = rows[n][F::element(st, 8 * c + 2 * u) / 2];
    out[(st * 2 + c) * kC + n] = make_uint4(h[0], h[1], h[2], h[3]);
  }
}

// Writes the image of x (and gate) for T tokens in tiles of kC.
template <class F, int kC>
void launch_prompt_image(const float* x, const float* gate, void* image, int64_t K, int64_t T, cudaStream_t stream) {
  const int64_t blocks = token_tiles(T, kC) * (kC / kImageTokens) * (K / kSbElems);
  launch_programmatic(true, prompt_image_kernel<F, kC>, dim3(unsigned(blocks)), kImageThreads, 0, stream, x, gate,
                      static_cast<uint4*>(image), K, T);
}

}  // namespace cuda::prompt_image
