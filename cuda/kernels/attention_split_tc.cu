// Split-sequence attention on tensor cores, for decode and short batches: one block per (KV head, token, split) as
// in the GQA split kernel, but the group's G query heads are the rows of mma.sync m16n8k16 products (padded to 16)
// instead of per-slot dot products with warp reductions. The block streams its split in tiles of 64 slots (K and V,
// cp.async 16-byte copies by all four warps, two stages: the next tile is in flight while this one is computed;
// a split's tiles are every n_active-th tile of the token's prefix);
// each warp takes 16 slots of a tile: S = Q K^T (2 products per 16 dims), online softmax over its 16 slots,
// O += P V; the warps' states merge in shared memory into the split's partial, and the last split block merges the
// splits (attention_splits.cuh). Why: the GQA kernel's per-slot chain of G shuffle reductions held a 16k-context
// decode at about a third of the memory bandwidth; here a slot costs two tensor-core products per warp and the loads
// are what remains. Rounding as the prefill kernel: Q x scale and P enter the products as f16.
#include "cuda/kernels/attention_split_tc.cuh"

#include "cuda/check.h"
#include "cuda/kernels/async_copy.cuh"
#include "cuda/kernels/attention_splits.cuh"
#include "cuda/kernels/mma.cuh"
#include "cuda/kernels/pdl.cuh"

namespace cuda {
namespace {

constexpr int kTile = 64;      // slots per shared tile, 16 per warp
constexpr int kThreads = 128;  // four warps

template <int HD>
constexpr int row_stride() { return HD + 8; }  // halves: 16-byte rows, conflict-free fragment reads

// Two stages of (K tile, V tile): the next tile's cp.async copies are in flight while this one is computed.
template <int HD>
constexpr size_t smem_bytes() { return size_t(2) * 2 * kTile * row_stride<HD>() * sizeof(uint16_t); }

template <int HD, int G>
__global__ void __launch_bounds__(kThreads) attention_split_tc_kernel(AttentionKernelParams p) {
  constexpr int kLd = row_stride<HD>();
  // After the last tile the same bytes hold the warps' outputs for the merge (4 x G x HD floats).
  extern __shared__ __align__(16) uint16_t tiles[];
  static_assert(4 * G * HD * sizeof(float) <= smem_bytes<HD>(), "merge buffer exceeds the tiles");
  __shared__ float m_s[4][G], l_s[4][G];
  pdl_launch_dependents();  // the o projection after it may launch and start on its weights (pdl.cuh)
  const int64_t kvh = blockIdx.x, t = blockIdx.y, split = blockIdx.z;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, tg = lane & 3;
  const int64_t pos = p.positions[t];
  // The token's tiles dealt round-robin to the splits (tile k to split k % n_active), at most max_splits of them:
  // at any moment the blocks of a step stream neighbouring tiles, one front moving through the cache, instead of
  // each block its own distant stretch (kernel notes: that held a 16k-context layer at ~1.7 TB/s). A token within
  // its first 64 slots has one split and needs no merge.
  const int64_t end = pos + 1, n_tiles = (end + kTile - 1) / kTile;
  const int n_active = int(min(n_tiles, int64_t(p.max_splits)));
  if (split >= n_active) return;  // the whole block: this split holds no tile
  const int64_t begin = split * kTile, stride = int64_t(n_active) * kTile;

  // Q x scale as the A operand: row g is head kvh G + g (rows >= G and rows g + 8 are zero).
  uint32_t qf[HD / 16][4];
  {
    const bool in = g < G;
    const float* q = p.q + (t * p.n_head + kvh * G + (in ? g : 0)) * HD + tg * 2;
#pragma unroll
    for (int kc = 0; kc < HD / 16; ++kc) {
      const float2 a = in ? *reinterpret_cast<const float2*>(q + kc * 16) : make_float2(0.f, 0.f);
      const float2 b = in ? *reinterpret_cast<const float2*>(q + kc * 16 + 8) : make_float2(0.f, 0.f);
      qf[kc][0] = mma::pack_half2(a.x * p.scale, a.y * p.scale);
      qf[kc][1] = 0u;
      qf[kc][2] = mma::pack_half2(b.x * p.scale, b.y * p.scale);
      qf[kc][3] = 0u;
    }
  }
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m = -INFINITY, l = 0.0f;  // row g's running max and this thread's part of its sum
  constexpr float kLog2e = 1.4426950408889634f;
  const uint16_t* kbase = p.k_cache + kvh * p.n_ctx * HD;
  const uint16_t* vbase = p.v_cache + kvh * p.n_ctx * HD;

  // The split's k-th tile into stage k % 2; slots past the token's position read as zeros (never NaN from stale
  // cache bytes).
  const auto issue = [&](int64_t n0, int stage) {
    uint16_t* ks = tiles + stage * 2 * kTile * kLd;
    uint16_t* vs = ks + kTile * kLd;
    for (int i = tid; i < kTile * HD / 8; i += kThreads) {
      const int row = i / (HD / 8), c8 = i % (HD / 8);
      const int64_t slot = n0 + row;
      if (slot < end) {
        cp_async16(ks + row * kLd + c8 * 8, reinterpret_cast<const uint4*>(kbase + slot * HD) + c8);
        cp_async16(vs + row * kLd + c8 * 8, reinterpret_cast<const uint4*>(vbase + slot * HD) + c8);
      } else {
        *reinterpret_cast<uint4*>(ks + row * kLd + c8 * 8) = make_uint4(0, 0, 0, 0);
        *reinterpret_cast<uint4*>(vs + row * kLd + c8 * 8) = make_uint4(0, 0, 0, 0);
      }
    }
    asm volatile("cp.async.commit_group;");
  };
  issue(begin, 0);
  int stage = 0;
  for (int64_t n0 = begin; n0 < end; n0 += stride, stage ^= 1) {
    if (n0 + stride < end) {
      issue(n0 + stride, stage ^ 1);  // its stage was last read in the previous iteration, before the barrier below
      asm volatile("cp.async.wait_group 1;");
    } else {
      asm volatile("cp.async.wait_group 0;");
    }
    __syncthreads();  // every thread's copies of this tile have landed
    const uint16_t* ks = tiles + stage * 2 * kTile * kLd;
    const uint16_t* vs = ks + kTile * kLd;
    const int64_t w0 = n0 + warp * 16;  // this warp's 16 slots
    if (w0 < end) {  // warp-uniform: a warp past the split idles this tile
      float s[2][4];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
        mma::qk_8slots<HD>(s[j], qf, ks + (warp * 16 + j * 8) * kLd, kLd, lane);
      }
      float mx = -INFINITY;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const int64_t a = w0 + j * 8 + tg * 2;
        if (a >= end) s[j][0] = -INFINITY;
        if (a + 1 >= end) s[j][1] = -INFINITY;
        mx = fmaxf(mx, fmaxf(s[j][0], s[j][1]));
      }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float mn = fmaxf(m, mx);  // finite: slot w0 < end is valid for every row
      const float c = exp2f((m - mn) * kLog2e);
      m = mn;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        s[j][0] = exp2f((s[j][0] - mn) * kLog2e), s[j][1] = exp2f((s[j][1] - mn) * kLog2e);
        sum += s[j][0] + s[j][1];
      }
      l = l * c + sum;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) o[n][0] *= c, o[n][1] *= c;
      const uint32_t a[4] = {mma::pack_half2(s[0][0], s[0][1]), 0u, mma::pack_half2(s[1][0], s[1][1]), 0u};
      mma::pv_16slots<HD>(o, a, vs + warp * 16 * kLd, kLd, lane);
    }
    __syncthreads();  // this stage is read before the next iteration refills it
  }
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  l += __shfl_xor_sync(0xffffffffu, l, 2);

  // The four warps' states of each head, merged into this split's partial {max, sum, acc} (the loop's last barrier
  // freed the tiles).
  float* o_s = reinterpret_cast<float*>(tiles);  // [warp][G][HD]
  if (g < G) {
    if (tg == 0) m_s[warp][g] = m, l_s[warp][g] = l;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n)
      *reinterpret_cast<float2*>(o_s + (warp * G + g) * HD + n * 8 + tg * 2) = make_float2(o[n][0], o[n][1]);
  }
  __syncthreads();
  for (int i = tid; i < G * HD; i += kThreads) {  // n_active == 1: the result itself, no partial
    const int gg = i / HD, d = i % HD;
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < 4; ++w) M = fmaxf(M, m_s[w][gg]);
    float L = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      if (m_s[w][gg] == -INFINITY) continue;  // a warp with no slot in this split
      const float e = exp2f((m_s[w][gg] - M) * kLog2e);
      L += l_s[w][gg] * e, acc += o_s[(w * G + gg) * HD + d] * e;
    }
    if (n_active == 1) {
      p.out[(t * p.n_head + kvh * G + gg) * HD + d] = acc / L;
      continue;
    }
    float* out = p.partial + ((t * p.n_head + kvh * G + gg) * p.max_splits + split) * (HD + 2);
    if (d == 0) out[0] = M, out[1] = L;
    out[2 + d] = acc;
  }
  if (n_active > 1) merge_splits_if_last<G>(p, kvh, t, n_active, HD);
}

template <int HD, int G>
void launch_g(const AttentionKernelParams& p, cudaStream_t stream) {
  constexpr size_t smem = smem_bytes<HD>();  // above the 48 KiB default for HD = 128: opt in once
  static const bool opted = [] {
    CUDA_CHECK(cudaFuncSetAttribute(attention_split_tc_kernel<HD, G>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    int(smem)));
    return true;
  }();
  (void)opted;
  const dim3 grid(unsigned(p.n_head_kv), unsigned(p.T), unsigned(p.max_splits));
  attention_split_tc_kernel<HD, G><<<grid, kThreads, smem, stream>>>(p);
}

template <int HD>
void launch_hd(const AttentionKernelParams& p, cudaStream_t stream) {
  switch (p.n_head / p.n_head_kv) {
    case 1: launch_g<HD, 1>(p, stream); break;
    case 2: launch_g<HD, 2>(p, stream); break;
    case 4: launch_g<HD, 4>(p, stream); break;
    default: launch_g<HD, 8>(p, stream); break;
  }
}

}  // namespace

bool attention_split_tc_applies(const AttentionKernelParams& p) {
  if (p.n_head_kv <= 0 || p.n_head % p.n_head_kv != 0) return false;
  const int64_t G = p.n_head / p.n_head_kv;
  return p.hd == p.hd_v && (p.hd == 64 || p.hd == 128) && (G == 1 || G == 2 || G == 4 || G == 8) &&
         p.max_splits <= kMaxSplitsGqa && reinterpret_cast<uintptr_t>(p.k_cache) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(p.v_cache) % 16 == 0 && reinterpret_cast<uintptr_t>(p.q) % 8 == 0;
}

void launch_attention_split_tc(const AttentionKernelParams& p, cudaStream_t stream) {
  LLM_REQUIRE(attention_split_tc_applies(p), "split attention (tensor cores): unsupported shape or alignment");
  if (p.hd == 64) launch_hd<64>(p, stream);
  else launch_hd<128>(p, stream);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
