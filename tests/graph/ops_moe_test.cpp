// The mixture-of-experts ops (TopK, MoeWeights, MulMatId, SwiGluOai, WeightedSum) and attention sinks against
// direct computations written out here, plus the builders' refusals of inconsistent shapes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

#include "graph_test_util.h"
#include "op_fixture.h"
#include "graph/reference_ops.h"
#include "quant/types.h"

using namespace graph;
using graph_test::expect_close;
using graph_test::Fixture;
using graph_test::random_vec;
using graph_test::sh;

namespace {

// An F32 activation holding v (TopK and MoeWeights read activations, not weights).
NodeId act(Fixture& f, const std::string& name, const std::vector<float>& v, Shape s) {
  return f.g.scale(name, f.w(name + "_w", v, s), 1.0f);
}

// Runs g with `out` as its output and returns its i32 values.
std::vector<int32_t> run_i32(Fixture& f, NodeId out) {
  f.g.mark_output(out);
  ReferenceExecutor ex(1);
  ex.run(f.g, plan(f.g), {}, {});
  const auto s = ex.output_i32(out);
  return {s.begin(), s.end()};
}

}  // namespace

TEST(ReferenceOps, TopKOrdersByValueThenIndex) {
  Fixture f;
  // Two rows of 6: ties (0.5 at 1, 3 and 4) keep index order; the k largest come largest first.
  const std::vector<float> v{0.1f, 0.5f, -2.0f, 0.5f, 0.5f, 0.7f,   //
                             3.0f, -1.0f, 3.0f, 2.0f, -5.0f, 3.0f};
  const auto ids = f.g.top_k("top", act(f, "a", v, sh(6, 2)), 4);
  EXPECT_EQ(f.g.node(ids).shape, sh(4, 2));
  EXPECT_EQ(f.g.node(ids).dtype, DType::I32);
  EXPECT_EQ(run_i32(f, ids), (std::vector<int32_t>{5, 1, 3, 4, 0, 2, 5, 3}));
}

TEST(ReferenceOps, MoeWeightsGatherSoftmaxAndNormalize) {
  const std::vector<float> scores{0.2f, -1.0f, 1.5f, 0.4f,   // token 0
                                  3.0f, 2.0f, 0.0f, 0.1f};   // token 1
  for (const MoeWeightsParams p : {MoeWeightsParams{false, false}, MoeWeightsParams{true, false},
                                   MoeWeightsParams{false, true}}) {
    Fixture f;
    const auto s = act(f, "s", scores, sh(4, 2));
    const auto ids = f.g.top_k("ids", s, 2);  // token 0: 2, 3; token 1: 0, 1
    const auto w = f.g.moe_weights("w", s, ids, p);
    const auto got = f.run(w);
    std::vector<double> want{1.5, 0.4, 3.0, 2.0};
    for (size_t t = 0; t < 2; ++t) {
      double* x = &want[2 * t];
      if (p.softmax) {
        const double m = std::max(x[0], x[1]), a = std::exp(x[0] - m), b = std::exp(x[1] - m);
        x[0] = a / (a + b);
        x[1] = b / (a + b);
      }
      if (p.normalize) {
        const double sum = x[0] + x[1];
        x[0] /= sum;
        x[1] /= sum;
      }
    }
    expect_close(got, want, 1e-7, 1e-6);
  }
  // The sum llama.cpp divides by is clamped below at 2^-14: tiny weights stay tiny instead of becoming 0.5 each.
  Fixture f;
  const auto s = act(f, "s", {1e-6f, 3e-6f, 0.0f}, sh(3, 1));
  const auto w = f.g.moe_weights("w", s, f.g.top_k("ids", s, 2), MoeWeightsParams{false, true});
  expect_close(f.run(w), {3e-6 / 6.103515625e-5, 1e-6 / 6.103515625e-5}, 1e-9, 1e-6);
}

// out[:, j, t] = W[ids[j, t]] x[:, j or 0, t] + bias[:, ids[j, t]], by a loop over the definition, for a shared
// input (X = 1) and one input per slot (X = k), F32 and quantized experts.
TEST(ReferenceOps, MulMatIdMatchesPerExpertProducts) {
  const int K = 64, N = 5, E = 4, k = 2, T = 3;
  const auto wv = random_vec(size_t(K * N * E), 71);
  const auto bv = random_vec(size_t(N * E), 72);
  // Scores that choose experts {3, 1}, {0, 3} and {0, 2} (a tie: index order).
  const std::vector<float> scores{0.0f, 1.0f, -1.0f, 2.0f,   //
                                  5.0f, 0.0f, 0.0f, 4.0f,    //
                                  1.0f, 0.0f, 1.0f, -3.0f};
  const std::vector<int32_t> chosen{3, 1, 0, 3, 0, 2};
  for (const quant::Type type : {quant::Type::F32, quant::Type::Q8_0, quant::Type::MXFP4})
    for (const int X : {1, k}) {
      SCOPED_TRACE(std::string(quant::type_name(type)) + " X=" + std::to_string(X));
      Fixture f;
      // The weights as the executor sees them: quantized bytes, and the floats they dequantize to.
      std::vector<float> w = wv;
      NodeId wn;
      if (type == quant::Type::F32) {
        wn = f.w("w", wv, sh(K, N, E));
      } else {
        std::vector<uint8_t> q(quant::row_bytes(type, K) * size_t(N * E));
        for (int r = 0; r < N * E; ++r) {
          quant::quantize_row(type, wv.data() + r * K, q.data() + size_t(r) * quant::row_bytes(type, K), K);
          quant::dequantize_row(type, q.data() + size_t(r) * quant::row_bytes(type, K), w.data() + r * K, K);
        }
        wn = f.ws.add_raw(f.g, "w", q, type, sh(K, N, E));
      }
      const auto xv = random_vec(size_t(K * X * T), 73);
      const auto ids = f.g.top_k("ids", act(f, "s", scores, sh(E, T)), k);
      const auto y = f.g.mul_mat_id("y", wn, f.w("x", xv, sh(K, X, T)), ids, f.w("b", bv, sh(N, E)));
      EXPECT_EQ(f.g.node(y).shape, sh(N, k, T));
      std::vector<double> want(size_t(N * k * T));
      for (int t = 0; t < T; ++t)
        for (int j = 0; j < k; ++j) {
          const int e = chosen[size_t(t * k + j)];
          for (int n = 0; n < N; ++n) {
            double d = bv[size_t(e * N + n)];
            for (int i = 0; i < K; ++i)
              d += double(w[size_t((e * N + n) * K + i)]) * xv[size_t((t * X + (X == 1 ? 0 : j)) * K + i)];
            want[size_t((t * k + j) * N + n)] = d;
          }
        }
      expect_close(f.run(y), want, 1e-6, 1e-6);
    }
}

// Quantized experts past the weight-cache budget are dequantized row by row, only the chosen experts' rows: the
// same floats, so the same results bit for bit.
TEST(ReferenceOps, MulMatIdRowByRowEqualsCached) {
  const int K = 32, N = 3, E = 5, T = 4;
  const auto wv = random_vec(size_t(K * N * E), 81);
  std::vector<uint8_t> q(quant::row_bytes(quant::Type::Q8_0, K) * size_t(N * E));
  for (int r = 0; r < N * E; ++r)
    quant::quantize_row(quant::Type::Q8_0, wv.data() + r * K, q.data() + size_t(r) * 34, K);
  std::vector<float> out[2];
  for (int budget = 0; budget < 2; ++budget) {
    Fixture f;
    const auto ids = f.g.top_k("ids", act(f, "s", random_vec(size_t(E * T), 82), sh(E, T)), 2);
    const auto y = f.g.mul_mat_id("y", f.ws.add_raw(f.g, "w", q, quant::Type::Q8_0, sh(K, N, E)),
                                  f.w("x", random_vec(size_t(K * T), 83), sh(K, 1, T)), ids);
    f.g.mark_output(y);
    ReferenceExecutor ex(2);
    ex.set_weight_cache_budget(budget ? ReferenceExecutor::kDefaultWeightCacheBudget : 0);
    ex.run(f.g, plan(f.g), {}, {});
    const auto s = ex.output_f32(y);
    out[budget].assign(s.begin(), s.end());
    EXPECT_EQ(ex.weight_cache_bytes(), budget ? uint64_t(K * N * E) * 4 : 0u);
  }
  EXPECT_EQ(out[0], out[1]);
}

TEST(ReferenceOps, SwiGluOaiClampsAndShifts) {
  Fixture f;
  const std::vector<float> g{-3.0f, 0.0f, 1.0f, 6.5f, 7.0f, 20.0f, -20.0f};
  const std::vector<float> u{0.5f, 2.0f, -9.0f, 9.0f, -1.0f, 3.0f, 100.0f};
  const auto y = f.g.swiglu_oai("y", f.w("g", g, sh(7)), f.w("u", u, sh(7)), SwiGluOaiParams{});
  std::vector<double> want;
  for (size_t i = 0; i < g.size(); ++i) {
    const double x = std::min(double(g[i]), 7.0), up = std::clamp(double(u[i]), -7.0, 7.0);
    want.push_back(x / (1.0 + std::exp(-1.702 * x)) * (up + 1.0));
  }
  expect_close(f.run(y), want, 1e-6, 1e-6);
  // Worked by hand: gate 20 clamps to 7, up 3 gives 4: 7 sigmoid(11.914) 4 = 27.99981...
  EXPECT_NEAR(want[5], 28.0 / (1.0 + std::exp(-11.914)), 1e-12);
  EXPECT_THROW(f.g.swiglu_oai("bad", f.w("a", g, sh(7)), f.w("b", u, sh(7)), SwiGluOaiParams{1.702f, 0.0f}),
               std::invalid_argument);
}

TEST(ReferenceOps, WeightedSumOverSlots) {
  Fixture f;
  const int ne = 3, k = 2, T = 2;
  const auto a = random_vec(size_t(ne * k * T), 91);
  const std::vector<float> w{0.25f, 0.75f, 2.0f, -1.0f};
  const auto y = f.g.weighted_sum("y", act(f, "a", a, sh(ne, k, T)), act(f, "w", w, sh(k, T)));
  std::vector<double> want(size_t(ne * T));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < ne; ++i)
      for (int j = 0; j < k; ++j)
        want[size_t(t * ne + i)] += double(w[size_t(t * k + j)]) * a[size_t((t * k + j) * ne + i)];
  expect_close(f.run(y), want, 1e-7, 1e-6);
}

// Sinks: one more logit per head in the softmax's denominator, unscaled; the sink is the last input.
TEST(ReferenceOps, AttentionSinksJoinTheDenominator) {
  const int nh = 4, nkv = 2, hd = 8, T = 5;
  const float scale = 0.35f;
  const auto qv = random_vec(size_t(hd * nh * T), 101, -2, 2), kv = random_vec(size_t(hd * nkv * T), 102, -2, 2);
  const auto vv = random_vec(size_t(hd * nkv * T), 103);
  const std::vector<float> sinks{-1.0f, 0.5f, 3.0f, -20.0f};
  Fixture f;
  f.g.kv = KvCacheSpec{1, 8, nkv, hd, hd};
  const auto positions = f.g.input("positions", InputParams::Kind::Positions, T);
  const auto s = f.w("sinks", sinks, sh(nh));
  const AttentionParams ap{0, nh, nkv, hd, hd, scale};
  const auto a = f.g.attention("attn", f.w("q", qv, sh(hd, nh, T)), f.w("k", kv, sh(hd, nkv, T)),
                               f.w("v", vv, sh(hd, nkv, T)), positions, ap, {}, s);
  ASSERT_TRUE(std::get<AttentionParams>(f.g.node(a).params).sinks);
  EXPECT_EQ(f.g.node(a).inputs.back(), s);
  std::vector<int32_t> pos(T);
  std::iota(pos.begin(), pos.end(), 0);
  const auto got = f.run(a, {}, pos);
  std::vector<double> want(size_t(hd * nh * T));
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < nh; ++h) {
      const int g = h / (nh / nkv);
      std::vector<double> w;
      double sum = std::exp(double(sinks[size_t(h)]));  // unnormalised, no max shift needed at these sizes
      for (int j = 0; j <= t; ++j) {
        double d = 0;
        for (int c = 0; c < hd; ++c)
          d += double(qv[size_t((t * nh + h) * hd + c)]) * kv[size_t((j * nkv + g) * hd + c)];
        w.push_back(std::exp(scale * d));
        sum += w.back();
      }
      for (int c = 0; c < hd; ++c) {
        double o = 0;
        for (int j = 0; j <= t; ++j) o += w[size_t(j)] / sum * vv[size_t((j * nkv + g) * hd + c)];
        want[size_t((t * nh + h) * hd + c)] = o;
      }
    }
  expect_close(got, want, 1e-6, 1e-5);
  // A sink of -20 hardly matters, one of 3 takes most of the weight: head 2's outputs shrink towards 0.
  double head2 = 0, head3 = 0;
  for (int c = 0; c < hd; ++c) {
    head2 += std::fabs(got[size_t(2 * hd + c)]);
    head3 += std::fabs(got[size_t(3 * hd + c)]);
  }
  EXPECT_LT(head2, 0.2 * head3);
}

TEST(GraphIr, MoeBuildersRefuseInconsistentShapes) {
  Fixture f;
  const auto s = act(f, "s", random_vec(8 * 3, 1), sh(8, 3));
  EXPECT_THROW(f.g.top_k("t", s, 0), std::invalid_argument);
  EXPECT_THROW(f.g.top_k("t", s, 9), std::invalid_argument);
  EXPECT_THROW(f.g.top_k("t", f.w("wt", random_vec(8, 2), sh(8)), 2), std::invalid_argument);  // a weight
  const auto ids = f.g.top_k("ids", s, 2);                                                       // [2, 3]
  EXPECT_THROW(f.g.moe_weights("m", s, s, {}), std::invalid_argument);                          // ids not i32
  const auto s2 = act(f, "s2", random_vec(8 * 2, 3), sh(8, 2));
  EXPECT_THROW(f.g.moe_weights("m", s2, ids, {}), std::invalid_argument);                       // T differs
  const auto w = f.w("w", random_vec(16 * 4 * 8, 4), sh(16, 4, 8));
  EXPECT_THROW(f.g.mul_mat_id("y", w, f.w("x", random_vec(16 * 3, 5), sh(15, 1, 3)), ids), std::invalid_argument);
  EXPECT_THROW(f.g.mul_mat_id("y", w, f.w("x3", random_vec(16 * 3 * 3, 11), sh(16, 3, 3)), ids), std::invalid_argument);
  const auto x4 = f.w("x4", random_vec(16 * 3, 6), sh(16, 1, 3));
  EXPECT_THROW(f.g.mul_mat_id("y", w, x4, ids, f.w("b", random_vec(4, 12), sh(4))),
               std::invalid_argument);  // bias must be [N, n_expert]
  EXPECT_THROW(f.g.mul_mat_id("y", s, f.w("x5", random_vec(8 * 3, 7), sh(8, 1, 3)), ids), std::invalid_argument);
  const auto y = f.g.mul_mat_id("y", w, f.w("x6", random_vec(16 * 3, 8), sh(16, 1, 3)), ids);  // [4, 2, 3]
  EXPECT_THROW(f.g.weighted_sum("ws", y, s), std::invalid_argument);
  EXPECT_NO_THROW(f.g.weighted_sum("ws", y, f.g.moe_weights("mw", s, ids, {})));
  const auto q = f.w("q", random_vec(4 * 2 * 3, 9), sh(4, 2, 3));
  const auto positions = f.g.input("positions", InputParams::Kind::Positions, 3);
  EXPECT_THROW(f.g.attention("a", q, q, q, positions, AttentionParams{0, 2, 2, 4, 4, 1.0f}, {},
                             f.w("sinks", random_vec(3, 10), sh(3))),
               std::invalid_argument);  // one sink per query head
}

// Expert ids outside the tensor are an error, not a wild read (ids come from TopK in a model; a bad graph could
// feed anything).
TEST(ReferenceOps, MoeOpsRefuseOutOfRangeIds) {
  const int32_t ids[2] = {1, 7};
  const float scores[4] = {0, 0, 0, 0};
  float out[2];
  ref::MoeWeightsArgs a;
  a.scores = scores;
  a.ids = ids;
  a.out = out;
  a.n_expert = 4;
  a.k = 2;
  a.t = 1;
  EXPECT_THROW(ref::moe_weights(a), std::out_of_range);
  std::vector<float> w(4 * 2 * 4), x(4), o(2 * 2);
  ref::MulMatIdArgs m;
  m.w = w.data();
  m.x = x.data();
  m.ids = ids;
  m.out = o.data();
  m.K = 4, m.N = 2, m.n_expert = 4, m.x_slots = 1, m.k = 2, m.t = 1;
  EXPECT_THROW(ref::mul_mat_id(m, nullptr), std::out_of_range);
}
