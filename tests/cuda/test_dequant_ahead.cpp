// Half copies made ahead on a side stream (cuda/dequant_ahead.h): which products take the ring and what
// work_buffers reserves for it (host only), and on a GPU that products reading copies made ahead, through the ring's
// reuse, run plainly and as a captured graph, keep the bits of the products that dequantize in their own step.
#include <cstring>

#include "cuda/context.h"
#include "cuda/dequant_ahead.h"
#include "cuda/work_buffers.h"
#include "gpu_test.h"
#include "graph/plan.h"
#include "product_graph.h"

namespace {

using graph::WeightRole;
using quant::Type;
using namespace gpu_test;

// The ring exists where a prompt's expert launches run, for the copies to go beside (DequantAhead::anchor): three
// slots of the largest copy a product on the dequantising route takes within the budget.
TEST(DequantAheadPlan, RingHoldsThreeOfTheLargestCopyBesideExperts) {
  const int64_t K = 512, N = 1024, T = 100;  // fewer weights than the wgmma kernel takes: the dequantising route
  const size_t half = cuda::gemm_half_bytes(K, N);
  cuda::ExecutorOptions opt;
  ASSERT_EQ(opt.dequant_ahead_bytes, size_t(256) << 20);
  const auto ring = [&](const graph::Graph& g) {
    return cuda::work_buffers(g, graph::plan(g), 132, opt).dequant_ring;
  };
  const graph::Graph q = one_product(Type::Q4_K, K, N, T, WeightRole::AttnQ, 0, true);
  EXPECT_EQ(ring(q), 3 * half);
  EXPECT_EQ(ring(one_product(Type::Q4_K, K, N, T, WeightRole::AttnQ)), 0u);  // a dense graph: nothing to run beside
  const graph::Graph pair = one_product(Type::Q4_K, K, N, T, WeightRole::AttnK, 1, true);  // k beside v
  EXPECT_EQ(ring(pair), 3 * 2 * half);
  EXPECT_EQ(ring(one_product(Type::F16, K, N, T, WeightRole::AttnQ, 0, true)), 0u);  // cuBLAS reads W as it is
  EXPECT_EQ(ring(one_product(Type::Q4_K, K, N, opt.matvec_max_tokens, WeightRole::AttnQ, 0, true)), 0u);  // decode
  opt.dequant_ahead_bytes = 3 * 2 * half - 1;  // a pair no longer fits a slot; one matrix does
  EXPECT_EQ(ring(pair), 3 * half);
  opt.dequant_ahead_bytes = 3 * half - 1;
  EXPECT_EQ(ring(q), 0u);
  opt.dequant_ahead_bytes = 0;
  EXPECT_EQ(ring(q), 0u);
  const cuda::DequantAhead off(opt, 0);
  EXPECT_EQ(off.bytes(), 0u);
}

// A product the ring feeds multiplies copies made ahead (GemmParams::w_half): its scratch holds x alone, where one
// the ring does not feed converts the whole of W there too (a pair: both matrices).
TEST(DequantAheadPlan, FedProductsReserveScratchForXAlone) {
  const int64_t K = 512, N = 1024, T = 100;
  const size_t x = cuda::gemm_x_scratch(K, T);
  cuda::ExecutorOptions opt;
  const auto scratch = [&](const graph::Graph& g) {
    return cuda::work_buffers(g, graph::plan(g), 132, opt).gemm_scratch;
  };
  const graph::Graph q = one_product(Type::Q4_K, K, N, T, WeightRole::AttnQ, 0, true);
  const graph::Graph pair = one_product(Type::Q4_K, K, N, T, WeightRole::AttnK, 1, true);
  EXPECT_EQ(scratch(q), x);
  EXPECT_EQ(scratch(pair), x);
  EXPECT_EQ(scratch(one_product(Type::Q4_K, K, N, T, WeightRole::AttnQ)), cuda::gemm_full_scratch(K, N, T));  // dense
  opt.dequant_ahead_bytes = 3 * cuda::gemm_half_bytes(K, N);  // one matrix fits a slot, a pair's two do not
  EXPECT_EQ(scratch(q), x);
  EXPECT_EQ(scratch(pair), cuda::gemm_pair_scratch(K, N, T));
  opt.dequant_ahead_bytes = 0;
  EXPECT_EQ(scratch(q), cuda::gemm_full_scratch(K, N, T));
}

// Five products through the ring's three slots (two of them pairs, one with its second output lower in memory), as
// steps on the compute stream: the copies for product j are made after product j - 3 was launched. Each output must
// be the bits of launch_gemm dequantizing into its scratch: the same half values reach the same cuBLAS call.
TEST(DequantAhead, ProductsOnCopiesMadeAheadKeepTheirBits) {
  REQUIRE_GPU();
  cuda::Context ctx;
  std::mt19937 rng(76);
  const int64_t K = 512, N = 96, T = 70;
  struct Product {
    Type t1, t2;  // t2 F32: one matrix
    bool second_lower;
  };
  const Product products[] = {{Type::Q4_K, Type::F32, false}, {Type::Q4_K, Type::Q6_K, true},
                              {Type::Q8_0, Type::F32, false}, {Type::Q6_K, Type::Q4_K, false},
                              {Type::Q4_0, Type::F32, false}};
  const size_t n = std::size(products), out = size_t(N * T);
  const auto x = random_floats(rng, K * T);
  auto dx = upload(x);
  std::vector<cuda::DeviceBuffer> w;
  std::vector<cuda::GemmParams> ps;
  const size_t sb = cuda::gemm_pair_scratch(K, N, T);
  cuda::DeviceBuffer scratch(sb), dy(2 * n * out * 4);
  float* y = dy.as<float>();
  for (size_t i = 0; i < n; ++i) {
    const Product& pr = products[i];
    w.push_back(upload(random_weights(rng, pr.t1, K, N)));
    cuda::GemmParams p{w.back().get(), pr.t1, dx.as<float>(), nullptr, y + 2 * i * out, K, N, T, scratch.get(), sb};
    if (pr.t2 != Type::F32) {
      w.push_back(upload(random_weights(rng, pr.t2, K, N)));
      p.w2 = w.back().get(), p.type2 = pr.t2, p.y2 = p.y + out;
      if (pr.second_lower) ::std::swap(p.y, p.y2);
    }
    ps.push_back(p);
  }
  const auto outputs = [&] {
    CUDA_CHECK(cudaDeviceSynchronize());
    return download<float>(dy, 2 * n * out);
  };
  const auto poison = [&] { CUDA_CHECK(cudaMemset(dy.get(), 0xff, dy.bytes())); };

  poison();
  for (const cuda::GemmParams& p : ps) cuda::launch_gemm(p, ctx.blas(), ctx.compute());
  const std::vector<float> want = outputs();

  // Each use forked after the slot's previous product, and with an anchor at step 3, where product 4 (its slot free
  // after product 1) has its copies queued before step 3's launch.
  for (const bool anchored : {false, true}) {
    SCOPED_TRACE(anchored ? "anchored" : "after the slot's previous product");
    cuda::ExecutorOptions opt;
    opt.dequant_ahead_bytes = 3 * 2 * cuda::gemm_half_bytes(K, N);
    cuda::DequantAhead ahead(opt, opt.dequant_ahead_bytes);
    std::vector<cuda::DequantAhead::Step> steps;
    for (const cuda::GemmParams& p : ps) {
      if (anchored && steps.size() == 3) ahead.anchor(steps.size());
      const int use = ahead.take(p, cuda::ProductRoute::GemmDequant, steps.size());
      ASSERT_GE(use, 0);
      steps.push_back([&ahead, &ctx, p, use](cudaStream_t s) {
        cuda::GemmParams q = p;
        q.w_half = ahead.ready(use, s);
        cuda::launch_gemm(q, ctx.blas(), s);
      });
    }
    EXPECT_EQ(ahead.uses(), n);
    EXPECT_EQ(ahead.take(ps[0], cuda::ProductRoute::PromptWgmma, steps.size()), -1);  // another route
    ahead.attach(steps);

    poison();
    for (const auto& step : steps) step(ctx.compute());
    const std::vector<float> plain = outputs();
    EXPECT_EQ(std::memcmp(plain.data(), want.data(), want.size() * 4), 0) << "plain launches";

    poison();
    const cudaStream_t s = ctx.compute();
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (const auto& step : steps) step(s);
    CUDA_CHECK(cudaStreamEndCapture(s, &g));
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    for (int replay = 0; replay < 2; ++replay) CUDA_CHECK(cudaGraphLaunch(exec, s));
    const std::vector<float> captured = outputs();
    EXPECT_EQ(std::memcmp(captured.data(), want.data(), want.size() * 4), 0) << "captured graph";
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(g));
  }
}

}  // namespace
