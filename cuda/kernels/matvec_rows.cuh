// The row bodies of the float32 matvecs: the dense one (matvec.cu: a matrix, a column per grid row) and the chosen
// experts' (matvec_id.cu: an expert's matrix per (token, slot)) run the same two, on the rows and column their
// block was given. Both keep x in float32, so the results match the CPU reference to float rounding.
// - unit rows (Q4_0, Q8_0, Q4_K, Q6_K with aligned rows): a block's threads stride over a row's 32-weight units
//   (matvec_units.cuh), R rows a block, x read once per unit for all of them;
// - chunk rows (every format): a warp's lanes stride over 32-element chunks (quant/dequant.cuh), x read once per
//   chunk for the warp's rows.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/matvec_units.cuh"
#include "cuda/kernels/mxfp4_codes.cuh"
#include "cuda/kernels/reduce.cuh"
#include "quant/dequant.cuh"

namespace cuda::mv {

template <quant::Type T>
inline constexpr bool kHasUnit =
    T == quant::Type::Q4_0 || T == quant::Type::Q8_0 || T == quant::Type::Q4_K || T == quant::Type::Q6_K;

// The unit rows' alignment needs: float4 x columns; 16-byte Q4_K rows, 4-byte rows for the 2-byte aligned formats.
inline bool unit_fits(quant::Type type, const void* w, const float* x, int64_t K, size_t row_bytes) {
  const auto a = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  const size_t wa = type == quant::Type::Q4_K ? 16 : 4;
  return a(x) % 16 == 0 && K % 4 == 0 && a(w) % wa == 0 && row_bytes % wa == 0;
}

// y[r] = (bias ? bias[r] : 0) + row r . x for r < rows, the R rows at w (row_bytes apart), by a block of kThreads
// threads: thread tid takes units tid, tid + kThreads, ...; rows past `rows` re-read the last row (no branch in the
// loop, so the R rows' loads issue together) and are not written. Every thread of the block must call it.
template <quant::Type T, int R, int kThreads>
__device__ __forceinline__ void unit_rows(const uint8_t* w, size_t row_bytes, const float* x, int64_t K, int rows,
                                          const float* bias, float* y) {
  using U = Unit<T>;
  const int64_t n_units = K / 32;
  float acc[R] = {};
  for (int64_t u = threadIdx.x; u < n_units; u += kThreads) {
    const float4* xa = reinterpret_cast<const float4*>(x + U::seg0(u));
    const float4* xb = reinterpret_cast<const float4*>(x + U::seg0(u) + U::kOff1);
    float x0[16], x1[16];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float4 a = __ldg(xa + i), b = __ldg(xb + i);
      x0[4 * i] = a.x, x0[4 * i + 1] = a.y, x0[4 * i + 2] = a.z, x0[4 * i + 3] = a.w;
      x1[4 * i] = b.x, x1[4 * i + 1] = b.y, x1[4 * i + 2] = b.z, x1[4 * i + 3] = b.w;
    }
    float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 16; ++i) s0 += x0[i], s1 += x1[i];
#pragma unroll
    for (int r = 0; r < R; ++r) acc[r] += U::dot(w + (r < rows ? r : rows - 1) * row_bytes, u, x0, x1, s0, s1);
  }
  __shared__ float part[kThreads / 32][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum_f(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    float v = bias ? bias[threadIdx.x] : 0.0f;
#pragma unroll
    for (int i = 0; i < kThreads / 32; ++i) v += part[i][threadIdx.x];
    y[threadIdx.x] = v;
  }
}

// y[r] = (bias ? bias[r] : 0) + row r . x for r < rows <= kRows, the rows at w (row_bytes apart), by one warp: lane l
// takes chunks l, l + 32, ...; x's chunk is read once for all rows (float4 loads when the column is 16-byte aligned
// and the chunk whole).
// kRecoded: MXFP4 experts recoded at upload (mxfp4_recode.cuh): w and row_bytes are the rows' codes (16 bytes a
// block), `scales` row 0's scale bytes, nb blocks a row.
template <quant::Type T, int kRows, bool kRecoded = false>
__device__ __forceinline__ void chunk_rows(const uint8_t* w, size_t row_bytes, const float* x, int64_t K, int rows,
                                           const float* bias, float* y, const uint8_t* scales = nullptr,
                                           int64_t nb = 0) {
  using quant::dev::kChunk;
  const int lane = threadIdx.x & 31;
  const int64_t n_chunks = (K + kChunk - 1) / kChunk;
  const bool x_aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  float acc[kRows] = {};
  for (int64_t c = lane; c < n_chunks; c += 32) {
    const int valid = int(K - c * kChunk < kChunk ? K - c * kChunk : kChunk);
    float xr[kChunk];
    const float* xc = x + c * kChunk;
    if (valid == kChunk && x_aligned) {
#pragma unroll
      for (int i = 0; i < kChunk; i += 4) {
        const float4 xv = __ldg(reinterpret_cast<const float4*>(xc + i));
        xr[i] = xv.x, xr[i + 1] = xv.y, xr[i + 2] = xv.z, xr[i + 3] = xv.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunk; ++i) xr[i] = i < valid ? xc[i] : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r < rows) {
        float v[kChunk];
        if constexpr (kRecoded) {
          mx::recoded_block_floats(w + r * row_bytes + 16 * c, scales[r * nb + c], v);
        } else {
          quant::dev::dequant_chunk<T>(w + r * row_bytes, c, valid, v);
        }
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < kChunk; ++i) a += v[i] * xr[i];  // v is 0 beyond `valid` (float formats)
        acc[r] += a;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum_f(acc[r]);
    if (lane == 0 && r < rows) y[r] = sum + (bias ? bias[r] : 0.0f);
  }
}

}  // namespace cuda::mv
