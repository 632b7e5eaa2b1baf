// CPU reference ops against direct computations written out here, on small odd shapes; executor error handling.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "graph/plan.h"
#include "graph/reference.h"
#include "graph_test_util.h"
#include "op_fixture.h"

using namespace graph;
using graph_test::random_vec;

using graph_test::expect_close;
using graph_test::Fixture;
using graph_test::sh;

TEST(ReferenceOps, MulMatWithBiasOddShapes) {
  Fixture f;
  const int64_t k = 7, n = 5, t = 3;
  const auto wv = random_vec(k * n, 1), xv = random_vec(k * t, 2), bv = random_vec(n, 3);
  const auto y = f.g.mul_mat("y", f.w("w", wv, sh(k, n)), f.w("x", xv, sh(k, t)), f.w("b", bv, sh(n)));
  std::vector<double> want(n * t);
  for (int64_t ti = 0; ti < t; ++ti)
    for (int64_t ni = 0; ni < n; ++ni) {
      double s = bv[ni];
      for (int64_t ki = 0; ki < k; ++ki) s += double(wv[ni * k + ki]) * xv[ti * k + ki];
      want[ti * n + ni] = s;
    }
  expect_close(f.run(y), want);
}

TEST(ReferenceOps, MulMatAndGetRowsOnQuantizedWeights) {
  for (quant::Type type : {quant::Type::Q8_0, quant::Type::Q4_0, quant::Type::Q4_K}) {
    SCOPED_TRACE(quant::type_name(type));
    Fixture f;
    const int64_t k = 256, n = 5, t = 2;
    const auto wv = random_vec(k * n, 4);
    const size_t rb = quant::row_bytes(type, k);
    std::vector<uint8_t> q(rb * n);
    std::vector<float> deq(k * n);
    for (int64_t r = 0; r < n; ++r) {
      quant::quantize_row(type, wv.data() + r * k, q.data() + r * rb, k);
      quant::dequantize_row(type, q.data() + r * rb, deq.data() + r * k, k);
    }
    const auto xv = random_vec(k * t, 5);
    const auto wq = f.ws.add_raw(f.g, "wq", q, type, sh(k, n));
    const auto ids = f.g.input("tokens", InputParams::Kind::Tokens, 3);
    const auto rows = f.g.get_rows("rows", wq, ids);  // before the product: rows dequantized one by one
    const auto y = f.g.mul_mat("y", wq, f.w("x", xv, sh(k, t)));
    const auto rows2 = f.g.get_rows("rows2", wq, ids);  // after it: copied from the cached dequantized table
    f.g.mark_output(rows);
    f.g.mark_output(rows2);
    f.g.mark_output(y);
    ReferenceExecutor ex(2);
    const std::vector<int32_t> tok{4, 0, 4};
    ex.run(f.g, plan(f.g), tok, {});
    std::vector<double> want(n * t);
    for (int64_t ti = 0; ti < t; ++ti)
      for (int64_t ni = 0; ni < n; ++ni) {
        double s = 0;
        for (int64_t ki = 0; ki < k; ++ki) s += double(deq[ni * k + ki]) * xv[ti * k + ki];
        want[ti * n + ni] = s;
      }
    const auto ys = ex.output_f32(y);
    expect_close({ys.begin(), ys.end()}, want, 1e-5, 1e-6);
    for (NodeId r : {rows, rows2}) {
      const auto got = ex.output_f32(r);
      ASSERT_EQ(got.size(), size_t(k * 3));
      for (size_t i = 0; i < tok.size(); ++i)
        for (int64_t c = 0; c < k; ++c) ASSERT_EQ(got[i * k + c], deq[tok[i] * k + c]) << i << "," << c;
    }
    // a second run with the table now cached gives the same values
    ex.run(f.g, plan(f.g), tok, {});
    EXPECT_EQ(ex.output_f32(rows)[k + 3], deq[3]);
  }
}

// Past the weight-cache budget a product dequantizes its matrix row by row instead of keeping a float copy: the
// same floats, so bit-identical results, and nothing cached.
TEST(ReferenceOps, MulMatWithoutWeightCacheGivesTheSameBits) {
  for (quant::Type type : {quant::Type::Q8_0, quant::Type::Q4_K, quant::Type::Q6_K, quant::Type::F16}) {
    SCOPED_TRACE(quant::type_name(type));
    Fixture f;
    const int64_t k = 512, n = 300, t = 3;  // enough work for the thread pool to split the rows
    const auto wv = random_vec(k * n, 14);
    const size_t rb = quant::row_bytes(type, k);
    std::vector<uint8_t> q(rb * n);
    for (int64_t r = 0; r < n; ++r) quant::quantize_row(type, wv.data() + r * k, q.data() + r * rb, k);
    const auto y = f.g.mul_mat("y", f.ws.add_raw(f.g, "wq", q, type, sh(k, n)), f.w("x", random_vec(k * t, 15), sh(k, t)),
                               f.w("b", random_vec(n, 16), sh(n)));
    f.g.mark_output(y);
    ReferenceExecutor cached(3), streamed(3);
    streamed.set_weight_cache_budget(0);
    cached.run(f.g, plan(f.g), {}, {});
    streamed.run(f.g, plan(f.g), {}, {});
    EXPECT_GT(cached.weight_cache_bytes(), 0u);
    EXPECT_EQ(streamed.weight_cache_bytes(), 0u);
    const auto a = cached.output_f32(y), b = streamed.output_f32(y);
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
  }
}

TEST(ReferenceOps, GetRowsRejectsOutOfRangeIds) {
  Fixture f;
  const auto ids = f.g.input("tokens", InputParams::Kind::Tokens, 2);
  const auto r = f.g.get_rows("inp_embd", f.w("emb", random_vec(3 * 4, 1), sh(3, 4)), ids);
  f.g.mark_output(r);
  ReferenceExecutor ex(1);
  const std::vector<int32_t> ok{3, 0}, bad{1, 4}, neg{-1, 0};
  EXPECT_NO_THROW(ex.run(f.g, plan(f.g), ok, {}));
  try {
    ex.run(f.g, plan(f.g), bad, {});
    FAIL() << "expected out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("inp_embd"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("id 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ex.run(f.g, plan(f.g), neg, {}), std::out_of_range);
}

TEST(ReferenceOps, RmsNormWithAndWithoutWeight) {
  for (bool with_weight : {false, true}) {
    Fixture f;
    const int64_t ne0 = 9, rows = 3;
    const auto xv = random_vec(ne0 * rows, 6), wv = random_vec(ne0, 7);
    const float eps = 1e-3f;
    const auto y = f.g.rms_norm("y", f.w("x", xv, sh(ne0, rows)), with_weight ? f.w("nw", wv, sh(ne0)) : kNoNode, eps);
    std::vector<double> want(ne0 * rows);
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < ne0; ++i) ss += double(xv[r * ne0 + i]) * xv[r * ne0 + i];
      const double d = std::sqrt(ss / ne0 + eps);
      for (int64_t i = 0; i < ne0; ++i) want[r * ne0 + i] = xv[r * ne0 + i] / d * (with_weight ? wv[i] : 1.0);
    }
    expect_close(f.run(y), want);
  }
}

// Rope on x [head_dim 6, 2 heads, 2 tokens] with n_rot 4 (the last two dims pass through), written out by formula.
TEST(ReferenceOps, RopeNormalAndNeoxByFormula) {
  for (RopeMode mode : {RopeMode::Normal, RopeMode::Neox}) {
    for (bool factors : {false, true}) {
      SCOPED_TRACE(std::string(mode == RopeMode::Neox ? "neox" : "normal") + (factors ? " with factors" : ""));
      Fixture f;
      const auto xv = random_vec(6 * 2 * 2, 8);
      const std::vector<float> ff{1.0f, 2.5f};
      const std::vector<int32_t> pos{3, 7};
      RopeParams p;
      p.mode = mode;
      p.n_rot = 4;
      p.freq_base = 100.0f;
      p.freq_scale = 0.5f;
      const auto positions = f.g.input("positions", InputParams::Kind::Positions, 2);
      const auto y = f.g.rope("y", f.w("x", xv, sh(6, 2, 2)), positions, p, factors ? f.w("ff", ff, sh(2)) : kNoNode);
      std::vector<double> want(xv.begin(), xv.end());
      for (int t = 0; t < 2; ++t)
        for (int h = 0; h < 2; ++h) {
          const int base = (t * 2 + h) * 6;
          for (int i = 0; i < 2; ++i) {
            double theta = pos[t] * 0.5 * std::pow(100.0, -2.0 * i / 4.0);
            if (factors) theta /= ff[i];
            // Normal pairs (0,1), (2,3); Neox pairs (0,2), (1,3).
            const int a = mode == RopeMode::Normal ? base + 2 * i : base + i;
            const int b = mode == RopeMode::Normal ? a + 1 : a + 2;
            want[a] = xv[a] * std::cos(theta) - xv[b] * std::sin(theta);
            want[b] = xv[a] * std::sin(theta) + xv[b] * std::cos(theta);
          }
        }
      expect_close(f.run(y, {}, pos), want);
    }
  }
}

// Attention against a naive computation that keeps every k and v; two runs (a batch of 3, then 2 more) share the
// cache. GQA: 4 query heads over 2 kv heads, head 1 reads kv head 0, head 2 reads kv head 1. head_dim_v != head_dim.
TEST(ReferenceOps, AttentionMatchesNaiveWithGqa) {
  const int nh = 4, nkv = 2, hd = 3, hdv = 5, n_ctx = 8;
  const float scale = 0.7f;
  std::vector<std::vector<float>> all_k(n_ctx), all_v(n_ctx);  // by position: [hd * nkv], [hdv * nkv]
  ReferenceExecutor ex(2);
  uint32_t seed = 20;
  int pos0 = 0;
  for (int t : {3, 2}) {
    Fixture f;
    f.g.kv = KvCacheSpec{2, n_ctx, nkv, hd, hdv};
    const auto qv = random_vec(hd * nh * t, ++seed, -2, 2), kv = random_vec(hd * nkv * t, ++seed, -2, 2),
               vv = random_vec(hdv * nkv * t, ++seed);
    const auto positions = f.g.input("positions", InputParams::Kind::Positions, t);
    const auto a = f.g.attention("attn", f.w("q", qv, sh(hd, nh, t)), f.w("k", kv, sh(hd, nkv, t)),
                                 f.w("v", vv, sh(hdv, nkv, t)), positions, AttentionParams{1, nh, nkv, hd, hdv, scale});
    f.g.mark_output(a);
    std::vector<int32_t> pos(t);
    for (int i = 0; i < t; ++i) {
      pos[i] = pos0 + i;
      all_k[pos[i]].assign(kv.begin() + i * hd * nkv, kv.begin() + (i + 1) * hd * nkv);
      all_v[pos[i]].assign(vv.begin() + i * hdv * nkv, vv.begin() + (i + 1) * hdv * nkv);
    }
    ex.run(f.g, plan(f.g), {}, pos);
    std::vector<double> want(hdv * nh * t);
    for (int i = 0; i < t; ++i)
      for (int h = 0; h < nh; ++h) {
        const int g = h / (nh / nkv);
        std::vector<double> s(pos[i] + 1);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= pos[i]; ++j) {
          double d = 0;
          for (int c = 0; c < hd; ++c) d += double(qv[(i * nh + h) * hd + c]) * all_k[j][g * hd + c];
          s[j] = scale * d;
          mx = std::max(mx, s[j]);
        }
        for (auto& x : s) sum += (x = std::exp(x - mx));
        for (int c = 0; c < hdv; ++c) {
          double o = 0;
          for (int j = 0; j <= pos[i]; ++j) o += s[j] / sum * all_v[j][g * hdv + c];
          want[(i * nh + h) * hdv + c] = o;
        }
      }
    const auto got = ex.output_f32(a);
    expect_close({got.begin(), got.end()}, want, 1e-6, 1e-5);
    // the cache holds what was written, at [slot][kv_head][dim] of layer 1; layer 0 untouched
    const auto kc = ex.k_cache(1);
    for (int i = 0; i < t; ++i)
      for (int c = 0; c < hd * nkv; ++c) EXPECT_EQ(kc[pos[i] * hd * nkv + c], all_k[pos[i]][c]);
    for (float x : ex.k_cache(0)) ASSERT_EQ(x, 0.0f);
    pos0 += t;
  }
  ex.clear_kv();
  for (float x : ex.v_cache(1)) ASSERT_EQ(x, 0.0f);
}

TEST(ReferenceOps, ElementwiseSoftmaxArgmaxLastToken) {
  Fixture f;
  const int64_t ne0 = 5, rows = 3;
  const auto av = random_vec(ne0 * rows, 30, -3, 3), bv = random_vec(ne0 * rows, 31, -3, 3), rv = random_vec(ne0, 32);
  const auto a = f.w("a", av, sh(ne0, rows)), b = f.w("b", bv, sh(ne0, rows));
  const auto add = f.g.add("add", a, b), mul = f.g.mul("mul", a, b), mulr = f.g.mul("mulr", a, f.w("r", rv, sh(ne0)));
  const auto silu = f.g.silu("silu", a), sw = f.g.swiglu("swiglu", a, b), sm = f.g.softmax("softmax", a);
  const auto last = f.g.last_token("last", add);
  // ties: row 0 max at 1 and 3 -> 1; row 1 all equal -> 0; row 2 max at the end
  const std::vector<float> tv{0, 2, 1, 2, -1, 7, 7, 7, 7, 7, -5, -4, -3, -2, -1};
  const auto am = f.g.argmax("argmax", f.w("tv", tv, sh(ne0, rows)));
  for (NodeId id : {add, mul, mulr, silu, sw, sm, last, am}) f.g.mark_output(id);
  ReferenceExecutor ex(1);
  ex.run(f.g, plan(f.g), {}, {});
  std::vector<double> w_add, w_mul, w_mulr, w_silu, w_sw, w_sm, w_last;
  for (int64_t i = 0; i < ne0 * rows; ++i) {
    w_add.push_back(av[i] + bv[i]);
    w_mul.push_back(double(av[i]) * bv[i]);
    w_mulr.push_back(double(av[i]) * rv[i % ne0]);
    w_silu.push_back(av[i] / (1 + std::exp(-double(av[i]))));
    w_sw.push_back(av[i] / (1 + std::exp(-double(av[i]))) * bv[i]);
  }
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < ne0; ++i) sum += std::exp(double(av[r * ne0 + i]));
    for (int64_t i = 0; i < ne0; ++i) w_sm.push_back(std::exp(double(av[r * ne0 + i])) / sum);
  }
  for (int64_t i = 0; i < ne0; ++i) w_last.push_back(av[2 * ne0 + i] + bv[2 * ne0 + i]);
  auto vec = [&](NodeId id) {
    const auto s = ex.output_f32(id);
    return std::vector<float>(s.begin(), s.end());
  };
  expect_close(vec(add), w_add);
  expect_close(vec(mul), w_mul);
  expect_close(vec(mulr), w_mulr);
  expect_close(vec(silu), w_silu);
  expect_close(vec(sw), w_sw);
  expect_close(vec(sm), w_sm);
  expect_close(vec(last), w_last);
  const auto idx = ex.output_i32(am);
  ASSERT_EQ(idx.size(), 3u);
  EXPECT_EQ(idx[0], 1);
  EXPECT_EQ(idx[1], 0);
  EXPECT_EQ(idx[2], 4);
}

TEST(ReferenceOps, ResultsDoNotDependOnThreadCount) {
  Fixture f;
  const int64_t k = 600, n = 515, t = 2;  // above the parallel threshold
  const auto y = f.g.mul_mat("y", f.w("w", random_vec(k * n, 40), sh(k, n)), f.w("x", random_vec(k * t, 41), sh(k, t)));
  f.g.mark_output(y);
  const Plan p = plan(f.g);
  ReferenceExecutor one(1), three(3);
  EXPECT_EQ(three.n_threads(), 3);
  one.run(f.g, p, {}, {});
  three.run(f.g, p, {}, {});
  const auto a = one.output_f32(y), b = three.output_f32(y);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]) << i;
}

TEST(ReferenceOps, AttentionDoesNotDependOnThreadCount) {
  const int nh = 8, nkv = 2, hd = 64, t = 32;  // enough work to be split over threads
  const auto qv = random_vec(hd * nh * t, 50), kv = random_vec(hd * nkv * t, 51), vv = random_vec(hd * nkv * t, 52);
  // Token i sits at position (7 i) mod 32: the whole batch enters the cache before any token attends, so the
  // order of tokens in a batch does not matter. `sorted` holds the same tokens in position order.
  std::vector<int32_t> pos(t), in_order(t);
  std::vector<float> qs(qv.size()), ks(kv.size()), vs(vv.size());
  for (int i = 0; i < t; ++i) {
    pos[i] = (i * 7) % t;
    in_order[pos[i]] = pos[i];
    std::copy_n(qv.begin() + i * hd * nh, hd * nh, qs.begin() + pos[i] * hd * nh);
    std::copy_n(kv.begin() + i * hd * nkv, hd * nkv, ks.begin() + pos[i] * hd * nkv);
    std::copy_n(vv.begin() + i * hd * nkv, hd * nkv, vs.begin() + pos[i] * hd * nkv);
  }
  auto build = [&](Fixture& f, const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v) {
    f.g.kv = KvCacheSpec{1, t, nkv, hd, hd};
    const auto positions = f.g.input("positions", InputParams::Kind::Positions, t);
    const auto a = f.g.attention("attn", f.w("q", q, sh(hd, nh, t)), f.w("k", k, sh(hd, nkv, t)),
                                 f.w("v", v, sh(hd, nkv, t)), positions, AttentionParams{0, nh, nkv, hd, hd, 0.125f});
    f.g.mark_output(a);
    return a;
  };
  Fixture shuffled, sorted;
  const auto a = build(shuffled, qv, kv, vv);
  const auto b = build(sorted, qs, ks, vs);
  ReferenceExecutor one(1), three(3), ordered(2);
  one.run(shuffled.g, plan(shuffled.g), {}, pos);
  three.run(shuffled.g, plan(shuffled.g), {}, pos);
  ordered.run(sorted.g, plan(sorted.g), {}, in_order);
  const auto x = one.output_f32(a), y = three.output_f32(a), z = ordered.output_f32(b);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << i;
  for (int i = 0; i < t; ++i)
    for (int c = 0; c < hd * nh; ++c) ASSERT_EQ(x[i * hd * nh + c], z[pos[i] * hd * nh + c]) << i << "," << c;
}

TEST(ReferenceExecutor, ReportsBadRunsClearly) {
  Fixture f;
  f.g.kv = KvCacheSpec{1, 4, 1, 2, 2};
  const auto tokens = f.g.input("tokens", InputParams::Kind::Tokens, 1);
  const auto positions = f.g.input("positions", InputParams::Kind::Positions, 1);
  const auto x = f.g.get_rows("x", f.w("emb", random_vec(2 * 3, 1), sh(2, 3)), tokens);
  const auto h = f.g.silu("h", x);
  const auto q = f.g.reshape("q", f.g.silu("hq", h), sh(2, 1, 1));
  const auto a = f.g.attention("attn", q, q, q, positions, AttentionParams{0, 1, 1, 2, 2, 1.0f});
  const auto out = f.g.silu("out", a);
  f.g.mark_output(out);
  const Plan p = plan(f.g);
  ReferenceExecutor ex(1);
  const std::vector<int32_t> tok{2};
  for (int32_t pos : {0, 3}) EXPECT_NO_THROW(ex.run(f.g, p, tok, std::vector<int32_t>{pos}));
  try {
    ex.run(f.g, p, tok, std::vector<int32_t>{4});
    FAIL() << "expected out_of_range";
  } catch (const std::out_of_range& e) {
    EXPECT_NE(std::string(e.what()).find("n_ctx = 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(ex.run(f.g, p, tok, std::vector<int32_t>{-1}), std::out_of_range);
  EXPECT_THROW(ex.run(f.g, p, std::vector<int32_t>{1, 2}, std::vector<int32_t>{0}), std::invalid_argument);
  EXPECT_THROW(ex.run(f.g, p, tok, {}), std::invalid_argument);
  ex.run(f.g, p, tok, std::vector<int32_t>{1});
  EXPECT_NO_THROW(ex.output_f32(out));
  EXPECT_THROW(ex.output_f32(h), std::invalid_argument);        // intermediate: buffer reused
  EXPECT_THROW(ex.output_i32(out), std::invalid_argument);      // wrong dtype
  EXPECT_THROW(ex.output_f32(999), std::invalid_argument);      // not a node
  EXPECT_EQ(ex.output_i32(tokens)[0], 2);                       // inputs stay readable
  // with every buffer kept, intermediates are readable
  ex.run(f.g, plan_all_live(f.g), tok, std::vector<int32_t>{1});
  EXPECT_EQ(ex.output_f32(h).size(), 2u);
  // a plan of another graph
  Graph other;
  other.input("tokens", InputParams::Kind::Tokens, 1);
  EXPECT_THROW(ex.run(f.g, plan(other), tok, std::vector<int32_t>{0}), std::invalid_argument);
  // a plan whose view does not share its source's bytes, or that hands a node another node's storage
  Plan tampered = plan(f.g);
  tampered.offset[static_cast<size_t>(q)] += 256;
  EXPECT_THROW(ex.run(f.g, tampered, tok, std::vector<int32_t>{0}), std::invalid_argument);
  tampered = plan(f.g);
  tampered.root[static_cast<size_t>(out)] = 2;  // the embedding weight
  EXPECT_THROW(ex.run(f.g, tampered, tok, std::vector<int32_t>{0}), std::invalid_argument);
  // attention parameters that contradict the graph's KV cache
  f.g.kv.head_dim_v = 3;
  EXPECT_THROW(ex.run(f.g, p, tok, std::vector<int32_t>{0}), std::invalid_argument);
  f.g.kv = KvCacheSpec{};
  EXPECT_THROW(ex.run(f.g, p, tok, std::vector<int32_t>{0}), std::invalid_argument);
}

TEST(ReferenceExecutor, WeightWithoutHostDataIsAnError) {
  Graph g;
  WeightParams wp;
  wp.tensor = "output.weight";
  const auto w = g.weight("output", wp, sh(4, 2));
  graph_test::WeightStore ws;
  const auto y = g.mul_mat("logits", w, ws.add(g, "x", random_vec(4, 1), sh(4)));
  g.mark_output(y);
  ReferenceExecutor ex(1);
  try {
    ex.run(g, plan(g), {}, {});
    FAIL() << "expected invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("output.weight"), std::string::npos) << e.what();
  }
}
