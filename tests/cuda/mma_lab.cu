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
#include "lab_common.cuh"
#include "quant/rows.h"
#include "quant/types.h"

namespace {

constexpr int kWarps = 8;  // a block: one 16-row tile, its super-blocks dealt to 8 warps

__device__ __forceinline__ uint2 ldg2(const uint8_t* p) {
  uint2 r;
  asm("ld.global.nc.L2::256B.v2.u32 {%0, %1}, [%2];" : "=r"(r.x), "=r"(r.y) : "l"(p));
  return r;
}
__device__ __forceinline__ uint4 ldg4(const uint8_t* p) {
  uint4 r;
  asm("ld.global.nc.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

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
// 2 tg + 1), the x fragments xf of the super-block for column g (zero past NT).
template <int NT>
__device__ __forceinline__ void superblock(const Raw& cur, const uint4 (&xf)[8], const int* xsum_sb0,
                                          const int* xsum_sb1, float s0, float s1, float (&out)[4]) {
  int X0[8] = {}, X1[8] = {};
  if (xsum_sb0) {
    const int4 a = __ldg(reinterpret_cast<const int4*>(xsum_sb0)), b = __ldg(reinterpret_cast<const int4*>(xsum_sb0) + 1);
    X0[0] = a.x, X0[1] = a.y, X0[2] = a.z, X0[3] = a.w, X0[4] = b.x, X0[5] = b.y, X0[6] = b.z, X0[7] = b.w;
  }
  if (NT > 1 && xsum_sb1) {
    const int4 a = __ldg(reinterpret_cast<const int4*>(xsum_sb1)), b = __ldg(reinterpret_cast<const int4*>(xsum_sb1) + 1);
    X1[0] = a.x, X1[1] = a.y, X1[2] = a.z, X1[3] = a.w, X1[4] = b.x, X1[5] = b.y, X1[6] = b.z, X1[7] = b.w;
  }
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
      const uint32_t a[4] = {(cur.q0[i].x >> sh) & 0x0f0f0f0fu, (cur.q1[i].x >> sh) & 0x0f0f0f0fu,
                             (cur.q0[i].y >> sh) & 0x0f0f0f0fu, (cur.q1[i].y >> sh) & 0x0f0f0f0fu};
      int dh[4], dl[4];
      mma_k32<true>(dh, a, xf[s].x, xf[s].y);
      mma_k32<false>(dl, a, xf[s].z, xf[s].w);
      const int sA = byte_of(sca[s >> 2], s & 3), sB = byte_of(scb[s >> 2], s & 3);
      const int mA = byte_of(mna[s >> 2], s & 3), mB = byte_of(mnb[s >> 2], s & 3);
      hi[0] += sA * dh[0], lo[0] += sA * dl[0], mn[0] += mA * X0[s];
      hi[2] += sB * dh[2], lo[2] += sB * dl[2], mn[2] += mB * X0[s];
      if (NT > 1) {
        hi[1] += sA * dh[1], lo[1] += sA * dl[1], mn[1] += mA * X1[s];
        hi[3] += sB * dh[3], lo[3] += sB * dl[3], mn[3] += mB * X1[s];
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

// y[t][n] = sum_k W[n][k] x[t][k] for t < NT, W Q4_K (N rows of row_bytes). Persistent blocks of 8 warps: block b
// takes the 16-row tiles b, b + G, ...; in a tile warp w the super-blocks w, w + 8, ...; a warp walks its (tile,
// super-block) items in order with the weights of the next kDepth items already loading, and the warps' partial
// tiles are added in warp order after a barrier a tile (two reduction buffers, so one barrier).
template <int NT, int kDepth>
__global__ void __launch_bounds__(kWarps * 32, 1) mma_q4k_kernel(const uint8_t* __restrict__ W, uint32_t row_bytes,
                                                                 int N, int K, const uint4* __restrict__ xq,
                                                                 const int* __restrict__ xsum,
                                                                 const float* __restrict__ xscale,
                                                                 float* __restrict__ y) {
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, tg = lane & 3;
  const int nsb = K / 256, n_tiles = (N + 15) / 16;
  const int c0 = 2 * tg, c1 = 2 * tg + 1;
  const bool v0 = c0 < NT, v1 = c1 < NT, bval = g < NT;
  const uint4* xg = xq + size_t(bval ? g : 0) * (K / 8);
  // This warp's items: per tile of this block, the super-blocks warp, warp + 8, ...
  const int per_tile = warp < nsb ? (nsb - 1 - warp) / kWarps + 1 : 0;
  const int my_tiles = blockIdx.x < n_tiles ? (n_tiles - 1 - int(blockIdx.x)) / int(gridDim.x) + 1 : 0;
  const int n_items = per_tile * my_tiles;
  const auto item_tile = [&](int j) { return int(blockIdx.x) + (j / per_tile) * int(gridDim.x); };
  const auto item_sb = [&](int j) { return warp + (j % per_tile) * kWarps; };
  const auto load_item = [&](int j) {
    Raw r{};
    if (j < n_items) {
      const int t = item_tile(j), sb = item_sb(j);
      const int ra = min(16 * t + g, N - 1), rb = min(16 * t + g + 8, N - 1);
      r = load_raw(W + size_t(ra) * row_bytes + size_t(sb) * 144, W + size_t(rb) * row_bytes + size_t(sb) * 144, tg);
    }
    return r;
  };
  const auto load_x = [&](int j, uint4 (&xf)[8]) {
    const int sb = j < n_items ? item_sb(j) : 0;
#pragma unroll
    for (int s = 0; s < 8; ++s) xf[s] = bval ? __ldg(xg + sb * 32 + 4 * s + tg) : make_uint4(0, 0, 0, 0);
  };
  Raw ring[kDepth];
#pragma unroll
  for (int d = 0; d < kDepth; ++d) ring[d] = load_item(d);
  uint4 xf[8];
  load_x(0, xf);
  __shared__ float red[2][kWarps][32][4];
  float out[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  int buf = 0;
  for (int tile_i = 0; tile_i < my_tiles; ++tile_i) {
    for (int k = 0; k < per_tile; ++k) {
      const int j = tile_i * per_tile + k, sb = item_sb(j);
      const Raw cur = ring[0];
#pragma unroll
      for (int d = 0; d + 1 < kDepth; ++d) ring[d] = ring[d + 1];
      ring[kDepth - 1] = load_item(j + kDepth);
      uint4 xn[8];
      load_x(j + 1, xn);
      superblock<NT>(cur, xf, v0 ? xsum + size_t(c0) * (K / 32) + sb * 8 : nullptr,
                     v1 ? xsum + size_t(c1) * (K / 32) + sb * 8 : nullptr,
                     v0 ? __ldg(xscale + size_t(c0) * nsb + sb) : 0.0f, v1 ? __ldg(xscale + size_t(c1) * nsb + sb) : 0.0f,
                     out);
#pragma unroll
      for (int s = 0; s < 8; ++s) xf[s] = xn[s];
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) red[buf][warp][lane][i] = out[i], out[i] = 0.0f;
    __syncthreads();
    if (threadIdx.x < 16 * NT) {
      const int r = threadIdx.x / NT, t = threadIdx.x % NT;
      const int src_lane = (r & 7) * 4 + t / 2, slot = (r >> 3) * 2 + (t & 1);
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += red[buf][w][src_lane][slot];
      const int row = 16 * (int(blockIdx.x) + tile_i * int(gridDim.x)) + r;
      if (row < N) y[size_t(t) * N + row] = sum;
    }
    buf ^= 1;
  }
}

int g_sms = 132;  // the device's multiprocessors (main sets it): one persistent block each

struct XBuf {
  uint4* q;
  int* sum;
  float* scale;
};

void launch_mma(int T, const void* w, int K, int N, const float* x, const XBuf& xb, float* y, cudaStream_t s,
                bool prep = true) {
  if (prep) quantize_x_kernel<<<dim3(K / 256, T), 256, 0, s>>>(x, K, xb.q, xb.sum, xb.scale);
  const uint32_t rb = uint32_t(K / 256 * 144);
  const dim3 grid(std::min((N + 15) / 16, g_sms));
  const auto* W = static_cast<const uint8_t*>(w);
  constexpr int D = 3;
  switch (T) {
    case 1: mma_q4k_kernel<1, D><<<grid, kWarps * 32, 0, s>>>(W, rb, N, K, xb.q, xb.sum, xb.scale, y); break;
    case 2: mma_q4k_kernel<2, D><<<grid, kWarps * 32, 0, s>>>(W, rb, N, K, xb.q, xb.sum, xb.scale, y); break;
    case 4: mma_q4k_kernel<4, D><<<grid, kWarps * 32, 0, s>>>(W, rb, N, K, xb.q, xb.sum, xb.scale, y); break;
    default: mma_q4k_kernel<8, D><<<grid, kWarps * 32, 0, s>>>(W, rb, N, K, xb.q, xb.sum, xb.scale, y); break;
  }
}

}  // namespace

int main() {
  cudaDeviceProp prop{};
  LAB_CHECK(cudaGetDeviceProperties(&prop, 0));
  cudaStream_t s;
  LAB_CHECK(cudaStreamCreate(&s));
  std::printf("device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  g_sms = prop.multiProcessorCount;
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
    // Correctness on copy 0: every 13th row against the float64 dot of the dequantized row.
    std::vector<uint8_t> hw(wb);
    LAB_CHECK(cudaMemcpy(hw.data(), w[0], wb, cudaMemcpyDeviceToHost));
    for (int T : {1, 2, 4, 8}) {
      launch_mma(T, w[0], K, N, x, xb, y, s);
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
      const float t_mma = lab::median_us(30, copies, s, [&](int i) { launch_mma(T, w[i % copies], K, N, x, xb, y, s); });
      const float t_core =
          lab::median_us(30, copies, s, [&](int i) { launch_mma(T, w[i % copies], K, N, x, xb, y, s, false); });
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
  }
  std::printf("\nQ4_K products, median of 30 batches, weights rotated past L2; copy bandwidth %.0f GB/s\n", copy_gbs);
  for (const auto& l : table) std::printf("%s\n", l.c_str());
  return 0;
}
