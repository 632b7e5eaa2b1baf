// Sliding-window attention and the RoPE scaling parameters (YaRN's ramp, the cos/sin attention factor) against
// direct computations written out here; the plain rotation is unchanged by the new fields; NeoX as the normal form
// on pairs side by side (graph/rope_pairs.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "graph/rope_pairs.h"
#include "graph_test_util.h"
#include "op_fixture.h"

using namespace graph;
using graph_test::expect_close;
using graph_test::Fixture;
using graph_test::random_vec;
using graph_test::sh;

namespace {

// NEOX rope of x [hd, n_head, T] by the definition in graph/ir.h, with YaRN's ramp and the attention factor.
std::vector<double> rope_by_formula(const std::vector<float>& x, int hd, int n_head, const std::vector<int32_t>& pos,
                                    const RopeParams& p, const std::vector<float>& ff) {
  std::vector<double> y(x.begin(), x.end());
  const int half = p.n_rot / 2;
  for (size_t t = 0; t < pos.size(); ++t)
    for (int h = 0; h < n_head; ++h)
      for (int i = 0; i < half; ++i) {
        double extrap = pos[t] * std::pow(double(p.freq_base), -2.0 * i / p.n_rot);
        if (!ff.empty()) extrap /= ff[size_t(i)];
        const double interp = p.freq_scale * extrap;
        double ramp = 1.0 - std::clamp((i - double(p.corr_low)) / std::max(0.001, double(p.corr_high) - p.corr_low),
                                       0.0, 1.0);
        const double mix = ramp * p.ext_factor;
        const double theta = interp * (1 - mix) + extrap * mix;
        const size_t a = (t * n_head + size_t(h)) * size_t(hd) + size_t(i), b = a + size_t(half);
        y[a] = p.attn_factor * (x[a] * std::cos(theta) - x[b] * std::sin(theta));
        y[b] = p.attn_factor * (x[a] * std::sin(theta) + x[b] * std::cos(theta));
      }
  return y;
}

std::vector<float> run_rope(const std::vector<float>& xv, int hd, int nh, const std::vector<int32_t>& pos,
                            const RopeParams& p, const std::vector<float>& ff = {}) {
  Fixture f;
  const int t = int(pos.size());
  const auto positions = f.g.input("positions", InputParams::Kind::Positions, t);
  const NodeId factors = ff.empty() ? kNoNode : f.w("ff", ff, sh(p.n_rot / 2));
  const auto y = f.g.rope("y", f.w("x", xv, sh(hd, nh, t)), positions, p, factors);
  return f.run(y, {}, pos);
}

}  // namespace

TEST(ReferenceOps, RopeYarnRampAndAttnFactorByFormula) {
  const int hd = 16, nh = 2;
  const std::vector<int32_t> pos{0, 5, 300, 4001};
  const auto xv = random_vec(size_t(hd * nh) * pos.size(), 41);
  RopeParams p;
  p.mode = RopeMode::Neox;
  p.n_rot = hd;
  p.freq_base = 10000.0f;
  p.freq_scale = 1.0f / 32;
  p.ext_factor = 1.0f;
  p.corr_low = 2.0f;
  p.corr_high = 5.0f;
  p.attn_factor = 1.34657359f;
  for (bool factors : {false, true}) {
    SCOPED_TRACE(factors ? "with freq factors" : "no freq factors");
    std::vector<float> ff;
    if (factors)
      for (int i = 0; i < hd / 2; ++i) ff.push_back(1.0f + 0.5f * float(i));
    expect_close(run_rope(xv, hd, nh, pos, p, ff), rope_by_formula(xv, hd, nh, pos, p, ff), 1e-6, 1e-5);
  }
  // The ramp's ends: pairs below corr_low keep the unscaled angle, pairs above corr_high take the scaled one.
  RopeParams unscaled = p, scaled = p;
  unscaled.freq_scale = 1.0f, unscaled.ext_factor = 0.0f;
  scaled.ext_factor = 0.0f;
  const auto y = run_rope(xv, hd, nh, pos, p), yu = run_rope(xv, hd, nh, pos, unscaled),
             ys = run_rope(xv, hd, nh, pos, scaled);
  for (size_t t = 0; t < pos.size(); ++t)
    for (int h = 0; h < nh; ++h) {
      const size_t base = (t * nh + size_t(h)) * hd;
      for (int i : {0, 1, 2}) EXPECT_EQ(y[base + size_t(i)], yu[base + size_t(i)]) << "pair " << i;
      for (int i : {5, 6, 7}) EXPECT_EQ(y[base + size_t(i)], ys[base + size_t(i)]) << "pair " << i;
    }
}

// graph/rope_pairs.h: NeoX on a head is the normal form on the head reordered with its pairs side by side, the same
// bits, for full and partial rotation, with YaRN's ramp and frequency factors (the CUDA session reorders q and k
// weights so and runs their ropes in the normal form).
TEST(ReferenceOps, NeoxRopeIsTheNormalFormOnPairsSideBySide) {
  const int hd = 16, nh = 3;
  const std::vector<int32_t> pos{0, 7, 1500};
  const auto xv = random_vec(size_t(hd * nh) * pos.size(), 43);
  for (int n_rot : {16, 8}) {
    for (bool yarn : {false, true}) {
      SCOPED_TRACE("n_rot " + std::to_string(n_rot) + (yarn ? ", YaRN and factors" : ""));
      RopeParams neox;
      neox.mode = RopeMode::Neox;
      neox.n_rot = n_rot;
      neox.freq_base = 10000.0f;
      std::vector<float> ff;
      if (yarn) {
        neox.freq_scale = 1.0f / 8, neox.ext_factor = 1.0f, neox.corr_low = 1.0f, neox.corr_high = 3.0f;
        for (int i = 0; i < n_rot / 2; ++i) ff.push_back(1.0f + 0.25f * float(i));
      }
      RopeParams normal = neox;
      normal.mode = RopeMode::Normal;
      const auto reorder = [&](const std::vector<float>& v) {
        std::vector<float> r(v.size());
        for (size_t h = 0; h < v.size() / hd; ++h)
          for (int i = 0; i < hd; ++i) r[h * hd + size_t(i)] = v[h * hd + size_t(rope_pair_source(i, n_rot))];
        return r;
      };
      EXPECT_EQ(run_rope(reorder(xv), hd, nh, pos, normal, ff), reorder(run_rope(xv, hd, nh, pos, neox, ff)));
    }
  }
  // The reorder is a permutation of each head: every element once.
  for (int n_rot : {16, 8, 2}) {
    std::vector<int> seen(hd, 0);
    for (int i = 0; i < hd; ++i) ++seen[size_t(rope_pair_source(i, n_rot))];
    EXPECT_EQ(seen, std::vector<int>(hd, 1)) << "n_rot " << n_rot;
  }
}

TEST(ReferenceOps, RopeNewFieldsAtTheirDefaultsChangeNothing) {
  const int hd = 8, nh = 3;
  const std::vector<int32_t> pos{1, 9, 77};
  const auto xv = random_vec(size_t(hd * nh) * pos.size(), 42);
  RopeParams p;
  p.mode = RopeMode::Normal;
  p.n_rot = hd;
  p.freq_base = 500000.0f;
  p.freq_scale = 0.25f;
  ASSERT_TRUE(p.plain());
  RopeParams with_ramp_bounds = p;  // corr dims alone do nothing without ext_factor
  with_ramp_bounds.corr_low = 1.0f, with_ramp_bounds.corr_high = 3.0f;
  EXPECT_EQ(run_rope(xv, hd, nh, pos, p), run_rope(xv, hd, nh, pos, with_ramp_bounds));
  // attn_factor 2 doubles every output exactly (a power of two scales without rounding).
  RopeParams doubled = p;
  doubled.attn_factor = 2.0f;
  EXPECT_FALSE(doubled.plain());
  const auto a = run_rope(xv, hd, nh, pos, p), b = run_rope(xv, hd, nh, pos, doubled);
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(b[i], 2.0f * a[i]) << i;
}

// Window 3 over 8 positions, filled by a prompt batch of 5 then three single-token steps: each query sees only the
// keys at p - 3 < pk <= p. A second executor without the window gives the full causal answer, which differs.
TEST(ReferenceOps, AttentionSlidingWindowMatchesNaive) {
  const int nh = 2, nkv = 1, hd = 4, n_ctx = 8, window = 3;
  const float scale = 0.5f;
  std::vector<std::vector<float>> all_k(n_ctx), all_v(n_ctx);
  ReferenceExecutor ex(2), full(2);
  uint32_t seed = 50;
  int pos0 = 0;
  for (int t : {5, 1, 1, 1}) {
    const auto qv = random_vec(size_t(hd * nh * t), ++seed, -2, 2);
    const auto kv = random_vec(size_t(hd * nkv * t), ++seed, -2, 2), vv = random_vec(size_t(hd * nkv * t), ++seed);
    std::vector<int32_t> pos(static_cast<size_t>(t));
    for (int i = 0; i < t; ++i) {
      pos[size_t(i)] = pos0 + i;
      all_k[size_t(pos0 + i)].assign(kv.begin() + i * hd * nkv, kv.begin() + (i + 1) * hd * nkv);
      all_v[size_t(pos0 + i)].assign(vv.begin() + i * hd * nkv, vv.begin() + (i + 1) * hd * nkv);
    }
    std::vector<float> got[2];
    for (int w : {window, 0}) {
      Fixture f;
      f.g.kv = KvCacheSpec{1, n_ctx, nkv, hd, hd};
      const auto positions = f.g.input("positions", InputParams::Kind::Positions, t);
      AttentionParams ap{0, nh, nkv, hd, hd, scale};
      ap.window = w;
      const auto a = f.g.attention("attn", f.w("q", qv, sh(hd, nh, t)), f.w("k", kv, sh(hd, nkv, t)),
                                   f.w("v", vv, sh(hd, nkv, t)), positions, ap);
      f.g.mark_output(a);
      ReferenceExecutor& e = w ? ex : full;
      e.run(f.g, plan(f.g), {}, pos);
      const auto s = e.output_f32(a);
      got[w ? 0 : 1].assign(s.begin(), s.end());
    }
    std::vector<double> want(size_t(hd * nh * t));
    for (int i = 0; i < t; ++i)
      for (int h = 0; h < nh; ++h) {
        const int p = pos[size_t(i)], first = std::max(0, p - window + 1);
        std::vector<double> s;
        double mx = -1e300, sum = 0;
        for (int j = first; j <= p; ++j) {
          double d = 0;
          for (int c = 0; c < hd; ++c) d += double(qv[size_t((i * nh + h) * hd + c)]) * all_k[size_t(j)][size_t(c)];
          s.push_back(scale * d);
          mx = std::max(mx, s.back());
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int c = 0; c < hd; ++c) {
          double o = 0;
          for (int j = first; j <= p; ++j) o += s[size_t(j - first)] / sum * all_v[size_t(j)][size_t(c)];
          want[size_t((i * nh + h) * hd + c)] = o;
        }
      }
    expect_close(got[0], want, 1e-6, 1e-5);
    // Positions 0..2 see at most 3 keys either way; later ones must differ from full attention.
    if (pos.back() >= window) {
      EXPECT_NE(got[0], got[1]) << "position " << pos.back();
    }
    pos0 += t;
  }
}

TEST(GraphIr, RopeAndAttentionRefuseBadScalingParameters) {
  Fixture f;
  const auto q = f.w("q", std::vector<float>(4 * 2 * 3), sh(4, 2, 3));
  const auto positions = f.g.input("positions", InputParams::Kind::Positions, 3);
  RopeParams p;
  p.n_rot = 4;
  p.attn_factor = 0.0f;
  EXPECT_THROW(f.g.rope("r", q, positions, p), std::invalid_argument);
  p.attn_factor = 1.0f;
  p.ext_factor = -1.0f;
  EXPECT_THROW(f.g.rope("r", q, positions, p), std::invalid_argument);
  p.ext_factor = 1.0f;
  p.corr_high = std::nanf("");
  EXPECT_THROW(f.g.rope("r", q, positions, p), std::invalid_argument);
  AttentionParams ap{0, 2, 2, 4, 4, 1.0f};
  ap.window = -1;
  EXPECT_THROW(f.g.attention("a", q, q, q, positions, ap), std::invalid_argument);
}
