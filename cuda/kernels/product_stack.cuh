// Up to three matrices that read the same x, in one launch of the small-batch or few-column kernel (q/k/v): the
// executor's stack_small_batch plans them, the kernels find each tile's or group's matrix from its first row.
#pragma once
#include <cstdint>

namespace cuda {

// Matrices of one type, K and layout, their rows stacked in this order, each N but the last a multiple of 32 (a tile
// or row group never holds rows of two). The launch's params then have the first one's w and the total N (their y
// and bias unused). A kernel argument of its own, as GluEpilogue: the launches of one matrix compile without it.
struct ProductStack {
  static constexpr int kMax = 3;
  const void* w[kMax] = {};
  const float* bias[kMax] = {};
  float* y[kMax] = {};
  int64_t N[kMax] = {};
  int n = 0;
};

// Throws cuda::InvalidArgument (messages starting with `who`) unless the stack fits a launch of w and N rows of K
// elements: one to three matrices, the first at w, their rows adding up to N, each but the last a multiple of 32,
// each 16-byte aligned (regrouped: each fits Q6_Kx8).
void check_product_stack(const ProductStack& s, const void* w, int64_t N, int64_t K, bool regrouped, const char* who);

}  // namespace cuda
