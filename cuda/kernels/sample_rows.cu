// One block a row (see sample_rows.cuh). The row's k candidates (k = the top-k clamp, 1 for greedy) are the k
// largest penalised logits, ties to the lower id: a radix select over the logits' order-preserving bit patterns
// (digits of 12, 12 and 8 bits, a shared-memory histogram a pass) narrows them to every logit above one bin plus
// that bin, and as soon as those fit in shared memory they are gathered and sorted in full (bitonic, on 64-bit
// keys: the logit's bits, then the complement of the id), which gives the CPU's order exactly. Thread 0 then walks
// them (sampling_walk.cuh). A pass reads the row once (from L2 after the first); a row whose k-th largest logit
// shares its exact value with more than kSampleRowsMaxCandidates others is left to the host.
#include "cuda/kernels/sample_rows.cuh"

#include <climits>

#include "cuda/check.h"
#include "cuda/kernels/sampling_walk.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kHashSlots = 1024;  // twice the window at most: probes stay short
constexpr int kMaxBins = 4096;
static_assert(kHashSlots >= 2 * kSampleRowsMaxWindow && kHashSlots >= kSampleRowsMaxTopK);

// Larger float, larger key; -0 as +0 (the CPU compares them equal, so the id decides).
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = __float_as_uint(v == 0.0f ? 0.0f : v);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) {
  return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k);
}

__device__ __forceinline__ uint32_t hash_slot(int32_t id) { return (uint32_t(id) * 2654435761u) >> 22; }  // 10 bits

// Calls f(i, row[i]) for every i < V, this thread's share. Four float4 loads in flight a thread where the row allows
// (one block reads a whole row: a loop of single loads waits a memory round trip per element, ~130 us for 128k).
template <typename F>
__device__ __forceinline__ void for_each_logit(const float* row, int64_t V, F&& f) {
  if (V % 4 == 0 && reinterpret_cast<uintptr_t>(row) % 16 == 0) {
    const float4* r4 = reinterpret_cast<const float4*>(row);
    const int64_t n4 = V / 4;
    for (int64_t j = threadIdx.x; j < n4; j += 4 * kThreads) {
      float4 v[4];
#pragma unroll
      for (int u = 0; u < 4; ++u)
        if (j + u * kThreads < n4) v[u] = __ldg(r4 + j + u * kThreads);
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const int64_t i = 4 * (j + u * kThreads);
        if (i < V) f(i, v[u].x), f(i + 1, v[u].y), f(i + 2, v[u].z), f(i + 3, v[u].w);
      }
    }
  } else {
    for (int64_t i = threadIdx.x; i < V; i += kThreads) f(i, __ldg(row + i));
  }
}

// Exclusive prefix sum over the block's threads in thread order; every thread gets its own.
__device__ __forceinline__ uint32_t block_exclusive_scan(uint32_t v, uint32_t* warp_totals) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t inc = v;
#pragma unroll
  for (int o = 1; o < 32; o <<= 1) {
    const uint32_t u = __shfl_up_sync(0xffffffffu, inc, o);
    if (lane >= o) inc += u;
  }
  if (lane == 31) warp_totals[warp] = inc;
  __syncthreads();
  uint32_t before = 0;
  for (int w = 0; w < warp; ++w) before += warp_totals[w];
  __syncthreads();  // warp_totals may be reused after return
  return before + inc - v;
}

__global__ void __launch_bounds__(kThreads) sample_rows_kernel(SampleRowsParams p) {
  __shared__ union {
    uint32_t hist[kMaxBins];
    unsigned long long cand[kSampleRowsMaxCandidates];
  } u;
  __shared__ union {
    struct {
      int32_t id[kHashSlots];
      int32_t n[kHashSlots];
    } hash;  // the penalty window's ids and counts, until the candidates are gathered
    struct {
      float value[kSampleRowsMaxTopK];
      int32_t id[kSampleRowsMaxTopK];
    } sorted;  // the candidates the walk reads
  } w;
  __shared__ uint32_t warp_totals[kThreads / 32];
  __shared__ uint32_t s_digit, s_above_bin, s_in_bin, s_count;
  __shared__ int s_bad;

  const int32_t r = blockIdx.x;
  const RowSampling rs = p.rows[r];
  const SamplingConfig& c = rs.cfg;
  const int64_t V = p.V;
  const int64_t k = c.candidates(V);
  const bool pen = c.penalties() && rs.window_len > 0;
  if (!rs.draw || k > kSampleRowsMaxTopK || (pen && rs.window_len > kSampleRowsMaxWindow)) {
    if (threadIdx.x == 0) p.out[r] = kRowNotDrawn;
    return;
  }
  const float* row = p.logits + int64_t(r) * p.row_stride;

  if (pen) {
    for (int i = threadIdx.x; i < kHashSlots; i += kThreads) w.hash.id[i] = -1, w.hash.n[i] = 0;
    __syncthreads();
    for (int t = threadIdx.x; t < rs.window_len; t += kThreads) {
      const int32_t id = p.windows[rs.window_offset + t];
      if (id < 0 || id >= V) continue;  // ignored, as on the CPU
      for (uint32_t s = hash_slot(id);; s = (s + 1) & (kHashSlots - 1)) {
        const int32_t prev = atomicCAS(&w.hash.id[s], -1, id);
        if (prev == -1 || prev == id) {
          atomicAdd(&w.hash.n[s], 1);
          break;
        }
      }
    }
  }
  if (threadIdx.x == 0) s_bad = 0;
  __syncthreads();
  const auto key_of = [&](int64_t i, float v) {
    if (pen) {
      for (uint32_t s = hash_slot(int32_t(i));; s = (s + 1) & (kHashSlots - 1)) {
        const int32_t h = w.hash.id[s];
        if (h == int32_t(i)) {
          v = apply_penalty(v, w.hash.n[s], c);
          break;
        }
        if (h == -1) break;
      }
    }
    return order_key(v);
  };

  // Radix select: `prefix` holds the top `fixed` bits of the k-th largest key; `above` keys lie above them.
  uint32_t prefix = 0, above = 0;
  int fixed = 0;
  bool gathered = false;
  const int widths[3] = {12, 12, 8};
  for (int pass = 0; pass < 3 && !gathered; ++pass) {
    const int width = widths[pass], shift = 32 - fixed - width;
    const uint32_t bins = 1u << width, mask = bins - 1;
    for (uint32_t b = threadIdx.x; b < bins; b += kThreads) u.hist[b] = 0;
    __syncthreads();
    for_each_logit(row, V, [&](int64_t i, float raw) {
      if (pass == 0 && (raw != raw || raw == INFINITY)) s_bad = 1;  // the CPU sampler refuses the row: let it say so
      const uint32_t key = key_of(i, raw);
      if (fixed == 0 || (key >> (32 - fixed)) == (prefix >> (32 - fixed))) atomicAdd(&u.hist[(key >> shift) & mask], 1u);
    });
    __syncthreads();
    if (s_bad) {
      if (threadIdx.x == 0) p.out[r] = kRowNotDrawn;
      return;
    }
    // The digit holding the k-th largest: thread 0 owns the highest bins, so the scan counts keys above each
    // thread's bins.
    const uint32_t need = uint32_t(k) - above;
    const uint32_t per = bins >= kThreads ? bins / kThreads : 1;
    const int64_t hi = int64_t(bins) - int64_t(threadIdx.x) * per;  // this thread's bins: [hi - per, hi)
    uint32_t own = 0;
    if (hi > 0)
      for (int64_t b = hi - 1; b >= hi - int64_t(per); --b) own += u.hist[b];
    const uint32_t before = block_exclusive_scan(own, warp_totals);
    if (hi > 0 && before < need && before + own >= need) {
      uint32_t run = before;
      for (int64_t b = hi - 1; b >= hi - int64_t(per); --b) {
        if (run + u.hist[b] >= need) {
          s_digit = uint32_t(b), s_above_bin = run, s_in_bin = u.hist[b];
          break;
        }
        run += u.hist[b];
      }
    }
    __syncthreads();
    prefix |= s_digit << shift;
    fixed += width;
    above += s_above_bin;
    gathered = above + s_in_bin <= uint32_t(kSampleRowsMaxCandidates);
    __syncthreads();  // s_digit & co. are rewritten by the next pass
  }
  if (!gathered) {  // more than kSampleRowsMaxCandidates logits equal to the k-th largest
    if (threadIdx.x == 0) p.out[r] = kRowNotDrawn;
    return;
  }

  // Every key whose top `fixed` bits reach the prefix's: `above` of them above, the rest in the k-th's bin.
  if (threadIdx.x == 0) s_count = 0;
  __syncthreads();
  const int drop = 32 - fixed;
  for_each_logit(row, V, [&](int64_t i, float raw) {
    const uint32_t key = key_of(i, raw);
    if ((key >> drop) >= (prefix >> drop)) {  // drop < 32: at least one pass fixed 12 bits
      const uint32_t at = atomicAdd(&s_count, 1u);
      u.cand[at] = (static_cast<unsigned long long>(key) << 32) | ~uint32_t(i);
    }
  });
  __syncthreads();
  const uint32_t n = s_count;
  uint32_t P = 1;
  while (P < n) P <<= 1;
  for (uint32_t i = n + threadIdx.x; i < P; i += kThreads) u.cand[i] = 0;  // below every real key
  __syncthreads();
  // Bitonic sort, descending.
  for (uint32_t size = 2; size <= P; size <<= 1)
    for (uint32_t stride = size >> 1; stride > 0; stride >>= 1) {
      for (uint32_t i = threadIdx.x; i < P; i += kThreads) {
        const uint32_t j = i ^ stride;
        if (j > i) {
          const unsigned long long a = u.cand[i], b = u.cand[j];
          const bool descending = (i & size) == 0;
          if (descending ? a < b : a > b) u.cand[i] = b, u.cand[j] = a;
        }
      }
      __syncthreads();
    }
  for (int64_t i = threadIdx.x; i < k; i += kThreads) {
    const unsigned long long e = u.cand[i];
    w.sorted.value[i] = key_value(uint32_t(e >> 32));
    w.sorted.id[i] = int32_t(~uint32_t(e));
  }
  __syncthreads();
  if (threadIdx.x == 0)
    p.out[r] = c.temp <= 0.0f ? w.sorted.id[0] : walk_sorted(c, w.sorted.value, w.sorted.id, k, rs.step);
}

}  // namespace

bool sample_rows_draws(const SamplingConfig& c, int64_t V, int32_t window_len) {
  if (V <= 0 || V >= INT32_MAX) return false;
  return c.candidates(V) <= kSampleRowsMaxTopK && !(c.penalties() && window_len > kSampleRowsMaxWindow);
}

void launch_sample_rows(const SampleRowsParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.logits && p.rows && p.out && (p.windows || p.n_rows == 0), "sample_rows: null pointer");
  LLM_REQUIRE(p.V > 0 && p.V < INT32_MAX && p.row_stride >= p.V && p.n_rows >= 0 && p.n_rows <= 65535,
              "sample_rows: bad shape");
  if (p.n_rows == 0) return;
  sample_rows_kernel<<<p.n_rows, kThreads, 0, stream>>>(p);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
