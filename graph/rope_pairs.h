// Rope pairs side by side. NeoX rotates the pairs (i, i + n_rot / 2) of a head, the normal form the neighbours
// (2i, 2i + 1), pair i by the same angle in both. So NeoX on a head is the normal form on the head reordered so that
// position 2i holds element i and 2i + 1 element i + n_rot / 2 (elements past n_rot keep their places). Reordering
// q and k alike leaves every score q.k the same sum of products, in another order, and v is not touched. The CUDA
// session reorders the q and k weights of models that normalise neither (cuda/weight_layouts.h), so their ropes run
// in the normal form, which the q/k/v launch's rope + KV epilogue computes: one launch fewer a decode layer.
#pragma once
#include <cstdint>

#include "graph/ir.h"

namespace graph {

// The element of a head, in the file's (NeoX) order, that position i holds after the reorder.
constexpr int32_t rope_pair_source(int32_t i, int32_t n_rot) {
  return i >= n_rot ? i : (i % 2 == 0 ? i / 2 : i / 2 + n_rot / 2);
}

// The biases whose elements the reorder moves with their rows (q's, k's, and q|k|v's first q and k heads).
constexpr bool is_rope_pair_bias(WeightRole r) {
  return r == WeightRole::AttnQBias || r == WeightRole::AttnKBias || r == WeightRole::AttnQkvBias;
}

}  // namespace graph
