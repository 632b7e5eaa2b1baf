// The q/k/v launch that also attends (MatvecParams::attend, cuda/kernels/matvec_attend.cuh): its q and K/V slot
// are bit for bit those of the launch without the tail (the groups go by KV head, each row computed as before), and
// its attention output matches a double-precision softmax over the q it wrote and the cache it leaves, with the
// kernel's documented rounding (q x scale to f16, K and V as the f16 cache holds them). Slots past the position
// hold f16 NaN: reading one fails the comparison. Launched twice: the counters must be back at zero.
#include <cmath>

#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/rope.cuh"
#include "gpu_test.h"
#include "quant/half.h"

namespace {

using quant::Type;
using namespace gpu_test;

struct Case {
  Type q_type, v_type;  // k has q's type
  int64_t K;            // 4096: blocks of 16 warps; 1024: 4 warps (more chunks a warp)
  int32_t head_dim, n_head, n_head_kv;
};

TEST(WeightKernels, MatvecAttendTail) {
  REQUIRE_GPU();
  std::mt19937 rng(777);
  const int64_t n_ctx = 1024;
  const float base = 10000.0f;
  const Case cases[] = {{Type::Q4_0, Type::Q4_0, 4096, 128, 8, 8},  // MHA (the 7B's group of 1), 16 warps
                        {Type::Q4_K, Type::Q6_K, 4096, 128, 16, 4},  // a Q4_K_M layer: two kernels in one launch
                        {Type::Q4_K, Type::Q4_K, 1024, 64, 16, 8},   // head_dim 64, group of 2, 4 warps
                        {Type::Q8_0, Type::Q8_0, 1024, 128, 8, 1},   // group of 8
                        {Type::Q4_0, Type::Q4_0, 2048, 64, 32, 8}};  // the 1B's shape
  for (const Case& c : cases)
    for (const int32_t pos : {0, 5, 100, 255, 700, int32_t(n_ctx) - 1}) {
      const int64_t hd = c.head_dim, Nq = hd * c.n_head, Nk = hd * c.n_head_kv;
      const int64_t G = c.n_head / c.n_head_kv;
      const auto wq = random_weights(rng, c.q_type, c.K, Nq), wk = random_weights(rng, c.q_type, c.K, Nk);
      const auto wv = random_weights(rng, c.v_type, c.K, Nk);
      const auto x = random_floats(rng, size_t(c.K)), norm_w = random_floats(rng, size_t(c.K), 0.5f, 1.5f);
      const auto powers = cuda::rope_base_powers(base, c.head_dim);
      // The cache before the launch: random values in the slots before the position, NaN from it on.
      std::vector<uint16_t> cache0(size_t(Nk * n_ctx), 0xffff);
      for (int64_t h = 0; h < c.n_head_kv; ++h)
        for (int64_t s = 0; s < pos; ++s)
          for (int64_t d = 0; d < hd; ++d)
            cache0[size_t((h * n_ctx + s) * hd + d)] = quant::f32_to_f16(random_floats(rng, 1, -2.0f, 2.0f)[0]);
      auto dq = upload(wq), dk = upload(wk), dv = upload(wv), dx = upload(x), dn = upload(norm_w);
      auto dpow = upload(powers), dpos = upload(std::vector<int32_t>{pos});
      auto unused = poisoned_f32(size_t(Nq));
      auto counters = upload(std::vector<unsigned>(size_t(c.n_head_kv), 0u));
      const std::string what = std::string(quant::type_name(c.q_type)) + "/" + quant::type_name(c.v_type) +
                                " K=" + std::to_string(c.K) + " hd=" + std::to_string(hd) + " heads " +
                                std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) +
                                " pos=" + std::to_string(pos);
      // One launch on fresh copies of the cache: with the tail or without.
      const auto launch = [&](bool attend, cuda::DeviceBuffer& q_out, cuda::DeviceBuffer& kc, cuda::DeviceBuffer& vc,
                              cuda::DeviceBuffer& out) {
        kc = upload(cache0), vc = upload(cache0);
        cuda::MatvecParams p{dq.get(), c.q_type, dx.as<float>(), nullptr, unused.as<float>(), c.K, Nq, 1};
        p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
        p.siblings[0] = cuda::MatvecParams::Sibling{dk.get(), nullptr, unused.as<float>(), Nk, c.q_type};
        p.siblings[1] = cuda::MatvecParams::Sibling{dv.get(), nullptr, unused.as<float>(), Nk, c.v_type};
        p.n_siblings = 2;
        p.rope_kv = cuda::MatvecRopeKv{q_out.as<float>(), kc.as<uint16_t>(), vc.as<uint16_t>(), dpos.as<int32_t>(),
                                       dpow.as<double>(), nullptr, 1.0f, c.head_dim, c.head_dim, c.head_dim, n_ctx};
        if (attend)
          p.attend = cuda::MatvecAttend{out.as<float>(), counters.as<unsigned>(), c.n_head, c.n_head_kv,
                                        1.0f / std::sqrt(float(hd))};
        ASSERT_TRUE(cuda::matvec_fuses(p)) << what;
        cuda::launch_matvec(p, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
      };
      auto q_plain = poisoned_f32(size_t(Nq)), q_att = poisoned_f32(size_t(Nq)), out = poisoned_f32(size_t(Nq));
      cuda::DeviceBuffer kc_plain, vc_plain, kc, vc;
      launch(false, q_plain, kc_plain, vc_plain, out);
      launch(true, q_att, kc, vc, out);
      CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));  // again: the counters are back at zero
      launch(true, q_att, kc, vc, out);

      const auto q = download<float>(q_att, size_t(Nq));
      const auto kh = download<uint16_t>(kc, cache0.size()), vh = download<uint16_t>(vc, cache0.size());
      ASSERT_EQ(0, std::memcmp(q.data(), download<float>(q_plain, size_t(Nq)).data(), q.size() * 4)) << what;
      ASSERT_EQ(kh, download<uint16_t>(kc_plain, cache0.size())) << what;
      ASSERT_EQ(vh, download<uint16_t>(vc_plain, cache0.size())) << what;

      const float scale = 1.0f / std::sqrt(float(hd));
      std::vector<double> ref(static_cast<size_t>(Nq), 0.0);
      double v_max = 0;
      for (int64_t h = 0; h < c.n_head; ++h) {
        const int64_t kvh = h / G;
        std::vector<double> s(size_t(pos) + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= pos; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e)
            d += double(quant::f16_to_f32(quant::f32_to_f16(q[size_t(h * hd + e)] * scale))) *
                 quant::f16_to_f32(kh[size_t((kvh * n_ctx + j) * hd + e)]);
          s[size_t(j)] = d, mx = std::max(mx, d);
        }
        for (double& v : s) v = std::exp(v - mx), sum += v;
        for (int64_t e = 0; e < hd; ++e) {
          double a = 0;
          for (int64_t j = 0; j <= pos; ++j) {
            const double vj = quant::f16_to_f32(vh[size_t((kvh * n_ctx + j) * hd + e)]);
            a += s[size_t(j)] * vj, v_max = std::max(v_max, std::fabs(vj));
          }
          ref[size_t(h * hd + e)] = a / sum;
        }
      }
      // f32 scores, softmax and P V against double: a wrong, missing or NaN slot is far outside this.
      EXPECT_TRUE(close("attention " + what, download<float>(out, size_t(Nq)), ref, {1e-4 * v_max}, 0.0));
    }
}

// The tail's shapes: head_dim = head_dim_v of 64 or 128, groups of 1, 2, 4 or 8, counters given, with the epilogue.
TEST(WeightKernels, MatvecAttendRefusesOtherShapes) {
  uint16_t cache[2] = {};
  unsigned counters[2] = {};
  int32_t pos = 0;
  double power = 1.0;
  alignas(16) float y[16] = {};
  alignas(16) uint8_t w[144] = {};  // pointers only: nothing is launched
  alignas(16) float x[512] = {};
  alignas(16) uint16_t kv[8] = {};
  cuda::MatvecParams p{w, Type::Q4_K, x, nullptr, y, 512, 256, 1};
  p.siblings[0] = cuda::MatvecParams::Sibling{w, nullptr, y, 128, Type::Q4_K};
  p.siblings[1] = cuda::MatvecParams::Sibling{w, nullptr, y, 128, Type::Q4_K};
  p.n_siblings = 2;
  p.rope_kv = cuda::MatvecRopeKv{y, kv, kv, &pos, &power, nullptr, 1.0f, 64, 64, 64, 16};
  p.attend = cuda::MatvecAttend{y, counters, 4, 2, 0.125f};
  EXPECT_TRUE(cuda::matvec_fuses(p));  // q 4 heads, k and v 2 heads of 64
  auto refused = [&](auto mutate) {
    cuda::MatvecParams b = p;
    mutate(b);
    return !cuda::matvec_fuses(b);
  };
  EXPECT_TRUE(refused([](auto& b) { b.rope_kv.q_out = nullptr; }));      // no epilogue
  EXPECT_TRUE(refused([](auto& b) { b.attend.counters = nullptr; }));    // no counters
  EXPECT_TRUE(refused([](auto& b) { b.attend.n_head = 6; }));            // group of 3
  EXPECT_TRUE(refused([](auto& b) { b.attend.n_head_kv = 1; }));         // heads not those of k
  EXPECT_TRUE(refused([&](auto& b) { b.rope_kv.k_cache = cache + 1; }));  // unaligned cache
  EXPECT_TRUE(refused([](auto& b) {                                      // head_dim 32
    b.rope_kv.head_dim = b.rope_kv.head_dim_v = b.rope_kv.n_rot = 32, b.attend.n_head = 8, b.attend.n_head_kv = 4;
  }));
}

}  // namespace
