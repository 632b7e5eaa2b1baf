// Decode attention and the o projection as one launch, split over heads ("split-K"): block (h, r) attends head h
// over cache slots [0, position] (or, for long contexts, takes head h's output of the split attention), multiplies
// its 128 values by the 4 column blocks of o that head h owns, for the rows of quarter r, and adds those partial
// rows into the residual stream. No block waits for another: the sum over heads is done by integer atomics on a
// 64-bit fixed-point accumulator (kFixedOne units), which gives the same bits whatever order the blocks arrive in.
// o is Q4_0 regrouped by columns at upload (q4_0_cols.cuh); its share of a block is loaded before pdl_wait().
// Why: at short contexts the attention's own launch, and the o launch's read of x after it, cost more than the
// attention's work (docs/kernel-notes.md, session 15).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

namespace cuda {

inline constexpr double kFixedOne = 4294967296.0;  // 2^32: one unit of the fixed-point residual stream is 2^-32

// A fixed-point value as a float: its high 32 bits (the integer part) plus its low 32 bits times 2^-32, rounded by
// one fma. Within an ulp of the exact conversion, and the same bits on the host and the device.
__host__ __device__ inline float fixed_to_float(long long v) {
  return fmaf(float(uint32_t(uint64_t(v))), float(1.0 / kFixedOne), float(int32_t(v >> 32)));
}

struct AttentionOParams {
  const float* q = nullptr;            // [128, n_head], RoPE applied (attending here)
  const uint16_t* k_cache = nullptr;   // this layer's f16 caches, [128, n_ctx, n_head_kv] (attention.cuh)
  const uint16_t* v_cache = nullptr;
  const int32_t* position = nullptr;   // device: the token attends slots [0, *position]
  const float* attn = nullptr;         // [128, n_head]: the attention's output (long contexts); null: attend here
  const void* o = nullptr;             // Q4_0 [D, D] regrouped by columns, D = 128 n_head
  const float* residual = nullptr;     // [D], added once
  unsigned long long* acc = nullptr;   // [D] fixed point, zero on entry: becomes residual + o(attention)
  unsigned long long* zero_next = nullptr;  // [D] or null: another accumulator, zeroed by this launch
  float scale = 1.0f;
  int64_t n_ctx = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
};

// The shapes launch_attention_o serves: head_dim = head_dim_v = 128, n_head 16, 32 or 64 (D / 4 rows a block: 1, 2
// or 4 per thread), n_head_kv dividing n_head.
bool attention_o_fits(int64_t n_head, int64_t n_head_kv, int64_t head_dim, int64_t head_dim_v);
void launch_attention_o(const AttentionOParams& p, cudaStream_t stream);

}  // namespace cuda
