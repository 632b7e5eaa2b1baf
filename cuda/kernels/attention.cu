// Split-sequence attention over the f16 cache. Each block owns one (head, token, split): its four warps take slots
// round-robin, each keeping an online-softmax state (running max, sum, value accumulator; lane owns value dims
// 2*lane + 64*i), merged inside the block and written as the split's partial state; combine_kernel merges splits.
// The prefill path uses the same kernel (one block per query row); a tiled flash-attention kernel is future work
// (docs/kernel-notes.md).
#include "cuda/kernels/attention.cuh"

#include <cuda_fp16.h>

#include <algorithm>

#include "cuda/check.h"

namespace cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxHd = 256;
constexpr int kVPerLane = kMaxHd / 64;  // half2 pairs per lane

__global__ void kv_write_kernel(KvWriteParams p) {
  const int64_t per_tok = p.n_head_kv * (p.hd + p.hd_v);
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_tok * p.T) return;
  const int64_t t = i / per_tok, r = i % per_tok;
  const int64_t pos = p.positions[t];
  if (pos < 0 || pos >= p.n_ctx) return;
  if (r < p.n_head_kv * p.hd) {
    const int64_t h = r / p.hd, d = r % p.hd;
    p.k_cache[(h * p.n_ctx + pos) * p.hd + d] = __half_as_ushort(__float2half_rn(p.k[t * p.n_head_kv * p.hd + r]));
  } else {
    const int64_t rv = r - p.n_head_kv * p.hd;
    const int64_t h = rv / p.hd_v, d = rv % p.hd_v;
    p.v_cache[(h * p.n_ctx + pos) * p.hd_v + d] =
        __half_as_ushort(__float2half_rn(p.v[t * p.n_head_kv * p.hd_v + rv]));
  }
}

__global__ void __launch_bounds__(kWarps * 32) attention_split_kernel(AttentionKernelParams p) {
  const int64_t h = blockIdx.x, t = blockIdx.y, s = blockIdx.z;
  const int n_splits = gridDim.z;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t kvh = h / (p.n_head / p.n_head_kv);
  __shared__ float q_s[kMaxHd];
  __shared__ float m_s[kWarps], l_s[kWarps];
  __shared__ float acc_s[kWarps][kMaxHd];

  const float* q = p.q + (t * p.n_head + h) * p.hd;
  for (int d = threadIdx.x; d < p.hd; d += blockDim.x) q_s[d] = q[d] * p.scale;
  __syncthreads();

  const int64_t last = p.positions[t];  // inclusive
  const int64_t begin = s * int64_t(p.split_len);
  const int64_t end = min(begin + p.split_len, last + 1);
  const __half* kc = reinterpret_cast<const __half*>(p.k_cache) + kvh * p.n_ctx * p.hd;
  const __half* vc = reinterpret_cast<const __half*>(p.v_cache) + kvh * p.n_ctx * p.hd_v;

  float m = -INFINITY, l = 0.0f;
  float acc[2 * kVPerLane];
#pragma unroll
  for (int i = 0; i < 2 * kVPerLane; ++i) acc[i] = 0.0f;
  for (int64_t slot = begin + warp; slot < end; slot += kWarps) {
    const __half2* kr = reinterpret_cast<const __half2*>(kc + slot * p.hd);
    float dot = 0.0f;
    for (int j = lane; j < p.hd / 2; j += 32) {
      const float2 kf = __half22float2(kr[j]);
      dot += q_s[2 * j] * kf.x + q_s[2 * j + 1] * kf.y;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float m_new = fmaxf(m, dot);
    const float corr = expf(m - m_new);  // 0 on the first slot (m = -inf)
    const float w = expf(dot - m_new);
    l = l * corr + w;
    const __half2* vr = reinterpret_cast<const __half2*>(vc + slot * p.hd_v);
#pragma unroll
    for (int i = 0; i < kVPerLane; ++i) {
      const int j = lane + 32 * i;
      float2 vf = make_float2(0.0f, 0.0f);
      if (2 * j < p.hd_v) vf = __half22float2(vr[j]);
      acc[2 * i] = acc[2 * i] * corr + w * vf.x;
      acc[2 * i + 1] = acc[2 * i + 1] * corr + w * vf.y;
    }
    m = m_new;
  }
  if (lane == 0) m_s[warp] = m, l_s[warp] = l;
#pragma unroll
  for (int i = 0; i < kVPerLane; ++i) {
    const int j = lane + 32 * i;
    if (2 * j < p.hd_v) acc_s[warp][2 * j] = acc[2 * i], acc_s[warp][2 * j + 1] = acc[2 * i + 1];
  }
  __syncthreads();
  // Merge the warps: partial = {M, L, acc[hd_v]} for this split, relative to M.
  float M = -INFINITY;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) M = fmaxf(M, m_s[w]);
  float* out = p.partial + ((t * p.n_head + h) * n_splits + s) * (p.hd_v + 2);
  float L = 0.0f;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) L += M == -INFINITY ? 0.0f : l_s[w] * expf(m_s[w] - M);
  if (threadIdx.x == 0) out[0] = M, out[1] = L;
  for (int d = threadIdx.x; d < p.hd_v; d += blockDim.x) {
    float a = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) a += M == -INFINITY ? 0.0f : acc_s[w][d] * expf(m_s[w] - M);
    out[2 + d] = a;
  }
}

__global__ void attention_combine_kernel(AttentionKernelParams p, int n_splits) {
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const float* part = p.partial + (t * p.n_head + h) * n_splits * (p.hd_v + 2);
  float M = -INFINITY;
  for (int s = 0; s < n_splits; ++s) M = fmaxf(M, part[s * (p.hd_v + 2)]);
  float L = 0.0f;
  for (int s = 0; s < n_splits; ++s) {
    const float ms = part[s * (p.hd_v + 2)];
    if (ms != -INFINITY) L += part[s * (p.hd_v + 2) + 1] * expf(ms - M);
  }
  float* out = p.out + (t * p.n_head + h) * p.hd_v;
  for (int d = threadIdx.x; d < p.hd_v; d += blockDim.x) {
    float a = 0.0f;
    for (int s = 0; s < n_splits; ++s) {
      const float ms = part[s * (p.hd_v + 2)];
      if (ms != -INFINITY) a += part[s * (p.hd_v + 2) + 2 + d] * expf(ms - M);
    }
    out[d] = a / L;
  }
}

int n_splits_of(int64_t n_ctx, int32_t split_len) { return int((n_ctx + split_len - 1) / split_len); }

}  // namespace

int32_t attention_split_len(int64_t n_ctx, int64_t n_head, int64_t T, int sm_count) {
  // Aim for about 4 blocks per SM in total, but never splits shorter than 64 slots.
  const int64_t rows = ::std::max<int64_t>(1, n_head * T);
  const int64_t want_splits = ::std::max<int64_t>(1, (4 * int64_t(sm_count) + rows - 1) / rows);
  const int64_t len = ::std::max<int64_t>(64, (n_ctx + want_splits - 1) / want_splits);
  return int32_t(::std::min<int64_t>(len, ::std::max<int64_t>(n_ctx, 1)));
}

size_t attention_scratch_floats(int64_t n_ctx, int64_t n_head, int64_t hd_v, int64_t T, int32_t split_len) {
  return size_t(n_head) * T * n_splits_of(n_ctx, split_len) * (hd_v + 2);
}

void launch_kv_write(const KvWriteParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.k && p.v && p.positions && p.k_cache && p.v_cache, "null pointer");
  LLM_REQUIRE(p.n_ctx > 0 && p.n_head_kv > 0 && p.hd > 0 && p.hd_v > 0 && p.T > 0, "empty shape");
  const int64_t n = p.n_head_kv * (p.hd + p.hd_v) * p.T;
  kv_write_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

void launch_attention(const AttentionKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.q && p.positions && p.k_cache && p.v_cache && p.out && p.partial, "null pointer");
  LLM_REQUIRE(p.n_ctx > 0 && p.n_head > 0 && p.n_head_kv > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.n_head % p.n_head_kv == 0, "n_head must be a multiple of n_head_kv");
  LLM_REQUIRE(p.hd > 0 && p.hd % 2 == 0 && p.hd <= kMaxHd, "head_dim must be even and <= 256");
  LLM_REQUIRE(p.hd_v > 0 && p.hd_v % 2 == 0 && p.hd_v <= kMaxHd, "head_dim_v must be even and <= 256");
  LLM_REQUIRE(p.split_len > 0, "split_len not set (attention_split_len)");
  LLM_REQUIRE(p.n_head <= 65535 && p.T <= 65535, "grid too large");
  const int n_splits = n_splits_of(p.n_ctx, p.split_len);
  LLM_REQUIRE(n_splits <= 65535, "too many splits");
  attention_split_kernel<<<dim3(unsigned(p.n_head), unsigned(p.T), unsigned(n_splits)), kWarps * 32, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
  attention_combine_kernel<<<dim3(unsigned(p.n_head), unsigned(p.T)), 128, 0, stream>>>(p, n_splits);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
