// Activation kernels against the CPU reference's own per-op functions (graph/reference_ops.h, what the CPU executor
// runs): RMSNorm (rows and per-head), RoPE (both orderings, freq factors, positions from device memory), add / mul
// broadcast, SiLU, SwiGLU, softmax, argmax.
#include <algorithm>

#include <cuda_fp16.h>

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/host_inputs.cuh"
#include "cuda/kernels/norm.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/kernels/softmax.cuh"
#include "gpu_test.h"
#include "graph/reference_ops.h"

namespace {

using namespace gpu_test;
namespace ref = graph::ref;

std::vector<double> widened(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// Appended piece by piece: GCC 12's -Wrestrict misfires on "[" + std::to_string(...) (a false positive).
std::string shape(int64_t a, int64_t b) {
  std::string s = "[";
  s += std::to_string(a);
  s += ", ";
  s += std::to_string(b);
  s += "]";
  return s;
}

// Rows of the register path (multiples of 4 up to 8192: Gemma-3-12B's 3840, Phi-4's 5120) and of the plain loop
// (odd, longer); with a residual added (the post-norm + residual add launch), and in place over x or the residual.
TEST(OpKernels, RmsNorm) {
  REQUIRE_GPU();
  std::mt19937 rng(1);
  for (int64_t ne0 : {1, 8, 63, 128, 257, 2048, 2052, 3840, 4096, 5120, 8192, 9000})  // each instance, its bounds
    for (int64_t rows : {1, 5})
      for (bool with_w : {false, true})
        for (int mode = 0; mode < 4; ++mode) {  // 0 plain, 1 residual, 2 residual in place over x, 3 over it
          const bool with_r = mode > 0;
          const auto x = random_floats(rng, ne0 * rows, -3.0f, 3.0f);
          const auto w = random_floats(rng, ne0), r = random_floats(rng, ne0 * rows);
          const float eps = 1e-5f;
          std::vector<float> want(x.size());
          ref::rms_norm({x.data(), with_w ? w.data() : nullptr, want.data(), ne0, rows, eps});
          if (with_r)
            for (size_t i = 0; i < want.size(); ++i) want[i] += r[i];
          const std::vector<double> ref = widened(want);
          auto dx = upload(x), dw = upload(w), dr = upload(r);
          auto out = poisoned_f32(x.size());
          float* dst = mode == 2 ? dx.as<float>() : mode == 3 ? dr.as<float>() : out.as<float>();
          cuda::RmsNormParams p{dx.as<float>(), with_w ? dw.as<float>() : nullptr, dst, ne0, rows, eps};
          p.residual = with_r ? dr.as<float>() : nullptr;
          cuda::launch_rms_norm(p, nullptr);
          const auto& got = mode == 2 ? dx : mode == 3 ? dr : out;
          EXPECT_TRUE(close("rms_norm " + shape(ne0, rows) + " mode " + std::to_string(mode),
                            download<float>(got, x.size()), ref, {1e-6}, 1e-5));
        }
}

// The residual Add before the norm in the same launch (RmsNormParams::add): the sum written to `sum` and normalised,
// for the same rows, with the sum in its own buffer, in place over x or over the other operand, and the norm's
// output in place over x (the plan may give it an operand's bytes).
TEST(OpKernels, RmsNormAfterAdd) {
  REQUIRE_GPU();
  std::mt19937 rng(3);
  for (int64_t ne0 : {1, 8, 63, 128, 257, 2048, 2052, 3840, 4096, 5120, 8192, 9000})  // each instance, its bounds
    for (int64_t rows : {1, 5})
      for (int mode = 0; mode < 4; ++mode) {  // 0 own buffers, 1 sum over x, 2 sum over add, 3 out over x
        const auto x = random_floats(rng, ne0 * rows, -3.0f, 3.0f), a = random_floats(rng, ne0 * rows, -3.0f, 3.0f);
        const auto w = random_floats(rng, ne0);
        const float eps = 1e-5f;
        std::vector<float> sum(x.size()), want(x.size());
        for (size_t i = 0; i < x.size(); ++i) sum[i] = x[i] + a[i];
        ref::rms_norm({sum.data(), w.data(), want.data(), ne0, rows, eps});
        auto dx = upload(x), da = upload(a), dw = upload(w);
        auto out = poisoned_f32(x.size()), ds = poisoned_f32(x.size());
        float* sum_at = mode == 1 ? dx.as<float>() : mode == 2 ? da.as<float>() : ds.as<float>();
        float* out_at = mode == 3 ? dx.as<float>() : out.as<float>();
        cuda::RmsNormParams p{dx.as<float>(), dw.as<float>(), out_at, ne0, rows, eps};
        p.add = da.as<float>(), p.sum = sum_at;
        cuda::launch_rms_norm(p, nullptr);
        const std::string what = "rms_norm after add " + shape(ne0, rows) + " mode " + std::to_string(mode);
        const auto& sum_buf = mode == 1 ? dx : mode == 2 ? da : ds;
        EXPECT_TRUE(close(what + " (sum)", download<float>(sum_buf, x.size()), widened(sum), {0.0}, 0.0));
        EXPECT_TRUE(close(what, download<float>(mode == 3 ? dx : out, x.size()), widened(want), {1e-6}, 1e-5));
      }
}

// The half copy of the output a product after the norm reads (RmsNormParams::half_out): each element the float
// output rounded to nearest, as launch_x_to_half rounds it, on the register path (3840, 4096) and the loop (9000,
// 257: past the registers, and not whole float4s).
TEST(OpKernels, RmsNormHalfCopy) {
  REQUIRE_GPU();
  std::mt19937 rng(8);
  for (int64_t ne0 : {257, 3840, 4096, 9000})
    for (const bool with_add : {false, true}) {
      const int64_t rows = 3;
      const auto x = random_floats(rng, ne0 * rows, -3.0f, 3.0f), a = random_floats(rng, ne0 * rows);
      const auto w = random_floats(rng, ne0);
      auto dx = upload(x), da = upload(a), dw = upload(w);
      auto out = poisoned_f32(x.size()), ds = poisoned_f32(x.size());
      cuda::DeviceBuffer half(x.size() * 2);
      cuda::RmsNormParams p{dx.as<float>(), dw.as<float>(), out.as<float>(), ne0, rows, 1e-5f};
      if (with_add) p.add = da.as<float>(), p.sum = ds.as<float>();
      p.half_out = half.get();
      cuda::launch_rms_norm(p, nullptr);
      const auto got = download<float>(out, x.size());
      const auto h = download<uint16_t>(half, x.size());
      for (size_t i = 0; i < x.size(); ++i) {
        const __half want = __float2half_rn(got[i]);
        ASSERT_EQ(h[i], *reinterpret_cast<const uint16_t*>(&want))
            << "rms_norm half copy " << shape(ne0, rows) << (with_add ? " after add" : "") << " at " << i;
      }
    }
  cuda::RmsNormParams bad{nullptr, nullptr, nullptr, 4, 1, 1e-5f};
  auto d = poisoned_f32(4);
  bad.x = d.as<float>(), bad.out = d.as<float>();
  bad.half_out = reinterpret_cast<void*>(uintptr_t(d.get()) + 2);
  EXPECT_THROW(cuda::launch_rms_norm(bad, nullptr), cuda::InvalidArgument) << "half_out not 16-byte aligned";
}

// The SwiGLU's and GeGLU's half copy for the down product (SwiGluParams::half_out): the float output rounded to
// nearest, element by element.
TEST(OpKernels, GluHalfCopy) {
  REQUIRE_GPU();
  std::mt19937 rng(9);
  for (const int64_t n : {1, 1000, 14336 * 3})
    for (const bool gelu : {false, true}) {
      const auto g = random_floats(rng, n, -4.0f, 4.0f), u = random_floats(rng, n);
      auto dg = upload(g), du = upload(u);
      auto out = poisoned_f32(size_t(n));
      cuda::DeviceBuffer half(size_t(n) * 2);
      const cuda::SwiGluParams p{dg.as<float>(), du.as<float>(), out.as<float>(), n, half.get()};
      gelu ? cuda::launch_geglu(p, nullptr) : cuda::launch_swiglu(p, nullptr);
      const auto got = download<float>(out, size_t(n));
      const auto h = download<uint16_t>(half, size_t(n));
      for (int64_t i = 0; i < n; ++i) {
        const __half want = __float2half_rn(got[size_t(i)]);
        ASSERT_EQ(h[size_t(i)], *reinterpret_cast<const uint16_t*>(&want))
            << (gelu ? "geglu" : "swiglu") << " half copy n=" << n << " at " << i;
      }
    }
}

TEST(OpKernels, Rope) {
  REQUIRE_GPU();
  std::mt19937 rng(2);
  struct Case {
    int64_t hd, nh, T;
    int32_t n_rot;
  };
  // Plain, then with LongRoPE's attention factor, then YaRN's ramp with a magnitude factor.
  struct Scaling {
    float ext_factor, corr_low, corr_high, attn_factor;
  };
  for (auto c : {Case{8, 4, 3, 8}, Case{64, 3, 5, 64}, Case{128, 2, 4, 96}, Case{256, 1, 2, 256}})
    for (auto mode : {graph::RopeMode::Normal, graph::RopeMode::Neox})
      for (bool ff : {false, true})
        for (const Scaling sc : {Scaling{0, 0, 0, 1}, Scaling{0, 0, 0, 1.19f}, Scaling{1, 3.5f, 20.5f, 1.07f}}) {
        const auto x = random_floats(rng, c.hd * c.nh * c.T);
        std::vector<float> factors = random_floats(rng, c.n_rot / 2, 1.0f, 8.0f);
        std::vector<int32_t> pos(c.T);
        for (auto& p : pos) p = int32_t(rng() % 5000);
        const float base = 500000.0f, fscale = 0.5f;
        std::vector<float> want(x.size());
        std::vector<double> trig(size_t(c.n_rot));
        ref::RopeArgs ra;
        ra.x = x.data(), ra.positions = pos.data(), ra.freq_factors = ff ? factors.data() : nullptr;
        ra.out = want.data(), ra.head_dim = c.hd, ra.n_head = c.nh, ra.t = c.T, ra.trig = trig.data();
        ra.p.mode = mode, ra.p.n_rot = c.n_rot, ra.p.freq_base = base, ra.p.freq_scale = fscale;
        ra.p.ext_factor = sc.ext_factor, ra.p.corr_low = sc.corr_low, ra.p.corr_high = sc.corr_high;
        ra.p.attn_factor = sc.attn_factor;
        ref::rope(ra);
        const std::vector<double> ref = widened(want);
        auto dx = upload(x), dp = upload(pos), df = upload(factors);
        auto out = poisoned_f32(x.size());
        cuda::RopeKernelParams p;
        p.x = dx.as<float>(), p.out = out.as<float>(), p.positions = dp.as<int32_t>();
        p.freq_factors = ff ? df.as<float>() : nullptr;
        p.head_dim = c.hd, p.n_head = c.nh, p.T = c.T, p.n_rot = c.n_rot, p.mode = mode;
        p.freq_base = base, p.freq_scale = fscale;
        p.ext_factor = sc.ext_factor, p.corr_low = sc.corr_low, p.corr_high = sc.corr_high;
        p.attn_factor = sc.attn_factor;
        cuda::launch_rope(p, nullptr);
        EXPECT_TRUE(close("rope hd=" + std::to_string(c.hd) + " n_rot=" + std::to_string(c.n_rot) +
                              (mode == graph::RopeMode::Neox ? " neox" : " normal") + (ff ? " ff" : "") +
                              (sc.ext_factor ? " yarn" : "") + (sc.attn_factor != 1 ? " attn_factor" : ""),
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
      std::vector<float> want(n);
      const std::string s = shape(ne0, rows);
      // Element-wise adds and multiplies are correctly rounded on both sides: equal to the last bit.

      cuda::launch_binary({cuda::BinaryOp::Add, da.as<float>(), db.as<float>(), out.as<float>(), n, n}, nullptr);
      ref::add(a.data(), b.data(), want.data(), n);
      EXPECT_TRUE(close("add " + s, download<float>(out, n), widened(want), {0}, 0));

      cuda::launch_binary({cuda::BinaryOp::Mul, da.as<float>(), dr.as<float>(), out.as<float>(), n, ne0}, nullptr);
      ref::mul(a.data(), row.data(), ne0, want.data(), n);
      EXPECT_TRUE(close("mul broadcast " + s, download<float>(out, n), widened(want), {0}, 0));

      cuda::launch_binary({cuda::BinaryOp::Add, da.as<float>(), dr.as<float>(), out.as<float>(), n, ne0}, nullptr);
      std::vector<float> row_tiled(n);
      for (int64_t i = 0; i < n; ++i) row_tiled[i] = row[i % ne0];
      ref::add(a.data(), row_tiled.data(), want.data(), n);
      EXPECT_TRUE(close("add broadcast (bias) " + s, download<float>(out, n), widened(want), {0}, 0));

      cuda::launch_unary({cuda::UnaryOp::Silu, da.as<float>(), out.as<float>(), n}, nullptr);
      ref::silu(a.data(), want.data(), n);
      EXPECT_TRUE(close("silu " + s, download<float>(out, n), widened(want), {1e-7}, 1e-6));

      cuda::launch_swiglu({da.as<float>(), db.as<float>(), out.as<float>(), n}, nullptr);
      ref::swiglu(a.data(), b.data(), want.data(), n);
      EXPECT_TRUE(close("swiglu " + s, download<float>(out, n), widened(want), {1e-7}, 1e-6));

      // GeGLU, scale and softcap are evaluated in double and rounded once on both sides.
      cuda::launch_geglu({da.as<float>(), db.as<float>(), out.as<float>(), n}, nullptr);
      ref::geglu(a.data(), b.data(), want.data(), n);
      EXPECT_TRUE(close("geglu " + s, download<float>(out, n), widened(want), {1e-7}, 1e-6));

      cuda::UnaryParams up{cuda::UnaryOp::Scale, da.as<float>(), out.as<float>(), n};
      up.param = 7.9372539f;  // sqrt(63): Gemma's embedding scale for a 63-wide model
      cuda::launch_unary(up, nullptr);
      ref::scale(a.data(), up.param, want.data(), n);
      EXPECT_TRUE(close("scale " + s, download<float>(out, n), widened(want), {0}, 0));

      up.op = cuda::UnaryOp::Softcap, up.param = 3.0f;
      cuda::launch_unary(up, nullptr);
      ref::softcap(a.data(), up.param, want.data(), n);
      EXPECT_TRUE(close("softcap " + s, download<float>(out, n), widened(want), {1e-7}, 1e-6));

      // The middle of every row (phi3's k out of its fused q|k|v rows).
      if (ne0 >= 3) {
        const int64_t off = ne0 / 3, len = ne0 - ne0 / 3 - 1;
        auto sl = poisoned_f32(len * rows);
        cuda::launch_slice({da.as<float>(), sl.as<float>(), ne0, rows, off, len}, nullptr);
        std::vector<float> want_sl(len * rows);
        ref::slice(a.data(), ne0, rows, off, len, want_sl.data());
        EXPECT_TRUE(close("slice " + s, download<float>(sl, len * rows), widened(want_sl), {0}, 0));
      }
    }
}

TEST(OpKernels, SoftmaxAndArgmax) {
  REQUIRE_GPU();
  std::mt19937 rng(4);
  for (int64_t ne0 : {1, 31, 512, 32000, 128256})  // 31: unaligned rows (the scalar argmax); 128256: Llama 3's vocab
    for (int64_t rows : {1, 3, 17}) {  // 17: one block a row; fewer: a cluster of blocks, or 32 blocks, a row
      auto x = random_floats(rng, ne0 * rows, -10, 10);
      // A planted tie in the last row (values are below 10 elsewhere): the lower index must win. In the first row
      // the tie is in the first and the last of the cluster's parts.
      if (ne0 > 40) x[(rows - 1) * ne0 + 40] = x[(rows - 1) * ne0 + 20] = 11.0f;
      if (ne0 > 40 && rows > 1) x[ne0 - 2] = x[5] = 12.0f;
      auto dx = upload(x);
      auto out = poisoned_f32(x.size());
      cuda::launch_softmax({dx.as<float>(), out.as<float>(), ne0, rows}, nullptr);
      std::vector<float> want(x.size());
      std::vector<int32_t> ref_arg(rows);
      ref::softmax(x.data(), want.data(), ne0, rows);
      ref::argmax(x.data(), ref_arg.data(), ne0, rows);  // the first of equal maxima
      EXPECT_TRUE(close("softmax " + shape(ne0, rows), download<float>(out, x.size()), widened(want), {1e-9}, 2e-5));
      cuda::DeviceBuffer arg(rows * 4);
      cuda::launch_argmax({dx.as<float>(), arg.as<int32_t>(), ne0, rows}, nullptr);
      EXPECT_EQ(download<int32_t>(arg, rows), ref_arg) << "argmax " << shape(ne0, rows);
      // The same ids also into a page-locked ring's slot 1 (read on the device), the other slot untouched.
      cuda::PinnedBuffer ring(size_t(2 * 20) * 4);
      std::fill_n(ring.as<int32_t>(), 40, -5);
      const auto slot = upload(std::vector<int32_t>{1});
      cuda::ArgmaxParams p{dx.as<float>(), arg.as<int32_t>(), ne0, rows};
      p.host_out = static_cast<int32_t*>(cuda::device_address_of_pinned(ring.get()));
      p.host_slot = slot.as<int32_t>();
      p.host_stride = 20;
      cuda::launch_argmax(p, nullptr);
      CUDA_CHECK(cudaDeviceSynchronize());
      const int32_t* r = ring.as<int32_t>();
      EXPECT_EQ(std::vector<int32_t>(r + 20, r + 20 + rows), ref_arg) << "argmax to the host " << shape(ne0, rows);
      EXPECT_EQ(std::vector<int32_t>(r, r + 20), std::vector<int32_t>(20, -5)) << "slot 0 " << shape(ne0, rows);
      // A few rows over 32 blocks a row, the last merging (ArgmaxParams::scratch; the row's first and last parts
      // hold the first row's tie): twice, the second launch finding the counters the first left at zero.
      if (rows > cuda::kArgmaxPartsRows) continue;
      cuda::DeviceBuffer scratch(cuda::argmax_parts_scratch_bytes());
      CUDA_CHECK(cudaMemset(scratch.get(), 0, scratch.bytes()));
      p.scratch = scratch.get();
      for (int launch = 0; launch < 2; ++launch) {
        CUDA_CHECK(cudaMemset(arg.get(), 0xff, arg.bytes()));
        std::fill_n(ring.as<int32_t>(), 40, -5);
        cuda::launch_argmax(p, nullptr);
        CUDA_CHECK(cudaDeviceSynchronize());
        EXPECT_EQ(download<int32_t>(arg, rows), ref_arg) << "argmax over parts " << shape(ne0, rows) << " #" << launch;
        EXPECT_EQ(std::vector<int32_t>(r + 20, r + 20 + rows), ref_arg) << "parts to the host " << shape(ne0, rows);
      }
    }
}

}  // namespace
