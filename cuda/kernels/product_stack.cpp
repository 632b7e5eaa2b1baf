#include "cuda/kernels/product_stack.cuh"

#include <string>

#include "cuda/check.h"
#include "cuda/kernels/q6_kx8.cuh"

namespace cuda {

void check_product_stack(const ProductStack& s, const void* w, int64_t N, int64_t K, bool regrouped, const char* who) {
  const ::std::string what = ::std::string(who) + " stack: ";
  LLM_REQUIRE(s.n >= 1 && s.n <= ProductStack::kMax, what + "1 to 3 matrices");
  LLM_REQUIRE(s.w[0] == w, what + "the launch's w is the first matrix");
  int64_t total = 0;
  for (int m = 0; m < s.n; ++m) {
    LLM_REQUIRE(s.w[m] && s.y[m] && s.N[m] > 0, what + "a matrix without rows, weights or output");
    LLM_REQUIRE(m == s.n - 1 || s.N[m] % 32 == 0, what + "rows of all but the last a multiple of 32");
    LLM_REQUIRE((reinterpret_cast<uintptr_t>(s.w[m]) & 15) == 0, what + "weights must be 16-byte aligned");
    if (regrouped) LLM_REQUIRE(q6_kx8_fits(s.w[m], K), "Q6_Kx8 rows: K % 2048 == 0, 16-byte aligned");
    total += s.N[m];
  }
  LLM_REQUIRE(total == N, what + "the launch's N is the matrices' rows in all");
}

}  // namespace cuda
