// Attention over the KV cache, by shape (a q8_0 or q4_0 cache: the two tensor-core kernels only, kv_quant_supported):
// - batches of 16+ query tokens, head_dim 64/128/256: tiled tensor-core flash attention (attention_prefill.cu);
// - otherwise head_dim 64/128/256 with query groups of 1/2/4/8: split-sequence attention on tensor cores
//   (attention_split_tc.cu);
// - what is left (other groups, other head sizes, tiny heads; unaligned buffers): the per-head split kernel here,
//   f16 only, no window or sinks. Flash-decoding: the slots [0, pos] of a token are cut into at most max_splits
//   splits whose length is chosen on the device from the token's position (so a captured decode step splits 100
//   slots and 16k slots alike into enough blocks, and blocks past the position exit at once); each split writes its
//   partial online-softmax state {max, sum, acc[hd_v]}: one block per (query head, token, split), lanes over
//   dimensions, then combine_kernel merges the splits. (Head_dim 256 had a GQA split kernel of its own here, one block
//   per KV head with per-slot dot products and shuffle reductions; the tensor-core kernels replaced it: kernel
//   notes, head_dim 256.)
// The KV write: one thread per value of an f16 cache, one warp per 32-value block of a q8_0 or q4_0 cache
// (kv_quant.cuh).
// Paged caches (kv_paging.cuh): every kernel here maps a token's positions to slots through its block-table row (the
// per-head kernel per slot, so any block size); padding tokens are skipped by the writers and get zero outputs;
// launch_attention gives the prefill kernel the per-run tiles of prompt chunks and the split kernels the other
// tokens.
#include "cuda/kernels/attention.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/kernels/attention_prefill.cuh"
#include "cuda/kernels/attention_splits.cuh"
#include "cuda/kernels/attention_split_tc.cuh"
#include "cuda/kernels/kv_quant.cuh"

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
  const int64_t slot = kv_write_slot(p.paging, t, p.positions[t], p.n_ctx);
  if (slot < 0) return;
  if (r < p.n_head_kv * p.hd) {
    const int64_t h = r / p.hd, d = r % p.hd;
    static_cast<uint16_t*>(p.k_cache)[(h * p.n_ctx + slot) * p.hd + d] =
        __half_as_ushort(__float2half_rn(p.k[t * p.n_head_kv * p.hd + r]));
  } else {
    const int64_t rv = r - p.n_head_kv * p.hd;
    const int64_t h = rv / p.hd_v, d = rv % p.hd_v;
    static_cast<uint16_t*>(p.v_cache)[(h * p.n_ctx + slot) * p.hd_v + d] =
        __half_as_ushort(__float2half_rn(p.v[t * p.n_head_kv * p.hd_v + rv]));
  }
}

// q8_0 / q4_0: one warp per (token, KV head, 32-value block) of K, then of V; lane i holds value i of the block.
template <graph::KvType KV>
__global__ void kv_write_quant_kernel(KvWriteParams p) {
  const int64_t kb = p.hd / 32, vb = p.hd_v / 32;  // blocks per head
  const int64_t per_tok = p.n_head_kv * (kb + vb);
  const int64_t w = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (w >= per_tok * p.T) return;  // warp-uniform, as everything below
  const int64_t t = w / per_tok, r = w % per_tok;
  const int64_t slot = kv_write_slot(p.paging, t, p.positions[t], p.n_ctx);
  if (slot < 0) return;
  if (r < p.n_head_kv * kb) {
    const int64_t h = r / kb, b = r % kb;
    quantize_kv_block<KV>(p.k[(t * p.n_head_kv + h) * p.hd + b * 32 + lane], lane, p.k_cache, p.k_scales,
                          h * p.n_ctx + slot, p.hd, b);
  } else {
    const int64_t h = (r - p.n_head_kv * kb) / vb, b = (r - p.n_head_kv * kb) % vb;
    quantize_kv_block<KV>(p.v[(t * p.n_head_kv + h) * p.hd_v + b * 32 + lane], lane, p.v_cache, p.v_scales,
                          h * p.n_ctx + slot, p.hd_v, b);
  }
}

__global__ void __launch_bounds__(kWarps * 32) attention_split_kernel(AttentionKernelParams p) {
  const int64_t h = blockIdx.x, t = blockIdx.y, s = blockIdx.z;
  const int n_splits = p.max_splits;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t kvh = h / (p.n_head / p.n_head_kv);
  if (p.tiled && p.tiled[t]) return;  // a prefill tile attends this token
  const KvRow table = kv_row(p.paging, t);  // no row: slot = base + position
  const int64_t last = p.positions[t];  // inclusive; -1 (padding): no split holds a slot, combine writes zeros
  const int64_t len = split_len_at(last, p.max_splits);
  const int64_t begin = s * len;
  if (begin > last) return;  // the whole block: this split holds no slot
  __shared__ float q_s[kMaxHd];
  __shared__ float m_s[kWarps], l_s[kWarps];
  __shared__ float acc_s[kWarps][kMaxHd];

  const float* q = p.q + (t * p.n_head + h) * p.hd;
  for (int d = threadIdx.x; d < p.hd; d += blockDim.x) q_s[d] = q[d] * p.scale;
  __syncthreads();

  const int64_t end = min(begin + len, last + 1);
  const __half* kc = reinterpret_cast<const __half*>(p.k_cache) + kvh * p.n_ctx * p.hd;
  const __half* vc = reinterpret_cast<const __half*>(p.v_cache) + kvh * p.n_ctx * p.hd_v;

  float m = -INFINITY, l = 0.0f;
  float acc[2 * kVPerLane];
#pragma unroll
  for (int i = 0; i < 2 * kVPerLane; ++i) acc[i] = 0.0f;
  for (int64_t slot = begin + warp; slot < end; slot += kWarps) {
    const int64_t at = kv_slot(table, p.paging.block_shift, slot);
    const __half2* kr = reinterpret_cast<const __half2*>(kc + at * p.hd);
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
    const __half2* vr = reinterpret_cast<const __half2*>(vc + at * p.hd_v);
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

__global__ void attention_combine_kernel(AttentionKernelParams p) {
  const int64_t h = blockIdx.x, t = blockIdx.y;
  const int64_t pos = p.positions[t];
  if (split_block_skips(p, pos, h, t, 0, 1, p.hd_v)) return;
  const int64_t len = split_len_at(pos, p.max_splits);
  const int n_splits = int((pos + len) / len);  // the splits that hold slots: ceil((pos + 1) / len)
  const float* part = p.partial + (t * p.n_head + h) * p.max_splits * (p.hd_v + 2);
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
    const float v = a / L;
    out[d] = v;
    if (p.out_half) p.out_half[(t * p.n_head + h) * p.hd_v + d] = __float2half_rn(v);
  }
}

}  // namespace

int32_t attention_max_splits(int64_t n_ctx, int64_t n_head_kv, int64_t T, int sm_count) {
  // One token: about 2 blocks per SM for its KV heads, never more splits than kMinSplit-slot pieces. Not the 3 the
  // tensor-core split kernel could hold: every split adds to the merge (one block per KV head reading all splits'
  // partials), and at 16k context 2 per SM decode 3% faster than 3 (8B, H100; 1 per SM ties with 2; with a q4_0
  // cache 3 and 4 per SM measured 6-7% slower). Head_dim 256's blocks are sized so that two fit as well (one f16
  // stage, the carveout for two; attention_split_tc.cu), so the same count serves every head size.
  // Several tokens (a batched decode, each of its own sequence): about 1 block per SM. Their (KV head, token) pairs
  // fill the GPU sooner, and each split's partial, counter and merge cost more than the tiles a block streams in
  // turn: 8B Q4_K_M, ~600 positions, `bench --parallel` B = 4 / 8 / 16 / 32 +1.3 / +2.2 / +4.4 / +3.0% against 2
  // per SM, B = 64 (one split either way) unchanged; half a block per SM lost 1-2% (H200, docs/kernel-notes.md,
  // session 40).
  const int64_t rows = ::std::max<int64_t>(1, n_head_kv * T);
  const int64_t blocks = (T > 1 ? 1 : 2) * int64_t(::std::max(sm_count, 1));
  const int64_t want = (blocks + rows - 1) / rows;
  const int64_t cap = ::std::max<int64_t>(1, (n_ctx + kMinSplit - 1) / kMinSplit);
  return int32_t(::std::clamp<int64_t>(want, 1, ::std::min<int64_t>(cap, kMaxSplitsGqa)));
}

bool kv_quant_supported(int64_t n_head, int64_t n_head_kv, int64_t hd, int64_t hd_v) {
  if (n_head <= 0 || n_head_kv <= 0 || n_head % n_head_kv != 0) return false;
  const int64_t G = n_head / n_head_kv;
  return hd == hd_v && (hd == 64 || hd == 128 || hd == 256) && (G == 1 || G == 2 || G == 4 || G == 8);
}

bool window_supported(int64_t n_head, int64_t n_head_kv, int64_t hd, int64_t hd_v) {
  return kv_quant_supported(n_head, n_head_kv, hd, hd_v);
}

::std::string kv_quant_refusal(graph::KvType type, int64_t n_head, int64_t n_head_kv, int64_t hd, int64_t hd_v) {
  return ::std::string("a ") + graph::kv_type_name(type) +
         " KV cache on the GPU needs head_dim 64, 128 or 256 (K and V alike) and n_head / n_head_kv of 1, 2, 4 or 8; "
         "got head_dim " + ::std::to_string(hd) + "/" + ::std::to_string(hd_v) + " and " + ::std::to_string(n_head) +
         "/" + ::std::to_string(n_head_kv) + " heads";
}

size_t attention_scratch_floats(int64_t n_head, int64_t hd_v, int64_t T, int32_t max_splits) {
  return size_t(n_head) * T * max_splits * (hd_v + 2) + size_t(n_head) * T;  // partials, then the counters
}

void launch_kv_write(const KvWriteParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.k && p.v && p.positions && p.k_cache && p.v_cache, "null pointer");
  LLM_REQUIRE(p.n_ctx > 0 && p.n_head_kv > 0 && p.hd > 0 && p.hd_v > 0 && p.T > 0, "empty shape");
  switch (p.kv_type) {
    case graph::KvType::F16: {
      const int64_t n = p.n_head_kv * (p.hd + p.hd_v) * p.T;
      kv_write_kernel<<<unsigned((n + 255) / 256), 256, 0, stream>>>(p);
      break;
    }
    case graph::KvType::Q8_0:
    case graph::KvType::Q4_0: {
      require_quant_cache_args(p.kv_type, p.hd, p.hd_v, p.k_scales, p.v_scales);
      const int64_t threads = p.n_head_kv * (p.hd + p.hd_v) * p.T;  // one warp per 32-value block
      const unsigned grid = unsigned((threads + 255) / 256);
      if (p.kv_type == graph::KvType::Q8_0) kv_write_quant_kernel<graph::KvType::Q8_0><<<grid, 256, 0, stream>>>(p);
      else kv_write_quant_kernel<graph::KvType::Q4_0><<<grid, 256, 0, stream>>>(p);
      break;
    }
    default: LLM_REQUIRE(false, "unknown KV type " + ::std::to_string(int(p.kv_type)));
  }
  CUDA_CHECK_LAUNCH(stream);
}

namespace {

// The split kernels for the tokens of p they attend (all but p.tiled's); p passed launch_attention's checks.
void launch_split(const AttentionKernelParams& p, cudaStream_t stream) {
  if (graph::kv_quantized(p.kv_type)) {  // the tensor-core kernels alone read quantized tiles
    LLM_REQUIRE(attention_split_tc_applies(p),
                ::std::string(graph::kv_type_name(p.kv_type)) + " KV cache: the split kernel needs 16-byte aligned "
                "quants, 4-byte aligned scales and max_splits <= 256");
    launch_attention_split_tc(p, stream);
    return;
  }
  if (attention_split_tc_applies(p)) {
    launch_attention_split_tc(p, stream);
    return;
  }
  LLM_REQUIRE(!p.sinks, "attention sinks: the tensor-core split kernel needs 16-byte aligned caches, 8-byte aligned "
                        "q and max_splits <= 256");
  // Sliding windows: the tensor-core kernels alone implement them (head_dim 256: every Gemma 3).
  LLM_REQUIRE(p.window == 0, "sliding-window attention needs head_dim 64, 128 or 256, 1, 2, 4 or 8 query heads per KV "
                             "head, 16-byte aligned caches, 8-byte aligned q and max_splits <= 256");
  const dim3 block(kWarps * 32);
  attention_split_kernel<<<dim3(unsigned(p.n_head), unsigned(p.T), unsigned(p.max_splits)), block, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
  attention_combine_kernel<<<dim3(unsigned(p.n_head), unsigned(p.T)), 128, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace

void launch_attention(const AttentionKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.q && p.positions && p.k_cache && p.v_cache && p.out && p.partial, "null pointer");
  LLM_REQUIRE(p.n_ctx > 0 && p.n_head > 0 && p.n_head_kv > 0 && p.T > 0, "empty shape");
  LLM_REQUIRE(p.n_head % p.n_head_kv == 0, "n_head must be a multiple of n_head_kv");
  LLM_REQUIRE(p.hd > 0 && p.hd % 2 == 0 && p.hd <= kMaxHd, "head_dim must be even and <= 256");
  LLM_REQUIRE(p.hd_v > 0 && p.hd_v % 2 == 0 && p.hd_v <= kMaxHd, "head_dim_v must be even and <= 256");
  LLM_REQUIRE(p.max_splits > 0 && p.max_splits <= 65535, "max_splits not set (attention_max_splits)");
  LLM_REQUIRE(p.window >= 0, "negative window");
  LLM_REQUIRE(!p.paging.block_table || (p.paging.kv_seq && p.paging.max_blocks > 0), "paged: null kv_seq");
  LLM_REQUIRE(reinterpret_cast<uintptr_t>(p.out_half) % 8 == 0, "the half outputs must be 8-byte aligned");
  LLM_REQUIRE(!p.sinks || kv_quant_supported(p.n_head, p.n_head_kv, p.hd, p.hd_v),
              "attention sinks need the tensor-core kernels' shapes (head_dim 64, 128 or 256, 1, 2, 4 or 8 query heads "
              "per KV head)");
  if (graph::kv_quantized(p.kv_type)) {
    const ::std::string name = graph::kv_type_name(p.kv_type);
    LLM_REQUIRE(kv_quant_supported(p.n_head, p.n_head_kv, p.hd, p.hd_v),
                kv_quant_refusal(p.kv_type, p.n_head, p.n_head_kv, p.hd, p.hd_v));
    LLM_REQUIRE(p.k_scales && p.v_scales, name + " KV cache: null scales");
  } else {
    LLM_REQUIRE(p.kv_type == graph::KvType::F16, "unknown KV type " + ::std::to_string(int(p.kv_type)));
  }
  if (p.new_token.k) {  // the launch forms the tokens' q, k and v itself (attention_new_token.cuh)
    const AttentionNewToken& e = p.new_token;
    LLM_REQUIRE(e.v && e.base_powers && !e.q_norm_w == !e.k_norm_w, "attention's new token: null pointer");
    // Several tokens only paged, each of its own sequence (the caller's to vouch for: a token of the same sequence
    // would read a slot another block writes), and no prefill tiles.
    LLM_REQUIRE((p.T == 1 || p.paging.block_table) && !p.tiles && p.kv_type == graph::KvType::F16 && p.hd == p.hd_v,
                "attention's new token: one token or a paged decode step, an f16 cache and head_dim = head_dim_v");
    LLM_REQUIRE(!p.paging.block_table || e.q_split_shift == 0, "attention's new token: no q split when paged");
    LLM_REQUIRE(e.n_rot > 0 && e.n_rot % 2 == 0 && e.n_rot <= p.hd,
                "attention's new token: n_rot must be even and <= head_dim");
    LLM_REQUIRE(attention_split_tc_applies(p), "attention's new token: the tensor-core split kernel must apply");
    launch_attention_split_tc(p, stream);
    return;
  }
  if (!attention_prefill_applies(p)) {
    AttentionKernelParams s = p;
    s.tiled = nullptr;  // no tile attends any token
    launch_split(s, stream);
    return;
  }
  // A paged batch's query tiles must each hold one sequence: the per-run tiles (paged_batch.h).
  LLM_REQUIRE(!p.paging.block_table || (p.tiles && p.tiled), "paged prefill attention: no query tiles");
  if (p.tiles_after_split) {  // the tokens no tile holds first, then the tiles, overlapping them
    launch_split(p, stream);
    launch_attention_prefill(p, stream);
    return;
  }
  launch_attention_prefill(p, stream);
  if (p.tiles) launch_split(p, stream);  // the tokens no tile holds: decode tokens, short runs, padding
}

}  // namespace cuda
