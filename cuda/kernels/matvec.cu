// Decode matrix-vector products. One column of the preset formats goes to the int16-activation kernel
// (matvec_i16.cu); the rest to one of two float kernels here:
// - unit kernel (Q4_0, Q8_0, Q4_K, Q6_K, the formats of the common presets): a block of 4 warps owns R rows and
//   all 128 threads stride over 32-weight units of K (matvec_units.cuh), so even a 1024-row matrix fills the GPU;
//   16-byte weight loads, no int-to-float conversion, x read once per unit for all R rows.
// - chunk kernel (every type): each warp owns kRows rows; lanes stride over 32-element chunks (quant/dequant.cuh)
//   and reuse the chunk's 32 floats of x for all kRows rows. Serves the other formats and unaligned pointers.
// Both keep x in float32 (no 8-bit activations): the results match the CPU reference to float rounding.
#include "cuda/kernels/matvec.cuh"

#include "cuda/check.h"
#include "cuda/kernels/matvec_f32_cols.cuh"
#include "cuda/kernels/matvec_units.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 4;   // rows per warp
constexpr int kRowsPerBlock = kWarps * kRows;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <quant::Type T>
__global__ void __launch_bounds__(kWarps * 32) matvec_kernel(MatvecParams p, size_t row_bytes) {
  using quant::dev::kChunk;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * kRows;
  const int64_t t = blockIdx.y;
  const float* x = p.x + t * p.K;
  if (n0 >= p.N) return;
  const int rows = int(p.N - n0 < kRows ? p.N - n0 : kRows);
  const uint8_t* w = static_cast<const uint8_t*>(p.w) + n0 * row_bytes;
  const int64_t n_chunks = (p.K + kChunk - 1) / kChunk;
  const bool x_aligned = (reinterpret_cast<uintptr_t>(x) & 15) == 0;
  float acc[kRows] = {};
  for (int64_t c = lane; c < n_chunks; c += 32) {
    const int valid = int(p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk);
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
        quant::dev::dequant_chunk<T>(w + r * row_bytes, c, valid, v);
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < kChunk; ++i) a += v[i] * xr[i];  // v is 0 beyond `valid` (float formats)
        acc[r] += a;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0 && r < rows) p.y[t * p.N + n0 + r] = sum + (p.bias ? p.bias[n0 + r] : 0.0f);
  }
}

constexpr int kUnitWarps = 4;

// y[n0 + r] for r < R: thread tid takes units tid, tid + 128, ...; rows past N re-read the last row (no branch in
// the loop, so the R rows' loads issue together) and are not written.
template <quant::Type T, int R>
__global__ void __launch_bounds__(kUnitWarps * 32) matvec_unit_kernel(MatvecParams p, size_t row_bytes) {
  using U = mv::Unit<T>;
  const int64_t n0 = int64_t(blockIdx.x) * R;
  const int64_t t = blockIdx.y;
  const float* x = p.x + t * p.K;
  const int rows = int(p.N - n0 < R ? p.N - n0 : R);
  const uint8_t* w = static_cast<const uint8_t*>(p.w) + n0 * row_bytes;
  const int64_t n_units = p.K / 32;
  float acc[R] = {};
  for (int64_t u = threadIdx.x; u < n_units; u += kUnitWarps * 32) {
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
  __shared__ float part[kUnitWarps][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    float v = p.bias ? p.bias[n0 + threadIdx.x] : 0.0f;
#pragma unroll
    for (int i = 0; i < kUnitWarps; ++i) v += part[i][threadIdx.x];
    p.y[t * p.N + n0 + threadIdx.x] = v;
  }
}

template <quant::Type T>
constexpr bool kHasUnitKernel =
    T == quant::Type::Q4_0 || T == quant::Type::Q8_0 || T == quant::Type::Q4_K || T == quant::Type::Q6_K;

// Unit kernel's alignment needs: float4 x columns; 16-byte Q4_K rows, 4-byte rows for the 2-byte aligned formats.
bool unit_kernel_fits(const MatvecParams& p, size_t row_bytes) {
  const auto a = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  const size_t wa = p.type == quant::Type::Q4_K ? 16 : 4;
  return a(p.x) % 16 == 0 && p.K % 4 == 0 && a(p.w) % wa == 0 && row_bytes % wa == 0;
}

template <quant::Type T, int R>
void launch_unit(const MatvecParams& p, size_t rb, cudaStream_t stream) {
  const dim3 grid(unsigned((p.N + R - 1) / R), unsigned(p.T));
  matvec_unit_kernel<T, R><<<grid, kUnitWarps * 32, 0, stream>>>(p, rb);
}

}  // namespace

void launch_matvec_i16(const MatvecParams& p, cudaStream_t stream);  // matvec_i16.cu

void launch_matvec(const MatvecParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && (p.x || p.x_fixed) && p.y, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.T > 0, "empty shape");
  const bool fuses = matvec_fuses(p);
  LLM_REQUIRE(!p.x_fixed || fuses, "fixed-point x: only the int16 kernel's Q4_0 launches read it");
  if (fuses) {
    launch_matvec_i16(p, stream);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  if (p.q6_kx8) {  // only the int16 kernel reads the regrouped layouts: one launch per column
    MatvecParams c = p;
    c.T = 1;
    LLM_REQUIRE(p.T == 1 || (!p.norm_w && !p.residual && !p.swiglu_out && p.n_siblings == 0 && !p.rope_kv.q_out),
                "regrouped weights: fusions need a single column");
    for (int64_t t = 0; t < p.T; ++t) {
      c.x = p.x + t * p.K, c.y = p.y + t * p.N;
      LLM_REQUIRE(matvec_fuses(c), "regrouped weights: shape or alignment the int16 matvec does not take");
      launch_matvec_i16(c, stream);
    }
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  LLM_REQUIRE(!p.norm_w && !p.residual && !p.swiglu_out && p.n_siblings == 0,
              "norm / residual / sibling fusion requested where matvec_fuses() is false");
  if (p.type == quant::Type::F32 && p.T >= kF32ColumnsMin && p.path == MatvecPath::Auto && !p.x_fixed) {
    launch_f32_columns(p, stream);  // one pass over the matrix for many columns (a router at prefill)
    return;
  }
  LLM_REQUIRE(p.T <= 65535, "too many columns for one launch");
  LLM_REQUIRE(p.N <= int64_t(kRowsPerBlock) * 0x7fffffff, "too many rows");
  const size_t rb = quant::row_bytes(p.type, p.K);  // throws for K not a multiple of the block size
  const bool units = p.path != MatvecPath::Generic && unit_kernel_fits(p, rb);
  dispatch_qtype(p.type, "matvec", [&](auto tag) {
    constexpr quant::Type T = decltype(tag)::value;
    if constexpr (kHasUnitKernel<T>) {
      if (units) {
        // 4 rows per block once there are enough blocks to fill the GPU twice over, else 2 (R = 8 measured slower:
        // docs/kernel-notes.md, v4 run 2).
        if (p.N * p.T >= 2048) launch_unit<T, 4>(p, rb, stream);
        else launch_unit<T, 2>(p, rb, stream);
        return;
      }
    }
    const dim3 grid(unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(p.T));
    matvec_kernel<T><<<grid, kWarps * 32, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
