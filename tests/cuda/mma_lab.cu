// Kernel lab (docs/kernel-notes.md, session 28): Q4_K products of 1..8 columns on integer tensor cores, against
// today's kernels (the int16 matvec at T = 1, batch_mm's fragments at T = 2..8).
//
// Why: the int16 matvec spends ~3 instructions a weight a thread (dp2a: two products an instruction, plus the
// decode), and its instruction issue, not DRAM, bounds it; batch_mm's T <= 8 launches unpack every weight to half
// through shared memory and sit at ~1.2 TB/s whatever T. Here a warp multiplies 16 rows x 32 k x 8 columns in one
// `mma.m16n8k32` (int8 x int8 -> int32), the weights' nibbles going from the load straight into the A fragment
// (one AND, or shift and AND, a word of four), so a weight costs well under one instruction for every T <= 8.
//
// Exactness: x is held as int16 per 256 (one scale a Q4_K super-block), split into a signed high byte and an
// unsigned low byte (q = 256 h + l), and the products of both are integer mma's: the sums are the exact integer dot
// products of the int16 path, only the float scaling differs from the dp2a kernel's. K order within a 32-element
// sub-block is permuted alike in A and B (lane tg of a quad takes bytes 8 tg .. 8 tg + 7 of a 32-byte qs group, one
// aligned 8-byte load a row), which an integer sum does not see.
//
// Usage: mma-lab   (MMA_LAB_SHAPES="4096x14336,14336x4096" K x N; prints correctness, then the timing table)
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/matvec_units.cuh"
#include "lab_common.cuh"
#include "quant/rows.h"
#include "quant/types.h"

namespace {


// Weight words through the read-only path with the L2 prefetch-size hint, as the matvec reads them.
__device__ __forceinline__ uint2 ldg2(const uint8_t* p) { return cuda::mv::ldg_w(reinterpret_cast<const uint2*>(p)); }
__device__ __forceinline__ uint4 ldg4(const uint8_t* p) { return cuda::mv::ldg_w(reinterpret_cast<const uint4*>(p)); }

// D = A B, 16 x 8 x 32, A unsigned bytes (codes), B signed (kSigned) or unsigned bytes.
template <bool kSigned>
__device__ __forceinline__ void mma_k32(int (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (kSigned)
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%10,%10,%10,%10};"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(0));
}

// x [T][K] float -> per column: 16 bytes per 8 elements (8 high bytes, then 8 low bytes of the int16 values), the
// integer sum of each 32, the scale of each 256. One block a (super-block, column), 256 threads.
__global__ void quantize_x_kernel(const float* x, int K, uint4* xq, int* xsum, float* xscale) {
  const int sb = blockIdx.x, t = blockIdx.y, e = threadIdx.x;
  const float v = x[size_t(t) * K + sb * 256 + e];
  __shared__ float red[8];
  float m = fabsf(v);
  for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(~0u, m, o));
  if ((e & 31) == 0) red[e >> 5] = m;
  __syncthreads();
  m = red[0];
  for (int i = 1; i < 8; ++i) m = fmaxf(m, red[i]);
  const float inv = m > 0.0f ? 32767.0f / m : 0.0f;
  const int q = __float2int_rn(v * inv);
  int s = q;
  for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(~0u, s, o);
  uint8_t* bytes = reinterpret_cast<uint8_t*>(xq + (size_t(t) * K + sb * 256 + e) / 8);
  bytes[e & 7] = uint8_t(q >> 8);
  bytes[8 + (e & 7)] = uint8_t(q & 0xff);
  if ((e & 31) == 0) xsum[size_t(t) * (K / 32) + sb * 8 + (e >> 5)] = s;
  if (e == 0) xscale[size_t(t) * (K / 256) + sb] = m * (1.0f / 32767.0f);
}

// Byte s of w, zero-extended (s a constant where the loops are unrolled: one PRMT).
__device__ __forceinline__ int byte_of(uint32_t w, int s) { return int(__byte_perm(w, 0u, 0x4440u | uint32_t(s))); }

// A Q4_K super-block's scales as packed bytes: sc[0] holds sub-blocks 0..3, sc[1] 4..7; the mins likewise.
__device__ __forceinline__ void q4k_scale_words(const uint4& h, uint32_t (&sc)[2], uint32_t (&mn)[2]) {
  sc[0] = h.y & 0x3f3f3f3fu;
  mn[0] = h.z & 0x3f3f3f3fu;
  sc[1] = (h.w & 0x0f0f0f0fu) | ((h.y >> 2) & 0x30303030u);
  mn[1] = ((h.w >> 4) & 0x0f0f0f0fu) | ((h.z >> 2) & 0x30303030u);
}

struct Raw {
  uint4 h0, h1;     // headers of rows g and g + 8
  uint2 q0[4], q1[4];  // this lane's 8 bytes of each 32-byte qs group, rows g and g + 8
};

__device__ __forceinline__ Raw load_raw(const uint8_t* b0, const uint8_t* b1, int tg) {
  Raw r;
  r.h0 = ldg4(b0);
  r.h1 = ldg4(b1);
#pragma unroll
  for (int i = 0; i < 4; ++i) r.q0[i] = ldg2(b0 + 16 + 32 * i + 8 * tg), r.q1[i] = ldg2(b1 + 16 + 32 * i + 8 * tg);
  return r;
}

// One super-block of one 16-row tile: its sub-block sums into out (values 0, 1 row g; 2, 3 row g + 8; columns 2 tg,
// 2 tg + 1). xs: this lane's x fragments of the super-block (column g) in shared memory, one 16-byte piece a
// sub-block, at xs[4 s]; X0, X1: the columns' sub-block sums; s0, s1: their scales.
template <int NT>
__device__ __forceinline__ void superblock(const Raw& cur, const uint4* xs, const int* X0p, const int* X1p, float s0,
                                          float s1, float (&out)[4]) {
  uint32_t sca[2], mna[2], scb[2], mnb[2];
  q4k_scale_words(cur.h0, sca, mna);
  q4k_scale_words(cur.h1, scb, mnb);
  int hi[4] = {0, 0, 0, 0}, lo[4] = {0, 0, 0, 0}, mn[4] = {0, 0, 0, 0};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int s = 2 * i + half;
      const int sh = 4 * half;
      const uint4 xf = xs[4 * s];
      const uint32_t a[4] = {(cur.q0[i].x >> sh) & 0x0f0f0f0fu, (cur.q1[i].x >> sh) & 0x0f0f0f0fu,
                             (cur.q0[i].y >> sh) & 0x0f0f0f0fu, (cur.q1[i].y >> sh) & 0x0f0f0f0fu};
      int dh[4], dl[4];
      mma_k32<true>(dh, a, xf.x, xf.y);
      mma_k32<false>(dl, a, xf.z, xf.w);
      const int sA = byte_of(sca[s >> 2], s & 3), sB = byte_of(scb[s >> 2], s & 3);
      const int mA = byte_of(mna[s >> 2], s & 3), mB = byte_of(mnb[s >> 2], s & 3);
      const int x0 = X0p[s];
      hi[0] += sA * dh[0], lo[0] += sA * dl[0], mn[0] += mA * x0;
      hi[2] += sB * dh[2], lo[2] += sB * dl[2], mn[2] += mB * x0;
      if (NT > 1) {
        const int x1 = X1p[s];
        hi[1] += sA * dh[1], lo[1] += sA * dl[1], mn[1] += mA * x1;
        hi[3] += sB * dh[3], lo[3] += sB * dl[3], mn[3] += mB * x1;
      }
    }
  }
  const float2 dA = __half22float2(*reinterpret_cast<const __half2*>(&cur.h0.x));
  const float2 dB = __half22float2(*reinterpret_cast<const __half2*>(&cur.h1.x));
  out[0] += s0 * (dA.x * (256.0f * float(hi[0]) + float(lo[0])) - dA.y * float(mn[0]));
  out[2] += s0 * (dB.x * (256.0f * float(hi[2]) + float(lo[2])) - dB.y * float(mn[2]));
  if (NT > 1) {
    out[1] += s1 * (dA.x * (256.0f * float(hi[1]) + float(lo[1])) - dA.y * float(mn[1]));
    out[3] += s1 * (dB.x * (256.0f * float(hi[3]) + float(lo[3])) - dB.y * float(mn[3]));
  }
}

// Shared memory of a block: x of every column (16 bytes per 8 elements, columns K / 8 + 4 pieces apart so that a
// quarter warp's 8 pieces fall in distinct banks), then the sub-block sums and the super-block scales.
__host__ __device__ inline size_t x_stride(int K) { return size_t(K / 8 + 4); }
__host__ __device__ inline size_t smem_bytes(int K, int NT) {
  return size_t(NT) * x_stride(K) * 16 + size_t(NT) * (K / 32) * 4 + size_t(NT) * (K / 256) * 4;
}

// y[t][n] = sum_k W[n][k] x[t][k] for t < NT, W Q4_K (N rows of row_bytes). Persistent blocks of 8 warps: block b
// takes the 16-row tiles b, b + G, ...; in a tile warp w the super-blocks w, w + 8, ...; a warp walks its (tile,
// super-block) items in order, the weights of the next kDepth items loading into a ring of registers indexed only by
// constants (the loop is unrolled by kDepth: moving a register whose load is still in flight would wait for it);
// x for the whole K sits in shared memory (copied once a block). The warps' partial tiles are added in warp order
// after a barrier a tile (two reduction buffers, so one barrier).
template <int NT, int kDepth, int kWarps, bool kLoadOnly, int kLayout = 0>
__global__ void __launch_bounds__(kWarps * 32, 1) mma_q4k_kernel(const uint8_t* __restrict__ W, uint32_t row_bytes,
                                                                 int N, int K, const uint4* __restrict__ xq,
                                                                 const int* __restrict__ xsum,
                                                                 const float* __restrict__ xscale,
                                                                 float* __restrict__ y) {
  extern __shared__ uint4 smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
  const int nsb = K / 256, n_tiles = (N + 15) / 16;
  const int c0 = 2 * tg, c1 = 2 * tg + 1;
  const bool v0 = c0 < NT, v1 = c1 < NT, bval = g < NT;
  const int per_tile = warp < nsb ? (nsb - 1 - warp) / kWarps + 1 : 0;
  // Tiles of this block: b, b + G, ... (kLayout 0, 2) or a run of consecutive ones (1).
  const int run = (n_tiles + int(gridDim.x) - 1) / int(gridDim.x);
  const int my_tiles = kLayout == 1 ? max(0, min(run, n_tiles - int(blockIdx.x) * run))
                       : int(blockIdx.x) < n_tiles ? (n_tiles - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  const auto tile_of = [&](int ti) { return kLayout == 1 ? int(blockIdx.x) * run + ti : int(blockIdx.x) + ti * int(gridDim.x); };
  const int n_items = per_tile * my_tiles;
  const auto load_item = [&](int j) {
    Raw r{};
    if (j < n_items) {
      const int t = tile_of(j / per_tile), sb = warp + (j % per_tile) * kWarps;
      if (kLayout == 3) {  // regrouped (regroup_q4k16): rows g, g + 8's headers; a 16-byte piece a lane a qs group
        const uint8_t* item = W + (size_t(t) * nsb + sb) * 2304;
        r.h0 = ldg4(item + 16 * g);
        r.h1 = ldg4(item + 16 * (g + 8));
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const uint4 v = ldg4(item + 256 + (32 * i + lane) * 16);
          r.q0[i] = make_uint2(v.x, v.y), r.q1[i] = make_uint2(v.z, v.w);
        }
        return r;
      }
      if (kLayout == 2) {  // 2304 contiguous bytes an item, 16-byte loads across the warp
        const uint4* b = reinterpret_cast<const uint4*>(W + (size_t(t) * nsb + sb) * 2304) + lane;
        r.h0 = ldg4(reinterpret_cast<const uint8_t*>(b));
        r.h1 = ldg4(reinterpret_cast<const uint8_t*>(b + 32));
        const uint4 u = ldg4(reinterpret_cast<const uint8_t*>(b + 64)), v = ldg4(reinterpret_cast<const uint8_t*>(b + 96));
        const uint4 z = lane < 16 ? ldg4(reinterpret_cast<const uint8_t*>(b + 128)) : make_uint4(0, 0, 0, 0);
        r.q0[0] = make_uint2(u.x, u.y), r.q0[1] = make_uint2(u.z, u.w), r.q0[2] = make_uint2(v.x, v.y);
        r.q0[3] = make_uint2(v.z, v.w), r.q1[0] = make_uint2(z.x, z.y), r.q1[1] = make_uint2(z.z, z.w);
        return r;
      }
      const int ra = min(16 * t + g, N - 1), rb = min(16 * t + g + 8, N - 1);
      r = load_raw(W + size_t(ra) * row_bytes + size_t(sb) * 144, W + size_t(rb) * row_bytes + size_t(sb) * 144, tg);
    }
    return r;
  };
  Raw ring[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) ring[d] = load_item(d);
  // x into shared memory while the first weights load.
  const size_t xs_stride = x_stride(K);
  int* sums = reinterpret_cast<int*>(smem + NT * xs_stride);
  float* scales = reinterpret_cast<float*>(sums + NT * (K / 32));
  for (int i = threadIdx.x; i < NT * (K / 8); i += blockDim.x) {
    const int t = i / (K / 8), k8 = i % (K / 8);
    smem[t * xs_stride + k8] = __ldg(xq + size_t(t) * (K / 8) + k8);
  }
  for (int i = threadIdx.x; i < NT * (K / 32); i += blockDim.x) sums[i] = __ldg(xsum + i);
  for (int i = threadIdx.x; i < NT * nsb; i += blockDim.x) scales[i] = __ldg(xscale + i);
  __syncthreads();
  const uint4* xg = smem + size_t(bval ? g : 0) * xs_stride + tg;
  __shared__ float red[2][kWarps][32][4];
  float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int buf = 0;
  const auto tile_end = [&](int tile_i) {
#pragma unroll
    for (int i = 0; i < 4; ++i) red[buf][warp][lane][i] = out[i], out[i] = 0.0f;
    __syncthreads();
    if (threadIdx.x < 16 * NT) {
      const int r = threadIdx.x / NT, t = threadIdx.x % NT;
      const int src_lane = (r & 7) * 4 + t / 2, slot = (r >> 3) * 2 + (t & 1);
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[buf][w][src_lane][slot];
      const int row = 16 * tile_of(tile_i) + r;
      if (row < N) y[size_t(t) * N + row] = sum;
    }
    buf ^= 1;
  };
  if (per_tile == 0) {
    for (int ti = 0; ti < my_tiles; ++ti) tile_end(ti);
    return;
  }
  for (int j0 = 0; j0 < n_items; j0 += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int j = j0 + d;
      if (j < n_items) {
        const int sb = warp + (j % per_tile) * kWarps;
        if (kLoadOnly) {  // the loads' floor: every loaded word used, no products
          const Raw& r = ring[d];
          uint32_t v = r.h0.x ^ r.h1.y ^ xg[sb * 32].x;
#pragma unroll
          for (int i = 0; i < 4; ++i) v ^= r.q0[i].x ^ r.q0[i].y ^ r.q1[i].x ^ r.q1[i].y;
          out[0] += float(v & 0xff);
        } else
        superblock<NT>(ring[d], xg + sb * 32,
                       v0 ? sums + c0 * (K / 32) + sb * 8 : sums, v1 ? sums + c1 * (K / 32) + sb * 8 : sums,
                       v0 ? scales[c0 * nsb + sb] : 0.0f, v1 ? scales[c1 * nsb + sb] : 0.0f, out);
        ring[d] = load_item(j + kDepth);
        if ((j + 1) % per_tile == 0) tile_end(j / per_tile);
      }
    }
  }
}

// Q4_K regrouped by 16-row tiles (the layout variants 6 and 7 read): tile t's super-block sb is 2304 contiguous
// bytes at (t nsb + sb) 2304: the 16 rows' 16-byte headers, then for each 32-byte qs group i and lane L (g = L / 4,
// tg = L % 4) 16 bytes: row g's bytes 8 tg .. 8 tg + 7 of the group, then row g + 8's. One thread a 16-byte piece.
__global__ void regroup_q4k16_kernel(const uint8_t* __restrict__ src, uint8_t* __restrict__ dst, int N, int nsb) {
  const size_t piece = blockIdx.x * size_t(blockDim.x) + threadIdx.x;  // 144 pieces an item: 16 headers, 128 qs
  const size_t item = piece / 144;
  const int p = int(piece % 144);
  if (item >= size_t(N / 16) * nsb) return;
  const int t = int(item / nsb), sb = int(item % nsb);
  const size_t rb = size_t(nsb) * 144;
  uint8_t* out = dst + item * 2304 + size_t(p) * 16;
  if (p < 16) {
    const uint8_t* in = src + size_t(16 * t + p) * rb + size_t(sb) * 144;
    for (int j = 0; j < 16; ++j) out[j] = in[j];
    return;
  }
  const int i = (p - 16) / 32, lane = (p - 16) % 32, g = lane >> 2, tg = lane & 3;
  for (int half = 0; half < 2; ++half) {
    const uint8_t* in = src + size_t(16 * t + g + 8 * half) * rb + size_t(sb) * 144 + 16 + 32 * i + 8 * tg;
    for (int j = 0; j < 8; ++j) out[8 * half + j] = in[j];
  }
}

int g_sms = 132;  // the device's multiprocessors (main sets it): one persistent block each

struct XBuf {
  uint4* q;
  int* sum;
  float* scale;
};

// Lab variants (MMA_LAB_VARIANT): 0 the kernel, 1 its loads alone, 2 sixteen warps a block, 3 the loads alone with
// each block's tiles consecutive, 4 the loads alone of a layout with a tile's 16 rows of a super-block in 2304
// contiguous bytes (read as 16-byte pieces across the warp: a regrouping at upload, simulated on the same bytes),
// 5 that with sixteen warps, 6 the kernel on Q4_K regrouped by 16-row tiles (regroup_q4k16_kernel, really), 7 that
// with sixteen warps.
int g_variant = 0;

template <int NT, int kWarps, bool kLoadOnly, int kLayout = 0>
void launch_variant(const uint8_t* W, uint32_t rb, int N, int K, const XBuf& xb, float* y, cudaStream_t s) {
  constexpr int D = 3;
  static bool attr = false;
  if (!attr) {
    attr = true;
    LAB_CHECK(cudaFuncSetAttribute(mma_q4k_kernel<NT, D, kWarps, kLoadOnly, kLayout>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, 200 << 10));
  }
  const dim3 grid(std::min((N + 15) / 16, g_sms));
  mma_q4k_kernel<NT, D, kWarps, kLoadOnly, kLayout><<<grid, kWarps * 32, smem_bytes(K, NT), s>>>(W, rb, N, K, xb.q, xb.sum,
                                                                                      xb.scale, y);
}

template <int NT>
void launch_t(const uint8_t* W, uint32_t rb, int N, int K, const XBuf& xb, float* y, cudaStream_t s) {
  if (g_variant == 1) launch_variant<NT, 8, true>(W, rb, N, K, xb, y, s);
  else if (g_variant == 2) launch_variant<NT, 16, false>(W, rb, N, K, xb, y, s);
  else if (g_variant == 3) launch_variant<NT, 8, true, 1>(W, rb, N, K, xb, y, s);
  else if (g_variant == 4) launch_variant<NT, 8, true, 2>(W, rb, N, K, xb, y, s);
  else if (g_variant == 5) launch_variant<NT, 16, true, 2>(W, rb, N, K, xb, y, s);
  else if (g_variant == 6) launch_variant<NT, 8, false, 3>(W, rb, N, K, xb, y, s);
  else if (g_variant == 7) launch_variant<NT, 16, false, 3>(W, rb, N, K, xb, y, s);
  else launch_variant<NT, 8, false>(W, rb, N, K, xb, y, s);
}

bool launch_mma(int T, const void* w, int K, int N, const float* x, const XBuf& xb, float* y, cudaStream_t s,
                bool prep = true) {
  if (smem_bytes(K, T) > (200u << 10)) return false;  // x of this many columns does not fit a block's shared memory
  if (prep) quantize_x_kernel<<<dim3(K / 256, T), 256, 0, s>>>(x, K, xb.q, xb.sum, xb.scale);
  const uint32_t rb = uint32_t(K / 256 * 144);
  const auto* W = static_cast<const uint8_t*>(w);
  switch (T) {
    case 1: launch_t<1>(W, rb, N, K, xb, y, s); break;
    case 2: launch_t<2>(W, rb, N, K, xb, y, s); break;
    case 4: launch_t<4>(W, rb, N, K, xb, y, s); break;
    default: launch_t<8>(W, rb, N, K, xb, y, s); break;
  }
  return true;
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  const cudaStream_t s = lab::open_device(prop);
  g_sms = prop.multiProcessorCount;
  if (const char* e = std::getenv("MMA_LAB_VARIANT")) g_variant = std::atoi(e);
  std::printf("variant %d\n", g_variant);
  const double copy_gbs = lab::copy_gbs(s);
  std::printf("copy D2D 1 GiB: %.0f GB/s (read + write)\n", copy_gbs);
  std::vector<std::pair<int, int>> shapes = {{4096, 14336}, {14336, 4096}, {4096, 4096}, {4096, 1024}};
  if (const char* e = std::getenv("MMA_LAB_SHAPES")) {
    shapes.clear();
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
      int K = 0, N = 0;
      if (std::sscanf(item.c_str(), "%dx%d", &K, &N) != 2 || K <= 0 || N <= 0 || K % 256) {
        std::fprintf(stderr, "MMA_LAB_SHAPES: '%s' is not KxN with K a multiple of 256\n", item.c_str());
        return 2;
      }
      shapes.emplace_back(K, N);
    }
  }
  const int kMaxT = 8, kMaxK = 32768, kMaxN = 131072;
  float *x, *y, *yref;
  XBuf xb;
  LAB_CHECK(cudaMalloc(&x, size_t(kMaxK) * kMaxT * 4));
  LAB_CHECK(cudaMalloc(&y, size_t(kMaxN) * kMaxT * 4));
  LAB_CHECK(cudaMalloc(&yref, size_t(kMaxN) * kMaxT * 4));
  LAB_CHECK(cudaMalloc(&xb.q, size_t(kMaxK) * kMaxT * 2));
  LAB_CHECK(cudaMalloc(&xb.sum, size_t(kMaxK / 32) * kMaxT * 4));
  LAB_CHECK(cudaMalloc(&xb.scale, size_t(kMaxK / 256) * kMaxT * 4));
  std::vector<float> hx(size_t(kMaxK) * kMaxT);
  {
    std::mt19937 rng(1);
    for (auto& v : hx) v = float(rng() % 2001) / 1000.0f - 1.0f;
    for (size_t i = 0; i < hx.size(); i += 997) hx[i] *= 40.0f;  // a few outliers, as activations have
    LAB_CHECK(cudaMemcpy(x, hx.data(), hx.size() * 4, cudaMemcpyHostToDevice));
  }
  void* scratch;
  const size_t scratch_bytes = size_t(64) << 20;
  LAB_CHECK(cudaMalloc(&scratch, scratch_bytes));
  void* counters;
  LAB_CHECK(cudaMalloc(&counters, cuda::kBatchMmCounterBytes));
  LAB_CHECK(cudaMemset(counters, 0, cuda::kBatchMmCounterBytes));
  using quant::Type;
  std::vector<std::string> table;
  for (const auto& [K, N] : shapes) {
    const size_t rbytes = quant::row_bytes(Type::Q4_K, K), wb = rbytes * N;
    const int copies = int(std::max<size_t>(3, (size_t(200) << 20) / wb + 1));
    std::vector<void*> w(copies);
    for (int i = 0; i < copies; ++i) {
      LAB_CHECK(cudaMalloc(&w[i], wb));
      lab::fill_kernel<<<1024, 256, 0, s>>>(static_cast<uint8_t*>(w[i]), wb, 77u + i);
    }
    LAB_CHECK(cudaStreamSynchronize(s));
    // The layout the kernel reads: the file's, or regrouped (variants 6, 7; N a multiple of 16).
    std::vector<void*> wk = w;
    if (g_variant >= 6) {
      if (N % 16) {
        std::fprintf(stderr, "regrouped variants need N a multiple of 16\n");
        return 2;
      }
      for (int i = 0; i < copies; ++i) {
        LAB_CHECK(cudaMalloc(&wk[i], wb));
        const size_t pieces = size_t(N / 16) * (K / 256) * 144;
        regroup_q4k16_kernel<<<unsigned((pieces + 255) / 256), 256, 0, s>>>(static_cast<const uint8_t*>(w[i]),
                                                                          static_cast<uint8_t*>(wk[i]), N, K / 256);
      }
      LAB_CHECK(cudaStreamSynchronize(s));
      LAB_CHECK(cudaGetLastError());
    }
    // Correctness on copy 0: every 13th row against the float64 dot of the dequantized row.
    std::vector<uint8_t> hw(wb);
    LAB_CHECK(cudaMemcpy(hw.data(), w[0], wb, cudaMemcpyDeviceToHost));
    for (int T : {1, 2, 4, 8}) {
      if (!launch_mma(T, wk[0], K, N, x, xb, y, s)) continue;
      cuda::MatvecParams mp{w[0], Type::Q4_K, x, nullptr, yref, K, N, 1};
      cuda::launch_matvec(mp, s);
      LAB_CHECK(cudaStreamSynchronize(s));
      LAB_CHECK(cudaGetLastError());
      std::vector<float> hy(size_t(N) * T), hm(N);
      LAB_CHECK(cudaMemcpy(hy.data(), y, hy.size() * 4, cudaMemcpyDeviceToHost));
      LAB_CHECK(cudaMemcpy(hm.data(), yref, hm.size() * 4, cudaMemcpyDeviceToHost));
      double worst = 0.0, worst_mv = 0.0;
      std::vector<float> row(K);
      for (int n = 0; n < N; n += 13) {
        quant::rows::dequantize_q4_k(hw.data() + size_t(n) * rbytes, row.data(), K);
        for (int t = 0; t < T; ++t) {
          double dot = 0.0, mag = 0.0;
          for (int k = 0; k < K; ++k) dot += double(row[k]) * hx[size_t(t) * K + k], mag += std::fabs(double(row[k]) * hx[size_t(t) * K + k]);
          const double e = std::fabs(hy[size_t(t) * N + n] - dot) / std::max(mag, 1e-30);
          worst = std::max(worst, e);
          if (t == 0) worst_mv = std::max(worst_mv, std::fabs(hm[n] - dot) / std::max(mag, 1e-30));
        }
      }
      std::printf("check K=%d N=%d T=%d: max |y - ref| / sum|w x|: mma %.2e, int16 matvec (T=1) %.2e\n", K, N, T, worst,
                  worst_mv);
    }
    for (int T : {1, 2, 4, 8}) {
      if (smem_bytes(K, T) > (200u << 10)) continue;
      const float t_mma = lab::median_us(30, copies, s, [&](int i) { launch_mma(T, wk[i % copies], K, N, x, xb, y, s); });
      const float t_core =
          lab::median_us(30, copies, s, [&](int i) { launch_mma(T, wk[i % copies], K, N, x, xb, y, s, false); });
      float t_old;
      if (T == 1) {
        t_old = lab::median_us(30, copies, s, [&](int i) {
          cuda::MatvecParams p{w[i % copies], Type::Q4_K, x, nullptr, y, K, N, 1};
          cuda::launch_matvec(p, s);
        });
      } else {
        t_old = lab::median_us(30, copies, s, [&](int i) {
          cuda::BatchMmParams p{w[i % copies], Type::Q4_K, x, nullptr, y, K, N, T, scratch, scratch_bytes};
          p.tile_counters = static_cast<uint32_t*>(counters);
          cuda::launch_batch_mm(p, s);
        });
      }
      LAB_CHECK(cudaGetLastError());
      char line[256];
      std::snprintf(line, sizeof line, "Q4_K %6d %6d T=%d | %s %7.1f us %5.0f GB/s | mma+prep %7.1f us %5.0f GB/s | mma alone %7.1f us %5.0f GB/s",
                    K, N, T, T == 1 ? "matvec  " : "batch_mm", t_old, wb / t_old / 1e3, t_mma, wb / t_mma / 1e3, t_core,
                    wb / t_core / 1e3);
      table.push_back(line);
    }
    for (void* p : w) LAB_CHECK(cudaFree(p));
    if (wk[0] != w[0])
      for (void* p : wk) LAB_CHECK(cudaFree(p));
  }
  std::printf("\nQ4_K products, median of 30 batches, weights rotated past L2; copy bandwidth %.0f GB/s\n", copy_gbs);
  for (const auto& l : table) std::printf("%s\n", l.c_str());
  return 0;
}
