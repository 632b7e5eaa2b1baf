// Whole-model checks on a tiny llama-like graph: a prompt prefilled at once equals the same tokens fed one by one
// (bit for bit, same KV cache), the graph equals an independent naive transformer, and decode is fast enough.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "graph/plan.h"
#include "graph/reference.h"
#include "graph_test_util.h"

using namespace graph;
using graph_test::TinyConfig;
using graph_test::TinyGraph;
using graph_test::TinyWeights;

namespace {

// Runs `tokens` at positions pos0.. through one graph of that batch size; returns the logits [n_vocab, T].
std::vector<float> run_batch(ReferenceExecutor& ex, const TinyConfig& c, const TinyWeights& w,
                             const std::vector<int32_t>& tokens, int pos0, bool all_live = false) {
  TinyGraph tg;
  graph_test::build_tiny(tg, c, w, static_cast<int>(tokens.size()));
  std::vector<int32_t> pos(tokens.size());
  for (size_t i = 0; i < pos.size(); ++i) pos[i] = pos0 + static_cast<int32_t>(i);
  ex.run(tg.g, all_live ? plan_all_live(tg.g) : plan(tg.g), tokens, pos);
  const auto l = ex.output_f32(tg.logits);
  // the last-token and argmax outputs agree with the full logits
  const auto last = ex.output_f32(tg.last_logits);
  const size_t v = static_cast<size_t>(c.n_vocab);
  for (size_t i = 0; i < v; ++i) EXPECT_EQ(last[i], l[l.size() - v + i]);
  size_t best = 0;
  for (size_t i = 1; i < v; ++i)
    if (last[i] > last[best]) best = i;
  EXPECT_EQ(ex.output_i32(tg.next_token)[0], static_cast<int32_t>(best));
  return {l.begin(), l.end()};
}

// The same transformer written directly, without the graph: double precision, every k/v recomputed each time.
std::vector<double> naive_logits(const TinyConfig& c, const TinyWeights& w, const std::vector<int32_t>& tokens) {
  const int e = c.n_embd, hd = c.head_dim, nh = c.n_head, nkv = c.n_head_kv, T = static_cast<int>(tokens.size());
  auto matvec = [](const std::vector<float>& m, const std::vector<double>& x, int k, int n, const float* bias) {
    std::vector<double> y(n);
    for (int i = 0; i < n; ++i) {
      double s = bias ? bias[i] : 0.0;
      for (int j = 0; j < k; ++j) s += m[size_t(i) * k + j] * x[j];
      y[i] = s;
    }
    return y;
  };
  auto norm = [&](const std::vector<double>& x, const std::vector<float>& g) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double d = std::sqrt(ss / x.size() + c.eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] / d * g[i];
    return y;
  };
  auto rope = [&](std::vector<double>& v, int n_heads, int pos) {
    for (int h = 0; h < n_heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const double th = pos * std::pow(double(c.rope_base), -2.0 * i / hd);
        const int a = h * hd + (c.rope_mode == RopeMode::Normal ? 2 * i : i);
        const int b = a + (c.rope_mode == RopeMode::Normal ? 1 : hd / 2);
        const double x0 = v[a], x1 = v[b];
        v[a] = x0 * std::cos(th) - x1 * std::sin(th);
        v[b] = x0 * std::sin(th) + x1 * std::cos(th);
      }
  };
  std::vector<std::vector<double>> x(T);
  for (int t = 0; t < T; ++t) x[t].assign(w.tok_embd.begin() + size_t(tokens[t]) * e, w.tok_embd.begin() + size_t(tokens[t] + 1) * e);
  for (int l = 0; l < c.n_layer; ++l) {
    std::vector<std::vector<double>> q(T), k(T), v(T);
    for (int t = 0; t < T; ++t) {
      const auto h = norm(x[t], w.attn_norm[l]);
      q[t] = matvec(w.wq[l], h, e, nh * hd, c.qkv_bias ? w.bq[l].data() : nullptr);
      k[t] = matvec(w.wk[l], h, e, nkv * hd, c.qkv_bias ? w.bk[l].data() : nullptr);
      v[t] = matvec(w.wv[l], h, e, nkv * hd, c.qkv_bias ? w.bv[l].data() : nullptr);
      rope(q[t], nh, t);
      rope(k[t], nkv, t);
    }
    for (int t = 0; t < T; ++t) {
      std::vector<double> att(nh * hd, 0.0);
      for (int h = 0; h < nh; ++h) {
        const int g = h / (nh / nkv);
        std::vector<double> s(t + 1);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[t][h * hd + i] * k[j][g * hd + i];
          s[j] = d / std::sqrt(double(hd));
          mx = std::max(mx, s[j]);
        }
        for (auto& z : s) sum += (z = std::exp(z - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i) att[h * hd + i] += s[j] / sum * v[j][g * hd + i];
      }
      const auto o = matvec(w.wo[l], att, nh * hd, e, nullptr);
      for (int i = 0; i < e; ++i) x[t][i] += o[i];
      const auto h = norm(x[t], w.ffn_norm[l]);
      const auto gt = matvec(w.gate[l], h, e, c.n_ff, nullptr), up = matvec(w.up[l], h, e, c.n_ff, nullptr);
      std::vector<double> act(c.n_ff);
      for (int i = 0; i < c.n_ff; ++i) act[i] = gt[i] / (1 + std::exp(-gt[i])) * up[i];
      const auto dn = matvec(w.down[l], act, c.n_ff, e, nullptr);
      for (int i = 0; i < e; ++i) x[t][i] += dn[i];
    }
  }
  std::vector<double> logits;
  for (int t = 0; t < T; ++t) {
    const auto y = matvec(w.output, norm(x[t], w.out_norm), e, c.n_vocab, nullptr);
    logits.insert(logits.end(), y.begin(), y.end());
  }
  return logits;
}

std::vector<TinyConfig> configs() {
  TinyConfig gqa;  // defaults: 4 heads over 2 kv heads, normal rope
  TinyConfig neox;
  neox.rope_mode = RopeMode::Neox;
  neox.qkv_bias = true;
  neox.n_head_kv = 4;
  neox.head_dim = 8;
  neox.n_embd = 30;
  neox.n_layer = 3;
  TinyConfig mqa;
  mqa.n_head_kv = 1;
  mqa.n_head = 3;
  return {gqa, neox, mqa};
}

}  // namespace

TEST(ReferenceModel, PrefillEqualsTokenByToken) {
  const std::vector<int32_t> prompt{5, 17, 0, 40, 17};
  int ci = 0;
  for (const TinyConfig& c : configs()) {
    SCOPED_TRACE("config " + std::to_string(ci++));
    const TinyWeights w(c, 11);
    ReferenceExecutor batched(2), single(1), split(3);
    const auto all = run_batch(batched, c, w, prompt, 0);
    std::vector<float> one;
    for (size_t i = 0; i < prompt.size(); ++i) {
      const auto l = run_batch(single, c, w, {prompt[i]}, static_cast<int>(i), i % 2 == 1);
      one.insert(one.end(), l.begin(), l.end());
    }
    // a prefill of 3, then 2 more in one batch
    auto mixed = run_batch(split, c, w, {prompt.begin(), prompt.begin() + 3}, 0);
    const auto rest = run_batch(split, c, w, {prompt.begin() + 3, prompt.end()}, 3);
    mixed.insert(mixed.end(), rest.begin(), rest.end());
    ASSERT_EQ(all.size(), one.size());
    for (size_t i = 0; i < all.size(); ++i) {
      ASSERT_EQ(all[i], one[i]) << "logit " << i % c.n_vocab << " of token " << i / c.n_vocab;
      ASSERT_EQ(all[i], mixed[i]) << "logit " << i % c.n_vocab << " of token " << i / c.n_vocab;
    }
    // the caches agree too
    for (int l = 0; l < c.n_layer; ++l) {
      const auto a = batched.k_cache(l), b = single.k_cache(l);
      for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(a[i], b[i]);
    }
    // a cleared cache starts a new sequence: the same prompt gives the same logits again
    batched.clear_kv();
    EXPECT_EQ(run_batch(batched, c, w, prompt, 0), all);
  }
}

TEST(ReferenceModel, MatchesNaiveTransformer) {
  const std::vector<int32_t> prompt{3, 9, 27, 1, 38, 2};
  for (const TinyConfig& c : configs()) {
    const TinyWeights w(c, 12);
    ReferenceExecutor ex(2);
    const auto got = run_batch(ex, c, w, prompt, 0);
    const auto want = naive_logits(c, w, prompt);
    ASSERT_EQ(got.size(), want.size());
    double max_err = 0;
    for (size_t i = 0; i < got.size(); ++i) max_err = std::max(max_err, std::fabs(got[i] - want[i]));
    EXPECT_LT(max_err, 2e-5) << "max |graph - naive| over the logits";
  }
}

// Decode speed of a stories260K-sized model (dim 64, 5 layers, 8/4 heads, ffn 172, vocab 512) on one thread.
TEST(ReferenceModel, DecodeSpeedOfATinyModel) {
  TinyConfig c;
  c.n_embd = 64;
  c.n_layer = 5;
  c.n_head = 8;
  c.n_head_kv = 4;
  c.head_dim = 8;
  c.n_ff = 172;
  c.n_vocab = 512;
  c.n_ctx = 256;
  const TinyWeights w(c, 13);
  TinyGraph tg;
  graph_test::build_tiny(tg, c, w, 1);
  const Plan p = plan(tg.g);
  ReferenceExecutor ex(1);
  const int n = 200;
  const auto t0 = std::chrono::steady_clock::now();
  int32_t tok = 1;
  for (int i = 0; i < n; ++i) {
    const int32_t pos = i;
    ex.run(tg.g, p, std::span(&tok, 1), std::span(&pos, 1));
    tok = ex.output_i32(tg.next_token)[0];
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double tps = n / s;
  RecordProperty("tokens_per_second", std::to_string(tps));
  std::printf("[ info ] stories260K-sized decode on one thread: %.0f tok/s (%d tokens, context up to %d)\n", tps, n, n);
#if defined(NDEBUG) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  // A loose floor (shared, loaded CI machines); the target on an idle core is >= 2000 tok/s. Unoptimised and
  // sanitizer builds only report.
  EXPECT_GT(tps, 300.0);
#endif
}
