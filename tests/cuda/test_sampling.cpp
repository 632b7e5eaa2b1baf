// The GPU sampler must pick exactly the token runtime::Sampler picks for the same logits, history, seed and step.
#include "cuda/kernels/sampling.cuh"
#include "gpu_test.h"
#include "runtime/device_sampling.h"
#include "runtime/sampler.h"

namespace {

using namespace gpu_test;

TEST(Sampling, PhiloxMatchesCpu) {
  for (uint64_t seed : {0ull, 1ull, 0xdeadbeefcafef00dull})
    for (uint64_t step : {0ull, 1ull, 77ull, 1ull << 40}) EXPECT_EQ(cuda::philox_uniform_host(seed, step), runtime::sampler_uniform(seed, step));
}

TEST(Sampling, SameTokenAsCpuSampler) {
  REQUIRE_GPU();
  std::mt19937 rng(21);
  std::vector<runtime::SamplerParams> configs;
  runtime::SamplerParams d;  // defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05
  configs.push_back(d);
  runtime::SamplerParams greedy = d;
  greedy.temp = 0;
  configs.push_back(greedy);
  runtime::SamplerParams nucleus = d;
  nucleus.top_k = 0, nucleus.top_p = 0.9f, nucleus.min_p = 0, nucleus.temp = 1.3f;
  configs.push_back(nucleus);
  runtime::SamplerParams pen = d;
  pen.repeat_penalty = 1.3f, pen.presence_penalty = 0.4f, pen.frequency_penalty = 0.2f, pen.repeat_last_n = 16;
  configs.push_back(pen);
  runtime::SamplerParams pen_all = pen;
  pen_all.repeat_last_n = -1, pen_all.top_k = 5, pen_all.min_p = 0.2f, pen_all.top_p = 1.0f;
  configs.push_back(pen_all);
  runtime::SamplerParams greedy_pen = pen;
  greedy_pen.temp = 0;
  configs.push_back(greedy_pen);
  runtime::SamplerParams plain = d;
  plain.top_k = 0, plain.top_p = 1.0f, plain.min_p = 0, plain.temp = 0.7f;
  configs.push_back(plain);

  for (int64_t V : {1, 17, 1000, 32000})
    for (bool ties : {false, true}) {
      cuda::DeviceBuffer scratch(cuda::sampling_scratch_bytes(V));
      cuda::DeviceBuffer state(sizeof(cuda::SamplingState)), token(4);
      for (size_t ci = 0; ci < configs.size(); ++ci) {
        auto cfg = configs[ci];
        cfg.seed = rng();
        runtime::Sampler cpu(cfg);
        for (uint64_t step = 0; step < 12; ++step) {
          // Logits on a coarse grid when `ties`, so equal values (and their id order) matter.
          auto logits = random_floats(rng, V, -8, 8);
          if (ties)
            for (auto& l : logits) l = std::round(l * 2) / 2;
          std::vector<int32_t> hist(rng() % 40);
          for (auto& h : hist) h = int32_t(rng() % (V + 3)) - 1;  // a few ids out of range: ignored
          const int32_t want = cpu.sample(logits, hist, step);

          auto dl = upload(logits), dh = upload(hist);
          cuda::SamplingState st;
          st.n_history = int32_t(hist.size()), st.step = step;
          CUDA_CHECK(cudaMemcpy(state.get(), &st, sizeof st, cudaMemcpyHostToDevice));
          cuda::SampleParams p;
          p.cfg = runtime::to_device_config(cfg), p.logits = dl.as<float>(), p.V = V, p.history = dh.as<int32_t>();
          p.state = state.as<cuda::SamplingState>(), p.out_token = token.as<int32_t>();
          p.scratch = scratch.get(), p.scratch_bytes = scratch.bytes();
          cuda::launch_sample(p, nullptr);
          const int32_t got = download<int32_t>(token, 1)[0];
          ASSERT_EQ(got, want) << "V=" << V << " config " << ci << " step " << step << (ties ? " ties" : "");
        }
      }
    }
}

}  // namespace
