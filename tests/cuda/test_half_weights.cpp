// Half-precision weight copies for prompts (cuda/half_weights.h): which weights the plan takes (host only), and on a
// GPU that a product through a copy gives the dequantizing GEMM's bits when the scratch holds the whole matrix, as
// the executor's scratch does for every matrix up to 256 MiB (work_buffers.h).
#include <algorithm>
#include <numeric>

#include "cuda/context.h"
#include "cuda/half_weights.h"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/work_buffers.h"
#include "gpu_test.h"
#include "product_graph.h"
#include "graph/plan.h"

namespace {

using graph::WeightRole;
using quant::Type;
using namespace gpu_test;

cuda::WeightDesc desc(WeightRole role, Type type, int64_t K, int64_t N, uint64_t offset, int64_t n_expert = 1) {
  return {role, 0, type, K, N, offset, n_expert};
}

TEST(HalfWeightsPlan, TakesTheLayersDenseMatricesInOrderWithinTheBudget) {
  const int64_t K = 256;
  const std::vector<cuda::WeightDesc> w = {
      desc(WeightRole::TokenEmbedding, Type::Q4_K, K, 1000, 0),   // get_rows reads it
      desc(WeightRole::AttnNorm, Type::F32, K, 1, 1),             // a vector
      desc(WeightRole::AttnQ, Type::Q4_K, K, 256, 2),             // 128 KiB
      desc(WeightRole::AttnK, Type::F16, K, 64, 3),               // already the GEMM's operand
      desc(WeightRole::AttnV, Type::Q6_K, K, 64, 4),              // 32 KiB
      desc(WeightRole::AttnOutput, Type::Q8_0, K, 256, 5),        // 128 KiB
      desc(WeightRole::FfnRouter, Type::F32, K, 8, 6),            // float32 columns
      desc(WeightRole::FfnGateExps, Type::Q4_K, K, 8 * 64, 7, 8), // the experts' own tiles
      desc(WeightRole::FfnGateUp, Type::Q4_K, K, 1024, 8),        // 512 KiB
      desc(WeightRole::FfnDown, Type::F32, 512, 256, 9),          // 256 KiB: F32 is dequantized too
      desc(WeightRole::Output, Type::Q6_K, K, 1000, 10),          // one row at a time but for all-logits runs
      desc(WeightRole::FfnUp, Type::Q8_K, K, 64, 11),             // no device dequantizer
  };
  const auto all = cuda::plan_half_weights(w, UINT64_MAX);
  EXPECT_EQ(all.chosen, (std::vector<size_t>{2, 4, 5, 8, 9}));
  EXPECT_EQ(all.candidates, 5u);
  EXPECT_EQ(all.bytes, uint64_t(256 + 64 + 256 + 1024) * K * 2 + 256 * 512 * 2);
  EXPECT_EQ(all.candidate_bytes, all.bytes);

  // 300 KiB: q, v and o (128 + 32 + 128 KiB) fit; gate|up (512) and down (256) would pass the budget.
  const auto some = cuda::plan_half_weights(w, 300 << 10);
  EXPECT_EQ(some.chosen, (std::vector<size_t>{2, 4, 5}));
  EXPECT_EQ(some.bytes, uint64_t(256 + 64 + 256) * K * 2);
  EXPECT_EQ(some.candidates, 5u);
  EXPECT_EQ(some.candidate_bytes, all.bytes);
  const auto skip = cuda::plan_half_weights(w, 100 << 10);  // q does not fit, a later smaller v still does
  EXPECT_EQ(skip.chosen, (std::vector<size_t>{4}));
  EXPECT_TRUE(cuda::plan_half_weights(w, 0).chosen.empty());

  // Copies start on 256-byte boundaries, as cuBLASLt's algorithms assume.
  EXPECT_EQ(cuda::half_copy_bytes(desc(WeightRole::AttnQ, Type::F32, 3, 5, 0)), 256u);
}

// The GEMM scratch: a quantized matrix's product on cuBLAS converts the whole matrix there (up to 256 MiB); an F16
// matrix's product only x (cuBLAS reads W as it is). (The prompt kernels' routes: test_product_route.cpp.)
TEST(HalfWeightsPlan, ScratchHoldsOnlyXWhereWIsHalf) {
  const int64_t K = 512, N = 1024, T = 100;
  const graph::Graph q = one_product(Type::Q4_0, K, N, T), h = one_product(Type::F16, K, N, T);
  const cuda::ExecutorOptions opt;
  EXPECT_EQ(cuda::work_buffers(q, graph::plan(q), 132, opt).gemm_scratch, cuda::gemm_full_scratch(K, N, T));
  EXPECT_EQ(cuda::work_buffers(h, graph::plan(h), 132, opt).gemm_scratch, cuda::gemm_x_scratch(K, T));
  EXPECT_EQ(cuda::gemm_x_scratch(K, T), size_t(K * T * 2));
}

// Two small products of one x and shape (Executor::pair_gemm_siblings, ExecutorOptions::gemm_pairs): the scratch
// holds both matrices whole, so the pair is one batched call; one product alone, or pairs off, keeps one matrix.
TEST(HalfWeightsPlan, ScratchHoldsBothMatricesOfAPair) {
  const int64_t K = 512, N = 1024, T = 100;
  const graph::Graph pair = one_product(Type::Q4_K, K, N, T, WeightRole::AttnK, 1);
  cuda::ExecutorOptions opt;
  ASSERT_TRUE(opt.gemm_pairs);
  EXPECT_EQ(cuda::work_buffers(pair, graph::plan(pair), 132, opt).gemm_scratch, cuda::gemm_pair_scratch(K, N, T));
  const graph::Graph one = one_product(Type::Q4_K, K, N, T, WeightRole::AttnK);
  EXPECT_EQ(cuda::work_buffers(one, graph::plan(one), 132, opt).gemm_scratch, cuda::gemm_full_scratch(K, N, T));
  opt.gemm_pairs = false;
  EXPECT_EQ(cuda::work_buffers(pair, graph::plan(pair), 132, opt).gemm_scratch, cuda::gemm_full_scratch(K, N, T));
}

// One matrix of each kind the copies come from, in the layout the upload leaves it in.
struct CopyCase {
  Type type;
  int64_t K, N;
  bool regroup;  // Q6_K into Q6_Kx8, as regroup_weights does before the copies are made
};

TEST(HalfWeights, ProductOnTheCopyIsTheDequantizingProduct) {
  REQUIRE_GPU();
  cuda::Context ctx;
  std::mt19937 rng(2026);
  const CopyCase cases[] = {{Type::Q4_K, 512, 300, false}, {Type::Q6_K, 2048, 72, true}, {Type::Q8_0, 96, 33, false},
                            {Type::Q4_0, 256, 129, false}, {Type::F32, 100, 17, false}, {Type::BF16, 64, 8, false}};
  // Two matrices in one arena, so the second copy starts past the first's.
  std::vector<std::vector<uint8_t>> mats;
  std::vector<cuda::WeightDesc> descs;
  uint64_t arena_bytes = 0;
  for (const CopyCase& c : cases) {
    mats.push_back(random_weights(rng, c.type, c.K, c.N));
    descs.push_back(desc(WeightRole::FfnDown, c.type, c.K, c.N, arena_bytes));
    arena_bytes += (mats.back().size() + 255) & ~size_t(255);
  }
  cuda::DeviceBuffer arena(arena_bytes);
  std::unordered_set<uint64_t> regrouped;
  for (size_t i = 0; i < std::size(cases); ++i) {
    CUDA_CHECK(cudaMemcpy(arena.as<uint8_t>() + descs[i].arena_offset, mats[i].data(), mats[i].size(),
                          cudaMemcpyHostToDevice));
    if (cases[i].regroup) {
      cuda::launch_q6_kx8_regroup(arena.as<uint8_t>() + descs[i].arena_offset, cases[i].K, cases[i].N, nullptr);
      regrouped.insert(descs[i].arena_offset);
    }
  }
  const cuda::HalfWeightsPlan plan = cuda::plan_half_weights(descs, UINT64_MAX);
  ASSERT_EQ(plan.chosen.size(), std::size(cases));
  const cuda::HalfWeights copies(arena.as<uint8_t>(), descs, plan, regrouped, ctx.compute());
  EXPECT_EQ(copies.count(), std::size(cases));
  EXPECT_EQ(copies.bytes(), plan.bytes);
  EXPECT_EQ(copies.find(arena_bytes), nullptr);  // no tensor there
  {  // a product whose matrix has a copy needs scratch for x alone, as an F16 matrix's does
    const graph::Graph g = one_product(cases[0].type, cases[0].K, cases[0].N, 100);
    cuda::ExecutorOptions with_copies;
    with_copies.half_weights = &copies;
    EXPECT_EQ(cuda::work_buffers(g, graph::plan(g), 132, with_copies).gemm_scratch,
              cuda::gemm_x_scratch(cases[0].K, 100));
  }
  for (size_t i = 0; i < std::size(cases); ++i) {
    const CopyCase& c = cases[i];
    const std::string what = std::string(quant::type_name(c.type)) + (c.regroup ? " regrouped" : "");
    const uint16_t* copy = copies.find(descs[i].arena_offset);
    ASSERT_NE(copy, nullptr) << what;
    const void* w = arena.as<uint8_t>() + descs[i].arena_offset;
    for (const int64_t T : {65, 200}) {
      const auto x = random_floats(rng, size_t(c.K * T));
      const auto bias = random_floats(rng, size_t(c.N));
      auto dx = upload(x), db = upload(bias);
      const size_t sb = cuda::gemm_full_scratch(c.K, c.N, T);
      cuda::DeviceBuffer scratch(sb);
      auto y_quant = poisoned_f32(size_t(c.N * T)), y_copy = poisoned_f32(size_t(c.N * T));
      cuda::GemmParams p{w, c.type, dx.as<float>(), db.as<float>(), y_quant.as<float>(), c.K, c.N, T,
                         scratch.get(), sb};
      p.regrouped = c.regroup;
      cuda::launch_gemm(p, ctx.blas(), ctx.compute());
      p.w = copy, p.type = Type::F16, p.regrouped = false, p.y = y_copy.as<float>();
      cuda::launch_gemm(p, ctx.blas(), ctx.compute());
      ctx.synchronize();
      EXPECT_EQ(download<float>(y_copy, size_t(c.N * T)), download<float>(y_quant, size_t(c.N * T)))
          << what << " T=" << T;
    }
  }
}

}  // namespace
