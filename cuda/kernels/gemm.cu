// Prefill GEMM: dequantize-to-half + cuBLAS. Why this form first: it is exact up to the half rounding of W and X,
// works for every block format through the one dequant_chunk definition, and cuBLAS runs the product on tensor cores;
// integer tensor-core kernels are a later lab variant (docs/kernel-notes.md).
#include "cuda/kernels/gemm.cuh"

#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/q4_0_cols.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMinRows = 128;

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

__device__ __forceinline__ uint32_t half2_bits(float lo, float hi) {
  // Hardware round-to-nearest-even, two values per instruction: the same bits as quant::f32_to_f16 (~15 integer
  // instructions per value) except for NaN payloads.
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// One thread per 32-element chunk of the slice. A thread's 64 output bytes are contiguous, so its own 16-byte stores
// hit every other 32-byte sector across the warp; when the warp's 32 chunks are one contiguous 2 KiB run (K a multiple
// of 32, the warp full), they pass through shared memory and leave as four 512-byte warp stores instead.
template <quant::Type T, bool kX8 = false>
__global__ void __launch_bounds__(kThreads) dequant_f16_kernel(DequantF16Params p, size_t row_bytes) {
  using quant::dev::kChunk;
  __shared__ uint4 stage[kThreads / 32][32 * 4];
  const int64_t chunks_per_row = (p.K + kChunk - 1) / kChunk;
  const int64_t total = chunks_per_row * p.rows;
  const int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x;
  const int lane = threadIdx.x & 31;
  const bool staged = p.K % kChunk == 0 && i - lane + 31 < total && (reinterpret_cast<uintptr_t>(p.out) & 15) == 0;
  if (i >= total) return;  // never a staged warp
  const int64_t r = i / chunks_per_row, c = i % chunks_per_row;
  const uint8_t* row = static_cast<const uint8_t*>(p.w) + (p.row0 + r) * row_bytes;
  const int valid = int((p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk));
  float v[kChunk];
  if constexpr (kX8) {
    static_assert(T == quant::Type::Q6_K, "only Q6_K is regrouped by runs");
    q6_kx8_dequant_chunk(row, c, v);  // K % 2048 == 0: every chunk whole
  } else {
    quant::dev::dequant_chunk<T>(row, c, valid, v);
  }
  uint16_t* out = p.out + r * p.K + c * kChunk;
  if (staged) {
    // uint4 j of lane l goes to slot 4l + (j ^ ((l >> 1) & 3)): conflict-free both ways (8 lanes per phase).
    uint4* st = stage[threadIdx.x >> 5];
    const int sw = (lane >> 1) & 3;
#pragma unroll
    for (int j = 0; j < 4; ++j)
      st[4 * lane + (j ^ sw)] = make_uint4(half2_bits(v[8 * j], v[8 * j + 1]), half2_bits(v[8 * j + 2], v[8 * j + 3]),
                                           half2_bits(v[8 * j + 4], v[8 * j + 5]),
                                           half2_bits(v[8 * j + 6], v[8 * j + 7]));
    __syncwarp();
    uint4* dst = reinterpret_cast<uint4*>(out - int64_t(lane) * kChunk);  // the warp's first chunk
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int idx = lane + 32 * k, src = idx >> 2;
      dst[idx] = st[4 * src + ((idx & 3) ^ ((src >> 1) & 3))];
    }
  } else if (valid == kChunk && (reinterpret_cast<uintptr_t>(out) & 15) == 0) {
#pragma unroll
    for (int j = 0; j < kChunk; j += 8)
      *reinterpret_cast<uint4*>(out + j) = make_uint4(half2_bits(v[j], v[j + 1]), half2_bits(v[j + 2], v[j + 3]),
                                                      half2_bits(v[j + 4], v[j + 5]), half2_bits(v[j + 6], v[j + 7]));
  } else {
#pragma unroll
    for (int j = 0; j < kChunk; ++j)
      if (j < valid) out[j] = quant::f32_to_f16(v[j]);
  }
}

// Q4_0 regrouped by columns (q4_0_cols.cuh), by tiles of 32 rows x 8 column blocks through shared memory: the reads
// go along a column block (consecutive threads on consecutive rows: 512 contiguous bytes a warp), the writes along
// the output rows (8 threads write a row's 512 contiguous bytes). K % 256 == 0: whole tiles across.
constexpr int kColsTileRows = 32, kColsTileCols = 8;
static_assert(kColsTileRows * kColsTileCols == kThreads, "one block of the tile a thread");
__global__ void __launch_bounds__(kThreads) dequant_q4_0_cols_kernel(DequantF16Params p) {
  __shared__ uint4 tile[kColsTileRows][kColsTileCols * 4];  // 64 bytes (32 halves) a block
  const int64_t col_tiles = p.K / 32 / kColsTileCols;
  const int64_t r0 = int64_t(blockIdx.x) / col_tiles * kColsTileRows;
  const int64_t c0 = int64_t(blockIdx.x) % col_tiles * kColsTileCols;
  {
    const int rr = int(threadIdx.x) % kColsTileRows, cc = int(threadIdx.x) / kColsTileRows;
    if (r0 + rr < p.rows) {
      const Q4_0ColsBlock b = q4_0_cols_block(static_cast<const uint8_t*>(p.w), p.K, p.N, p.row0 + r0 + rr, c0 + cc);
      const uint4 q = *reinterpret_cast<const uint4*>(b.qs);
      const float d = quant::dev::h2f(*reinterpret_cast<const uint16_t*>(b.d));
      const uint32_t w[4] = {q.x, q.y, q.z, q.w};
      float v[32];
#pragma unroll
      for (int j = 0; j < 16; ++j) {
        const uint32_t byte = (w[j / 4] >> (8 * (j % 4))) & 0xffu;
        v[j] = float(int(byte & 0x0f) - 8) * d, v[j + 16] = float(int(byte >> 4) - 8) * d;
      }
#pragma unroll
      for (int j = 0; j < 4; ++j)
        tile[rr][4 * cc + j] = make_uint4(half2_bits(v[8 * j], v[8 * j + 1]), half2_bits(v[8 * j + 2], v[8 * j + 3]),
                                          half2_bits(v[8 * j + 4], v[8 * j + 5]), half2_bits(v[8 * j + 6], v[8 * j + 7]));
    }
  }
  __syncthreads();
  const int rr = int(threadIdx.x) / kColsTileCols, cc = int(threadIdx.x) % kColsTileCols;
  if (r0 + rr >= p.rows) return;
  uint4* out = reinterpret_cast<uint4*>(p.out + (r0 + rr) * p.K + (c0 + cc) * 32);
#pragma unroll
  for (int j = 0; j < 4; ++j) out[j] = tile[rr][4 * cc + j];
}

__global__ void f32_to_f16_kernel(const float* x, __half* out, int64_t n) {
  pdl_wait();  // x is the kernel before's output (a programmatic launch; a no-op otherwise)
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2half_rn(x[i]);
}

__global__ void add_bias_kernel(float* y, const float* bias, int64_t N, int64_t n) {
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += bias[i % N];
}

unsigned blocks_for(int64_t n, int threads) { return unsigned((n + threads - 1) / threads); }

}  // namespace

void launch_x_to_half(const float* x, void* out, int64_t n, cudaStream_t stream, bool programmatic) {
  launch_programmatic(programmatic, f32_to_f16_kernel, dim3(blocks_for(n, 256)), 256, 0, stream, x,
                      static_cast<__half*>(out), n);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_dequant_f16(const DequantF16Params& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.out, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.rows > 0 && p.row0 >= 0, "empty or negative shape");
  const size_t rb = quant::row_bytes(p.type, p.K);
  const int64_t chunks = (p.K + quant::dev::kChunk - 1) / quant::dev::kChunk * p.rows;
  LLM_REQUIRE(chunks / kThreads < 0x7fffffff, "slice too large for one launch");
  if (p.regrouped && p.type == quant::Type::Q4_0) {
    const bool out_aligned = (reinterpret_cast<uintptr_t>(p.out) & 15) == 0;
    LLM_REQUIRE(q4_0_cols_fits(p.w, p.K, p.N) && p.row0 + p.rows <= p.N && out_aligned,
                "Q4_0 by columns: K a multiple of 256, 16-byte aligned, rows within N");
    const int64_t tiles = (p.rows + kColsTileRows - 1) / kColsTileRows * (p.K / 32 / kColsTileCols);
    LLM_REQUIRE(tiles <= 0x7fffffff, "slice too large for one launch");
    dequant_q4_0_cols_kernel<<<unsigned(tiles), kThreads, 0, stream>>>(p);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  if (p.regrouped) {
    LLM_REQUIRE(p.type == quant::Type::Q6_K && q6_kx8_fits(p.w, p.K),
                "regrouped weights: Q6_K rows of K % 2048 == 0, 16-byte aligned");
    dequant_f16_kernel<quant::Type::Q6_K, true><<<blocks_for(chunks, kThreads), kThreads, 0, stream>>>(p, rb);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  dispatch_qtype(p.type, "dequantize to f16", [&](auto tag) {
    dequant_f16_kernel<decltype(tag)::value><<<blocks_for(chunks, kThreads), kThreads, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

size_t gemm_min_scratch(int64_t K, int64_t N, int64_t T) {
  return align256(size_t(K) * T * 2) + align256(size_t(K) * ::std::min(N, kMinRows) * 2);
}
size_t gemm_x_scratch(int64_t K, int64_t T) { return align256(size_t(K) * T * 2); }
size_t gemm_half_bytes(int64_t K, int64_t N) { return align256(size_t(K) * N * 2); }
size_t gemm_full_scratch(int64_t K, int64_t N, int64_t T) { return gemm_x_scratch(K, T) + gemm_half_bytes(K, N); }

bool gemm_pair_swapped(const GemmParams& p) { return p.w2 && p.y2 < p.y; }
DequantF16Params gemm_member_dequant(const GemmParams& p, int i) {
  const bool second = (i == 1) != gemm_pair_swapped(p);
  return second ? DequantF16Params{p.w2, p.type2, p.K, 0, p.N, nullptr, p.regrouped2, p.N}
                : DequantF16Params{p.w, p.type, p.K, 0, p.N, nullptr, p.regrouped, p.N};
}

size_t gemm_pair_scratch(int64_t K, int64_t N, int64_t T) {
  return gemm_x_scratch(K, T) + 2 * gemm_half_bytes(K, N);
}

namespace {

void add_bias(float* y, const float* bias, int64_t N, int64_t T, cudaStream_t stream) {
  add_bias_kernel<<<blocks_for(N * T, 256), 256, 0, stream>>>(y, bias, N, N * T);
  CUDA_CHECK_LAUNCH(stream);
}

// A pair as one batched call (GemmParams::w2): the matrix of the lower output first (gemm_member_dequant), so the
// batch's output stride is positive. False where it does not apply (F16 weights read in place, the scratch too
// small; never with w_half): the caller goes on one matrix at a time.
bool gemm_pair(const GemmParams& p, const Blas& blas, __half* xh, size_t x_bytes, cudaStream_t stream) {
  const size_t w_bytes = gemm_half_bytes(p.K, p.N);
  if (!p.w_half &&
      (p.type == quant::Type::F16 || p.type2 == quant::Type::F16 || p.scratch_bytes < x_bytes + 2 * w_bytes))
    return false;
  struct Member {
    DequantF16Params w;
    float* y;
    const float* bias;
  };
  const bool swap = gemm_pair_swapped(p);
  Member m[2] = {{gemm_member_dequant(p, 0), swap ? p.y2 : p.y, swap ? p.bias2 : p.bias},
                 {gemm_member_dequant(p, 1), swap ? p.y : p.y2, swap ? p.bias : p.bias2}};
  const uint16_t* wh = p.w_half;  // made ahead: the lower output's matrix first too (GemmParams::w_half)
  if (!wh) {
    auto* out = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(p.scratch) + x_bytes);
    for (int i = 0; i < 2; ++i) {
      m[i].w.out = out + i * (w_bytes / 2);
      launch_dequant_f16(m[i].w, stream);
    }
    wh = out;
  }
  blas.gemm_tn_f16_f32_batched(p.N, p.T, p.K, wh, int64_t(w_bytes / 2), xh, m[0].y, p.N, m[1].y - m[0].y, 2, stream);
  for (const Member& each : m)
    if (each.bias) add_bias(each.y, each.bias, p.N, p.T, stream);
  return true;
}

}  // namespace

void launch_gemm(const GemmParams& p, const Blas& blas, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.y, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.K <= 0x7fffffff && p.N <= 0x7fffffff && p.T <= 0x7fffffff, "dimension exceeds cuBLAS int range");
  LLM_REQUIRE(!p.w2 || p.y2, "the second matrix of a pair without its output");
  // F16 weights, or a copy made ahead, are already the GEMM operand.
  const bool direct_f16 = p.type == quant::Type::F16 || p.w_half;
  const size_t x_bytes = gemm_x_scratch(p.K, p.T);
  const size_t need = direct_f16 ? x_bytes : gemm_min_scratch(p.K, p.N, p.T);
  LLM_REQUIRE(p.scratch && p.scratch_bytes >= need, "scratch of " + ::std::to_string(p.scratch_bytes) +
                                                        " bytes is below the minimum " + ::std::to_string(need));
  (void)quant::row_bytes(p.type, p.K);  // validates K against the block size

  auto* xh = static_cast<__half*>(p.scratch);
  const int64_t nx = p.K * p.T;
  if (!p.x_in_scratch) launch_x_to_half(p.x, xh, nx, stream);
  if (p.w2 && gemm_pair(p, blas, xh, x_bytes, stream)) return;

  // Column-major view: W rows are columns of a K x N matrix A (lda K); Y (N x T, ldc N) = A^T X.
  auto gemm = [&](const void* a, int64_t row0, int64_t rows) {
    blas.gemm_tn_f16_f32(rows, p.T, p.K, a, xh, p.y + row0, p.N, stream);
  };
  if (direct_f16) {
    gemm(p.w_half ? p.w_half : p.w, 0, p.N);
  } else {
    auto* wh = reinterpret_cast<uint16_t*>(static_cast<uint8_t*>(p.scratch) + x_bytes);
    const int64_t slice = ::std::min<int64_t>(p.N, int64_t((p.scratch_bytes - x_bytes) / (size_t(p.K) * 2)));
    for (int64_t row0 = 0; row0 < p.N; row0 += slice) {
      const int64_t rows = ::std::min(slice, p.N - row0);
      launch_dequant_f16({p.w, p.type, p.K, row0, rows, wh, p.regrouped, p.N}, stream);
      gemm(wh, row0, rows);
    }
  }
  if (p.bias) add_bias(p.y, p.bias, p.N, p.T, stream);
  if (p.w2) {  // the pair's second matrix on its own: x is in the scratch
    GemmParams second = p;
    second.w = p.w2, second.type = p.type2, second.regrouped = p.regrouped2, second.bias = p.bias2, second.y = p.y2;
    second.w2 = nullptr, second.x_in_scratch = true;
    launch_gemm(second, blas, stream);
  }
}

}  // namespace cuda
