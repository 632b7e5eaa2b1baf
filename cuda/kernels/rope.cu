// RoPE: one thread per rotated pair, the angle formed as rope_angle.cuh says. The powers base^(-2i/n_rot) are
// computed on the host at launch and passed as a kernel parameter: a double pow per thread was half of the kernel's
// FP64 work, and the kernel is FP64-bound in prefill (40 heads x 64 pairs x 512 tokens on an 8B) and latency-bound
// in decode. rope_kv into a q8_0 or q4_0 cache: one warp per 32-value block of k and v, so the block's scale sees
// all of its rotated values.
#include "cuda/kernels/rope.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cuda/check.h"
#include "cuda/kernels/kv_quant.cuh"
#include "cuda/kernels/rope_angle.cuh"

namespace cuda {
namespace {

constexpr int kMaxHalfRot = 128;  // n_rot <= 256

// base^(-2i/n_rot) for each pair index i, read through the constant bank (__grid_constant__, no local copy).
struct BasePowers {
  double v[kMaxHalfRot];
};

BasePowers base_powers(const RopeKernelParams& p) {
  BasePowers b{};
  const ::std::vector<double> v = rope_base_powers(p.freq_base, p.n_rot);
  ::std::copy(v.begin(), v.end(), b.v);
  return b;
}

// Pair j (of n_rot / 2) of one head: its two indices a, b in the head (by the pair ordering) and their values
// rotated to `pos`.
// kScaled: the YaRN ramp and attention factor of RopeKernelParams apply (a separate instance, so the plain kernels
// compile as they did before scaling existed).
template <bool kScaled>
__device__ __forceinline__ void rope_pair(const RopeKernelParams& p, const BasePowers& bp, int64_t j, int32_t pos,
                                         const float* x, int64_t& a, int64_t& b, float& y0, float& y1) {
  const int64_t half = p.n_rot / 2;
  a = p.mode == graph::RopeMode::Normal ? 2 * j : j;
  b = p.mode == graph::RopeMode::Normal ? 2 * j + 1 : j + half;
  if constexpr (!kScaled)
    rope_rotate(pos, p.freq_scale, bp.v[j], p.freq_factors, j, x[a], x[b], y0, y1);
  else
    rope_rotate_scaled(pos, p.freq_scale, bp.v[j], p.freq_factors, j, p.ext_factor, p.corr_low, p.corr_high,
                       p.attn_factor, x[a], x[b], y0, y1);
}

// Unit j of one head (pair j below n_rot / 2, else a pass-through dimension): its indices a and b (-1 for a
// pass-through) and their values rotated to `pos`.
template <bool kScaled>
__device__ __forceinline__ void rope_unit_values(const RopeKernelParams& p, const BasePowers& bp, int64_t j,
                                                 int32_t pos, const float* x, int64_t& a, int64_t& b, float& y0,
                                                 float& y1) {
  const int64_t half = p.n_rot / 2;
  if (j >= half) {
    a = p.n_rot + (j - half), b = -1, y0 = x[a], y1 = 0.0f;
    return;
  }
  rope_pair<kScaled>(p, bp, j, pos, x, a, b, y0, y1);
}

// Unit j of one head, from x into out at `pos`.
template <bool kScaled>
__device__ __forceinline__ void rope_unit(const RopeKernelParams& p, const BasePowers& bp, int64_t j, int32_t pos,
                                         const float* x, float* out) {
  int64_t a, b;
  float y0, y1;
  rope_unit_values<kScaled>(p, bp, j, pos, x, a, b, y0, y1);
  out[a] = y0;
  if (b >= 0) out[b] = y1;
}

template <bool kScaled>
__global__ void rope_kernel(RopeKernelParams p, const __grid_constant__ BasePowers bp) {
  const int64_t half = p.n_rot / 2;
  const int64_t pass = p.head_dim - p.n_rot;  // pass-through tail per head
  const int64_t per_head = half + pass;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_head * p.n_head * p.T) return;
  const int64_t j = i % per_head;
  const int64_t h = (i / per_head) % p.n_head;
  const int64_t t = i / (per_head * p.n_head);
  const int64_t head = (t * p.n_head + h) * p.head_dim;
  rope_unit<kScaled>(p, bp, j, p.positions[t], p.x + head, p.out + head);
}

// One thread per q pair, k pair or v element of each token: q rotated into q_out, k rotated and v copied into the
// f16 cache slot of the token's position (what rope(q), rope(k) and kv_write do in three launches).
template <bool kScaled>
__global__ void rope_kv_kernel(RopeKvParams p, const __grid_constant__ BasePowers bp) {
  const RopeKernelParams& r = p.rope;
  const int64_t half = r.n_rot / 2, pass = r.head_dim - r.n_rot, per_head = half + pass;
  const int64_t nq = per_head * r.n_head, nk = per_head * p.n_head_kv, nv = p.hd_v * p.n_head_kv;
  const int64_t per_tok = nq + nk + nv;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_tok * r.T) return;
  const int64_t t = i / per_tok;
  int64_t e = i % per_tok;
  const int32_t pos = r.positions[t];
  if (e >= nq + nk) {  // v
    e -= nq + nk;
    const int64_t slot = kv_write_slot(p.paging, t, pos, p.n_ctx);
    if (slot < 0) return;
    const int64_t h = e / p.hd_v, d = e % p.hd_v;
    static_cast<uint16_t*>(p.v_cache)[(h * p.n_ctx + slot) * p.hd_v + d] =
        __half_as_ushort(__float2half_rn(p.v[t * nv + e]));
    return;
  }
  const bool is_k = e >= nq;
  if (is_k) e -= nq;
  const int64_t nh = is_k ? p.n_head_kv : r.n_head;
  const int64_t j = e % per_head, h = e / per_head;
  const float* x = (is_k ? p.k : r.x) + (t * nh + h) * r.head_dim;
  int64_t a, b;
  float x0, x1;
  rope_unit_values<kScaled>(r, bp, j, pos, x, a, b, x0, x1);
  if (!is_k) {
    float* out = r.out + (t * nh + h) * r.head_dim;
    out[a] = x0;
    if (b >= 0) out[b] = x1;
    return;
  }
  const int64_t slot = kv_write_slot(p.paging, t, pos, p.n_ctx);
  if (slot < 0) return;
  uint16_t* kc = static_cast<uint16_t*>(p.k_cache) + (h * p.n_ctx + slot) * r.head_dim;
  kc[a] = __half_as_ushort(__float2half_rn(x0));
  if (b >= 0) kc[b] = __half_as_ushort(__float2half_rn(x1));
}

// rope_kv_kernel with the per-head RMS norms of q and k first (RopeKvParams::q_norm_w): one warp per (token, q or k
// head) normalises its head into shared memory (the norm needs the whole head before any pair rotates), then rotates
// it pair by pair as rope_kv_kernel does; the blocks after the heads' copy v into the cache. A head is read whole
// before it is written, so q may be rotated in place.
// (Loading each warp's head and norm weights into registers before the position and angles, the same bits, was no
// faster: Qwen3-30B-A3B and Gemma-3-4B pp512 within +-1%, BENCHMARKS.md session 51.)
constexpr int kNormWarps = 8;
constexpr int kMaxNormHeadDim = 256;
// kHD: the head_dim as a constant (64, 128, 256), each lane's kHD / 32 values and norm weights loaded together
// before the block's angles (their loads in flight while the angles are formed), indices in 32 bits; 0: any
// head_dim, a loop. As one loop of 64-bit indices with the loads after the angles' barrier, a Qwen3-30B-A3B pp512
// launch (512 tokens x 36 heads) took 19.3 us at 16% of the DRAM's bandwidth, 10.3 M warp instructions, its warps
// waiting on their loads (Nsight, session 73). The same values in the same order either way.
template <bool kScaled, int kHD>
__global__ void __launch_bounds__(kNormWarps * 32) norm_rope_kv_kernel(RopeKvParams p,
                                                                       const __grid_constant__ BasePowers bp) {
  const RopeKernelParams& r = p.rope;
  __shared__ float head_s[kNormWarps][kMaxNormHeadDim];
  const int64_t t = blockIdx.y;
  const int n_heads = int(r.n_head + p.n_head_kv), head_blocks = (n_heads + kNormWarps - 1) / kNormWarps;
  // This warp's head: q head hh or k head hh - n_head (past n_heads: none, the v blocks' warps included).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int hh = int(blockIdx.x) * kNormWarps + warp;
  const bool has_head = int(blockIdx.x) < head_blocks && hh < n_heads, is_k = hh >= r.n_head;
  const int h = is_k ? hh - int(r.n_head) : hh, nh = int(is_k ? p.n_head_kv : r.n_head);
  const int hd = kHD > 0 ? kHD : int(r.head_dim);
  const float* x = has_head ? (is_k ? p.k : r.x) + (t * nh + h) * hd : nullptr;
  const float* w = is_k ? p.k_norm_w : p.q_norm_w;
  const int32_t pos = r.positions[t];
  if (int(blockIdx.x) >= head_blocks) {  // v
    const int64_t slot = kv_write_slot(p.paging, t, pos, p.n_ctx);
    if (slot < 0) return;
    const int hd_v = int(p.hd_v), nv = hd_v * int(p.n_head_kv), stride = (int(gridDim.x) - head_blocks) * blockDim.x;
    for (int e = (int(blockIdx.x) - head_blocks) * blockDim.x + threadIdx.x; e < nv; e += stride) {
      const int vh = e / hd_v, d = e - vh * hd_v;
      static_cast<uint16_t*>(p.v_cache)[(vh * p.n_ctx + slot) * hd_v + d] =
          __half_as_ushort(__float2half_rn(p.v[t * nv + e]));
    }
    return;
  }
  constexpr int kPer = kHD > 0 ? kHD / 32 : 1;
  float xv[kPer], wv[kPer];
  if constexpr (kHD > 0) {
    if (has_head) {
#pragma unroll
      for (int i = 0; i < kPer; ++i) xv[i] = x[lane + 32 * i], wv[i] = w[lane + 32 * i];
    }
  }
  // The plain rotation's (cos, sin) of each pair, once for the block's heads (all of token t) instead of once a head:
  // one double sincos a pair, where the prefill of a Qwen3-30B-A3B layer rotated 36 heads x 64 pairs a token.
  __shared__ float2 cs_s[kMaxHalfRot];
  if constexpr (!kScaled) {
    for (int j = threadIdx.x; j < r.n_rot / 2; j += blockDim.x) {
      float c, sn;
      rope_cos_sin(pos, r.freq_scale, bp.v[j], r.freq_factors, j, c, sn);
      cs_s[j] = make_float2(c, sn);
    }
    __syncthreads();  // before any warp leaves
  }
  if (!has_head) return;  // warp-uniform
  float* s = head_s[warp];
  float ss = 0.0f;
  if constexpr (kHD > 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) ss += xv[i] * xv[i];
  } else {
    for (int d = lane; d < hd; d += 32) {
      const float v = x[d];
      s[d] = v, ss += v * v;
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
  const float scale = rsqrtf(ss / float(hd) + p.norm_eps);
  if constexpr (kHD > 0) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) s[lane + 32 * i] = xv[i] * scale * wv[i];
  } else {
    for (int d = lane; d < hd; d += 32) s[d] = s[d] * scale * w[d];
  }
  __syncwarp();
  const int64_t slot = is_k ? kv_write_slot(p.paging, t, pos, p.n_ctx) : 0;
  if (slot < 0) return;  // a padding token: no cache write (warp-uniform)
  float* const out = is_k ? nullptr : r.out + (t * nh + h) * hd;
  uint16_t* const kc = is_k ? static_cast<uint16_t*>(p.k_cache) + (h * p.n_ctx + slot) * hd : nullptr;
  const int64_t half = r.n_rot / 2, per_head = half + (hd - r.n_rot);
  for (int64_t j = lane; j < per_head; j += 32) {
    int64_t a, b;
    float y0, y1;
    if constexpr (kScaled) {
      rope_unit_values<kScaled>(r, bp, j, pos, s, a, b, y0, y1);
    } else if (j < half) {  // rope_pair's pair, rotated by the block's angles
      a = r.mode == graph::RopeMode::Normal ? 2 * j : j;
      b = r.mode == graph::RopeMode::Normal ? 2 * j + 1 : j + half;
      rope_apply(cs_s[j].x, cs_s[j].y, s[a], s[b], y0, y1);
    } else {  // a pass-through dimension
      a = r.n_rot + (j - half), b = -1, y0 = s[a], y1 = 0.0f;
    }
    if (out) {
      out[a] = y0;
      if (b >= 0) out[b] = y1;
    } else {
      kc[a] = __half_as_ushort(__float2half_rn(y0));
      if (b >= 0) kc[b] = __half_as_ushort(__float2half_rn(y1));
    }
  }
}

// q8_0 / q4_0: per token, one thread per q pair as above (padded to whole warps), then one warp per (KV head,
// 32-value block) of k and of v. Lane i of a k block rotates value i itself (reading its pair partner, which under
// NEOX ordering lies in another block), lane i of a v block reads value i; the warp quantizes the block.
template <graph::KvType KV, bool kScaled>
__global__ void rope_kv_quant_kernel(RopeKvParams p, const __grid_constant__ BasePowers bp) {
  const RopeKernelParams& r = p.rope;
  const int64_t half = r.n_rot / 2, pass = r.head_dim - r.n_rot, per_head = half + pass;
  const int64_t nq = (per_head * r.n_head + 31) / 32 * 32;  // whole warps, so no warp spans q and k
  const int64_t nk = r.head_dim * p.n_head_kv, nv = p.hd_v * p.n_head_kv;
  const int64_t per_tok = nq + nk + nv;  // a multiple of 32: warps never span tokens
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= per_tok * r.T) return;  // whole warps
  const int64_t t = i / per_tok;
  int64_t e = i % per_tok;
  const int32_t pos = r.positions[t];
  if (e < nq) {  // q
    if (e >= per_head * r.n_head) return;  // the padding (no shuffles in this part)
    const int64_t j = e % per_head, h = e / per_head;
    const int64_t head = (t * r.n_head + h) * r.head_dim;
    rope_unit<kScaled>(r, bp, j, pos, r.x + head, r.out + head);
    return;
  }
  const int64_t slot = kv_write_slot(p.paging, t, pos, p.n_ctx);
  if (slot < 0) return;  // warp-uniform: padding, or the token's slot lies outside the cache
  e -= nq;
  const int lane = int(e % 32);  // e % 32 == threadIdx.x % 32: the segments are whole warps
  if (e < nk) {  // k
    const int64_t h = e / r.head_dim, d = e % r.head_dim;
    const float* x = p.k + (t * p.n_head_kv + h) * r.head_dim;
    float y = 0.0f;
    if (d >= r.n_rot) {
      y = x[d];
    } else {
      const int64_t j = r.mode == graph::RopeMode::Normal ? d / 2 : (d < half ? d : d - half);
      int64_t a, b;
      float y0, y1;
      rope_pair<kScaled>(r, bp, j, pos, x, a, b, y0, y1);
      y = d == a ? y0 : y1;
    }
    quantize_kv_block<KV>(y, lane, p.k_cache, p.k_scales, h * p.n_ctx + slot, r.head_dim, d / 32);
    return;
  }
  e -= nk;  // v
  const int64_t h = e / p.hd_v, d = e % p.hd_v;
  quantize_kv_block<KV>(p.v[t * nv + e], lane, p.v_cache, p.v_scales, h * p.n_ctx + slot, p.hd_v, d / 32);
}

bool scaled(const RopeKernelParams& p) { return p.ext_factor != 0.0f || p.attn_factor != 1.0f; }

}  // namespace

::std::vector<double> rope_base_powers(float freq_base, int32_t n_rot) {
  ::std::vector<double> v(size_t(n_rot > 0 ? n_rot / 2 : 0));
  for (int32_t i = 0; i < n_rot / 2; ++i)
    v[size_t(i)] = ::std::pow(double(freq_base), -2.0 * double(i) / double(n_rot));
  return v;
}

void launch_rope(const RopeKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.x && p.out && p.positions, "null pointer");
  LLM_REQUIRE(p.head_dim > 0 && p.n_head > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= p.head_dim, "n_rot must be even and <= head_dim");
  const int64_t n = (p.n_rot / 2 + (p.head_dim - p.n_rot)) * p.n_head * p.T;
  LLM_REQUIRE(p.n_rot / 2 <= kMaxHalfRot, "n_rot must be <= 256");
  if (scaled(p))
    rope_kernel<true><<<unsigned((n + 255) / 256), 256, 0, stream>>>(p, base_powers(p));
  else
    rope_kernel<false><<<unsigned((n + 255) / 256), 256, 0, stream>>>(p, base_powers(p));
  CUDA_CHECK_LAUNCH(stream);
}

void launch_rope_kv(const RopeKvParams& p, cudaStream_t stream) {
  const RopeKernelParams& r = p.rope;
  LLM_REQUIRE(r.x && r.out && r.positions && p.k && p.v && p.k_cache && p.v_cache, "null pointer");
  LLM_REQUIRE(r.head_dim > 0 && r.n_head > 0 && r.T > 0 && p.n_head_kv > 0 && p.hd_v > 0 && p.n_ctx > 0,
              "empty shape");
  LLM_REQUIRE(r.n_rot > 0 && r.n_rot % 2 == 0 && r.n_rot <= r.head_dim, "n_rot must be even and <= head_dim");
  LLM_REQUIRE(r.n_rot / 2 <= kMaxHalfRot, "n_rot must be <= 256");
  const int64_t per_head = r.n_rot / 2 + (r.head_dim - r.n_rot);
  LLM_REQUIRE(!p.q_norm_w == !p.k_norm_w, "rope_kv: both q and k norm weights or neither");
  if (p.q_norm_w) {
    LLM_REQUIRE(p.kv_type == graph::KvType::F16, "rope_kv with q/k norms: f16 cache only");
    LLM_REQUIRE(r.head_dim <= kMaxNormHeadDim && r.T <= 65535, "rope_kv with q/k norms: head_dim <= 256");
    const int64_t head_blocks = (r.n_head + p.n_head_kv + kNormWarps - 1) / kNormWarps;
    const int64_t v_blocks = (p.hd_v * p.n_head_kv + kNormWarps * 32 - 1) / (kNormWarps * 32);
    const dim3 grid(unsigned(head_blocks + v_blocks), unsigned(r.T));
    const auto launch = [&]<int kHD>() {
      if (scaled(r))
        norm_rope_kv_kernel<true, kHD><<<grid, kNormWarps * 32, 0, stream>>>(p, base_powers(r));
      else
        norm_rope_kv_kernel<false, kHD><<<grid, kNormWarps * 32, 0, stream>>>(p, base_powers(r));
    };
    if (r.head_dim == 64) launch.template operator()<64>();
    else if (r.head_dim == 128) launch.template operator()<128>();
    else if (r.head_dim == 256) launch.template operator()<256>();
    else launch.template operator()<0>();
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  switch (p.kv_type) {
    case graph::KvType::F16: {
      const int64_t n = (per_head * (r.n_head + p.n_head_kv) + p.hd_v * p.n_head_kv) * r.T;
      if (scaled(r))
        rope_kv_kernel<true><<<unsigned((n + 255) / 256), 256, 0, stream>>>(p, base_powers(r));
      else
        rope_kv_kernel<false><<<unsigned((n + 255) / 256), 256, 0, stream>>>(p, base_powers(r));
      break;
    }
    case graph::KvType::Q8_0:
    case graph::KvType::Q4_0: {
      require_quant_cache_args(p.kv_type, r.head_dim, p.hd_v, p.k_scales, p.v_scales);
      const int64_t nq = (per_head * r.n_head + 31) / 32 * 32;  // as the kernel: q padded to whole warps
      const int64_t n = (nq + (r.head_dim + p.hd_v) * p.n_head_kv) * r.T;
      const unsigned grid = unsigned((n + 255) / 256);
      const bool q8 = p.kv_type == graph::KvType::Q8_0;
      if (q8 && scaled(r))
        rope_kv_quant_kernel<graph::KvType::Q8_0, true><<<grid, 256, 0, stream>>>(p, base_powers(r));
      else if (q8)
        rope_kv_quant_kernel<graph::KvType::Q8_0, false><<<grid, 256, 0, stream>>>(p, base_powers(r));
      else if (scaled(r))
        rope_kv_quant_kernel<graph::KvType::Q4_0, true><<<grid, 256, 0, stream>>>(p, base_powers(r));
      else
        rope_kv_quant_kernel<graph::KvType::Q4_0, false><<<grid, 256, 0, stream>>>(p, base_powers(r));
      break;
    }
    default: LLM_REQUIRE(false, "unknown KV type " + ::std::to_string(int(p.kv_type)));
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
