// Kernel lab timings of the prompt products (run only with LLM_CUDA_BENCH=1; otherwise skipped): one product of an
// 8B's shapes at prompt lengths, on the wgmma prompt kernel (launch_prompt_wgmma) and the dequantize + cuBLAS path
// (launch_gemm), each with its image or conversion of x (lab_timing.h's median of single launches). The weights
// rotate over 4 copies (past the 50 MB L2), as a prompt's layers do. Prints a table: us and TFLOP/s.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "lab_timing.h"

namespace {

struct Shape {
  const char* name;
  quant::Type type;
  bool regrouped;
  int64_t K, N;
};

}  // namespace

// The 8B's gate / up (Q4_K), q / o (Q4_K) and down (Q4_K and Q6_Kx8) products.
TEST(KernelLab, PromptProducts) {
  REQUIRE_LAB_TIMINGS();
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  const auto lengths = gpu_test::lab_counts("LLM_LAB_PROMPT_TOKENS", {128, 256, 512, 1024, 2048});
  const int64_t t_max = *std::max_element(lengths.begin(), lengths.end());
  std::printf("device: %s\nprompt products: us (TFLOP/s)\n%-14s %5s %18s %18s\n", ctx.name().c_str(), "shape", "T",
              "wgmma", "dequant+cuBLAS");
  using quant::Type;
  for (const Shape& sh : {Shape{"gate 4096x14336", Type::Q4_K, false, 4096, 14336},
                          Shape{"q 4096x4096", Type::Q4_K, false, 4096, 4096},
                          Shape{"down 14336x4096", Type::Q4_K, false, 14336, 4096},
                          Shape{"down Q6_Kx8", Type::Q6_K, true, 14336, 4096}}) {
    const int64_t K = sh.K, N = sh.N;
    std::mt19937 rng(3);
    const size_t wb = quant::row_bytes(sh.type, K) * N;
    std::vector<uint8_t> host(wb);
    for (auto& b : host) b = uint8_t(rng() & 0x3f);  // scales and codes small: no infinities in half
    std::vector<cuda::DeviceBuffer> w;
    for (int i = 0; i < 4; ++i) {
      w.emplace_back(wb);
      CUDA_CHECK(cudaMemcpy(w.back().get(), host.data(), wb, cudaMemcpyHostToDevice));
      if (sh.regrouped) cuda::launch_q6_kx8_regroup(w.back().get(), K, N, s);
    }
    std::vector<float> x(size_t(K * t_max));
    for (auto& v : x) v = float(rng() % 2001) / 1000.0f - 1.0f;
    cuda::DeviceBuffer dx(x.size() * 4), dy(size_t(N * t_max) * 4), counters(cuda::kBatchMmCounterBytes);
    CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
    CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
    for (const int64_t T : lengths) {
      const size_t sb = std::max(cuda::gemm_full_scratch(K, N, T), cuda::prompt_wgmma_scratch(K, N, T));
      cuda::DeviceBuffer scratch(sb);
      auto params = [&](int i) {
        cuda::BatchMmParams p{w[i % 4].get(), sh.type, dx.as<float>(), nullptr, dy.as<float>(), K, N, T,
                              scratch.get(), sb};
        p.regrouped = sh.regrouped;
        p.tile_counters = counters.as<uint32_t>();
        return p;
      };
      const double wg = gpu_test::median_launch_us(s, [&](int i) { cuda::launch_prompt_wgmma(params(i), s); });
      const double cb = gpu_test::median_launch_us(s, [&](int i) {
        cuda::GemmParams g{w[i % 4].get(), sh.type, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, scratch.get(),
                           sb};
        g.regrouped = sh.regrouped;
        cuda::launch_gemm(g, ctx.blas(), s);
      });
      auto col = [&](double us) {
        char b[32];
        std::snprintf(b, sizeof b, "%.0f (%.0f)", us, 2.0 * double(K) * double(N) * double(T) / (us * 1e6));
        return std::string(b);
      };
      std::printf("%-14s %5lld %18s %18s\n", sh.name, (long long)T, col(wg).c_str(), col(cb).c_str());
      std::fflush(stdout);  // each row kept should a later launch hang
    }
  }
}
