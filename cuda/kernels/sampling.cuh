// On-GPU token sampling that picks exactly the token app::Sampler picks (app/sampler.h is the specification):
// penalties over a device-resident history window, greedy or sorted filtering (top-k, top-p, min-p), temperature and
// a seeded Philox4x32-10 draw. History length and draw counter are read from device memory, so a captured decode
// step samples at every position; the configuration is fixed per launch (a change re-captures).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

// Mirrors app::SamplerParams (cuda/ does not depend on app/); same meaning of every field.
struct SamplingConfig {
  float temp = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  int32_t repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;

  // The candidates a draw walks (runtime/sampler.h steps 3-4): the top k when 0 < top_k < V, else all V; greedy
  // needs only the largest.
  __host__ __device__ int64_t candidates(int64_t V) const {
    return temp <= 0.0f ? 1 : (top_k > 0 && top_k < V) ? top_k : V;
  }
  __host__ __device__ bool penalties() const {
    return repeat_last_n != 0 && (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
};

// Per-draw state in device memory, written by the host before each launch / replay.
struct SamplingState {
  int32_t n_history = 0;  // valid entries of the history buffer
  int32_t pad = 0;
  uint64_t step = 0;      // Philox counter of this draw
};

struct SampleParams {
  SamplingConfig cfg;
  const float* logits = nullptr;       // [V]
  int64_t V = 0;
  const int32_t* history = nullptr;    // [history_cap] device; the first state->n_history entries are valid
  const SamplingState* state = nullptr;// device
  int32_t* out_token = nullptr;        // [1] device memory, or page-locked host memory as the device addresses it
  void* scratch = nullptr;             // sampling_scratch_bytes(V) bytes of device memory
  size_t scratch_bytes = 0;
};

size_t sampling_scratch_bytes(int64_t V);
void launch_sample(const SampleParams& p, cudaStream_t stream);

// The uniform draw of app/sampler.h, on the host (tests compare it with the device's).
float philox_uniform_host(uint64_t seed, uint64_t step);

}  // namespace cuda
