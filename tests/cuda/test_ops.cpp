// Activation kernels against double-precision CPU references: RMSNorm (rows and per-head), RoPE (both orderings,
// freq factors, positions from device memory), add / mul broadcast, SiLU, SwiGLU, softmax, argmax.
#include <algorithm>

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/norm.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/kernels/softmax.cuh"
#include "gpu_test.h"

namespace {

using namespace gpu_test;

// Appended piece by piece: GCC 12's -Wrestrict misfires on "[" + std::to_string(...) (a false positive).
std::string shape(int64_t a, int64_t b) {
  std::string s = "[";
  s += std::to_string(a);
  s += ", ";
  s += std::to_string(b);
  s += "]";
  return s;
}

TEST(OpKernels, RmsNorm) {
  REQUIRE_GPU();
  std::mt19937 rng(1);
  for (int64_t ne0 : {1, 8, 63, 128, 257, 4096})
    for (int64_t rows : {1, 5})
      for (bool with_w : {false, true}) {
        const auto x = random_floats(rng, ne0 * rows, -3.0f, 3.0f);
        const auto w = random_floats(rng, ne0);
        const float eps = 1e-5f;
        std::vector<double> ref(x.size());
        for (int64_t r = 0; r < rows; ++r) {
          double ss = 0;
          for (int64_t i = 0; i < ne0; ++i) ss += double(x[r * ne0 + i]) * x[r * ne0 + i];
          const double s = 1.0 / std::sqrt(ss / ne0 + eps);
          for (int64_t i = 0; i < ne0; ++i) ref[r * ne0 + i] = x[r * ne0 + i] * s * (with_w ? w[i] : 1.0);
        }
        auto dx = upload(x), dw = upload(w);
        auto out = poisoned_f32(x.size());
        cuda::launch_rms_norm({dx.as<float>(), with_w ? dw.as<float>() : nullptr, out.as<float>(), ne0, rows, eps},
                              nullptr);
        EXPECT_TRUE(close("rms_norm " + shape(ne0, rows), download<float>(out, x.size()), ref, {1e-6}, 1e-5));
      }
}

TEST(OpKernels, Rope) {
  REQUIRE_GPU();
  std::mt19937 rng(2);
  struct Case {
    int64_t hd, nh, T;
    int32_t n_rot;
  };
  for (auto c : {Case{8, 4, 3, 8}, Case{64, 3, 5, 64}, Case{128, 2, 4, 96}, Case{256, 1, 2, 256}})
    for (auto mode : {graph::RopeMode::Normal, graph::RopeMode::Neox})
      for (bool ff : {false, true}) {
        const auto x = random_floats(rng, c.hd * c.nh * c.T);
        std::vector<float> factors = random_floats(rng, c.n_rot / 2, 1.0f, 8.0f);
        std::vector<int32_t> pos(c.T);
        for (auto& p : pos) p = int32_t(rng() % 5000);
        const float base = 500000.0f, fscale = 0.5f;
        std::vector<double> ref(x.begin(), x.end());
        const int64_t half = c.n_rot / 2;
        for (int64_t t = 0; t < c.T; ++t)
          for (int64_t h = 0; h < c.nh; ++h)
            for (int64_t i = 0; i < half; ++i) {
              double th = double(pos[t]) * fscale * std::pow(double(base), -2.0 * double(i) / c.n_rot);
              if (ff) th /= factors[i];
              const int64_t a = mode == graph::RopeMode::Neox ? i : 2 * i, b = mode == graph::RopeMode::Neox ? i + half : 2 * i + 1;
              const int64_t o = (t * c.nh + h) * c.hd;
              ref[o + a] = x[o + a] * std::cos(th) - x[o + b] * std::sin(th);
              ref[o + b] = x[o + a] * std::sin(th) + x[o + b] * std::cos(th);
            }
        auto dx = upload(x), dp = upload(pos), df = upload(factors);
        auto out = poisoned_f32(x.size());
        cuda::RopeKernelParams p;
        p.x = dx.as<float>(), p.out = out.as<float>(), p.positions = dp.as<int32_t>();
        p.freq_factors = ff ? df.as<float>() : nullptr;
        p.head_dim = c.hd, p.n_head = c.nh, p.T = c.T, p.n_rot = c.n_rot, p.mode = mode;
        p.freq_base = base, p.freq_scale = fscale;
        cuda::launch_rope(p, nullptr);
        EXPECT_TRUE(close("rope hd=" + std::to_string(c.hd) + " n_rot=" + std::to_string(c.n_rot) +
                              (mode == graph::RopeMode::Neox ? " neox" : " normal") + (ff ? " ff" : ""),
                          download<float>(out, x.size()), ref, {1e-6}, 1e-6));
      }
}

TEST(OpKernels, ElementWise) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int64_t ne0 : {1, 7, 300})
    for (int64_t rows : {1, 3}) {
      const int64_t n = ne0 * rows;
      const auto a = random_floats(rng, n, -4, 4), b = random_floats(rng, n, -4, 4), row = random_floats(rng, ne0);
      auto da = upload(a), db = upload(b), dr = upload(row);
      auto out = poisoned_f32(n);
      std::vector<double> ref(n);
      const std::string s = shape(ne0, rows);

      cuda::launch_binary({cuda::BinaryOp::Add, da.as<float>(), db.as<float>(), out.as<float>(), n, n}, nullptr);
      for (int64_t i = 0; i < n; ++i) ref[i] = double(a[i]) + b[i];
      EXPECT_TRUE(close("add " + s, download<float>(out, n), ref, {0}, 6e-8));

      cuda::launch_binary({cuda::BinaryOp::Mul, da.as<float>(), dr.as<float>(), out.as<float>(), n, ne0}, nullptr);
      for (int64_t i = 0; i < n; ++i) ref[i] = double(a[i]) * row[i % ne0];
      EXPECT_TRUE(close("mul broadcast " + s, download<float>(out, n), ref, {0}, 6e-8));

      cuda::launch_binary({cuda::BinaryOp::Add, da.as<float>(), dr.as<float>(), out.as<float>(), n, ne0}, nullptr);
      for (int64_t i = 0; i < n; ++i) ref[i] = double(a[i]) + row[i % ne0];
      EXPECT_TRUE(close("add broadcast (bias) " + s, download<float>(out, n), ref, {0}, 6e-8));

      cuda::launch_unary({cuda::UnaryOp::Silu, da.as<float>(), out.as<float>(), n}, nullptr);
      for (int64_t i = 0; i < n; ++i) ref[i] = a[i] / (1.0 + std::exp(-double(a[i])));
      EXPECT_TRUE(close("silu " + s, download<float>(out, n), ref, {1e-7}, 1e-6));

      cuda::launch_swiglu({da.as<float>(), db.as<float>(), out.as<float>(), n}, nullptr);
      for (int64_t i = 0; i < n; ++i) ref[i] = a[i] / (1.0 + std::exp(-double(a[i]))) * b[i];
      EXPECT_TRUE(close("swiglu " + s, download<float>(out, n), ref, {1e-7}, 1e-6));
    }
}

TEST(OpKernels, SoftmaxAndArgmax) {
  REQUIRE_GPU();
  std::mt19937 rng(4);
  for (int64_t ne0 : {1, 31, 512, 32000})
    for (int64_t rows : {1, 3}) {
      auto x = random_floats(rng, ne0 * rows, -10, 10);
      // A planted tie in the last row (values are below 10 elsewhere): the lower index must win.
      if (ne0 > 40) x[(rows - 1) * ne0 + 40] = x[(rows - 1) * ne0 + 20] = 11.0f;
      auto dx = upload(x);
      auto out = poisoned_f32(x.size());
      cuda::launch_softmax({dx.as<float>(), out.as<float>(), ne0, rows}, nullptr);
      std::vector<double> ref(x.size());
      std::vector<int32_t> ref_arg(rows);
      for (int64_t r = 0; r < rows; ++r) {
        const float* xr = &x[r * ne0];
        const int64_t am = std::max_element(xr, xr + ne0) - xr;  // first of equal maxima
        ref_arg[r] = int32_t(am);
        double sum = 0;
        for (int64_t i = 0; i < ne0; ++i) sum += std::exp(double(xr[i]) - xr[am]);
        for (int64_t i = 0; i < ne0; ++i) ref[r * ne0 + i] = std::exp(double(xr[i]) - xr[am]) / sum;
      }
      EXPECT_TRUE(close("softmax " + shape(ne0, rows), download<float>(out, x.size()), ref, {1e-9}, 2e-5));
      cuda::DeviceBuffer arg(rows * 4);
      cuda::launch_argmax({dx.as<float>(), arg.as<int32_t>(), ne0, rows}, nullptr);
      EXPECT_EQ(download<int32_t>(arg, rows), ref_arg) << "argmax " << shape(ne0, rows);
    }
}

}  // namespace
