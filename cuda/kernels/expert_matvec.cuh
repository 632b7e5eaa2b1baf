// Decode products of a mixture's chosen experts with their neighbours fused in (issue 27), on the int16-activation
// units of the dense decode matvec (matvec_i16_units.cuh): x is quantized to int16 runs once per block and every
// weight byte of a chosen expert is read once.
// - expert_glu: the gate and up products of every (token, slot) and the activation between them in one launch,
//   h = act(gate_e x + b_gate_e, up_e x + b_up_e), so neither product is stored (graph: MulMatId, MulMatId, SwiGlu
//   or SwiGluOai).
// - expert_down: the down products of a token's k slots, each on its own input column, mixed by the routing weights
//   and added to the residual in one launch, y = r + sum_j w_j (down_{e_j} h_j + b_{e_j}) (graph: MulMatId,
//   WeightedSum, Add).
// Expert ids are read from device memory (or, with a route, each block routes its token from the router's scores
// there: moe_route_block.cuh), so a decode step stays one captured graph. The gate/up launch is plain, or a
// programmatic dependent of a routing launch that lets it start only once the logits are read
// (ExpertGluParams::programmatic): nothing of it can start before the ids, and blocks resident early only to wait cost
// gpt-oss-20b 4.7% of its tg128 (446 → 426 tok/s, H100) and Qwen3-30B-A3B 3.7% (session 44). The down launch after
// it is a programmatic dependent (ExpertDownParams::ids_before_wait): its ids are known by then, since the gate/up
// launch lets it start only past its own wait. Each output is
// summed in an order fixed by the shapes (not by T or by which block holds it): a token's result does not depend on
// its neighbours in the batch.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/moe.cuh"
#include "quant/types.h"
#ifdef __CUDACC__
#include "cuda/kernels/swiglu.cuh"
#endif

namespace cuda {

enum class ExpertAct : uint8_t { SwiGlu, SwiGluOai };
#ifdef __CUDACC__
// act(gate, up) as the element-wise SwiGlu / SwiGluOai kernels compute it (the expert launches and the prefill tiles).
__device__ __forceinline__ float activate(ExpertAct act, float g, float u, float alpha, float limit) {
  return act == ExpertAct::SwiGlu ? silu(g) * u : swiglu_oai(g, u, alpha, limit);
}
#endif

struct ExpertGluParams {
  const void* gate = nullptr;      // [K, N, n_expert] of `type`: expert e's N rows start at row e N
  const void* up = nullptr;        // same shape and type
  quant::Type type = quant::Type::F32;
  const float* gate_bias = nullptr;  // [N, n_expert] or null
  const float* up_bias = nullptr;
  const float* x = nullptr;        // [K, T]: every slot of token t reads column t
  // Set: x is x w of an RmsNorm folded into the router's parts (RouterPartsParams::xw), whose sums of squares these
  // are: the runs' scales are multiplied by 1 / rms (folded_norm_scale) after the quantization.
  const float* norm_ss = nullptr;  // [norm_parts][T]
  int norm_parts = 0;
  float norm_eps = 0.0f;
  const int32_t* ids = nullptr;    // [k, T] device memory; ids outside [0, n_expert) give zero rows
  float* out = nullptr;            // [N, k, T]
  ExpertAct act = ExpertAct::SwiGlu;
  float alpha = 1.702f, limit = 7.0f;  // SwiGluOai (moe.cuh)
  int64_t K = 0, N = 0, n_expert = 0, k = 0, T = 0;
  int groups_per_block = 0;        // row groups a block owns; 0: the launcher's choice (the kernel lab sweeps it)
  // Set: h leaves as expert_down's int16 input runs (kExpertRunBytes per 16 values, [T][k][N / 16]) instead of
  // floats at out, so the down launch neither quantizes it nor reads the floats (N a multiple of 16).
  void* runs_out = nullptr;
  bool recoded = false;            // MXFP4 gate and up recoded at upload (mxfp4_recode.cuh)
  // Launched as a programmatic dependent of the routing launch right before it (MoeRouteParams::late_dependents),
  // reading nothing before its wait; it lets its own dependents (the down launch, which reads the ids before its
  // wait) start only after that wait.
  bool programmatic = false;
  // logits set: every block routes its token itself from these router scores (moe_route_block.cuh; the same
  // choices as the routing launch) instead of reading ids, so a decode step needs no routing launch.
  MoeRouteSource route;
};

struct ExpertDownParams {
  const void* w = nullptr;         // [K, N, n_expert] of `type`
  quant::Type type = quant::Type::F32;
  const float* bias = nullptr;     // [N, n_expert] or null
  const float* x = nullptr;        // [K, k, T]: slot j of token t reads column t k + j
  const int32_t* ids = nullptr;    // [k, T]; a slot whose id is outside [0, n_expert) adds nothing
  const float* weights = nullptr;  // [k, T] routing weights
  const float* residual = nullptr; // [N, T] or null
  float* out = nullptr;            // [N, T]
  int64_t K = 0, N = 0, n_expert = 0, k = 0, T = 0;
  int groups_per_block = 0;        // as ExpertGluParams
  const void* x_runs = nullptr;    // set: x as expert_glu's runs_out ([T][k][K / 16]) instead of floats at x
  // Set where ids and weights were written before the launch ahead of this one let it start (expert_glu: a plain
  // launch after the routing, or a programmatic one that lets its dependents start past its own wait): then this
  // launch is a programmatic dependent of it and its blocks read the ids and start their first weights before
  // pdl_wait(), while the gate/up launch finishes.
  bool ids_before_wait = false;
  bool recoded = false;            // MXFP4 experts recoded at upload (mxfp4_recode.cuh)
  // logits set: every block routes its token itself, ids and weights (as ExpertGluParams::route), before its
  // pdl_wait(): the launch is then a programmatic dependent of the gate/up launch, whose start means the router's
  // scores are written.
  MoeRouteSource route;
};

// One run of 16 values of h as expert_glu writes it for expert_down: 8 words of int16 pairs, the scale, the exact
// float sum, padding to 48 bytes (three 16-byte stores).
inline constexpr size_t kExpertRunBytes = 48;

// Whether the launchers take these params: a type with an int16 unit (Q4_0, Q8_0, Q4_K, Q6_K as in GGUF, MXFP4 as
// in GGUF or recoded), rows the unit can load (alignment), K / 32 <= 256 units, for expert_down the k quantized
// inputs in 48 KiB of shared memory, and a route (if any) of the launch's n_expert, k and T, up to
// kRouteBlockMaxExperts experts. The executor fuses only where they do; the unfused ops serve everything else.
bool expert_glu_fits(const ExpertGluParams& p);
bool expert_down_fits(const ExpertDownParams& p);

// Throw cuda::InvalidArgument where the fits above say no, or for null pointers and empty shapes.
void launch_expert_glu(const ExpertGluParams& p, cudaStream_t stream);
void launch_expert_down(const ExpertDownParams& p, cudaStream_t stream);

}  // namespace cuda
