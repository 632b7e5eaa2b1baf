// cuBLASLt products (cuda/blas.h).
#include "cuda/blas.h"

#include <memory>
#include <string>
#include <utility>

#include "cuda/check.h"

namespace cuda {

struct Blas::Shape {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Shape() {
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
    if (b) (void)cublasLtMatrixLayoutDestroy(b);
    if (a) (void)cublasLtMatrixLayoutDestroy(a);
    if (op) (void)cublasLtMatmulDescDestroy(op);
  }
};

Blas::Blas(size_t workspace_bytes) : workspace_(workspace_bytes) { CUBLAS_CHECK(cublasLtCreate(&handle_)); }

Blas::~Blas() {
  shapes_.clear();  // descriptors before the handle
  if (handle_) (void)cublasLtDestroy(handle_);
}

void Blas::gemm_tn_f16_f32_batched(int64_t m, int64_t n, int64_t k, const void* a, int64_t stride_a, const void* b,
                                   float* d, int64_t ldd, int64_t stride_d, int count, cudaStream_t stream) const {
  LLM_REQUIRE(m > 0 && n > 0 && k > 0 && ldd >= m, "bad shape");
  LLM_REQUIRE(m <= 0x7fffffff && n <= 0x7fffffff && k <= 0x7fffffff && ldd <= 0x7fffffff,
              "dimension exceeds cuBLAS int range");
  LLM_REQUIRE(count >= 1 && (count == 1 || (stride_a >= m * k && stride_d >= ldd * n)),
              "batched product: its A and D overlap");
  if (count == 1) stride_a = stride_d = 0;  // one shape whatever the caller passed
  const auto key = ::std::make_tuple(m, n, k, ldd, count, stride_a, stride_d);
  auto it = shapes_.find(key);
  if (it == shapes_.end()) {
    auto s = ::std::make_unique<Shape>();
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&s->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(s->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s->a, CUDA_R_16F, uint64_t(k), uint64_t(m), k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s->b, CUDA_R_16F, uint64_t(k), uint64_t(n), k));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&s->d, CUDA_R_32F, uint64_t(m), uint64_t(n), ldd));
    if (count > 1) {  // strided batches; B's stride 0: every product reads the same x
      const int64_t strides[3] = {stride_a, 0, stride_d};
      cublasLtMatrixLayout_t layouts[3] = {s->a, s->b, s->d};
      for (int i = 0; i < 3; ++i) {
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
                                                      sizeof count));
        CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &strides[i], sizeof strides[i]));
      }
    }
    cublasLtMatmulPreference_t pref = nullptr;
    CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = workspace_.bytes();
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st = [&] {
      const cublasStatus_t e =
          cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
      if (e != CUBLAS_STATUS_SUCCESS) return e;
      return cublasLtMatmulAlgoGetHeuristic(handle_, s->op, s->a, s->b, s->d, s->d, pref, 1, &result, &found);
    }();
    (void)cublasLtMatmulPreferenceDestroy(pref);
    CUBLAS_CHECK(st);
    if (found < 1)
      throw Error("cuBLASLt has no algorithm for a " + ::std::to_string(m) + " x " + ::std::to_string(n) + " x " +
                  ::std::to_string(k) + " half-precision product");
    s->algo = result.algo;
    it = shapes_.emplace(key, ::std::move(s)).first;
  }
  const Shape& s = *it->second;
  const float alpha = 1.0f, beta = 0.0f;
  CUBLAS_CHECK(cublasLtMatmul(handle_, s.op, &alpha, a, s.a, b, s.b, &beta, d, s.d, d, s.d, &s.algo,
                              workspace_.get(), workspace_.bytes(), stream));
}

}  // namespace cuda
