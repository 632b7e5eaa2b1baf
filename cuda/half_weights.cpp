// Half-precision copies of the prompt products' matrices (see half_weights.h).
#include "cuda/half_weights.h"

#include "cuda/check.h"
#include "cuda/kernels/gemm.cuh"

namespace cuda {

namespace {

bool copies(const WeightDesc& w) {
  using graph::WeightRole;
  switch (w.role) {
    case WeightRole::AttnQ:
    case WeightRole::AttnK:
    case WeightRole::AttnV:
    case WeightRole::AttnQkv:
    case WeightRole::AttnOutput:
    case WeightRole::FfnGate:
    case WeightRole::FfnUp:
    case WeightRole::FfnGateUp:
    case WeightRole::FfnDown:
      // Not Q8_1 / Q8_K: activation formats without a device dequantizer (qtype_dispatch.cuh).
      return w.type != quant::Type::F16 && w.type != quant::Type::Q8_1 && w.type != quant::Type::Q8_K &&
             w.n_expert == 1 && w.K > 0 && w.N > 0;
    default:
      return false;
  }
}

}  // namespace

uint64_t half_copy_bytes(const WeightDesc& w) {
  return (uint64_t(w.K) * uint64_t(w.N) * 2 + 255) & ~uint64_t(255);
}

HalfWeightsPlan plan_half_weights(::std::span<const WeightDesc> weights, uint64_t budget_bytes) {
  HalfWeightsPlan plan;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!copies(weights[i])) continue;
    const uint64_t b = half_copy_bytes(weights[i]);
    ++plan.candidates;
    plan.candidate_bytes += b;
    if (plan.bytes + b > budget_bytes) continue;  // a smaller one later may still fit
    plan.chosen.push_back(i);
    plan.bytes += b;
  }
  return plan;
}

HalfWeights::HalfWeights(const uint8_t* arena, ::std::span<const WeightDesc> weights, const HalfWeightsPlan& plan,
                         const ::std::unordered_set<uint64_t>& regrouped, cudaStream_t stream) {
  if (plan.chosen.empty()) return;
  buffer_ = DeviceBuffer(plan.bytes);
  uint64_t at = 0;
  for (const size_t i : plan.chosen) {
    LLM_REQUIRE(i < weights.size(), "half copies: a planned weight index is out of range");
    const WeightDesc& w = weights[i];
    LLM_REQUIRE(at + half_copy_bytes(w) <= plan.bytes, "half copies: the plan's bytes do not cover its weights");
    DequantF16Params p;
    p.w = arena + w.arena_offset;
    p.type = w.type;
    p.K = w.K;
    p.row0 = 0;
    p.rows = w.N;
    p.out = reinterpret_cast<uint16_t*>(buffer_.as<uint8_t>() + at);
    p.regrouped = regrouped.contains(w.arena_offset);
    p.N = w.N;
    launch_dequant_f16(p, stream);
    offsets_.emplace(w.arena_offset, at);
    at += half_copy_bytes(w);
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

const uint16_t* HalfWeights::find(uint64_t tensor_arena_offset) const {
  const auto it = offsets_.find(tensor_arena_offset);
  if (it == offsets_.end()) return nullptr;
  return reinterpret_cast<const uint16_t*>(buffer_.as<const uint8_t>() + it->second);
}

const uint16_t* HalfWeights::rows(const graph::WeightParams& w, int64_t K) const {
  const uint16_t* copy = find(w.arena_offset - w.tensor_offset);
  if (!copy || K <= 0) return nullptr;
  const int64_t row0 = int64_t(w.tensor_offset / quant::row_bytes(w.type, K));
  return (row0 * K * 2) % 256 == 0 ? copy + row0 * K : nullptr;
}

}  // namespace cuda
