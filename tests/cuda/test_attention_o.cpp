// Q4_0 matrices regrouped by columns (q4_0_cols.cuh) and the attention + o projection launch (attention_o.cuh)
// against double-precision references: the causal softmax over the f16 cache, the product with o's dequantized
// rows, plus the residual; the fixed-point result the same bits when launched again.
#include <cmath>
#include <cstring>

#include "cuda/kernels/attention_o.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/q4_0_cols.cuh"
#include "gpu_test.h"
#include "quant/half.h"

namespace {

using quant::Type;
using namespace gpu_test;

TEST(Q4_0Cols, HostRegroupKeepsEveryBlock) {
  std::mt19937 rng(11);
  const int64_t K = 512, N = 40;
  const auto w = random_weights(rng, Type::Q4_0, K, N);
  std::vector<uint8_t> r(w.size());
  cuda::q4_0_cols_regroup_host(w.data(), r.data(), K, N);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < K / 32; ++c) {
      const uint8_t* b = w.data() + (n * (K / 32) + c) * 18;
      const cuda::Q4_0ColsBlock o = cuda::q4_0_cols_block(r.data(), K, N, n, c);
      ASSERT_EQ(std::memcmp(o.qs, b + 2, 16), 0) << n << "," << c;
      ASSERT_EQ(std::memcmp(o.d, b, 2), 0) << n << "," << c;
    }
  EXPECT_FALSE(cuda::q4_0_cols_fits(w.data(), 96, N));  // K not a multiple of 256
}

TEST(Q4_0Cols, DeviceRegroupAndDequantMatchTheFile) {
  REQUIRE_GPU();
  std::mt19937 rng(12);
  const int64_t K = 1024, N = 300;
  const auto w = random_weights(rng, Type::Q4_0, K, N);
  std::vector<uint8_t> host(w.size());
  cuda::q4_0_cols_regroup_host(w.data(), host.data(), K, N);
  auto dw = upload(w);
  cuda::launch_q4_0_cols_regroup(dw.get(), K, N, nullptr);
  EXPECT_EQ(download<uint8_t>(dw, w.size()), host);
  // Rows [17, 17 + 200) dequantized from the regrouped matrix: the same binary16 values as from the file's.
  const int64_t row0 = 17, rows = 200;
  auto file = upload(w);
  cuda::DeviceBuffer a(size_t(K * rows * 2)), b(size_t(K * rows * 2));
  cuda::launch_dequant_f16({file.get(), Type::Q4_0, K, row0, rows, a.as<uint16_t>(), false, N}, nullptr);
  cuda::launch_dequant_f16({dw.get(), Type::Q4_0, K, row0, rows, b.as<uint16_t>(), true, N}, nullptr);
  EXPECT_EQ(download<uint16_t>(a, size_t(K * rows)), download<uint16_t>(b, size_t(K * rows)));
}

struct Shape {
  int32_t n_head, n_head_kv;
};

// The attention of head h at position pos over caches [128, n_ctx, n_kv] of f16 bits, in double.
std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<uint16_t>& kc,
                                  const std::vector<uint16_t>& vc, int64_t n_ctx, const Shape& s, int32_t pos,
                                  float scale) {
  std::vector<double> out(size_t(128) * s.n_head);
  for (int h = 0; h < s.n_head; ++h) {
    const int g = h / (s.n_head / s.n_head_kv);
    std::vector<double> sc(size_t(pos) + 1);
    double m = -INFINITY;
    for (int t = 0; t <= pos; ++t) {
      double d = 0;
      for (int k = 0; k < 128; ++k)
        d += double(q[size_t(h) * 128 + k]) * double(quant::f16_to_f32(kc[(size_t(g) * n_ctx + t) * 128 + k]));
      sc[size_t(t)] = d * scale, m = std::max(m, sc[size_t(t)]);
    }
    double l = 0;
    for (double& e : sc) e = std::exp(e - m), l += e;
    for (int k = 0; k < 128; ++k) {
      double a = 0;
      for (int t = 0; t <= pos; ++t) a += sc[size_t(t)] * double(quant::f16_to_f32(vc[(size_t(g) * n_ctx + t) * 128 + k]));
      out[size_t(h) * 128 + k] = a / l;
    }
  }
  return out;
}

TEST(AttentionKernels, AttentionOMatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  const int64_t n_ctx = 300;
  const float scale = 1.0f / std::sqrt(128.0f);
  for (const Shape s : {Shape{32, 8}, Shape{32, 32}, Shape{16, 4}}) {
    const int64_t D = 128 * int64_t(s.n_head), kv = 128 * n_ctx * s.n_head_kv;
    ASSERT_TRUE(cuda::attention_o_fits(s.n_head, s.n_head_kv, 128, 128));
    const auto o = random_weights(rng, Type::Q4_0, D, D);
    std::vector<uint8_t> cols(o.size());
    cuda::q4_0_cols_regroup_host(o.data(), cols.data(), D, D);
    const auto q = random_floats(rng, size_t(D)), residual = random_floats(rng, size_t(D));
    std::vector<uint16_t> kc(static_cast<size_t>(kv)), vc(static_cast<size_t>(kv));
    for (auto& v : kc) v = quant::f32_to_f16(std::uniform_real_distribution<float>(-1, 1)(rng));
    for (auto& v : vc) v = quant::f32_to_f16(std::uniform_real_distribution<float>(-1, 1)(rng));
    auto dcols = upload(cols), dq = upload(q), dres = upload(residual), dk = upload(kc), dv = upload(vc);
    cuda::DeviceBuffer acc(size_t(D) * 8);
    for (const int32_t pos : {0, 9, 130, 299})
      for (const bool given : {false, true}) {  // attending here, or taking the attention's output (long contexts)
        const auto att = attention_ref(q, kc, vc, n_ctx, s, pos, scale);
        std::vector<float> att_f(att.begin(), att.end());
        auto datt = upload(att_f), dpos = upload(std::vector<int32_t>{pos});
        cuda::AttentionOParams p;
        p.q = dq.as<float>(), p.k_cache = dk.as<uint16_t>(), p.v_cache = dv.as<uint16_t>();
        p.position = dpos.as<int32_t>(), p.attn = given ? datt.as<float>() : nullptr, p.o = dcols.get();
        p.residual = dres.as<float>(), p.acc = acc.as<unsigned long long>(), p.scale = scale, p.n_ctx = n_ctx;
        p.n_head = s.n_head, p.n_head_kv = s.n_head_kv;
        std::vector<long long> first;
        for (int rep = 0; rep < 2; ++rep) {
          CUDA_CHECK(cudaMemset(acc.get(), 0, acc.bytes()));
          cuda::launch_attention_o(p, nullptr);
          const auto got = download<long long>(acc, size_t(D));
          if (rep == 0) first = got;
          else EXPECT_EQ(got, first) << "the same bits when launched again";
        }
        // o's rows times the attention (the one the kernel took: the reference's own when given), in double.
        std::vector<float> y(static_cast<size_t>(D));
        std::vector<double> ref(static_cast<size_t>(D)), atol(static_cast<size_t>(D));
        for (int64_t n = 0; n < D; ++n) {
          const auto row = ref_row(o, Type::Q4_0, D, n);
          double acc_d = residual[size_t(n)], mag = 0;
          for (int64_t k = 0; k < D; ++k) {
            const double a = given ? double(att_f[size_t(k)]) : att[size_t(k)];
            acc_d += double(row[size_t(k)]) * a, mag += std::fabs(double(row[size_t(k)]) * a);
          }
          ref[size_t(n)] = acc_d;
          atol[size_t(n)] = 1e-4 * mag + 1e-6;  // the int16 runs of the attention (1 / 65534 of a run's largest)
          y[size_t(n)] = float(double(first[size_t(n)]) / cuda::kFixedOne);
        }
        EXPECT_TRUE(close("attention_o heads " + std::to_string(s.n_head) + "/" + std::to_string(s.n_head_kv) +
                              " pos " + std::to_string(pos) + (given ? " (attention given)" : ""),
                          y, ref, atol, 1e-5));
      }
  }
}

// The gate/up launch reading x from the fixed-point stream (MatvecParams::x_fixed) computes what it computes from
// the same values as floats, and block 0 hands x on as floats (x_copy).
TEST(WeightKernels, MatvecReadsFixedPointX) {
  REQUIRE_GPU();
  std::mt19937 rng(41);
  const int64_t K = 4096, N = 1536;
  const auto wg = random_weights(rng, Type::Q4_0, K, N), wu = random_weights(rng, Type::Q4_0, K, N);
  const auto x = random_floats(rng, size_t(K), -4.0f, 4.0f), norm_w = random_floats(rng, size_t(K), 0.5f, 1.5f);
  std::vector<long long> xf(x.size());
  std::vector<float> back(x.size());
  for (size_t i = 0; i < x.size(); ++i)
    xf[i] = std::llround(double(x[i]) * cuda::kFixedOne), back[i] = cuda::fixed_to_float(xf[i]);
  auto dg = upload(wg), du = upload(wu), dx = upload(back), dxf = upload(xf), dn = upload(norm_w);
  auto copy = poisoned_f32(size_t(K)), gy = poisoned_f32(size_t(N)), uy = poisoned_f32(size_t(N));
  std::vector<std::vector<float>> out;
  for (const bool fixed : {false, true}) {
    auto h = poisoned_f32(size_t(N));
    cuda::MatvecParams p{dg.get(), Type::Q4_0, fixed ? nullptr : dx.as<float>(), nullptr, gy.as<float>(), K, N, 1};
    p.x_fixed = fixed ? dxf.as<long long>() : nullptr, p.x_copy = fixed ? copy.as<float>() : nullptr;
    p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
    p.siblings[0] = cuda::MatvecParams::Sibling{du.get(), nullptr, uy.as<float>(), N, Type::Q4_0};
    p.n_siblings = 1, p.swiglu_out = h.as<float>();
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    out.push_back(download<float>(h, size_t(N)));
  }
  EXPECT_EQ(out[0], out[1]) << "the same floats in: the same bits out";
  EXPECT_EQ(download<float>(copy, size_t(K)), back);
  cuda::MatvecParams q{dg.get(), Type::Q4_K, nullptr, nullptr, gy.as<float>(), K, N, 1};
  q.x_fixed = dxf.as<long long>();
  EXPECT_FALSE(cuda::matvec_fuses(q)) << "Q4_0 only";
  q.type = Type::Q4_0, q.K = 17920;
  EXPECT_FALSE(cuda::matvec_fuses(q)) << "one pass only (K <= 16384)";
}

TEST(AttentionKernels, AttentionORefusesOtherShapes) {
  EXPECT_FALSE(cuda::attention_o_fits(32, 8, 64, 64));
  EXPECT_FALSE(cuda::attention_o_fits(24, 8, 128, 128));
  EXPECT_FALSE(cuda::attention_o_fits(32, 5, 128, 128));
  EXPECT_TRUE(cuda::attention_o_fits(64, 8, 128, 128));
}

}  // namespace
