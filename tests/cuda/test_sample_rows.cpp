// Many rows drawn at once (sample_rows.cuh), each with its own parameters, seed, step and penalty window: every
// drawn row must be exactly the token runtime::Sampler picks for that row; rows outside the kernel's limits, rows
// not asked for and rows with a NaN or +inf logit come back kRowNotDrawn.
#include <cmath>
#include <limits>

#include "cuda/kernels/sample_rows.cuh"
#include "gpu_test.h"
#include "runtime/device_sampling.h"
#include "runtime/sampler.h"

namespace {

using namespace gpu_test;

std::vector<runtime::SamplerParams> configs() {
  std::vector<runtime::SamplerParams> v;
  runtime::SamplerParams d;  // the defaults: temp 0.8, top-k 40, top-p 0.95, min-p 0.05
  v.push_back(d);
  runtime::SamplerParams greedy = d;
  greedy.temp = 0;
  v.push_back(greedy);
  runtime::SamplerParams wide = d;  // the largest top-k the kernel takes, top-p deciding
  wide.top_k = cuda::kSampleRowsMaxTopK, wide.top_p = 0.9f, wide.min_p = 0, wide.temp = 1.3f;
  v.push_back(wide);
  runtime::SamplerParams pen = d;
  pen.repeat_penalty = 1.3f, pen.presence_penalty = 0.4f, pen.frequency_penalty = 0.2f, pen.repeat_last_n = 16;
  v.push_back(pen);
  runtime::SamplerParams pen_all = pen;  // the whole history as the window
  pen_all.repeat_last_n = -1, pen_all.top_k = 5, pen_all.min_p = 0.2f, pen_all.top_p = 1.0f;
  v.push_back(pen_all);
  runtime::SamplerParams greedy_pen = pen;
  greedy_pen.temp = 0;
  v.push_back(greedy_pen);
  runtime::SamplerParams one = d;
  one.top_k = 1;
  v.push_back(one);
  runtime::SamplerParams hot = d;
  hot.temp = 5.0f, hot.top_k = 200, hot.top_p = 1.0f, hot.min_p = 0;
  v.push_back(hot);
  return v;
}

struct Rows {
  std::vector<float> logits;
  std::vector<cuda::RowSampling> rows;
  std::vector<int32_t> windows;
  std::vector<std::vector<int32_t>> history;  // each row's history, as the CPU sampler takes it
  std::vector<runtime::SamplerParams> params;
};

// Draws every row on the device; returns the tokens.
std::vector<int32_t> draw(const Rows& r, int64_t V) {
  auto dl = upload(r.logits);
  auto dr = cuda::DeviceBuffer(r.rows.size() * sizeof(cuda::RowSampling));
  CUDA_CHECK(cudaMemcpy(dr.get(), r.rows.data(), r.rows.size() * sizeof(cuda::RowSampling), cudaMemcpyHostToDevice));
  auto windows = r.windows;
  windows.push_back(0);  // never empty
  auto dw = upload(windows);
  cuda::DeviceBuffer out(r.rows.size() * 4);
  cuda::SampleRowsParams p;
  p.logits = dl.as<float>(), p.V = V, p.row_stride = V, p.n_rows = int32_t(r.rows.size());
  p.rows = dr.as<cuda::RowSampling>(), p.windows = dw.as<int32_t>(), p.out = out.as<int32_t>();
  cuda::launch_sample_rows(p, nullptr);
  CUDA_CHECK(cudaDeviceSynchronize());
  return download<int32_t>(out, r.rows.size());
}

void add_row(Rows& r, const runtime::SamplerParams& params, std::vector<float> logits, std::vector<int32_t> history,
             uint64_t step, bool drawn = true) {
  cuda::RowSampling rs;
  rs.cfg = runtime::to_device_config(params), rs.step = step, rs.draw = drawn ? 1 : 0;
  std::span<const int32_t> w(history);
  if (params.repeat_last_n == 0 || !rs.cfg.penalties()) w = {};
  if (params.repeat_last_n > 0 && w.size() > size_t(params.repeat_last_n)) w = w.last(size_t(params.repeat_last_n));
  rs.window_offset = int32_t(r.windows.size()), rs.window_len = int32_t(w.size());
  r.windows.insert(r.windows.end(), w.begin(), w.end());
  r.rows.push_back(rs);
  r.logits.insert(r.logits.end(), logits.begin(), logits.end());
  r.history.push_back(std::move(history));
  r.params.push_back(params);
}

TEST(SampleRows, EveryRowIsTheCpuSamplersToken) {
  REQUIRE_GPU();
  std::mt19937 rng(5);
  const auto cfgs = configs();
  int drawn = 0;
  for (int64_t V : {1, 17, 1000, 32000, 151936})
    for (int variant = 0; variant < 3; ++variant) {
      Rows r;
      for (size_t ci = 0; ci < cfgs.size(); ++ci)
        for (uint64_t step = 0; step < 3; ++step) {
          auto params = cfgs[ci];
          params.seed = rng();
          // variant 0: plain; 1: logits on a coarse grid (ties: the id decides); 2: a row of equal values with
          // -inf, +0 and -0 among them.
          auto logits = random_floats(rng, size_t(V), -8, 8);
          if (variant == 1)
            for (auto& l : logits) l = std::round(l * 2) / 2;
          if (variant == 2)
            for (size_t i = 0; i < logits.size(); ++i)
              logits[i] = i % 7 == 0 ? -std::numeric_limits<float>::infinity() : i % 3 == 0 ? -0.0f : i % 5 == 0 ? 0.0f : logits[i];
          std::vector<int32_t> hist(rng() % 40);
          for (auto& h : hist) h = int32_t(rng() % uint32_t(std::min<int64_t>(V, 50) + 3)) - 1;  // repeats, and ids out of range
          add_row(r, params, std::move(logits), std::move(hist), step);
        }
      const auto got = draw(r, V);
      for (size_t i = 0; i < r.rows.size(); ++i) {
        runtime::Sampler cpu(r.params[i]);
        const int32_t want =
            cpu.sample(std::span<const float>(r.logits).subspan(i * size_t(V), size_t(V)), r.history[i], r.rows[i].step);
        if (got[i] == cuda::kRowNotDrawn) continue;  // more than the candidate limit tied: the host's row
        ++drawn;
        ASSERT_EQ(got[i], want) << "V=" << V << " variant " << variant << " row " << i;
      }
    }
  // Only rows of tied logits beyond kSampleRowsMaxCandidates may be left out; nearly every row is drawn.
  std::printf("[ drawn    ] %d rows on the device\n", drawn);
  EXPECT_GE(drawn, 5 * 3 * 8 * 3 - 8 * 3 * 3);
}

TEST(SampleRows, RowsOutsideTheLimitsAreLeftToTheHost) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  const int64_t V = 32000;
  Rows r;
  runtime::SamplerParams d;
  add_row(r, d, random_floats(rng, size_t(V), -8, 8), {}, 0, /*drawn=*/false);  // not asked
  auto nan_row = random_floats(rng, size_t(V), -8, 8);
  nan_row[123] = std::numeric_limits<float>::quiet_NaN();
  add_row(r, d, nan_row, {}, 0);
  auto inf_row = random_floats(rng, size_t(V), -8, 8);
  inf_row[77] = std::numeric_limits<float>::infinity();
  add_row(r, d, inf_row, {}, 0);
  add_row(r, d, std::vector<float>(size_t(V), 1.5f), {}, 0);  // every logit tied with the 40th
  runtime::SamplerParams all = d;
  all.top_k = 0;  // the whole vocabulary as candidates: past kSampleRowsMaxTopK
  EXPECT_FALSE(cuda::sample_rows_draws(runtime::to_device_config(all), V, 0));
  EXPECT_TRUE(cuda::sample_rows_draws(runtime::to_device_config(all), cuda::kSampleRowsMaxTopK, 0));
  runtime::SamplerParams pen = d;
  pen.repeat_penalty = 1.1f, pen.repeat_last_n = -1;
  EXPECT_FALSE(cuda::sample_rows_draws(runtime::to_device_config(pen), V, cuda::kSampleRowsMaxWindow + 1));
  EXPECT_TRUE(cuda::sample_rows_draws(runtime::to_device_config(pen), V, cuda::kSampleRowsMaxWindow));
  add_row(r, all, random_floats(rng, size_t(V), -8, 8), {}, 0);  // the kernel checks too
  auto good = random_floats(rng, size_t(V), -8, 8);
  add_row(r, d, good, {}, 3);
  const auto got = draw(r, V);
  for (size_t i = 0; i + 1 < got.size(); ++i) EXPECT_EQ(got[i], cuda::kRowNotDrawn) << "row " << i;
  runtime::Sampler cpu(d);
  EXPECT_EQ(got.back(), cpu.sample(good, {}, 3));  // its neighbours do not disturb it
}

}  // namespace
