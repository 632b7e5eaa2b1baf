// Kernel lab timings of the chosen experts' products (run only with LLM_CUDA_BENCH=1): the decode matvec over k
// experts (bandwidth over the bytes of the chosen experts) and the expert-grouped prefill tiles (TFLOP/s over the
// products of the chosen experts), at Qwen3-30B-A3B's and gpt-oss-20b's expert shapes. Several copies of the expert
// tensor and several id sets rotate so that L2 does not hold what a launch reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/kernels/matvec_id.cuh"
#include "cuda/kernels/moe_gemm.cuh"
#include "lab_timing.h"

namespace {

struct Shape {
  const char* name;
  quant::Type type;
  int64_t K, N, n_expert, k;
};

TEST(KernelLab, Moe) {
  REQUIRE_LAB_TIMINGS();
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  std::printf("device: %s\n", ctx.name().c_str());
  std::printf("| shape | type | T | us | GB/s of chosen experts | TFLOP/s |\n|---|---|---:|---:|---:|---:|\n");
  const Shape shapes[] = {
      {"qwen3-30b-a3b ffn_up_exps", quant::Type::Q4_K, 2048, 768, 128, 8},
      {"qwen3-30b-a3b ffn_down_exps", quant::Type::Q6_K, 768, 2048, 128, 8},
      {"qwen3-30b-a3b ffn_up_exps", quant::Type::Q8_0, 2048, 768, 128, 8},
      {"gpt-oss-20b ffn_up_exps", quant::Type::MXFP4, 2880, 2880, 32, 4},
  };
  std::mt19937 rng(7);
  for (const Shape& sh : shapes) {
    const size_t rb = quant::row_bytes(sh.type, sh.K);
    const size_t tensor = rb * size_t(sh.N * sh.n_expert);
    const int copies = int(std::max<size_t>(2, (size_t(200) << 20) / tensor + 1));
    cuda::DeviceBuffer w(tensor * copies);
    CUDA_CHECK(cudaMemset(w.get(), 0, w.bytes()));  // zero blocks: finite values, the same bytes read
    for (const int64_t T : {int64_t(1), int64_t(512)}) {
      constexpr int kIdSets = 16;
      std::vector<int32_t> ids(size_t(kIdSets * sh.k * T));
      std::vector<int32_t> perm(size_t(sh.n_expert));
      for (size_t r = 0; r < ids.size(); r += size_t(sh.k)) {
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        std::copy(perm.begin(), perm.begin() + sh.k, ids.begin() + r);
      }
      cuda::DeviceBuffer dids(ids.size() * 4), x(size_t(sh.K * T) * 4), y(size_t(sh.N * sh.k * T) * 4);
      CUDA_CHECK(cudaMemcpy(dids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
      CUDA_CHECK(cudaMemset(x.get(), 0, x.bytes()));
      const size_t scratch_bytes = cuda::moe_gemm_scratch_bytes(sh.n_expert, sh.k, T, sh.K, 1);
      cuda::DeviceBuffer scratch(scratch_bytes);
      cuda::MatvecIdParams p;
      p.type = sh.type, p.x = x.as<float>(), p.x_slots = 1, p.y = y.as<float>();
      p.K = sh.K, p.N = sh.N, p.n_expert = sh.n_expert, p.k = sh.k, p.T = T;
      auto launch = [&](int i) {
        p.w = w.as<uint8_t>() + size_t(i % copies) * tensor;
        p.ids = dids.as<int32_t>() + size_t(i % kIdSets) * size_t(sh.k * T);
        if (T <= 4) cuda::launch_matvec_id(p, s);
        else cuda::launch_moe_gemm(p, scratch.get(), scratch_bytes, s);
      };
      const double ms = gpu_test::median_launch_us(s, launch) * 1e-3;
      // Bytes: the distinct experts the batch chose (all of them, nearly, at T = 512), read once each.
      std::vector<char> used(size_t(sh.n_expert), 0);
      for (int64_t u = 0; u < sh.k * T; ++u) used[size_t(ids[size_t(u)])] = 1;
      const double n_used = double(std::count(used.begin(), used.end(), 1));
      const double gbs = n_used * double(rb) * double(sh.N) / (ms * 1e-3) / 1e9;
      const double tflops = 2.0 * double(sh.K) * double(sh.N) * double(sh.k * T) / (ms * 1e-3) / 1e12;
      std::printf("| %s | %s | %lld | %.1f | %.0f | %.2f |\n", sh.name, quant::type_name(sh.type), (long long)T,
                  ms * 1e3, gbs, tflops);
    }
  }
}

}  // namespace
