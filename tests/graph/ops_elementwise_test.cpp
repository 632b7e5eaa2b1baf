// The element-wise ops gemma3 and phi3 brought (GeGlu, Scale, Softcap, Slice) against direct computations, and
// the builders' refusals of bad parameters.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>

#include "graph/reference_ops.h"
#include "graph_test_util.h"
#include "op_fixture.h"

using namespace graph;
using graph_test::expect_close;
using graph_test::Fixture;
using graph_test::random_vec;
using graph_test::sh;

namespace {

// tanh-approximated GELU, written out from its definition.
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

}  // namespace

TEST(ReferenceOps, GeGluIsTanhGeluOfGateTimesUp) {
  Fixture f;
  // Odd count; gates from -6 to 6 cover both tails and the middle of the curve.
  const auto gv = random_vec(5 * 3, 31, -6.0f, 6.0f), uv = random_vec(5 * 3, 32);
  const auto y = f.g.geglu("y", f.w("gate", gv, sh(5, 3)), f.w("up", uv, sh(5, 3)));
  std::vector<double> want(gv.size());
  for (size_t i = 0; i < gv.size(); ++i) want[i] = gelu(gv[i]) * uv[i];
  expect_close(f.run(y), want, 1e-7, 1e-6);
}

TEST(ReferenceOps, GeluAnchors) {
  // Published values of the tanh approximation, and gelu(x) - gelu(-x) = x.
  EXPECT_EQ(ref::gelu_tanh(0.0), 0.0);
  EXPECT_NEAR(ref::gelu_tanh(1.0), 0.8411919906082768, 1e-12);
  EXPECT_NEAR(ref::gelu_tanh(-1.0), -0.15880800939172324, 1e-12);
  for (double x : {0.3, 2.5, 7.0}) EXPECT_NEAR(ref::gelu_tanh(x) - ref::gelu_tanh(-x), x, 1e-12) << x;
}

TEST(ReferenceOps, ScaleMultipliesEveryElement) {
  Fixture f;
  const auto xv = random_vec(7 * 2, 33, -3.0f, 3.0f);
  const auto y = f.g.scale("y", f.w("x", xv, sh(7, 2)), 16.0f);
  const std::vector<float> got = f.run(y);
  for (size_t i = 0; i < xv.size(); ++i) EXPECT_EQ(got[i], xv[i] * 16.0f) << i;  // a power of two: exact
  Fixture f2;
  const auto y2 = f2.g.scale("y", f2.w("x", xv, sh(7, 2)), 0.3f);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = double(xv[i]) * double(0.3f);
  expect_close(f2.run(y2), want, 0, 1e-7);
}

TEST(ReferenceOps, SoftcapBoundsLogitsSmoothly) {
  Fixture f;
  std::vector<float> xv = random_vec(9 * 2, 34, -100.0f, 100.0f);
  xv[0] = 0.0f;
  xv[1] = 1e-3f;
  const float cap = 30.0f;
  const auto y = f.g.softcap("y", f.w("x", xv, sh(9, 2)), cap);
  std::vector<double> want(xv.size());
  for (size_t i = 0; i < xv.size(); ++i) want[i] = cap * std::tanh(double(xv[i]) / cap);
  const std::vector<float> got = f.run(y);
  expect_close(got, want, 1e-6, 1e-6);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_NEAR(got[1], 1e-3f, 1e-9);  // identity near zero
  for (float v : got) EXPECT_LE(std::fabs(v), cap);
}

// A fused [q | k | v] product read as its parts: each row's elements [offset, offset + n), packed.
TEST(ReferenceOps, SliceTakesARowRangeOfEveryRow) {
  Fixture f;
  const int64_t ne0 = 11, rows = 3;
  const auto xv = random_vec(ne0 * rows, 35);
  // Slice needs an activation: route the weight through a Scale by 1.
  const auto x = f.g.scale("x1", f.w("x", xv, sh(ne0, rows)), 1.0f);
  const auto a = f.g.slice("a", x, 0, 4);
  const auto b = f.g.slice("b", x, 4, 5);
  const auto c = f.g.slice("c", x, 9, 2);
  EXPECT_EQ(f.g.node(b).shape, sh(5, 3));
  const auto c_heads = f.g.reshape("c_heads", c, sh(1, 2, 3));  // a view of the packed part
  f.g.mark_output(a);
  f.g.mark_output(b);
  f.g.mark_output(c_heads);
  ReferenceExecutor ex(1);
  ex.run(f.g, plan(f.g), {}, {});
  const struct {
    NodeId id;
    int64_t offset, n;
  } parts[] = {{a, 0, 4}, {b, 4, 5}, {c_heads, 9, 2}};
  for (const auto& p : parts) {
    const auto got = ex.output_f32(p.id);
    ASSERT_EQ(got.size(), size_t(p.n * rows));
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < p.n; ++i) EXPECT_EQ(got[r * p.n + i], xv[r * ne0 + p.offset + i]) << r << "," << i;
  }
}

TEST(GraphIr, NewOpsRefuseBadParameters) {
  Fixture f;
  const auto w = f.w("w", std::vector<float>(12), sh(4, 3));
  const auto x = f.g.scale("x", w, 1.0f);
  EXPECT_THROW(f.g.scale("s", x, std::nanf("")), std::invalid_argument);
  EXPECT_THROW(f.g.softcap("c", x, 0.0f), std::invalid_argument);
  EXPECT_THROW(f.g.softcap("c", x, -1.0f), std::invalid_argument);
  EXPECT_THROW(f.g.slice("l", x, 2, 3), std::invalid_argument);   // past the row
  EXPECT_THROW(f.g.slice("l", x, 0, 0), std::invalid_argument);   // empty
  EXPECT_THROW(f.g.slice("l", w, 0, 2), std::invalid_argument);   // a weight, not an activation
  EXPECT_THROW(f.g.geglu("g", x, f.w("u", std::vector<float>(5), sh(5))), std::invalid_argument);
  EXPECT_EQ(f.g.node(f.g.slice("l", x, 1, 3)).shape, sh(3, 3));
  EXPECT_STREQ(op_name(Op::GeGlu), "GeGlu");
  EXPECT_STREQ(op_name(Op::Slice), "Slice");
  EXPECT_STREQ(weight_role_name(WeightRole::AttnQkv), "attn_qkv");
  EXPECT_STREQ(weight_role_name(WeightRole::FfnPostNorm), "ffn_post_norm");
}
