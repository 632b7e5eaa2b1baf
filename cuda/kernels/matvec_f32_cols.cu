// Many columns of a float32 matrix in one pass over it: a mixture's router (n_embd x n_expert, kept in float32 so
// that near-tied expert scores are ranked as the reference ranks them) at prefill. The matvec kernels re-read the
// matrix for every column: at Qwen3-30B-A3B's T = 512 that is 512 x 1 MiB from L2 a layer. Here a block keeps a
// 16-row x 32-column tile of outputs and walks K in chunks of 64 through shared memory, so the matrix is read
// T / 32 times. Each output is one float32 fma chain in ascending k, whatever T and the tile: batch invariant, and
// within the matvec's tolerance of the reference (float32 products and sums).
// As partial products (launch_f32_column_parts): the same tiles over slices of K, one slice a block, each slice's
// chain written to its own part for a reader to add in part order (a router's parts, moe_route): K / slice times the
// blocks, each with a chain that much shorter. One block an SM walking all of K was 42 us a layer of Qwen3-30B-A3B's
// pp512 (128 blocks, 2048 dependent fmas each). Where the rows come in 64s (Qwen3's 128 experts) the parts take
// 64 x 64 tiles instead (f32_cols_outer_kernel, below; the same bits, +0.5% on a Qwen3-30B-A3B pp512).
#include "cuda/kernels/matvec_f32_cols.cuh"

#include "cuda/check.h"

namespace cuda {
namespace {

constexpr int kTileCols = 32, kChunk = 64, kThreads = 64;
constexpr int kXLoads = kTileCols * kChunk / kThreads;
constexpr int kLd = kChunk + 4;  // a row in shared memory: 16-byte aligned, rows 4 banks apart
// A thread's rows: R (2, or 4 for the parts' tall tiles), 8 apart; a tile 8 R rows.
template <int R>
constexpr int tile_rows() { return 8 * R; }
template <int R>
constexpr int w_loads() { return tile_rows<R>() * kChunk / kThreads; }

// Chunk k0's matrix and x elements of this thread into registers: element k0 + tid of each tile row and column
// (zeros past N, T and k_end; rows K apart).
static_assert(kThreads == kChunk, "a thread loads one k of every row and column of a chunk");
template <int kWLoads>
__device__ __forceinline__ void load_chunk(const float* w, const float* x, int64_t K, int64_t k_end, int64_t N,
                                           int64_t T, int64_t n0, int64_t t0, int64_t k0, float (&wr)[kWLoads],
                                           float (&xr)[kXLoads]) {
  const int64_t k = k0 + int(threadIdx.x);
  const bool in_k = k < k_end;
  const float* wp = w + n0 * K + k;
  const float* xp = x + t0 * K + k;
#pragma unroll
  for (int j = 0; j < kWLoads; ++j) wr[j] = in_k && n0 + j < N ? __ldg(wp + j * K) : 0.0f;
#pragma unroll
  for (int j = 0; j < kXLoads; ++j) xr[j] = in_k && t0 + j < T ? __ldg(xp + j * K) : 0.0f;
}

// The next chunk's loads are in flight while this one is multiplied: with few blocks an SM (a router is 128 x 2048 at
// most) the L2 latency, not the arithmetic, would set the pace otherwise.
// A thread holds R rows x 4 columns of the tile (rows rp + 8 a, columns cq + 8 j: those a warp reads at once lie in
// distinct banks) and takes four k at a time from 16-byte shared loads: R + 4 loads for 16 R fmas (R = 2: 6 for
// 32). The first form, a row and two columns a thread with a load a product, was bound by the shared-memory pipe
// (51 us a layer of Qwen3-30B-A3B's pp512, 8.6% of it; session 32); R = 2 still is by count (~13 us of its 20). R = 4
// (8 loads for 64 fmas, the same bits) was no faster for the router's parts: Qwen3-30B-A3B pp512 within +-1%
// (BENCHMARKS.md, session 51), so R stays a template argument with one instance.
// slice_k > 0: block z covers K slice [z slice_k, (z + 1) slice_k) and writes y + z T N, without the bias.
template <int R>
__global__ void __launch_bounds__(kThreads) f32_cols_kernel(const float* w, const float* x, const float* bias,
                                                            float* y, int64_t K, int64_t N, int64_t T,
                                                            int64_t slice_k) {
  constexpr int kTileRows = tile_rows<R>(), kWLoads = w_loads<R>();
  __shared__ __align__(16) float ws[kTileRows][kLd];
  __shared__ __align__(16) float xs[kTileCols][kLd];
  const int tid = int(threadIdx.x);
  const int rp = tid / 8, cq = tid % 8;  // rows rp + 8 a; columns cq, cq + 8, cq + 16, cq + 24
  const int64_t n0 = int64_t(blockIdx.x) * kTileRows, t0 = int64_t(blockIdx.y) * kTileCols;
  int64_t k_begin = 0, k_end = K;
  if (slice_k > 0) {
    k_begin = int64_t(blockIdx.z) * slice_k, k_end = k_begin + slice_k < K ? k_begin + slice_k : K;
    y += int64_t(blockIdx.z) * T * N, bias = nullptr;
  }
  float wr[kWLoads], xr[kXLoads];
  load_chunk(w, x, K, k_end, N, T, n0, t0, k_begin, wr, xr);
  float acc[R][4] = {};
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kChunk) {
    __syncthreads();  // the last chunk's products are done with ws and xs
#pragma unroll
    for (int j = 0; j < kWLoads; ++j) ws[j][tid] = wr[j];
#pragma unroll
    for (int j = 0; j < kXLoads; ++j) xs[j][tid] = xr[j];
    __syncthreads();
    if (k0 + kChunk < k_end) load_chunk(w, x, K, k_end, N, T, n0, t0, k0 + kChunk, wr, xr);
#pragma unroll 4
    for (int kk = 0; kk < kChunk; kk += 4) {
      float4 wv[R], xv[4];
#pragma unroll
      for (int a = 0; a < R; ++a) wv[a] = *reinterpret_cast<const float4*>(&ws[rp + 8 * a][kk]);
#pragma unroll
      for (int b = 0; b < 4; ++b) xv[b] = *reinterpret_cast<const float4*>(&xs[cq + 8 * b][kk]);
#pragma unroll
      for (int a = 0; a < R; ++a)
#pragma unroll
        for (int b = 0; b < 4; ++b) {  // each output's chain in ascending k
          acc[a][b] = fmaf(wv[a].x, xv[b].x, acc[a][b]);
          acc[a][b] = fmaf(wv[a].y, xv[b].y, acc[a][b]);
          acc[a][b] = fmaf(wv[a].z, xv[b].z, acc[a][b]);
          acc[a][b] = fmaf(wv[a].w, xv[b].w, acc[a][b]);
        }
    }
  }
#pragma unroll
  for (int a = 0; a < R; ++a) {
    const int64_t n = n0 + rp + 8 * a;
    if (n >= N) continue;
    const float bn = bias ? bias[n] : 0.0f;
#pragma unroll
    for (int b = 0; b < 4; ++b)
      if (const int64_t t = t0 + cq + 8 * b; t < T) y[t * N + n] = acc[a][b] + bn;
  }
}

// Partial products in 64-row x 64-column tiles (launch_f32_column_parts where N % 64 == 0 and the tiles' alignment
// holds): 128 threads, each 4 rows x 8 columns, a chunk of 32 k of the matrix and x in shared memory k-major, so a
// thread takes one float4 of rows and two of columns a k for 32 fmas (3 shared loads where the 16 x 32 tiles take 6
// for the same 32), and the matrix and x are read from L2 T / 64 and N / 64 times (not T / 32 and N / 16). Each
// output the same chain (zero, then fmaf(w, x, acc) in ascending k over its slice): the 16 x 32 tiles' bits. A k row
// of the tile is stored with its 16-byte groups permuted (index ^ 4 ((k / 4) % 8)), so the staging's stores, eight
// consecutive k of each of four rows a warp, fall in distinct banks; a thread's float4 stays one group.
constexpr int kOTile = 64, kOChunk = 32, kOThreads = 128;
constexpr int kOLoads = kOTile * kOChunk / 4 / kOThreads;  // float4 of the matrix (and of x) a thread stages a chunk

__device__ __forceinline__ int outer_swizzle(int k) { return 4 * ((k >> 2) & 7); }

__global__ void __launch_bounds__(kOThreads) f32_cols_outer_kernel(const float* w, const float* x, float* parts,
                                                                   int64_t K, int64_t N, int64_t T,
                                                                   int64_t slice_k) {
  __shared__ __align__(16) float ws[2][kOChunk][kOTile];
  __shared__ __align__(16) float xs[2][kOChunk][kOTile];
  const int tid = int(threadIdx.x);
  const int64_t n0 = int64_t(blockIdx.x) * kOTile, t0 = int64_t(blockIdx.y) * kOTile;
  const int64_t k_begin = int64_t(blockIdx.z) * slice_k;
  const int64_t k_end = k_begin + slice_k < K ? k_begin + slice_k : K;
  float* y = parts + int64_t(blockIdx.z) * T * N;
  // Staging: float4 j of this thread is row (or column) (tid + 128 j) / 8, k 4 ((tid + 128 j) % 8) of the chunk.
  float4 wr[kOLoads], xr[kOLoads];
  const auto load = [&](int64_t k0) {
#pragma unroll
    for (int j = 0; j < kOLoads; ++j) {
      const int idx = tid + kOThreads * j, r = idx >> 3;
      const int64_t k = k0 + 4 * (idx & 7);
      const bool in_k = k < k_end;  // K % 4 == 0: a float4 is all in or all out
      wr[j] = in_k ? __ldg(reinterpret_cast<const float4*>(w + (n0 + r) * K + k)) : make_float4(0, 0, 0, 0);
      xr[j] = in_k && t0 + r < T ? __ldg(reinterpret_cast<const float4*>(x + (t0 + r) * K + k))
                                 : make_float4(0, 0, 0, 0);
    }
  };
  const auto stage = [&](int b) {
#pragma unroll
    for (int j = 0; j < kOLoads; ++j) {
      const int idx = tid + kOThreads * j, r = idx >> 3, kq = 4 * (idx & 7);
      const int at = r ^ outer_swizzle(kq);
      ws[b][kq][at] = wr[j].x, ws[b][kq + 1][at] = wr[j].y, ws[b][kq + 2][at] = wr[j].z, ws[b][kq + 3][at] = wr[j].w;
      xs[b][kq][at] = xr[j].x, xs[b][kq + 1][at] = xr[j].y, xs[b][kq + 2][at] = xr[j].z, xs[b][kq + 3][at] = xr[j].w;
    }
  };
  const int ty = tid >> 3, tx = tid & 7;  // rows 4 ty .. 4 ty + 3; columns 4 tx .. + 3 and 32 + 4 tx .. + 3
  float acc[4][8] = {};
  load(k_begin);
  stage(0);
  __syncthreads();
  int b = 0;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kOChunk, b ^= 1) {
    const bool more = k0 + kOChunk < k_end;
    if (more) load(k0 + kOChunk);
#pragma unroll 8
    for (int kk = 0; kk < kOChunk; ++kk) {
      const int s = outer_swizzle(kk);
      const float4 a = *reinterpret_cast<const float4*>(&ws[b][kk][(4 * ty) ^ s]);
      const float4 c0 = *reinterpret_cast<const float4*>(&xs[b][kk][(4 * tx) ^ s]);
      const float4 c1 = *reinterpret_cast<const float4*>(&xs[b][kk][(32 + 4 * tx) ^ s]);
      const float av[4] = {a.x, a.y, a.z, a.w};
      const float cv[8] = {c0.x, c0.y, c0.z, c0.w, c1.x, c1.y, c1.z, c1.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(av[i], cv[j], acc[i][j]);
    }
    if (more) stage(b ^ 1);  // the other buffer: its readers (the chunk before) passed the last barrier
    __syncthreads();
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t t = t0 + (j < 4 ? 4 * tx + j : 32 + 4 * tx + j - 4);
    if (t < T)
      *reinterpret_cast<float4*>(y + t * N + n0 + 4 * ty) = make_float4(acc[0][j], acc[1][j], acc[2][j], acc[3][j]);
  }
}

}  // namespace

void launch_f32_columns(const MatvecParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.type == quant::Type::F32 && p.w && p.x && p.y, "f32 columns: float32 matrix and x required");
  constexpr int kTileRows = tile_rows<2>();
  LLM_REQUIRE((p.N + kTileRows - 1) / kTileRows <= 0x7fffffff && (p.T + kTileCols - 1) / kTileCols <= 65535,
              "f32 columns: too many rows or columns");
  const dim3 grid(unsigned((p.N + kTileRows - 1) / kTileRows), unsigned((p.T + kTileCols - 1) / kTileCols));
  f32_cols_kernel<2><<<grid, kThreads, 0, stream>>>(static_cast<const float*>(p.w), p.x, p.bias, p.y, p.K, p.N,
                                                    p.T, 0);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_f32_column_parts(const float* w, const float* x, float* parts, int64_t K, int64_t N, int64_t T,
                             int64_t slice_k, cudaStream_t stream, bool outer_tiles) {
  LLM_REQUIRE(w && x && parts, "f32 column parts: null pointer");
  LLM_REQUIRE(K > 0 && N > 0 && T > 0 && slice_k > 0 && slice_k % kChunk == 0, "f32 column parts: bad shape");
  const int64_t n_parts = (K + slice_k - 1) / slice_k;
  const auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  if (outer_tiles && N % kOTile == 0 && K % 4 == 0 && aligned(w) && aligned(x) && aligned(parts)) {
    LLM_REQUIRE(N / kOTile <= 0x7fffffff && (T + kOTile - 1) / kOTile <= 65535 && n_parts <= 65535,
                "f32 column parts: too many rows, columns or parts");
    const dim3 grid(unsigned(N / kOTile), unsigned((T + kOTile - 1) / kOTile), unsigned(n_parts));
    f32_cols_outer_kernel<<<grid, kOThreads, 0, stream>>>(w, x, parts, K, N, T, slice_k);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  constexpr int64_t tile = tile_rows<2>();
  LLM_REQUIRE((N + tile - 1) / tile <= 0x7fffffff && (T + kTileCols - 1) / kTileCols <= 65535 && n_parts <= 65535,
              "f32 column parts: too many rows, columns or parts");
  const dim3 grid(unsigned((N + tile - 1) / tile), unsigned((T + kTileCols - 1) / kTileCols), unsigned(n_parts));
  f32_cols_kernel<2><<<grid, kThreads, 0, stream>>>(w, x, nullptr, parts, K, N, T, slice_k);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
