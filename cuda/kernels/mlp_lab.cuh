// LAB (issue 6, kernel notes session 15; timing only, results wrong): a decode feed-forward block as one launch
// (gate/up + SwiGLU, then split-K down into a 64-bit fixed-point accumulator, partial rows summed by clusters of 2
// through distributed shared memory; tests/cuda/mlp_lab.cu has the checked version). The executor launches it in
// place of the gate/up launch when LLM_CUDA_LAB_MLP=1 (with LLM_CUDA_OMIT_STEPS=ffn_down): the down weight's bytes
// are read as if regrouped at upload ([F / 32][K] blocks of 16 quant bytes, then the scales), x is read from a
// scratch fixed-point vector and the result goes to another that nothing reads.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda {

struct MlpLabParams {
  const void* gate;   // Q4_0 [K, F]
  const void* up;
  const void* down;   // Q4_0 [F, K] bytes, read as regrouped
  const float* norm_w;
  float eps;
  int64_t K, F;
};
bool mlp_lab_enabled();
void launch_mlp_lab(const MlpLabParams& p, cudaStream_t stream);

}  // namespace cuda
