// Sampling pipeline: (1) copy logits, applying penalties per token id from occurrence counts of the history window;
// (2a) greedy: argmax per block as the logits are penalised, then one block over the blocks' results; (2b) otherwise a stable descending radix sort of (logit, id) pairs (stable, so equal
// logits keep ascending ids, the CPU's tie rule) and one thread walking the sorted prefix in double, in the exact
// order and arithmetic of app::Sampler. The walk is sequential on purpose: bit-identical sums need the CPU's order.
#include "cuda/kernels/sampling.cuh"

#include <cub/device/device_radix_sort.cuh>

#include "cuda/check.h"
#include "cuda/kernels/reduce.cuh"
#include "cuda/kernels/sampling_walk.cuh"

namespace cuda {
namespace {

constexpr int kThreads = 256;

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
      l = apply_penalty(l, n, p.cfg);
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

// Steps 4-8 over the sorted candidates, one thread.
__global__ void walk_kernel(SampleParams p, Scratch s) {
  const int64_t kept = p.cfg.candidates(p.V);  // the sort path: temp > 0
  *p.out_token = walk_sorted(p.cfg, s.keys_out, s.ids_out, kept, p.state->step);
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
