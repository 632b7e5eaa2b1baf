// LAB (issue 6, kernel notes session 15; timing only, results wrong): the short-context attention and the o
// projection as one launch, split-K over heads (tests/cuda/attn_o_lab.cu has the checked version). The executor
// launches it in place of the attention when LLM_CUDA_LAB_ATTN_O=1 (with LLM_CUDA_OMIT_STEPS=attn_output): the o
// weight's bytes are read as if regrouped at upload (quants [D / 32][D] x 16 bytes, then scales), and the partial
// rows go into a scratch fixed-point accumulator that nothing reads.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct AttnOLabParams {
  const float* q;            // [128, n_head], RoPE applied
  const uint16_t* k_cache;   // this layer, f16 [128, n_ctx, n_head_kv]
  const uint16_t* v_cache;
  const int32_t* position;
  const void* o;             // the o weight, Q4_0 [D, D] bytes (D = 128 n_head)
  float scale;
  int64_t n_ctx;
  int n_head, n_head_kv;
};
bool attn_o_lab_enabled();
void launch_attn_o_lab(const AttnOLabParams& p, cudaStream_t stream);

}  // namespace cuda
