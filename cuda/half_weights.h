// Half-precision copies of the matrices that prompts' products read (--half-weights): a product of more tokens than
// the small-batch kernels take (batch_mm.cuh) otherwise dequantizes its whole matrix into the GEMM scratch on every
// evaluation, 2 bytes a weight written and read back beside the product itself (gemm.cu; ~6 of an 8B pp512's 21 ms
// on an H100, docs/kernel-notes.md). With a copy, cuBLAS multiplies the copy directly, as it does an F16 model's
// matrices. The price is device memory, 2 bytes a weight for as long as the session lives, so it is opt-in and
// bounded by a budget: the weights + KV cache + 10% promise (README) holds only without it.
// Decode never reads the copies: one token's matvec and the small-batch kernels keep reading the quantized weights.
#pragma once
#include <cstddef>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "cuda/raii.h"
#include "cuda/weight_layouts.h"

namespace cuda {

// Which weights get a copy: the dense per-layer matrices a prompt's products read through the GEMM (q, k, v, fused
// q|k|v, o, gate, up, fused gate|up, down) of a type other than F16 (already the GEMM's operand), in the order given
// (the model's, layer by layer), each whole or not at all, while their copies fit in budget_bytes. Not the experts
// (their own tiles read the quantized bytes), the router (float32 columns), the embedding table or the output
// matrix (one row at a time but for perplexity's all-logits evaluations).
struct HalfWeightsPlan {
  ::std::vector<size_t> chosen;  // indices into the weights, in order
  uint64_t bytes = 0;            // device bytes of their copies, alignment included
  size_t candidates = 0;         // weights that qualify, chosen or not
  uint64_t candidate_bytes = 0;  // what copies of all of them would take
};
HalfWeightsPlan plan_half_weights(::std::span<const WeightDesc> weights, uint64_t budget_bytes);

// Device bytes of one weight's copy (its K * N halves, rounded up to 256 bytes).
uint64_t half_copy_bytes(const WeightDesc& w);

class HalfWeights {
 public:
  HalfWeights() = default;
  // Allocates the plan's bytes and dequantizes each chosen weight from `arena` (after regroup_weights: `regrouped`
  // holds the arena offsets it moved) into its copy on `stream`, then waits. Throws cuda::Error when the allocation
  // fails.
  HalfWeights(const uint8_t* arena, ::std::span<const WeightDesc> weights, const HalfWeightsPlan& plan,
              const ::std::unordered_set<uint64_t>& regrouped, cudaStream_t stream);

  // The copy of the tensor at this arena offset (a WeightParams' arena_offset - tensor_offset), row 0; null when the
  // tensor has none.
  const uint16_t* find(uint64_t tensor_arena_offset) const;
  // The copy of a weight node's rows (K values each): its tensor's copy from the row its range starts at (phi3's
  // fused q|k|v and gate|up are ranges of one tensor). Null when the tensor has no copy, or when the range starts
  // off a 256-byte boundary: cuBLASLt's algorithms are chosen for operands aligned so (blas.cpp asks for no other
  // alignment), as the GEMM scratch is.
  const uint16_t* rows(const graph::WeightParams& w, int64_t K) const;
  uint64_t bytes() const { return buffer_.bytes(); }
  size_t count() const { return offsets_.size(); }

 private:
  DeviceBuffer buffer_;
  ::std::unordered_map<uint64_t, uint64_t> offsets_;  // tensor arena offset -> byte offset in buffer_
};

}  // namespace cuda
