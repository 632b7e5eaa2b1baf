// The prompt kernel against the CPU reference: launch_prompt_wgmma (batch_mm_wgmma.cuh: Q4_K and Q6_Kx8, tiles of 128
// tokens) on these cases: one to eight token tiles with a partial last one, rows leaving a partial row tile, K of one
// and several super-blocks, a bias, the grids choose_blocks picks (whole tiles, equal splits, runs across tiles), the
// image of x reused by a sibling launch and formed from a SwiGLU's gate and up; and the launches it refuses.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/executor.h"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/elementwise.cuh"
#include "gpu_test.h"
#include "product_test_util.h"

namespace {

using quant::Type;
using namespace gpu_test;
using namespace product_test;

constexpr int64_t kTileTokens = 128;  // the kernel's token tile

// The formats it serves.
std::vector<Case> cases() { return {Case{Type::Q4_K, false}, Case{Type::Q6_K, true}}; }

}  // namespace

// Every size against the CPU reference (Q6_Kx8: K in runs of 2048), the counters left zero; then a sibling launch on
// the image the first left.
TEST(PromptProducts, MatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(781);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  struct Size {
    int64_t N, T;
  };
  for (const Case c : cases())
    for (int64_t K : c.regrouped ? std::vector<int64_t>{2048, 6144} : std::vector<int64_t>{256, 2304, 4096})
      for (const Size s :
           {Size{77, 65}, Size{333, 200}, Size{1000, 128}, Size{77, 300}, Size{260, 530}, Size{200, 1000}}) {
        const int64_t N = s.N, T = s.T;
        if (T > 512 && K > 2304) continue;  // the reference's time
        ASSERT_TRUE(cuda::prompt_wgmma_supports(c.type, c.regrouped, K, N, T));
        const bool with_bias = N != 333;
        WgmmaProduct m = wgmma_product(rng, c, K, N, T, with_bias);
        auto &dw = m.dw, &dx = m.dx, &db = m.db;
        const auto &ref = m.ref, &atol = m.atol;
        const size_t sb = cuda::prompt_wgmma_scratch(K, N, T);
        cuda::DeviceBuffer scratch(sb);
        auto dy = poisoned_f32(N * T);
        cuda::BatchMmParams p{dw.get(), c.type, dx.as<float>(), with_bias ? db.as<float>() : nullptr, dy.as<float>(),
                              K, N, T, scratch.get(), sb};
        p.regrouped = c.regrouped;
        p.tile_counters = counters.as<uint32_t>();
        cuda::launch_prompt_wgmma(p, nullptr, false);
        const std::string what = std::string("prompt wgmma ") + layout_name(c) + " K=" + std::to_string(K) +
                                 " N=" + std::to_string(N) + " T=" + std::to_string(T);
        const auto y = download<float>(dy, N * T);
        EXPECT_TRUE(close(what, y, ref, atol, 0.0));
        expect_counters_zero(counters);
        // A sibling of the same x with image_ready takes the image the launch left: x overwritten with NaN now,
        // the same bits.
        CUDA_CHECK(cudaMemset(dx.get(), 0xff, size_t(K * T) * 4));
        auto dy2 = poisoned_f32(N * T);
        p.y = dy2.as<float>();
        cuda::launch_prompt_wgmma(p, nullptr, true);
        const auto y2 = download<float>(dy2, N * T);
        EXPECT_EQ(0, std::memcmp(y.data(), y2.data(), y.size() * 4)) << what << ": the image not reused";
        expect_counters_zero(counters);
      }
}

// x formed from a SwiGLU's gate and up by the prompt kernel's image launch: the same bits as the element-wise
// SwiGLU launch followed by the product of its output.
TEST(PromptProducts, FormTheSwiGluOfTheirX) {
  REQUIRE_GPU();
  std::mt19937 rng(782);
  cuda::DeviceBuffer counters(cuda::kBatchMmCounterBytes);
  CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
  for (const Case c : cases()) {
    const int64_t K = 4096, N = 333, T = 150;
    auto w = random_weights(rng, c.type, K, N);
    auto gate = random_floats(rng, K * T), up = random_floats(rng, K * T);
    for (float& g : gate) g *= 4.0f;  // past silu's knee both ways
    if (c.regrouped) w = regrouped(w, K, N);
    auto dw = upload(w), dg = upload(gate), du = upload(up);
    cuda::DeviceBuffer dx(size_t(K * T) * 4);
    const size_t sb = cuda::prompt_wgmma_scratch(K, N, T);
    cuda::DeviceBuffer scratch(sb);
    cuda::launch_swiglu({dg.as<float>(), du.as<float>(), dx.as<float>(), K * T}, nullptr);
    auto two_launches = poisoned_f32(N * T), formed = poisoned_f32(N * T);
    cuda::BatchMmParams p{dw.get(), c.type, dx.as<float>(), nullptr, two_launches.as<float>(), K, N, T,
                          scratch.get(), sb};
    p.regrouped = c.regrouped;
    p.tile_counters = counters.as<uint32_t>();
    cuda::launch_prompt_wgmma(p, nullptr, false);
    p.x = du.as<float>(), p.x_gate = dg.as<float>(), p.y = formed.as<float>();
    cuda::launch_prompt_wgmma(p, nullptr, false);
    const auto a = download<float>(two_launches, N * T), b = download<float>(formed, N * T);
    EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4))
        << "wgmma " << layout_name(c) << ": not the two launches' bits";
    expect_counters_zero(counters);
  }
}

// Which products the prompt kernel serves (no device needed), and the launches it refuses before touching the device:
// too few tokens, other formats and layouts, K not in whole super-blocks (Q6_Kx8: runs of 2048), more tiles than the
// counters hold (a 128k vocabulary's output matrix from 32 token tiles on), a scratch below its size, weights not
// 16-byte aligned, x not 8-byte aligned, no counters.
TEST(PromptProducts, RangeAndRefusals) {
  for (const int64_t T : {int64_t(1), int64_t(8), cuda::kBatchMmMaxTokens})
    EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q4_K, false, 4096, 4096, T)) << T;
  for (const int64_t T : {cuda::kBatchMmMaxTokens + 1, int64_t(512), int64_t(8192)}) {
    EXPECT_TRUE(cuda::prompt_wgmma_supports(Type::Q4_K, false, 4096, 14336, T)) << T;
    EXPECT_TRUE(cuda::prompt_wgmma_supports(Type::Q6_K, true, 14336, 4096, T)) << T;
    EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q6_K, false, 4096, 4096, T)) << T;
    EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q4_K, true, 4096, 4096, T)) << T;
    EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q8_0, false, 4096, 4096, T)) << T;
    EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q4_K, false, 4096 + 32, 4096, T)) << T;
    EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q6_K, true, 4096 + 256, 4096, T)) << T;
  }
  EXPECT_TRUE(cuda::prompt_wgmma_supports(Type::Q6_K, true, 4096, 128256, 32 * kTileTokens));
  EXPECT_FALSE(cuda::prompt_wgmma_supports(Type::Q6_K, true, 4096, 128256, 64 * kTileTokens));
  const int64_t K = 4096, N = 256, T = 100;
  auto* const fake = reinterpret_cast<float*>(uintptr_t(1) << 20);  // never dereferenced: refused first
  const size_t sb = cuda::prompt_wgmma_scratch(K, N, T);
  auto params = [&] {
    cuda::BatchMmParams p{fake, Type::Q4_K, fake, nullptr, fake, K, N, T, fake, sb};
    p.tile_counters = reinterpret_cast<uint32_t*>(fake);
    return p;
  };
  auto p = params();
  p.T = cuda::kBatchMmMaxTokens;
  EXPECT_THROW(cuda::launch_prompt_wgmma(p, nullptr, false), cuda::InvalidArgument);
  p = params(), p.scratch_bytes = sb - 1;
  EXPECT_THROW(cuda::launch_prompt_wgmma(p, nullptr, false), cuda::InvalidArgument);
  p = params(), p.w = reinterpret_cast<const uint8_t*>(fake) + 8;
  EXPECT_THROW(cuda::launch_prompt_wgmma(p, nullptr, false), cuda::InvalidArgument);
  p = params(), p.x = fake + 1;
  EXPECT_THROW(cuda::launch_prompt_wgmma(p, nullptr, false), cuda::InvalidArgument);
  p = params(), p.tile_counters = nullptr;
  EXPECT_THROW(cuda::launch_prompt_wgmma(p, nullptr, false), cuda::InvalidArgument);
  p = params(), p.type = Type::Q8_0;
  EXPECT_THROW(cuda::launch_prompt_wgmma(p, nullptr, false), cuda::InvalidArgument);
}

// The executor's choice of prompt kernel from the environment (no device needed): the wgmma kernel to 512 tokens by
// default; LLM_CUDA_PROMPT_WGMMA / _MAX set it, and a count that is not one is refused.
TEST(PromptProducts, ChoicesFromEnvironment) {
  const char* names[] = {"LLM_CUDA_PROMPT_WGMMA", "LLM_CUDA_PROMPT_WGMMA_MAX"};
  for (const char* n : names) ::unsetenv(n);
  const cuda::ExecutorOptions d = cuda::ExecutorOptions::from_env();
  EXPECT_TRUE(d.prompt_wgmma);
  EXPECT_EQ(d.prompt_wgmma_max_tokens, 512);
  ::setenv("LLM_CUDA_PROMPT_WGMMA", "0", 1);
  ::setenv("LLM_CUDA_PROMPT_WGMMA_MAX", "640", 1);
  const cuda::ExecutorOptions o = cuda::ExecutorOptions::from_env();
  EXPECT_FALSE(o.prompt_wgmma);
  EXPECT_EQ(o.prompt_wgmma_max_tokens, 640);
  ::setenv("LLM_CUDA_PROMPT_WGMMA_MAX", "many", 1);
  EXPECT_THROW(cuda::ExecutorOptions::from_env(), cuda::InvalidArgument);
  for (const char* n : names) ::unsetenv(n);
}
