// The chosen experts' matvecs (matvec_id.cuh). Grid (row blocks, k, T): a block reads ids[j, t] once and computes
// its rows of that expert for that (token, slot). Two bodies, as the dense matvec (matvec.cu): the unit kernel
// (matvec_units.cuh: Q4_0, Q8_0, Q4_K, Q6_K with aligned rows; 128 threads over a row's 32-weight units, R rows a
// block) and the chunk kernel for every other format (MXFP4, F16, Q5_0, Q5_K, ...: lanes over 32-element chunks
// dequantized by quant/dequant.cuh, 4 rows a warp). Both keep x in float32, so results match the CPU reference to
// float rounding.
#include "cuda/kernels/matvec_id.cuh"

#include "cuda/check.h"
#include "cuda/kernels/matvec_units.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRows = 4;  // rows per warp (chunk kernel)
constexpr int kRowsPerBlock = kWarps * kRows;

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// This block's expert, input column and output column; false when the id is out of range (the rows are zeroed).
struct Slot {
  const uint8_t* w;
  const float* x;
  const float* bias;
  float* y;
};
__device__ __forceinline__ bool slot_of(const MatvecIdParams& p, size_t row_bytes, Slot& s) {
  const int64_t j = blockIdx.y, t = blockIdx.z;
  const int32_t e = p.ids[t * p.k + j];
  s.y = p.y + (t * p.k + j) * p.N;
  if (e < 0 || e >= p.n_expert) return false;
  s.w = static_cast<const uint8_t*>(p.w) + size_t(e) * size_t(p.N) * row_bytes;
  s.x = p.x + (t * p.x_slots + (p.x_slots == 1 ? 0 : j)) * p.K;
  s.bias = p.bias ? p.bias + int64_t(e) * p.N : nullptr;
  return true;
}

template <quant::Type T>
__global__ void __launch_bounds__(kWarps * 32) matvec_id_chunk_kernel(MatvecIdParams p, size_t row_bytes) {
  using quant::dev::kChunk;
  const int lane = threadIdx.x & 31;
  const int64_t n0 = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * kRows;
  if (n0 >= p.N) return;
  const int rows = int(p.N - n0 < kRows ? p.N - n0 : kRows);
  Slot s;
  if (!slot_of(p, row_bytes, s)) {
    if (lane < rows) s.y[n0 + lane] = 0.0f;
    return;
  }
  const uint8_t* w = s.w + n0 * row_bytes;
  const int64_t n_chunks = (p.K + kChunk - 1) / kChunk;
  float acc[kRows] = {};
  for (int64_t c = lane; c < n_chunks; c += 32) {
    const int valid = int(p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk);
    float xr[kChunk];
    const float* xc = s.x + c * kChunk;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) xr[i] = i < valid ? __ldg(xc + i) : 0.0f;
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r < rows) {
        float v[kChunk];
        quant::dev::dequant_chunk<T>(w + r * row_bytes, c, valid, v);
        float a = 0.0f;
#pragma unroll
        for (int i = 0; i < kChunk; ++i) a += v[i] * xr[i];
        acc[r] += a;
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) {
    const float sum = warp_sum(acc[r]);
    if (lane == 0 && r < rows) s.y[n0 + r] = sum + (s.bias ? s.bias[n0 + r] : 0.0f);
  }
}

constexpr int kUnitThreads = 128;

template <quant::Type T, int R>
__global__ void __launch_bounds__(kUnitThreads) matvec_id_unit_kernel(MatvecIdParams p, size_t row_bytes) {
  using U = mv::Unit<T>;
  const int64_t n0 = int64_t(blockIdx.x) * R;
  const int rows = int(p.N - n0 < R ? p.N - n0 : R);
  Slot s;
  if (!slot_of(p, row_bytes, s)) {
    if (threadIdx.x < rows) s.y[n0 + threadIdx.x] = 0.0f;
    return;
  }
  const uint8_t* w = s.w + n0 * row_bytes;
  const int64_t n_units = p.K / 32;
  float acc[R] = {};
  for (int64_t u = threadIdx.x; u < n_units; u += kUnitThreads) {
    const float4* xa = reinterpret_cast<const float4*>(s.x + U::seg0(u));
    const float4* xb = reinterpret_cast<const float4*>(s.x + U::seg0(u) + U::kOff1);
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
  __shared__ float part[kUnitThreads / 32][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const float v = warp_sum(acc[r]);
    if (lane == 0) part[warp][r] = v;
  }
  __syncthreads();
  if (threadIdx.x < rows) {
    float v = s.bias ? s.bias[n0 + threadIdx.x] : 0.0f;
#pragma unroll
    for (int i = 0; i < kUnitThreads / 32; ++i) v += part[i][threadIdx.x];
    s.y[n0 + threadIdx.x] = v;
  }
}

template <quant::Type T>
constexpr bool kHasUnit =
    T == quant::Type::Q4_0 || T == quant::Type::Q8_0 || T == quant::Type::Q4_K || T == quant::Type::Q6_K;

// The unit kernel's alignment needs (as matvec.cu): float4 x columns, 16-byte Q4_K rows, 4-byte rows otherwise.
bool unit_fits(const MatvecIdParams& p, size_t row_bytes) {
  const auto a = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  const size_t wa = p.type == quant::Type::Q4_K ? 16 : 4;
  return a(p.x) % 16 == 0 && p.K % 4 == 0 && a(p.w) % wa == 0 && row_bytes % wa == 0;
}

}  // namespace

void launch_matvec_id(const MatvecIdParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.ids && p.y, "matvec_id: null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.n_expert > 0 && p.k > 0 && p.T > 0, "matvec_id: empty shape");
  LLM_REQUIRE(p.x_slots == 1 || p.x_slots == p.k, "matvec_id: x_slots must be 1 or k");
  LLM_REQUIRE(p.k <= 65535 && p.T <= 65535 && p.N <= int64_t(kRowsPerBlock) * 0x7fffffff, "matvec_id: too large");
  const size_t rb = quant::row_bytes(p.type, p.K);  // throws for K not a multiple of the block size
  const bool units = unit_fits(p, rb);
  dispatch_qtype(p.type, "matvec_id", [&](auto tag) {
    constexpr quant::Type T = decltype(tag)::value;
    if constexpr (kHasUnit<T>) {
      if (units) {
        // 4 rows a block when the (row block, slot) pairs fill the GPU twice over, else 2 (as matvec.cu).
        if (p.N * p.k * p.T >= 2048) {
          matvec_id_unit_kernel<T, 4><<<dim3(unsigned((p.N + 3) / 4), unsigned(p.k), unsigned(p.T)),
                                        kUnitThreads, 0, stream>>>(p, rb);
        } else {
          matvec_id_unit_kernel<T, 2><<<dim3(unsigned((p.N + 1) / 2), unsigned(p.k), unsigned(p.T)),
                                        kUnitThreads, 0, stream>>>(p, rb);
        }
        return;
      }
    }
    const dim3 grid(unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(p.k), unsigned(p.T));
    matvec_id_chunk_kernel<T><<<grid, kWarps * 32, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
