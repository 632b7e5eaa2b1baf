// Expert-grouped prefill products (moe_gemm.cuh).
// - group kernel (one block): counts each expert's users u = t k + j, their offsets (a scan) and the lists. The
//   order inside a list depends on atomics, the results do not: each output is one user's dot over K, summed in
//   the same order whichever tile holds it.
// - tile kernel: grid (row tiles of 64, experts, token tiles); block (tile, e, z) takes expert e's users
//   32 z .. 32 z + 31, 32 gridDim.z further on, ... until the list ends (blocks of experts nobody chose exit at once).
//   Per K-step of 64: 128 threads dequantize the 64 rows' two chunks into shared memory (quant/dequant.cuh, so every
//   format, MXFP4 included), the other 128 gather the 32 users' x; then each thread forms 4 rows x 2 users in float32.
#include "cuda/kernels/moe_gemm.cuh"

#include "cuda/check.h"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "quant/dequant.cuh"

namespace cuda {
namespace {

constexpr int kBN = 64;   // rows of a tile
constexpr int kBT = 32;   // users of a tile
constexpr int kBK = 64;   // K per step: two 32-element chunks
constexpr int kThreads = 256;
constexpr int kGroupThreads = 1024;

struct Groups {
  int32_t* counts;   // [n_expert]
  int32_t* offsets;  // [n_expert]
  int32_t* users;    // [k T], grouped by expert
};

Groups groups_in(void* scratch, int64_t n_expert) {
  auto* s = static_cast<int32_t*>(scratch);
  return {s, s + n_expert, s + 2 * n_expert};
}

__global__ void __launch_bounds__(kGroupThreads) moe_group_kernel(MatvecIdParams p, Groups g) {
  extern __shared__ int32_t sh[];  // counts, then fill positions, [n_expert] each
  int32_t* cnt = sh;
  int32_t* fill = sh + p.n_expert;
  const int64_t n_users = p.k * p.T;
  for (int64_t e = threadIdx.x; e < p.n_expert; e += blockDim.x) cnt[e] = 0;
  __syncthreads();
  for (int64_t u = threadIdx.x; u < n_users; u += blockDim.x) {
    const int32_t e = p.ids[u];
    if (e >= 0 && e < p.n_expert) atomicAdd(&cnt[e], 1);
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    int32_t run = 0;
    for (int64_t e = 0; e < p.n_expert; ++e) {
      g.offsets[e] = fill[e] = run;
      g.counts[e] = cnt[e];
      run += cnt[e];
    }
  }
  __syncthreads();
  for (int64_t u = threadIdx.x; u < n_users; u += blockDim.x) {
    const int32_t e = p.ids[u];
    if (e >= 0 && e < p.n_expert) g.users[atomicAdd(&fill[e], 1)] = int32_t(u);
  }
}

// Users whose id is out of range get zero rows (as the matvec), written by this small pass.
__global__ void moe_zero_invalid_kernel(MatvecIdParams p) {
  const int64_t u = blockIdx.x;
  const int32_t e = p.ids[u];
  if (e >= 0 && e < p.n_expert) return;
  for (int64_t n = threadIdx.x; n < p.N; n += blockDim.x) p.y[u * p.N + n] = 0.0f;
}

template <quant::Type T>
__global__ void __launch_bounds__(kThreads) moe_tile_kernel(MatvecIdParams p, Groups g, size_t row_bytes) {
  using quant::dev::kChunk;
  __shared__ __align__(16) float ws[kBK][kBN];  // ws[kk][n]: the tile's rows, transposed
  __shared__ __align__(16) float xs[kBK][kBT];  // xs[kk][u]: the users' inputs, transposed
  const int64_t e = blockIdx.y;
  const int32_t count = g.counts[e];
  const int64_t n0 = int64_t(blockIdx.x) * kBN;
  const int tid = threadIdx.x, ty = tid / 16, tx = tid % 16;  // rows 4 ty .. 4 ty + 3, users 2 tx, 2 tx + 1
  const uint8_t* we = static_cast<const uint8_t*>(p.w) + size_t(e) * size_t(p.N) * row_bytes;
  const int32_t* list = g.users + g.offsets[e];
  const int64_t n_chunks = (p.K + kChunk - 1) / kChunk;
  for (int64_t u0 = int64_t(blockIdx.z) * kBT; u0 < count; u0 += int64_t(gridDim.z) * kBT) {
    // The input row of the user this thread gathers (threads 128..255: user (tid - 128) / 4, quarter tid % 4).
    const float* xrow = nullptr;
    if (tid >= 128) {
      const int64_t ui = u0 + (tid - 128) / 4;
      if (ui < count) {
        const int64_t u = list[ui], t = u / p.k, j = u % p.k;
        xrow = p.x + (t * p.x_slots + (p.x_slots == 1 ? 0 : j)) * p.K;
      }
    }
    float acc[4][2] = {};
    for (int64_t k0 = 0; k0 < p.K; k0 += kBK) {
      if (tid < 128) {
        const int r = tid / 2, cc = tid % 2;
        const int64_t c = k0 / kChunk + cc;
        float v[kChunk];
        if (n0 + r < p.N && c < n_chunks) {
          const int valid = int(p.K - c * kChunk < kChunk ? p.K - c * kChunk : kChunk);
          quant::dev::dequant_chunk<T>(we + (n0 + r) * row_bytes, c, valid, v);
        } else {
#pragma unroll
          for (int i = 0; i < kChunk; ++i) v[i] = 0.0f;
        }
#pragma unroll
        for (int i = 0; i < kChunk; ++i) ws[cc * kChunk + i][r] = v[i];
      } else {
        const int ul = (tid - 128) / 4, q = tid % 4;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          const int64_t kk = k0 + q * 16 + i;
          xs[q * 16 + i][ul] = xrow && kk < p.K ? __ldg(xrow + kk) : 0.0f;
        }
      }
      __syncthreads();
#pragma unroll 8
      for (int kk = 0; kk < kBK; ++kk) {
        const float4 w4 = *reinterpret_cast<const float4*>(&ws[kk][4 * ty]);
        const float2 x2 = *reinterpret_cast<const float2*>(&xs[kk][2 * tx]);
        const float w[4] = {w4.x, w4.y, w4.z, w4.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i][0] = fmaf(w[i], x2.x, acc[i][0]), acc[i][1] = fmaf(w[i], x2.y, acc[i][1]);
      }
      __syncthreads();
    }
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
      const int64_t ui = u0 + 2 * tx + jj;
      if (ui >= count) continue;
      float* y = p.y + int64_t(list[ui]) * p.N;
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t n = n0 + 4 * ty + i;
        if (n < p.N) y[n] = acc[i][jj] + (p.bias ? p.bias[e * p.N + n] : 0.0f);
      }
    }
  }
}

}  // namespace

void launch_moe_gemm(const MatvecIdParams& p, void* scratch, size_t scratch_bytes, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.ids && p.y && scratch, "moe_gemm: null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.n_expert > 0 && p.k > 0 && p.T > 0, "moe_gemm: empty shape");
  LLM_REQUIRE(p.x_slots == 1 || p.x_slots == p.k, "moe_gemm: x_slots must be 1 or k");
  LLM_REQUIRE(p.n_expert <= 4096 && p.n_expert <= 65535, "moe_gemm: at most 4096 experts");
  LLM_REQUIRE(p.k * p.T <= 0x7fffffff, "moe_gemm: too many users");
  LLM_REQUIRE(scratch_bytes >= moe_group_scratch_bytes(p.n_expert, p.k, p.T), "moe_gemm: scratch too small");
  const size_t rb = quant::row_bytes(p.type, p.K);
  const Groups g = groups_in(scratch, p.n_expert);
  moe_group_kernel<<<1, kGroupThreads, size_t(2 * p.n_expert) * 4, stream>>>(p, g);
  CUDA_CHECK_LAUNCH(stream);
  moe_zero_invalid_kernel<<<unsigned(p.k * p.T), 128, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
  // An expert has at most T users when a token's k ids are distinct (TopK's are); more are taken by the loop.
  const int64_t z = (p.T + kBT - 1) / kBT;
  const dim3 grid(unsigned((p.N + kBN - 1) / kBN), unsigned(p.n_expert), unsigned(z < 65535 ? z : 65535));
  dispatch_qtype(p.type, "moe_gemm", [&](auto tag) {
    moe_tile_kernel<decltype(tag)::value><<<grid, kThreads, 0, stream>>>(p, g, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
