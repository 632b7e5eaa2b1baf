// Sampling pipeline: (1) copy logits, applying penalties per token id from occurrence counts of the history window;
// (2a) greedy: argmax per block as the logits are penalised, then one block over the blocks' results; (2b) otherwise a stable descending radix sort of (logit, id) pairs (stable, so equal
// logits keep ascending ids, the CPU's tie rule) and one thread walking the sorted prefix in double, in the exact
// order and arithmetic of app::Sampler. The walk is sequential on purpose: bit-identical sums need the CPU's order.
#include "cuda/kernels/sampling.cuh"

#include <cub/device/device_radix_sort.cuh>

#include "cuda/check.h"
#include "cuda/kernels/reduce.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 256;

__host__ __device__ inline void philox_round(uint32_t (&c)[4], const uint32_t (&k)[2]) {
  const uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
  const uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
  const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
  const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
  const uint32_t n0 = hi1 ^ c[1] ^ k[0], n1 = lo1, n2 = hi0 ^ c[3] ^ k[1], n3 = lo0;
  c[0] = n0, c[1] = n1, c[2] = n2, c[3] = n3;
}

__host__ __device__ inline float philox_uniform(uint64_t seed, uint64_t step) {
  uint32_t c[4] = {uint32_t(step), uint32_t(step >> 32), 0u, 0u};
  uint32_t k[2] = {uint32_t(seed), uint32_t(seed >> 32)};
  for (int r = 0; r < 10; ++r) {
    if (r > 0) k[0] += 0x9E3779B9u, k[1] += 0xBB67AE85u;
    philox_round(c, k);
  }
  return float(c[0] >> 8) * (1.0f / 16777216.0f);
}

struct Scratch {
  float* keys_in;
  float* keys_out;
  int32_t* ids_in;
  int32_t* ids_out;
  int32_t* counts;
  void* cub_temp;
  size_t cub_bytes;
};

size_t align256(size_t b) { return (b + 255) & ~size_t(255); }

size_t cub_temp_bytes(int64_t V) {
  size_t bytes = 0;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(nullptr, bytes, static_cast<const float*>(nullptr),
                                                        static_cast<float*>(nullptr),
                                                        static_cast<const int32_t*>(nullptr),
                                                        static_cast<int32_t*>(nullptr), int(V)));
  return bytes;
}

Scratch carve(void* base, int64_t V) {
  auto* p = static_cast<uint8_t*>(base);
  Scratch s{};
  const size_t fv = align256(size_t(V) * 4);
  s.keys_in = reinterpret_cast<float*>(p), p += fv;
  s.keys_out = reinterpret_cast<float*>(p), p += fv;
  s.ids_in = reinterpret_cast<int32_t*>(p), p += fv;
  s.ids_out = reinterpret_cast<int32_t*>(p), p += fv;
  s.counts = reinterpret_cast<int32_t*>(p), p += fv;
  s.cub_temp = p;
  s.cub_bytes = cub_temp_bytes(V);
  return s;
}

// Window [first, n_history) of the history, as app::apply_penalties defines it.
__device__ __forceinline__ int32_t window_first(const SamplingConfig& c, int32_t n) {
  return c.repeat_last_n < 0 ? 0 : max(0, n - c.repeat_last_n);
}

__global__ void count_kernel(SampleParams p, int32_t* counts) {
  const int32_t n = p.state->n_history;
  for (int32_t i = window_first(p.cfg, n) + int32_t(blockIdx.x * blockDim.x + threadIdx.x); i < n;
       i += gridDim.x * blockDim.x) {
    const int32_t c = p.history[i];
    if (c >= 0 && c < p.V) atomicAdd(&counts[c], 1);
  }
}

// Logit i penalised (float32, in the CPU's operation order, no contraction); its count re-zeroed.
__device__ __forceinline__ float penalised_logit(const SampleParams& p, const Scratch& s, int64_t i, bool penalise) {
  float l = p.logits[i];
  if (penalise) {
    const int32_t n = s.counts[i];
    if (n > 0) {
      l = l > 0.0f ? __fdiv_rn(l, p.cfg.repeat_penalty) : __fmul_rn(l, p.cfg.repeat_penalty);
      l = __fsub_rn(l, __fadd_rn(__fmul_rn(float(n), p.cfg.frequency_penalty), p.cfg.presence_penalty));
      s.counts[i] = 0;
    }
  }
  return l;
}

// keys = penalised logits, ids = 0..V-1; counts re-zeroed.
__global__ void prepare_kernel(SampleParams p, Scratch s, bool penalise) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.V; i += int64_t(gridDim.x) * blockDim.x) {
    const float l = penalised_logit(p, s, i, penalise);
    s.keys_in[i] = l == 0.0f ? 0.0f : l;  // -0 and +0 compare equal on the CPU: one bit pattern for the sort
    s.ids_in[i] = int32_t(i);
  }
}

// Greedy, first pass: block b's argmax of the penalised logits it visits (as prepare_kernel's grid), into
// partial[b]; the second pass reduces the blocks' results. argmax_merge keeps the larger value and, among equal
// ones, the lower id, and skips NaN: any order of merging gives the CPU's answer. (One block over the whole
// vocabulary took 20 us for 128k ids; this is ~1 us of loads spread over the GPU plus a short second launch.)
__global__ void greedy_partial_kernel(SampleParams p, Scratch s, bool penalise, ArgMax* partial) {
  ArgMax best;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < p.V; i += int64_t(gridDim.x) * blockDim.x)
    best = argmax_merge(best, ArgMax{penalised_logit(p, s, i, penalise), int32_t(i)});
  __shared__ ArgMax red[kThreads / 32];
  best = block_argmax<kThreads>(best, red);
  if (threadIdx.x == 0) partial[blockIdx.x] = best;
}

__global__ void greedy_final_kernel(SampleParams p, const ArgMax* partial, int n) {
  ArgMax best;
  for (int i = int(threadIdx.x); i < n; i += kThreads) best = argmax_merge(best, partial[i]);
  __shared__ ArgMax red[kThreads / 32];
  best = block_argmax<kThreads>(best, red);
  if (threadIdx.x == 0) *p.out_token = best.idx < 0 ? 0 : best.idx;
}

// Steps 4-8 of app/sampler.h over the sorted candidates, one thread.
__global__ void walk_kernel(SampleParams p, Scratch s) {
  const SamplingConfig& c = p.cfg;
  const float* l = s.keys_out;
  int64_t kept = (c.top_k > 0 && c.top_k < p.V) ? c.top_k : p.V;
  const double l0 = double(l[0]);
  if (c.top_p < 1.0f) {
    double Q = 0.0;
    for (int64_t i = 0; i < kept; ++i) Q += exp(double(l[i]) - l0);
    const double target = double(c.top_p) * Q;
    double run = 0.0;
    for (int64_t i = 0; i < kept; ++i) {
      run += exp(double(l[i]) - l0);
      if (run >= target) {
        kept = i + 1;
        break;
      }
    }
  }
  if (c.min_p > 0.0f) {
    int64_t i = 1;
    while (i < kept && exp(double(l[i]) - l0) >= double(c.min_p)) ++i;
    kept = i;
  }
  double W = 0.0;
  for (int64_t i = 0; i < kept; ++i) W += exp((double(l[i]) - l0) / double(c.temp));
  const double target = double(philox_uniform(c.seed, p.state->step)) * W;
  double run = 0.0;
  int32_t pick = s.ids_out[kept - 1];
  for (int64_t i = 0; i < kept; ++i) {
    run += exp((double(l[i]) - l0) / double(c.temp));
    if (run > target) {
      pick = s.ids_out[i];
      break;
    }
  }
  *p.out_token = pick;
}

}  // namespace

float philox_uniform_host(uint64_t seed, uint64_t step) { return philox_uniform(seed, step); }

size_t sampling_scratch_bytes(int64_t V) { return 5 * align256(size_t(V) * 4) + align256(cub_temp_bytes(V)); }

void launch_sample(const SampleParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.logits && p.history && p.state && p.out_token && p.scratch, "null pointer");
  LLM_REQUIRE(p.V > 0 && p.V <= 0x7fffffff, "bad vocabulary size");
  LLM_REQUIRE(p.scratch_bytes >= sampling_scratch_bytes(p.V), "scratch too small (sampling_scratch_bytes)");
  const Scratch s = carve(p.scratch, p.V);
  const bool penalise = p.cfg.penalties();
  const unsigned grid = unsigned(::std::min<int64_t>((p.V + kThreads - 1) / kThreads, 1024));
  if (penalise) {
    // counts are kept all-zero between launches (prepare_kernel clears what it used); zero them once per launch
    // anyway so a previous failure cannot leak into this draw.
    CUDA_CHECK(cudaMemsetAsync(s.counts, 0, size_t(p.V) * 4, stream));
    count_kernel<<<64, kThreads, 0, stream>>>(p, s.counts);
    CUDA_CHECK_LAUNCH(stream);
  }
  if (p.cfg.temp <= 0.0f) {
    // The blocks' results in keys_out, which only the sort path uses: grid x 8 bytes <= V x 4 rounded up to 256.
    auto* partial = reinterpret_cast<ArgMax*>(s.keys_out);
    greedy_partial_kernel<<<grid, kThreads, 0, stream>>>(p, s, penalise, partial);
    CUDA_CHECK_LAUNCH(stream);
    greedy_final_kernel<<<1, kThreads, 0, stream>>>(p, partial, int(grid));
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  prepare_kernel<<<grid, kThreads, 0, stream>>>(p, s, penalise);
  CUDA_CHECK_LAUNCH(stream);
  size_t bytes = s.cub_bytes;
  CUDA_CHECK(cub::DeviceRadixSort::SortPairsDescending(s.cub_temp, bytes, s.keys_in, s.keys_out, s.ids_in, s.ids_out,
                                                        int(p.V), 0, 32, stream));
  walk_kernel<<<1, 1, 0, stream>>>(p, s);
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
