// The attention tail of a q/k/v launch (MatvecAttend, matvec.cuh): one block attends the G query heads of one KV
// head over cache slots [0, end) of an f16 cache. Warps take 16-slot chunks round-robin:
// - S = (q x scale) K^T on tensor cores (mma.cuh), K loaded from the cache straight into the B fragments: lane
//   (g, tg) reads 16 bytes, dimensions 32 c + 8 tg .. + 7 of slot g, which are its B registers of the 16-dimension
//   chunks 2c and 2c + 1; q is loaded in the same order, so no shared-memory tile and no transpose.
// - An online softmax per warp (running max and sum per head, as the split kernels).
// - P V on CUDA cores: each lane owns HD / 32 dimensions of every head and the warp reads V's rows whole (one
//   coalesced row a slot); P and the rescale factors go through the warp's shared memory.
// The warps' states then merge in shared memory in warp order (deterministic). Why not the split kernel's tiles:
// up to 16 warps cover 256 slots in one chunk each, and the launch's registers (bound 512, 1) leave no room for
// its copy ring and its per-warp P V fragments.
// Everything the block reads was written in this launch, by other blocks too: loads go through L2 (__ldcg).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/mma.cuh"

namespace cuda::attend {

// Shared-memory floats a warp needs: P and the rescale factor of each head for a chunk (G x 17), then its state
// for the merge (G x {max, sum, HD values}).
__host__ __device__ constexpr int warp_floats(int hd, int g) { return g * 17 + g * (hd + 2); }

constexpr float kLog2e = 1.4426950408889634f;

// What a block reads and writes: the launch's rotated q, this layer's caches, the output (all by value: a
// reference into the kernel's parameters would make them addressable memory for the whole kernel).
struct Operands {
  const float* q;  // [HD, n_head]
  const uint16_t* k_cache;
  const uint16_t* v_cache;
  float* out;      // [HD, n_head]
  int64_t n_ctx;
  float scale;
};

template <int HD, int G>
__device__ __forceinline__ void attend_kv_head(Operands a, int64_t kvh, int32_t end, int n_warps, float* smem) {
  static_assert((HD == 64 || HD == 128) && G >= 1 && G <= 8, "attend shape");
  constexpr int kDims = HD / 32;  // a lane's dimensions in P V
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5, g = lane >> 2, tg = lane & 3;
  const bool row = g < G;  // this lane's row of the S fragments is a real head
  const int64_t head0 = kvh * G;
  float* mine = smem + warp * warp_floats(HD, G);
  float* p_s = mine;                // [G][16]
  float* c_s = mine + G * 16;       // [G]
  float* state = mine + G * 17;     // [G][HD + 2]: max, sum, values

  float m = -INFINITY, l = 0.0f;  // row g's running max, this lane's part of its sum
  float o[G][kDims];
#pragma unroll
  for (int h = 0; h < G; ++h)
#pragma unroll
    for (int i = 0; i < kDims; ++i) o[h][i] = 0.0f;

  if (warp < n_warps) {
    // q x scale as A fragments in the order of the K loads: chunk 2c holds dims 32c + 8tg + (0,1) and (2,3),
    // chunk 2c + 1 dims + (4,5) and (6,7); rows g >= G and g + 8 are zero.
    uint32_t qa[HD / 16][2];
    const float* q = a.q + (head0 + (row ? g : 0)) * HD + 8 * tg;
#pragma unroll
    for (int c = 0; c < HD / 32; ++c) {
      const float4 lo = row ? __ldcg(reinterpret_cast<const float4*>(q + 32 * c)) : make_float4(0, 0, 0, 0);
      const float4 hi = row ? __ldcg(reinterpret_cast<const float4*>(q + 32 * c + 4)) : make_float4(0, 0, 0, 0);
      qa[2 * c][0] = mma::pack_half2(lo.x * a.scale, lo.y * a.scale);
      qa[2 * c][1] = mma::pack_half2(lo.z * a.scale, lo.w * a.scale);
      qa[2 * c + 1][0] = mma::pack_half2(hi.x * a.scale, hi.y * a.scale);
      qa[2 * c + 1][1] = mma::pack_half2(hi.z * a.scale, hi.w * a.scale);
    }
    const uint16_t* kbase = a.k_cache + kvh * a.n_ctx * HD;
    const uint16_t* vbase = a.v_cache + kvh * a.n_ctx * HD;
    for (int32_t s0 = warp * 16; s0 < end; s0 += n_warps * 16) {
      float s[2][4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int32_t slot = s0 + 8 * j + g;
        uint4 k[HD / 32];
#pragma unroll
        for (int c = 0; c < HD / 32; ++c)
          k[c] = slot < end ? __ldcg(reinterpret_cast<const uint4*>(kbase + int64_t(slot) * HD + 32 * c + 8 * tg))
                            : make_uint4(0, 0, 0, 0);  // never NaN from stale bytes
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
        for (int c = 0; c < HD / 32; ++c) {
          const uint32_t a0[4] = {qa[2 * c][0], 0u, qa[2 * c][1], 0u}, a1[4] = {qa[2 * c + 1][0], 0u, qa[2 * c + 1][1], 0u};
          mma::m16n8k16(s[j], a0, k[c].x, k[c].y);
          mma::m16n8k16(s[j], a1, k[c].z, k[c].w);
        }
      }
      // Row g's scores of slots s0 + 8j + 2tg + (0, 1); the online softmax of the 16.
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int32_t at = s0 + 8 * j + 2 * tg;
        if (at >= end) s[j][0] = -INFINITY;
        if (at + 1 >= end) s[j][1] = -INFINITY;
        mx = fmaxf(mx, fmaxf(s[j][0], s[j][1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m, mx);  // finite: slot s0 < end is valid
      const float cf = exp2f((m - mn) * kLog2e);
      m = mn;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const float p0 = exp2f((s[j][0] - mn) * kLog2e), p1 = exp2f((s[j][1] - mn) * kLog2e);
        sum += p0 + p1;
        if (row) p_s[g * 16 + 8 * j + 2 * tg] = p0, p_s[g * 16 + 8 * j + 2 * tg + 1] = p1;
      }
      l = l * cf + sum;
      if (row && tg == 0) c_s[g] = cf;
      __syncwarp();
      // O = O cf + P V: the chunk's valid rows of V, loaded whole by the warp (lane: dims kDims lane ..).
      const int32_t n_valid = end - s0 < 16 ? end - s0 : 16;
      __half2 v[16][kDims / 2];
#pragma unroll
      for (int t = 0; t < 16; ++t) {
        const uint16_t* vr = vbase + int64_t(s0 + t) * HD + kDims * lane;
        if constexpr (kDims == 4) {
          const uint2 w = t < n_valid ? __ldcg(reinterpret_cast<const uint2*>(vr)) : make_uint2(0u, 0u);
          v[t][0] = *reinterpret_cast<const __half2*>(&w.x), v[t][1] = *reinterpret_cast<const __half2*>(&w.y);
        } else {
          const unsigned w = t < n_valid ? __ldcg(reinterpret_cast<const unsigned*>(vr)) : 0u;
          v[t][0] = *reinterpret_cast<const __half2*>(&w);
        }
      }
#pragma unroll
      for (int h = 0; h < G; ++h) {
        const float ch = c_s[h];
#pragma unroll
        for (int i = 0; i < kDims; ++i) o[h][i] *= ch;
#pragma unroll
        for (int t = 0; t < 16; ++t) {
          const float pt = p_s[h * 16 + t];  // 0 past the valid slots
#pragma unroll
          for (int i = 0; i < kDims / 2; ++i) {
            const float2 vf = __half22float2(v[t][i]);
            o[h][2 * i] = fmaf(pt, vf.x, o[h][2 * i]);
            o[h][2 * i + 1] = fmaf(pt, vf.y, o[h][2 * i + 1]);
          }
        }
      }
      __syncwarp();  // P and the factors are read before the next chunk rewrites them
    }
  }
  // This warp's state (a warp without a chunk: max -inf, sum 0, values 0).
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);
  if (warp < n_warps) {
    if (row && tg == 0) state[g * (HD + 2)] = m, state[g * (HD + 2) + 1] = l;
#pragma unroll
    for (int h = 0; h < G; ++h)
#pragma unroll
      for (int i = 0; i < kDims; ++i) state[h * (HD + 2) + 2 + kDims * lane + i] = o[h][i];
  }
  __syncthreads();
  // The merge in warp order: head h, dimension d.
  for (int it = int(threadIdx.x); it < G * HD; it += int(blockDim.x)) {
    const int h = it / HD, d = it % HD;
    float M = -INFINITY;
    for (int w = 0; w < n_warps; ++w) M = fmaxf(M, smem[w * warp_floats(HD, G) + G * 17 + h * (HD + 2)]);
    float L = 0.0f, acc = 0.0f;
    for (int w = 0; w < n_warps; ++w) {
      const float* st = smem + w * warp_floats(HD, G) + G * 17 + h * (HD + 2);
      const float ew = st[0] == -INFINITY ? 0.0f : expf(st[0] - M);
      L = fmaf(st[1], ew, L);
      acc = fmaf(st[2 + d], ew, acc);
    }
    a.out[(head0 + h) * HD + d] = acc / L;
  }
}

// LAB: the block's attention of KV head kvh at slots [0, end) into `out` (the o projection's x).
__device__ __forceinline__ void attend_kv_head(const MatvecAttendLab& at, float* out, int64_t kvh, int32_t end,
                                               int n_warps, float* smem) {
  const Operands a{at.q, at.k_cache, at.v_cache, out, at.n_ctx, at.scale};
  const int G = at.n_head / at.n_head_kv;
  if (at.head_dim == 128 && G == 1) attend_kv_head<128, 1>(a, kvh, end, n_warps, smem);
  else if (at.head_dim == 128 && G == 4) attend_kv_head<128, 4>(a, kvh, end, n_warps, smem);
  else __trap();  // LAB: the 7B's and the 8B's shapes only
}

}  // namespace cuda::attend
