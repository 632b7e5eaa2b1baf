// Kernel lab timings of a mixture's decode products (run only with LLM_CUDA_BENCH=1): gate/up with the activation
// and down with the weighted sum, as the fused launches (expert_matvec.cuh, h handed over as int16 runs, as the
// executor runs them) and as the unfused ops they replace
// (matvec_id.cuh twice plus the activation; matvec_id plus the weighted sum), at Qwen3-30B-A3B's and gpt-oss-20b's
// expert shapes, one token. Bandwidth over the chosen experts' bytes. Several copies of the expert tensors and
// several id sets rotate so that L2 does not hold what a launch reads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/kernels/expert_matvec.cuh"
#include "cuda/kernels/matvec_id.cuh"
#include "cuda/kernels/moe.cuh"
#include "lab_timing.h"

namespace {

struct Shape {
  const char* name;
  quant::Type gate_type, down_type;
  int64_t n_embd, n_ff, n_expert, k;
};

TEST(KernelLab, ExpertMatvec) {
  REQUIRE_LAB_TIMINGS();
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  std::printf("device: %s\n", ctx.name().c_str());
  std::printf("| shape | products | fused us | GB/s | back to back us | GB/s | unfused us | GB/s |\n"
              "|---|---|---:|---:|---:|---:|---:|---:|\n");
  const Shape shapes[] = {
      {"qwen3-30b-a3b Q4_K_M", quant::Type::Q4_K, quant::Type::Q6_K, 2048, 768, 128, 8},
      {"qwen3-30b-a3b Q8_0", quant::Type::Q8_0, quant::Type::Q8_0, 2048, 768, 128, 8},
      {"gpt-oss-20b MXFP4", quant::Type::MXFP4, quant::Type::MXFP4, 2880, 2880, 32, 4},
  };
  std::mt19937 rng(9);
  constexpr int kIdSets = 16;
  const char* only = std::getenv("LLM_LAB_EXPERT_SHAPE");  // a substring of the shapes' names to run alone (ncu)
  for (const Shape& sh : shapes) {
    if (only && !std::strstr(sh.name, only)) continue;
    const size_t grb = quant::row_bytes(sh.gate_type, sh.n_embd), drb = quant::row_bytes(sh.down_type, sh.n_ff);
    const size_t gt = grb * size_t(sh.n_ff * sh.n_expert), dt = drb * size_t(sh.n_embd * sh.n_expert);
    const int copies = int(std::max<size_t>(2, (size_t(300) << 20) / (2 * gt + dt) + 1));
    cuda::DeviceBuffer gate(gt * copies), up(gt * copies), down(dt * copies);
    CUDA_CHECK(cudaMemset(gate.get(), 0, gate.bytes()));  // zero blocks: finite values, the same bytes read
    CUDA_CHECK(cudaMemset(up.get(), 0, up.bytes()));
    CUDA_CHECK(cudaMemset(down.get(), 0, down.bytes()));
    std::vector<int32_t> ids(size_t(kIdSets * sh.k)), perm(static_cast<size_t>(sh.n_expert));
    for (size_t r = 0; r < ids.size(); r += size_t(sh.k)) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::copy(perm.begin(), perm.begin() + sh.k, ids.begin() + r);
    }
    cuda::DeviceBuffer dids(ids.size() * 4), x(size_t(sh.n_embd) * 4), h(size_t(sh.n_ff * sh.k) * 4),
        g(size_t(sh.n_ff * sh.k) * 4), u(size_t(sh.n_ff * sh.k) * 4), d(size_t(sh.n_embd * sh.k) * 4),
        rw(size_t(sh.k) * 4), y(size_t(sh.n_embd) * 4);
    CUDA_CHECK(cudaMemcpy(dids.get(), ids.data(), ids.size() * 4, cudaMemcpyHostToDevice));
    for (auto* b : {&x, &h, &rw}) CUDA_CHECK(cudaMemset(b->get(), 0, b->bytes()));
    const auto id_set = [&](int i) { return dids.as<int32_t>() + size_t(i % kIdSets) * size_t(sh.k); };
    const bool oai = sh.gate_type == quant::Type::MXFP4;

    // The fused pair as the executor runs it: h handed over as int16 runs.
    cuda::DeviceBuffer runs(size_t(sh.n_ff * sh.k / 16) * cuda::kExpertRunBytes);
    cuda::ExpertGluParams gp;
    gp.type = sh.gate_type, gp.x = x.as<float>(), gp.runs_out = runs.get();
    gp.act = oai ? cuda::ExpertAct::SwiGluOai : cuda::ExpertAct::SwiGlu;
    gp.K = sh.n_embd, gp.N = sh.n_ff, gp.n_expert = sh.n_expert, gp.k = sh.k, gp.T = 1;
    const auto glu_launch = [&](int i) {
      gp.gate = gate.as<uint8_t>() + size_t(i % copies) * gt, gp.up = up.as<uint8_t>() + size_t(i % copies) * gt;
      gp.ids = id_set(i);
      cuda::launch_expert_glu(gp, s);
    };
    const double glu = gpu_test::median_launch_us(s, glu_launch);
    const double glu_b2b = gpu_test::median_batch_us(s, 2 * copies, glu_launch);
    cuda::MatvecIdParams mp;
    mp.type = sh.gate_type, mp.x = x.as<float>(), mp.x_slots = 1;
    mp.K = sh.n_embd, mp.N = sh.n_ff, mp.n_expert = sh.n_expert, mp.k = sh.k, mp.T = 1;
    const double glu_before = gpu_test::median_launch_us(s, [&](int i) {
      mp.ids = id_set(i);
      mp.w = gate.as<uint8_t>() + size_t(i % copies) * gt, mp.y = g.as<float>();
      cuda::launch_matvec_id(mp, s);
      mp.w = up.as<uint8_t>() + size_t(i % copies) * gt, mp.y = u.as<float>();
      cuda::launch_matvec_id(mp, s);
      cuda::launch_swiglu_oai({g.as<float>(), u.as<float>(), h.as<float>(), sh.n_ff * sh.k}, s);
    });
    const double gbytes = 2.0 * double(sh.k) * double(sh.n_ff) * double(grb);
    std::printf("| %s | gate+up | %.1f | %.0f | %.1f | %.0f | %.1f | %.0f |\n", sh.name, glu, gbytes / glu / 1e3,
                glu_b2b, gbytes / glu_b2b / 1e3, glu_before, gbytes / glu_before / 1e3);
    for (const int gpb : {8, 16, 32}) {  // the launcher's choice against fixed row groups per block
      gp.groups_per_block = gpb;
      const double us = gpu_test::median_launch_us(s, glu_launch), b2b = gpu_test::median_batch_us(s, 2 * copies, glu_launch);
      std::printf("| %s | gate+up, %d groups a block | %.1f | %.0f | %.1f | %.0f | | |\n", sh.name, gpb, us,
                  gbytes / us / 1e3, b2b, gbytes / b2b / 1e3);
    }

    cuda::ExpertDownParams dp;
    dp.type = sh.down_type, dp.x_runs = runs.get(), dp.weights = rw.as<float>(), dp.residual = x.as<float>();
    dp.out = y.as<float>(), dp.K = sh.n_ff, dp.N = sh.n_embd, dp.n_expert = sh.n_expert, dp.k = sh.k, dp.T = 1;
    dp.ids_before_wait = true;  // as the executor launches it after gate/up (only down launches queue back to back
                                // here, so the wait is for the previous down)
    const auto down_launch = [&](int i) {
      dp.w = down.as<uint8_t>() + size_t(i % copies) * dt, dp.ids = id_set(i);
      cuda::launch_expert_down(dp, s);
    };
    const double dn = gpu_test::median_launch_us(s, down_launch);
    const double dn_b2b = gpu_test::median_batch_us(s, 2 * copies, down_launch);
    cuda::MatvecIdParams md;
    md.type = sh.down_type, md.x = h.as<float>(), md.x_slots = sh.k, md.y = d.as<float>();
    md.K = sh.n_ff, md.N = sh.n_embd, md.n_expert = sh.n_expert, md.k = sh.k, md.T = 1;
    const double dn_before = gpu_test::median_launch_us(s, [&](int i) {
      md.w = down.as<uint8_t>() + size_t(i % copies) * dt, md.ids = id_set(i);
      cuda::launch_matvec_id(md, s);
      cuda::launch_weighted_sum({d.as<float>(), rw.as<float>(), y.as<float>(), sh.n_embd, sh.k, 1}, s);
    });
    const double dbytes = double(sh.k) * double(sh.n_embd) * double(drb);
    std::printf("| %s | down+sum | %.1f | %.0f | %.1f | %.0f | %.1f | %.0f |\n", sh.name, dn, dbytes / dn / 1e3,
                dn_b2b, dbytes / dn_b2b / 1e3, dn_before, dbytes / dn_before / 1e3);
    for (const int gpb : {1, 2, 4, 8, 16}) {
      dp.groups_per_block = gpb;
      const double us = gpu_test::median_launch_us(s, down_launch), b2b = gpu_test::median_batch_us(s, 2 * copies, down_launch);
      std::printf("| %s | down+sum, %d groups a block | %.1f | %.0f | %.1f | %.0f | | |\n", sh.name, gpb, us,
                  dbytes / us / 1e3, b2b, dbytes / b2b / 1e3);
    }
  }
}

}  // namespace
