// Warp and block reductions shared by the row kernels (softmax, argmax, sampling). Device-only, header-only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}
__device__ __forceinline__ float warp_sum_f(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Every thread gets the result; `red` holds kThreads / 32 entries and may be reused after return.
template <int kThreads>
__device__ __forceinline__ float block_max(float v, float* red) {
  v = warp_max(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = red[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) r = fmaxf(r, red[w]);
  return r;
}
template <int kThreads>
__device__ __forceinline__ float block_sum(float v, float* red) {
  v = warp_sum_f(v);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = v;
  __syncthreads();
  float r = 0.0f;
#pragma unroll
  for (int w = 0; w < kThreads / 32; ++w) r += red[w];
  return r;
}

// Largest value, lower index on exact ties; NaN never beats a number; idx -1 means "nothing seen".
struct ArgMax {
  float val = -INFINITY;
  int32_t idx = -1;
};
__device__ __forceinline__ ArgMax argmax_merge(ArgMax a, ArgMax b) {
  if (b.idx < 0 || b.val != b.val) return a;
  if (a.idx < 0 || a.val != a.val) return b;
  if (b.val > a.val || (b.val == a.val && b.idx < a.idx)) return b;
  return a;
}
__device__ __forceinline__ ArgMax warp_argmax(ArgMax a) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    ArgMax b;
    b.val = __shfl_xor_sync(0xffffffffu, a.val, o);
    b.idx = __shfl_xor_sync(0xffffffffu, a.idx, o);
    a = argmax_merge(a, b);
  }
  return a;
}
template <int kThreads>
__device__ __forceinline__ ArgMax block_argmax(ArgMax a, ArgMax* red) {
  a = warp_argmax(a);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = a;
  __syncthreads();
  ArgMax r = red[0];
#pragma unroll
  for (int w = 1; w < kThreads / 32; ++w) r = argmax_merge(r, red[w]);
  return r;
}

// Sum over the warp of each of the R values; lane (r * 32 / R) ends with row r's sum (R = 4: lanes 0, 8, 16, 24).
template <int R>
__device__ __forceinline__ float warp_sum_rows(float (&a)[R], int lane) {
  if constexpr (R == 4) {
    const bool up = lane & 16;
    float k0 = up ? a[2] : a[0], k1 = up ? a[3] : a[1];
    k0 += __shfl_xor_sync(0xffffffffu, up ? a[0] : a[2], 16);
    k1 += __shfl_xor_sync(0xffffffffu, up ? a[1] : a[3], 16);
    const bool mid = lane & 8;
    float k = mid ? k1 : k0;
    k += __shfl_xor_sync(0xffffffffu, mid ? k0 : k1, 8);
#pragma unroll
    for (int o = 4; o > 0; o >>= 1) k += __shfl_xor_sync(0xffffffffu, k, o);
    return k;  // lane 8 * (2 * up + mid) holds row 2 * up + mid
  } else {
    float mine = 0.0f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      float v = a[r];
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
      if (lane == r * (32 / R)) mine = v;
    }
    return mine;
  }
}

// Sum over the warp of each of V values (V a power of two <= 32), transposed as it goes: each halving step keeps
// half the values and sends the other half to the partner lane, so V values take V - 1 + 5 - log2(V) shuffles
// instead of 5 V. Lane v * (32 / V) ends with value v's sum (V = 4 pairs as warp_sum_rows<4>).
template <int V>
__device__ __forceinline__ float warp_sum_transposed(float (&a)[V], int lane) {
  static_assert(V >= 1 && V <= 32 && (V & (V - 1)) == 0, "a power of two up to 32 values");
#pragma unroll
  for (int s = 0; (V >> s) > 1; ++s) {
    const int n = V >> s, o = 16 >> s;
    const bool up = lane & o;
#pragma unroll
    for (int i = 0; i < n / 2; ++i) {
      const float keep = up ? a[i + n / 2] : a[i], send = up ? a[i] : a[i + n / 2];
      a[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
    }
  }
  float v = a[0];
#pragma unroll
  for (int o = 16 / V; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

}  // namespace cuda
