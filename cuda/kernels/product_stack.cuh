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

#ifdef __CUDACC__
// The matrix of a stack that holds the launch's row `row` (stacked numbering), and its first row there. Selects, not
// s.w[m]: an indexed kernel-parameter array would go through local memory.
struct StackedMatrix {
  const void* w;
  const float* bias;
  float* y;
  int64_t N, row0;
};
__device__ __forceinline__ StackedMatrix stacked_matrix(const ProductStack& s, int64_t row) {
  static_assert(ProductStack::kMax == 3, "the selects below");
  const int64_t end0 = s.N[0], end1 = end0 + s.N[1];
  const int m = row < end0 || s.n == 1 ? 0 : row < end1 || s.n == 2 ? 1 : 2;
  return {m == 0 ? s.w[0] : m == 1 ? s.w[1] : s.w[2], m == 0 ? s.bias[0] : m == 1 ? s.bias[1] : s.bias[2],
          m == 0 ? s.y[0] : m == 1 ? s.y[1] : s.y[2], m == 0 ? s.N[0] : m == 1 ? s.N[1] : s.N[2],
          m == 0 ? 0 : m == 1 ? end0 : end1};
}
#endif

}  // namespace cuda
