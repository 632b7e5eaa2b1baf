// The CPU sampler against its specification in app/sampler.h: Philox known answers, the uniform derivation, the
// filters' order and tie rules, and the sampled distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "runtime/sampler.h"

namespace {

TEST(Philox, Random123KnownAnswers) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(runtime::philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(runtime::philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(runtime::philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, UniformIsTheTop24BitsOfWordZero) {
  const uint64_t seed = 0x0123456789abcdefull;
  for (uint64_t step : {0ull, 1ull, 2ull, 0x100000000ull + 5}) {
    const auto x = runtime::philox4x32_10({uint32_t(step), uint32_t(step >> 32), 0, 0}, {0x89abcdefu, 0x01234567u});
    const float u = runtime::sampler_uniform(seed, step);
    EXPECT_EQ(u, float(x[0] >> 8) / 16777216.0f);
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
  }
  EXPECT_NE(runtime::sampler_uniform(1, 0), runtime::sampler_uniform(2, 0));
  EXPECT_NE(runtime::sampler_uniform(1, 0), runtime::sampler_uniform(1, 1));
}

TEST(Sampler, ArgmaxPrefersLowerIdOnTiesAndSkipsNaN) {
  const std::vector<float> l{1.0f, 3.0f, 2.0f, 3.0f};
  EXPECT_EQ(runtime::argmax(l), 1);
  const std::vector<float> n{NAN, -5.0f, NAN, -4.0f};
  EXPECT_EQ(runtime::argmax(n), 3);
  runtime::SamplerParams p;
  p.temp = 0.0f;
  runtime::Sampler s(p);
  EXPECT_EQ(s.sample(l, {}, 0), 1);
}

TEST(Sampler, PenaltiesFollowTheFormula) {
  runtime::SamplerParams p;
  p.repeat_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  p.repeat_last_n = 4;
  std::vector<float> l{1.0f, -1.0f, 3.0f, 0.5f, 7.0f};
  // Window = last 4 = {1, 1, 3, 0}; token 4 (the oldest entry) is outside it; 99 is out of range and ignored.
  const std::vector<int32_t> history{4, 1, 1, 3, 0};
  runtime::apply_penalties(p, history, l);
  EXPECT_EQ(l[0], 1.0f / 2.0f - (1 * 0.25f + 0.5f));
  EXPECT_EQ(l[1], -1.0f * 2.0f - (2 * 0.25f + 0.5f));
  EXPECT_EQ(l[2], 3.0f);
  EXPECT_EQ(l[3], 0.5f / 2.0f - (1 * 0.25f + 0.5f));
  EXPECT_EQ(l[4], 7.0f);

  // Greedy sees penalised logits: token 4 wins until it is in the window.
  p.temp = 0;
  p.presence_penalty = 10.0f;
  runtime::Sampler s(p);
  const std::vector<float> g{0.0f, 0.0f, 0.0f, 0.0f, 1.0f};
  const std::vector<int32_t> h4{4};
  EXPECT_EQ(s.sample(g, {}, 0), 4);
  EXPECT_EQ(s.sample(g, h4, 0), 0);
  p.repeat_last_n = 0;  // off
  EXPECT_EQ(runtime::Sampler(p).sample(g, h4, 0), 4);
}

// Draws with this seed over steps 0..n-1; returns counts per id.
std::map<int32_t, int> draw(runtime::SamplerParams p, const std::vector<float>& logits, int n) {
  runtime::Sampler s(p);
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) ++counts[s.sample(logits, {}, uint64_t(i))];
  return counts;
}

TEST(Sampler, TwoTokenDrawFollowsTheInverseCdf) {
  // Sorted order: id 1 (weight 1), id 0 (weight 1/3). id 1 exactly when u * 4/3 < 1.
  runtime::SamplerParams p;
  p.temp = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 42;
  runtime::Sampler s(p);
  const std::vector<float> l{0.0f, std::log(3.0f)};
  for (uint64_t step = 0; step < 2000; ++step) {
    const double u = runtime::sampler_uniform(42, step);
    const double w0 = std::exp(double(l[0]) - double(l[1]));
    const int32_t want = u * (1.0 + w0) < 1.0 ? 1 : 0;
    ASSERT_EQ(s.sample(l, {}, step), want) << step;
  }
}

TEST(Sampler, FrequenciesMatchTheTemperedSoftmax) {
  const std::vector<float> l{1.0f, 0.2f, -0.5f, 2.0f, 0.0f};
  for (float temp : {1.0f, 0.5f}) {
    runtime::SamplerParams p;
    p.temp = temp;
    p.top_k = 0;
    p.top_p = 1.0f;
    p.min_p = 0.0f;
    p.seed = 1234;
    const int n = 40000;
    auto counts = draw(p, l, n);
    double z = 0;
    for (float v : l) z += std::exp(v / temp);
    for (int i = 0; i < 5; ++i) {
      const double prob = std::exp(l[size_t(i)] / temp) / z;
      const double sigma = std::sqrt(prob * (1 - prob) / n);
      EXPECT_NEAR(counts[i] / double(n), prob, 5 * sigma + 1e-9) << "temp " << temp << " id " << i;
    }
  }
}

TEST(Sampler, TopKTopPMinPKeepTheDocumentedPrefix) {
  // Probabilities at temperature 1: 0.5, 0.3, 0.15, 0.05 (ids 2, 0, 3, 1).
  const std::vector<float> l{std::log(0.3f), std::log(0.05f), std::log(0.5f), std::log(0.15f)};
  runtime::SamplerParams base;
  base.temp = 1.0f;
  base.top_k = 0;
  base.top_p = 1.0f;
  base.min_p = 0.0f;
  base.seed = 9;
  auto ids = [&](runtime::SamplerParams p) {
    std::set<int32_t> s;
    for (const auto& [id, c] : draw(p, l, 3000)) s.insert(id);
    return s;
  };
  EXPECT_EQ(ids(base), (std::set<int32_t>{0, 1, 2, 3}));
  runtime::SamplerParams k = base;
  k.top_k = 2;
  EXPECT_EQ(ids(k), (std::set<int32_t>{2, 0}));
  k.top_k = 1;
  EXPECT_EQ(ids(k), (std::set<int32_t>{2}));
  runtime::SamplerParams tp = base;
  tp.top_p = 0.75f;  // 0.5 < 0.75 <= 0.8
  EXPECT_EQ(ids(tp), (std::set<int32_t>{2, 0}));
  tp.top_p = 0.85f;  // 0.8 < 0.85 <= 0.95
  EXPECT_EQ(ids(tp), (std::set<int32_t>{2, 0, 3}));
  runtime::SamplerParams mp = base;
  mp.min_p = 0.2f;  // ratios to the best: 1, 0.6, 0.3, 0.1
  EXPECT_EQ(ids(mp), (std::set<int32_t>{2, 0, 3}));
  mp.min_p = 0.5f;
  EXPECT_EQ(ids(mp), (std::set<int32_t>{2, 0}));
  // top-p runs before the temperature: a high temperature does not widen the kept set.
  tp.top_p = 0.75f;
  tp.temp = 5.0f;
  EXPECT_EQ(ids(tp), (std::set<int32_t>{2, 0}));
}

TEST(Sampler, TiesSortByLowerId) {
  // Four equal logits, top-k 2: only ids 0 and 1 survive.
  runtime::SamplerParams p;
  p.top_k = 2;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.seed = 3;
  const std::vector<float> l{0.5f, 0.5f, 0.5f, 0.5f};
  auto counts = draw(p, l, 500);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GT(counts[0], 0);
  EXPECT_GT(counts[1], 0);
}

TEST(Sampler, SameSeedSameStepSameToken) {
  runtime::SamplerParams p;
  p.seed = 77;
  std::vector<float> l(300);
  for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::sin(double(i) * 1.7)) * 3.0f;
  runtime::Sampler a(p), b(p);
  for (uint64_t step = 0; step < 50; ++step) EXPECT_EQ(a.sample(l, {}, step), b.sample(l, {}, step));
}

TEST(Sampler, InvalidParametersAndLogits) {
  runtime::SamplerParams p;
  p.repeat_penalty = 0.0f;
  EXPECT_THROW(runtime::Sampler{p}, std::invalid_argument);
  p = {};
  p.min_p = 1.5f;
  EXPECT_THROW(runtime::Sampler{p}, std::invalid_argument);
  p = {};
  p.repeat_last_n = -2;
  EXPECT_THROW(runtime::Sampler{p}, std::invalid_argument);
  p = {};
  p.temp = NAN;
  EXPECT_THROW(runtime::Sampler{p}, std::invalid_argument);
  runtime::Sampler s(runtime::SamplerParams{});
  const std::vector<float> bad{0.0f, NAN};
  EXPECT_THROW(s.sample(bad, {}, 0), std::runtime_error);
  EXPECT_THROW(s.sample({}, {}, 0), std::invalid_argument);
}

// Step 0: each bias is added to its id's logit in float32 before the penalties; ids past the logits are ignored;
// -inf bans a token. A bias may turn the greedy pick and remove a token from the draws.
TEST(Sampler, LogitBiasIsAddedBeforeThePenalties) {
  const std::vector<float> l{1.0f, 3.0f, 2.0f, 0.5f};
  runtime::SamplerParams p;
  p.temp = 0.0f;
  p.logit_bias = {{2, 1.5f}, {7, 100.0f}};  // 2 becomes the largest (3.5); 7 is not a token here
  EXPECT_EQ(runtime::Sampler(p).sample(l, {}, 0), 2);
  // With a repeat penalty on token 2: (2 + 1.5) / 2 = 1.75 < 3, so 1 wins: the bias came first.
  p.repeat_penalty = 2.0f;
  EXPECT_EQ(runtime::Sampler(p).sample(l, std::vector<int32_t>{2}, 0), 1);
  // Sampled: the banned token never comes, whatever the draw.
  runtime::SamplerParams q;
  q.temp = 1.0f, q.top_k = 0, q.top_p = 1.0f, q.min_p = 0.0f;
  q.logit_bias = {{1, -INFINITY}};
  runtime::Sampler s(q);
  int picked_1 = 0;
  for (uint64_t step = 0; step < 200; ++step) picked_1 += s.sample(l, {}, step) == 1;
  EXPECT_EQ(picked_1, 0);
  runtime::SamplerParams bad;
  bad.logit_bias = {{-1, 1.0f}};
  EXPECT_THROW(runtime::Sampler{bad}, std::invalid_argument);
  bad.logit_bias = {{1, NAN}};
  EXPECT_THROW(runtime::Sampler{bad}, std::invalid_argument);
  bad.logit_bias = {{1, INFINITY}};
  EXPECT_THROW(runtime::Sampler{bad}, std::invalid_argument);
}

}  // namespace
