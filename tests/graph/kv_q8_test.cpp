// The CPU reference with a q8_0 or q4_0 KV cache: what enters the cache is each head's K/V quantized to GGUF's Q8_0
// or Q4_0 (blocks of 32 along the head dimension) and dequantized, computed here from the formats' definitions, and
// attention reads exactly those values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "graph/plan.h"
#include "graph/reference.h"
#include "graph_test_util.h"
#include "quant/half.h"

using namespace graph;
using graph_test::random_vec;

namespace {

Shape sh(int64_t a, int64_t b = 1, int64_t c = 1) { return Shape{{a, b, c, 1}}; }

// Q8_0 round trip of 32 values as GGUF defines it: d = max|x| / 127 stored as f16, q = round(x / d) half away from
// zero (x times the reciprocal of the unrounded d), value q * f16(d).
std::vector<float> q8_round_trip(const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b + i]));
    const float d = amax / 127.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const float dh = quant::f16_to_f32(quant::f32_to_f16(d));
    for (int i = 0; i < 32; ++i) out[size_t(b + i)] = std::round(x[b + i] * id) * dh;
  }
  return out;
}

// Q4_0 round trip of 32 values as GGUF defines it: m the value of largest magnitude (its sign kept, the first on
// ties), d = m / -8 stored as f16, q = min(15, trunc(x / d + 8.5)) (x times the reciprocal of the unrounded d),
// value (q - 8) * f16(d). m itself lands on q = 0, the end of the range that has one more step.
std::vector<float> q4_round_trip(const float* x, int64_t n) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t b = 0; b < n; b += 32) {
    float m = 0;
    for (int i = 0; i < 32; ++i)
      if (std::fabs(x[b + i]) > std::fabs(m)) m = x[b + i];
    const float d = m / -8.0f, id = d != 0 ? 1.0f / d : 0.0f;
    const float dh = quant::f16_to_f32(quant::f32_to_f16(d));
    for (int i = 0; i < 32; ++i) {
      const int q = std::min(15, static_cast<int>(x[b + i] * id + 8.5f));
      out[size_t(b + i)] = float(q - 8) * dh;
    }
  }
  return out;
}

using RoundTrip = std::vector<float> (*)(const float*, int64_t);

// Three tokens at slots 2..4 of a 6-slot cache, 2 kv heads of K dim 64 (two blocks) and V dim 32, 4 query heads:
// the cache must hold round_trip of each head's row, bit for bit, and attention must read those values.
void expect_cache_holds_rounded_values(KvType type, RoundTrip round_trip) {
  const int nh = 4, nkv = 2, hd = 64, hdv = 32, n_ctx = 6, t = 3;
  const float scale = 0.125f;
  Graph g;
  graph_test::WeightStore ws;
  g.kv = KvCacheSpec{1, n_ctx, nkv, hd, hdv, type};
  const auto qv = random_vec(hd * nh * t, 71, -2, 2), kv = random_vec(hd * nkv * t, 72, -2, 2),
             vv = random_vec(hdv * nkv * t, 73);
  const auto positions = g.input("positions", InputParams::Kind::Positions, t);
  const auto a = g.attention("attn", ws.add(g, "q", qv, sh(hd, nh, t)), ws.add(g, "k", kv, sh(hd, nkv, t)),
                             ws.add(g, "v", vv, sh(hdv, nkv, t)), positions, AttentionParams{0, nh, nkv, hd, hdv, scale});
  g.mark_output(a);
  ReferenceExecutor ex(2);
  const std::vector<int32_t> pos{2, 3, 4};
  ex.run(g, plan(g), {}, pos);

  // [token][kv head][dim], each head's row quantized on its own.
  std::vector<float> kq, vq;
  for (int i = 0; i < t * nkv; ++i) {
    const auto k1 = round_trip(kv.data() + i * hd, hd), v1 = round_trip(vv.data() + i * hdv, hdv);
    kq.insert(kq.end(), k1.begin(), k1.end());
    vq.insert(vq.end(), v1.begin(), v1.end());
  }
  const auto kc = ex.k_cache(0), vc = ex.v_cache(0);
  size_t changed = 0;
  for (int i = 0; i < t; ++i) {
    for (int c = 0; c < hd * nkv; ++c) {
      ASSERT_EQ(kc[size_t(pos[i] * hd * nkv + c)], kq[size_t(i * hd * nkv + c)]) << "token " << i << " k " << c;
      changed += kq[size_t(i * hd * nkv + c)] != kv[size_t(i * hd * nkv + c)];
    }
    for (int c = 0; c < hdv * nkv; ++c)
      ASSERT_EQ(vc[size_t(pos[i] * hdv * nkv + c)], vq[size_t(i * hdv * nkv + c)]) << "token " << i << " v " << c;
  }
  EXPECT_GT(changed, size_t(hd * nkv * t / 2)) << "the cache should hold rounded values, not the inputs";

  // Attention over the dequantized values: token i sees the batch's slots 2..pos[i] (slots 0, 1 never written).
  const auto got = ex.output_f32(a);
  for (int i = 0; i < t; ++i)
    for (int h = 0; h < nh; ++h) {
      const int gk = h / (nh / nkv);
      std::vector<double> s;
      for (int j = 0; j <= i; ++j) {
        double d = 0;
        for (int c = 0; c < hd; ++c) d += double(qv[size_t((i * nh + h) * hd + c)]) * kq[size_t((j * nkv + gk) * hd + c)];
        s.push_back(scale * d);
      }
      // Slots 0 and 1 are zero in the cache and attended too (positions start at 2): score 0, value 0.
      s.push_back(0.0);
      s.push_back(0.0);
      const double mx = *std::max_element(s.begin(), s.end());
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - mx));
      for (int c = 0; c < hdv; ++c) {
        double o = 0;
        for (int j = 0; j <= i; ++j) o += s[size_t(j)] / sum * vq[size_t((j * nkv + gk) * hdv + c)];
        const float want = float(o);
        EXPECT_NEAR(got[size_t((i * nh + h) * hdv + c)], want, 1e-5 + 1e-5 * std::fabs(want)) << i << " " << h << " " << c;
      }
    }
}

TEST(ReferenceKvQ8, CacheHoldsQuantizedValuesAndAttentionReadsThem) {
  expect_cache_holds_rounded_values(KvType::Q8_0, q8_round_trip);
}

TEST(ReferenceKvQ4, CacheHoldsQuantizedValuesAndAttentionReadsThem) {
  expect_cache_holds_rounded_values(KvType::Q4_0, q4_round_trip);
}

// The hand-written Q4_0 round trip that the cache test compares with, against values worked out by hand: both ends
// of the 4-bit range (m on q = 0, -m past q = 15 and clamped) and an all-zero block (d = 0).
TEST(ReferenceKvQ4, RoundTripCoversTheRange) {
  std::vector<float> x(64, 0.0f);
  for (int i = 0; i < 32; ++i) x[size_t(i)] = -1.0f + 2.0f * float(i) / 31.0f;  // m = -1 (first of the two ends)
  const auto r = q4_round_trip(x.data(), 64);
  EXPECT_EQ(r[0], -1.0f);      // q = 0: (0 - 8) * (-1 / -8)
  EXPECT_EQ(r[31], 0.875f);    // +1 clamps at q = 15: 7 / 8
  for (int i = 32; i < 64; ++i) EXPECT_EQ(r[size_t(i)], 0.0f);
  for (int i = 0; i < 32; ++i) EXPECT_LE(std::fabs(r[size_t(i)] - x[size_t(i)]), 0.125f + 1e-6f) << i;
}

void expect_refuses_head_dims_of_16(KvType type) {
  Graph g;
  graph_test::WeightStore ws;
  g.kv = KvCacheSpec{1, 4, 1, 16, 16, type};
  const auto positions = g.input("positions", InputParams::Kind::Positions, 1);
  const auto x = random_vec(16, 1);
  const auto a = g.attention("attn", ws.add(g, "q", x, sh(16, 1, 1)), ws.add(g, "k", x, sh(16, 1, 1)),
                             ws.add(g, "v", x, sh(16, 1, 1)), positions, AttentionParams{0, 1, 1, 16, 16, 0.25f});
  g.mark_output(a);
  ReferenceExecutor ex(1);
  const std::vector<int32_t> pos{0};
  EXPECT_THROW(ex.run(g, plan(g), {}, pos), std::invalid_argument);
}

TEST(ReferenceKvQ8, RefusesHeadDimsThatAreNotBlocksOf32) { expect_refuses_head_dims_of_16(KvType::Q8_0); }
TEST(ReferenceKvQ4, RefusesHeadDimsThatAreNotBlocksOf32) { expect_refuses_head_dims_of_16(KvType::Q4_0); }

TEST(KvType, NamesRoundTrip) {
  EXPECT_STREQ(kv_type_name(KvType::Q4_0), "q4_0");
  for (KvType t : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    KvType back = t == KvType::F16 ? KvType::Q8_0 : KvType::F16;
    ASSERT_TRUE(parse_kv_type(kv_type_name(t), back));
    EXPECT_EQ(back, t);
  }
  KvType x = KvType::F16;
  EXPECT_FALSE(parse_kv_type("q4_1", x));
  EXPECT_FALSE(parse_kv_type("Q4_0", x));  // the names are lower case, as --cache-type takes them
  EXPECT_FALSE(parse_kv_type("", x));
  EXPECT_EQ(x, KvType::F16);
}

// The one head-dim rule every layer applies (session, reference, CUDA cache and kernels): q8_0 and q4_0 heads are
// whole GGUF Q8_0 / Q4_0 blocks (32 values, from the formats' traits); f16 takes any dims.
TEST(KvType, HeadDimsFitWholeBlocks) {
  EXPECT_EQ(kv_block_values(KvType::F16), 1);
  EXPECT_EQ(kv_block_values(KvType::Q8_0), 32);
  EXPECT_EQ(kv_block_values(KvType::Q4_0), 32);
  EXPECT_TRUE(kv_head_dims_fit(KvType::F16, 8, 8));
  EXPECT_TRUE(kv_head_dims_fit(KvType::Q8_0, 64, 128));
  EXPECT_FALSE(kv_head_dims_fit(KvType::Q8_0, 16, 16));
  EXPECT_FALSE(kv_head_dims_fit(KvType::Q8_0, 64, 48));  // v alone not whole blocks
  EXPECT_TRUE(kv_head_dims_fit(KvType::Q4_0, 64, 128));
  EXPECT_FALSE(kv_head_dims_fit(KvType::Q4_0, 16, 16));
  EXPECT_FALSE(kv_head_dims_fit(KvType::Q4_0, 48, 64));  // k alone not whole blocks
}

}  // namespace
