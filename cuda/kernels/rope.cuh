// Rotary position embedding, both pair orderings, positions read from device memory (so a captured decode step
// serves every position), optional per-pair frequency factors.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "cuda/kernels/kv_paging.cuh"
#include "graph/ir.h"

namespace cuda {

struct RopeKernelParams {
  const float* x = nullptr;             // [head_dim, n_head, T]
  float* out = nullptr;                 // [head_dim, n_head, T]; may equal x
  const int32_t* positions = nullptr;   // [T], device memory
  const float* freq_factors = nullptr;  // [n_rot / 2] or null: theta_i is divided by freq_factors[i]
  int64_t head_dim = 0;
  int64_t n_head = 0;
  int64_t T = 0;
  int32_t n_rot = 0;                    // even, <= head_dim; dimensions >= n_rot pass through
  graph::RopeMode mode = graph::RopeMode::Normal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  // graph::RopeParams' YaRN ramp and cos/sin factor (LongRoPE, YaRN); the defaults are the plain rotation, the only
  // one the q/k/v matvec epilogue implements.
  float ext_factor = 0.0f;
  float corr_low = 0.0f, corr_high = 0.0f;
  float attn_factor = 1.0f;
};

void launch_rope(const RopeKernelParams& p, cudaStream_t stream);

// base^(-2i/n_rot) for each pair i < n_rot / 2 (glibc's pow, as the CPU reference): the rope kernels take them as a
// launch parameter, the q/k/v matvec epilogue from device memory (MatvecRopeKv::base_powers).
::std::vector<double> rope_base_powers(float freq_base, int32_t n_rot);

// rope(q) -> rope.out, and rope(k), v written into the KV cache slot of each token's position (layouts and element
// types of cuda/kernels/attention.cuh: f16, or q8_0 / q4_0 with head_dim and hd_v multiples of 32): one launch for
// what rope, rope and kv_write do. rope.x is q; k shares rope's head_dim, n_rot and positions.
struct RopeKvParams {
  RopeKernelParams rope;             // q: x [head_dim, n_head, T] -> out
  const float* k = nullptr;          // [head_dim, n_head_kv, T]
  const float* v = nullptr;          // [hd_v, n_head_kv, T]
  void* k_cache = nullptr;           // this layer: [head_dim, n_ctx, n_head_kv] as KvWriteParams::k_cache
  void* v_cache = nullptr;           // this layer: [hd_v, n_ctx, n_head_kv] likewise
  int64_t n_head_kv = 0;
  int64_t hd_v = 0;
  int64_t n_ctx = 0;
  graph::KvType kv_type = graph::KvType::F16;
  uint16_t* k_scales = nullptr;      // q8_0, q4_0: [head_dim / 32, n_ctx, n_head_kv] binary16 scales; else null
  uint16_t* v_scales = nullptr;      // q8_0, q4_0: [hd_v / 32, n_ctx, n_head_kv]
  KvPaging paging = {};              // a paged cache: slots through the block table, padding not written
  // Per-head RMS norms of q (rope.x) and k before the rotation (Gemma 3, Qwen 3: what two RmsNorm launches did):
  // both weights or neither; f16 cache, head_dim <= 256.
  const float* q_norm_w = nullptr;   // [head_dim]
  const float* k_norm_w = nullptr;   // [head_dim]
  float norm_eps = 0.0f;
};
void launch_rope_kv(const RopeKvParams& p, cudaStream_t stream);

}  // namespace cuda
