// Weight kernels against the CPU reference dequantizer + double-precision math, for every weight type:
// decode matvec, dequantize-to-half, prefill GEMM (sliced and whole), get_rows.
#include <algorithm>

#include "cuda/context.h"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/get_rows.cuh"
#include "cuda/kernels/matvec.cuh"
#include "gpu_test.h"

namespace {

using quant::Type;
using namespace gpu_test;

const Type kTypes[] = {Type::F32,  Type::F16,  Type::BF16, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1,
                       Type::Q8_0, Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K};

// Row lengths to test: odd ones for the plain formats, 1..several blocks for the block formats.
std::vector<int64_t> row_lengths(Type t) {
  const int64_t b = quant::traits(t).block_elems;
  if (b == 1) return {1, 17, 33, 100, 257, 4096};
  if (b == 32) return {32, 96, 160, 4096};
  return {256, 768, 4096};
}

class WeightKernels : public ::testing::TestWithParam<Type> {};

TEST_P(WeightKernels, MatvecMatchesReference) {
  REQUIRE_GPU();
  const Type type = GetParam();
  std::mt19937 rng(1234 + int(type));
  for (int64_t K : row_lengths(type))
    for (int64_t N : {1, 7, 130, 1000})
      // F32 from cuda::kF32ColumnsMin columns on: the one-pass kernel of a router at prefill (matvec_f32_cols.cu).
      for (int64_t T : type == Type::F32 ? std::vector<int64_t>{1, 3, 37} : std::vector<int64_t>{1, 3}) {
        const auto w = random_weights(rng, type, K, N);
        const auto x = random_floats(rng, K * T);
        const auto bias = random_floats(rng, N);
        const bool with_bias = N == 7;
        std::vector<double> ref, mag, mx;
        reference(w, type, x, K, N, T, with_bias ? &bias : nullptr, ref, mag, mx);
        auto dw = upload(w), dx = upload(x), db = upload(bias);
        // float32 accumulation in a different order: a few ulps of sum |w x|.
        std::vector<double> atol(mag.size());
        for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
        // Every kernel: Auto (the int16-activation kernel for one column of the preset formats, which may round x
        // by its documented bound on top: int16_bound), the float unit kernel, and the generic chunk kernel.
        const auto i16 = int16_bound(w, type, x, K, N, T);
        for (auto path : {cuda::MatvecPath::Auto, cuda::MatvecPath::Unit, cuda::MatvecPath::Generic}) {
          auto dy = poisoned_f32(N * T);
          cuda::MatvecParams p{dw.get(), type, dx.as<float>(), with_bias ? db.as<float>() : nullptr, dy.as<float>(),
                               K, N, T};
          p.path = path;
          std::vector<double> tol = atol;
          if (cuda::matvec_fuses(p))
            for (size_t i = 0; i < tol.size(); ++i) tol[i] += i16[i];
          cuda::launch_matvec(p, nullptr);
          EXPECT_TRUE(close(std::string("matvec ") + quant::type_name(type) +
                                (path == cuda::MatvecPath::Auto   ? " auto"
                                 : path == cuda::MatvecPath::Unit ? " unit"
                                                                  : " generic") +
                                " K=" + std::to_string(K) +
                                " N=" + std::to_string(N) + " T=" + std::to_string(T),
                            download<float>(dy, N * T), ref, tol, 0.0));
        }
      }
}

// The fusions of the int16 kernel: RMS norm of x (with its weight) before the product, a residual added after.
TEST_P(WeightKernels, MatvecFusesNormAndResidual) {
  REQUIRE_GPU();
  const Type type = GetParam();
  std::mt19937 rng(777 + int(type));
  bool any = false;
  for (int64_t K : row_lengths(type))
    for (int64_t N : {5, 130, 1000}) {
      const auto w = random_weights(rng, type, K, N);
      auto x = random_floats(rng, K);
      for (auto& v : x) v *= 3.0f;  // off unit RMS, so the normalisation matters
      const auto nw = random_floats(rng, K), res = random_floats(rng, N);
      const float eps = 1e-5f;
      auto dw = upload(w), dx = upload(x), dn = upload(nw), dr = upload(res);
      auto dy = poisoned_f32(N);
      cuda::MatvecParams p{dw.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
      p.norm_w = dn.as<float>(), p.norm_eps = eps, p.residual = dr.as<float>();
      if (!cuda::matvec_fuses(p)) {
        EXPECT_THROW(cuda::launch_matvec(p, nullptr), cuda::InvalidArgument);
        continue;
      }
      any = true;
      const std::vector<float> xn = rms_normed(x, nw, eps);
      std::vector<double> ref, mag, mx;
      reference(w, type, xn, K, N, 1, nullptr, ref, mag, mx);
      std::vector<double> atol(mag.size());
      const auto i16 = int16_bound(w, type, xn, K, N, 1);  // the int16 rounding of the normalised x
      for (size_t i = 0; i < mag.size(); ++i) ref[i] += res[i], atol[i] = 1e-5 * mag[i] + i16[i] + 1e-6;
      cuda::launch_matvec(p, nullptr);
      EXPECT_TRUE(close(std::string("fused matvec ") + quant::type_name(type) + " K=" + std::to_string(K) +
                            " N=" + std::to_string(N),
                        download<float>(dy, N), ref, atol, 0.0));
    }
  const bool preset = type == Type::Q4_0 || type == Type::Q8_0 || type == Type::Q4_K || type == Type::Q6_K;
  EXPECT_EQ(any, preset) << "the int16 kernel serves exactly the preset formats";
}

// Row lengths that give the int16 kernel's other block shapes (row slices sharing x: matvec_i16.cu): 5120 has 160
// threads a slice and 3 slices, 8192 256 and 2, 11008, 14336 and 16384 one slice of 352, 448 and 512 threads (a
// 7B's and an 8B's down projections; the unsliced instantiation, which the shorter rows above never reach); with the
// norm and residual fused, and row counts leaving slices idle (7) or streaming several groups each (1000).
TEST(WeightKernels, MatvecSliceShapesMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(5150);
  for (const Type type : {Type::Q4_0, Type::Q4_K, Type::Q6_K, Type::Q8_0})
    for (const int64_t K : {5120, 8192, 11008, 14336, 16384})
      for (const int64_t N : {7, 1000}) {
        if (type == Type::Q6_K && K == 11008) continue;  // 43 blocks of 210 bytes: rows not 4-byte aligned
        const auto w = random_weights(rng, type, K, N);
        const auto x = random_floats(rng, K), nw = random_floats(rng, K), res = random_floats(rng, N);
        auto dw = upload(w), dx = upload(x), dn = upload(nw), dr = upload(res);
        auto dy = poisoned_f32(N);
        cuda::MatvecParams p{dw.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
        p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f, p.residual = dr.as<float>();
        ASSERT_TRUE(cuda::matvec_fuses(p));
        std::vector<double> ref, mag, mx;
        reference(w, type, rms_normed(x, nw, 1e-5f), K, N, 1, nullptr, ref, mag, mx);
        std::vector<double> atol(mag.size());
        for (size_t i = 0; i < mag.size(); ++i) ref[i] += res[i], atol[i] = 1e-5 * mag[i] + 1e-6;
        cuda::launch_matvec(p, nullptr);
        EXPECT_TRUE(close(std::string("sliced matvec ") + quant::type_name(type) + " K=" + std::to_string(K) +
                              " N=" + std::to_string(N),
                          download<float>(dy, N), ref, atol, 0.0));
      }
}

// Wide rows (more than 512 units of 32: the wide instances of matvec_i16.cu), the down projections of n_ff 17920
// (Phi-4), 21504 (Gemma 3 27B), 28672 (Llama 3 70B) and 32768 (Mistral Small): the launcher's own block shape
// (passes 0) and others set through MatvecParams::passes (2: one slice of up to 512 threads; 3; 5: 4 slices of
// 128-224 threads; 5 with one slice), plain and with the norm and residual fused, for row counts that leave slices
// idle (7) or stream several groups each (1000).
TEST(WeightKernels, MatvecWideRowsMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(17920);
  for (const Type type : {Type::Q4_0, Type::Q4_K, Type::Q6_K, Type::Q8_0})
    for (const int64_t K : {17920, 21504, 28672, 32768})
      for (const int64_t N : {7, 1000}) {
        const auto w = random_weights(rng, type, K, N);
        const auto x = random_floats(rng, K), nw = random_floats(rng, K), res = random_floats(rng, N);
        auto dw = upload(w), dx = upload(x), dn = upload(nw), dr = upload(res);
        std::vector<double> ref, mag, mx, fref, fmag, fmx;
        reference(w, type, x, K, N, 1, nullptr, ref, mag, mx);
        reference(w, type, rms_normed(x, nw, 1e-5f), K, N, 1, nullptr, fref, fmag, fmx);
        std::vector<double> atol(mag.size()), fatol(fmag.size());
        for (size_t i = 0; i < mag.size(); ++i)
          atol[i] = 1e-5 * mag[i] + 1e-6, fref[i] += res[i], fatol[i] = 1e-5 * fmag[i] + 1e-6;
        const struct {
          int passes, max_slices;
        } shapes[] = {{0, 4}, {2, 4}, {3, 4}, {5, 4}, {5, 1}};
        for (const auto& sh : shapes)
          for (const bool fused : {false, true}) {
            auto dy = poisoned_f32(N);
            cuda::MatvecParams p{dw.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
            p.passes = int16_t(sh.passes), p.max_slices = sh.max_slices;
            if (fused) p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f, p.residual = dr.as<float>();
            ASSERT_TRUE(cuda::matvec_fuses(p));
            cuda::launch_matvec(p, nullptr);
            EXPECT_TRUE(close(std::string("wide matvec ") + quant::type_name(type) + " K=" + std::to_string(K) +
                                  " N=" + std::to_string(N) + " passes=" + std::to_string(sh.passes) +
                                  " slices<=" + std::to_string(sh.max_slices) + (fused ? " fused" : ""),
                              download<float>(dy, N), fused ? fref : ref, fused ? fatol : atol, 0.0));
          }
      }
}

// The launch modes on wide rows (K = 21504): three same-type matrices with biases and the norm (q/k/v), gate and up
// with the SwiGLU epilogue (gate as main and as sibling), and a Q4_K launch with a Q6_K sibling (the pair kernel),
// each matrix against its reference.
TEST(WeightKernels, MatvecWideRowsFusions) {
  REQUIRE_GPU();
  std::mt19937 rng(21504);
  const int64_t K = 21504;
  const auto x = random_floats(rng, K), norm_w = random_floats(rng, K, 0.5f, 1.5f);
  const std::vector<float> xn = rms_normed(x, norm_w, 1e-5);
  auto dx = upload(x), dn = upload(norm_w);
  const auto tol = [](const std::vector<double>& mag) {
    std::vector<double> atol(mag.size());
    for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
    return atol;
  };
  for (const Type type : {Type::Q4_0, Type::Q4_K, Type::Q6_K, Type::Q8_0}) {
    const int64_t Ns[3] = {1000, 7, 130};
    std::vector<std::vector<uint8_t>> w;
    std::vector<std::vector<float>> bias;
    std::vector<cuda::DeviceBuffer> dw, db, dy;
    for (int64_t N : Ns) {
      w.push_back(random_weights(rng, type, K, N));
      bias.push_back(random_floats(rng, N));
      dw.push_back(upload(w.back())), db.push_back(upload(bias.back())), dy.push_back(poisoned_f32(N));
    }
    cuda::MatvecParams p{dw[0].get(), type, dx.as<float>(), db[0].as<float>(), dy[0].as<float>(), K, Ns[0], 1};
    p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
    for (int i = 1; i < 3; ++i)
      p.siblings[i - 1] = cuda::MatvecParams::Sibling{dw[i].get(), db[i].as<float>(), dy[i].as<float>(), Ns[i], type};
    p.n_siblings = 2;
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    for (int i = 0; i < 3; ++i) {
      std::vector<double> ref, mag, mx;
      reference(w[i], type, xn, K, Ns[i], 1, &bias[i], ref, mag, mx);
      EXPECT_TRUE(close(std::string("wide sibling ") + std::to_string(i) + " " + quant::type_name(type),
                        download<float>(dy[i], Ns[i]), ref, tol(mag), 0.0));
    }

    const int64_t N = 5003;  // a partial group
    const auto wg = random_weights(rng, type, K, N), wu = random_weights(rng, type, K, N);
    std::vector<double> g, gmag, gmx, u, umag, umx;
    reference(wg, type, xn, K, N, 1, nullptr, g, gmag, gmx);
    reference(wu, type, xn, K, N, 1, nullptr, u, umag, umx);
    std::vector<double> ref(N), atol(N);  // as in MatvecSwiGluEpilogue
    for (int64_t n = 0; n < N; ++n) {
      const double silu = g[n] / (1.0 + std::exp(-g[n]));
      ref[n] = silu * u[n];
      atol[n] = 1e-5 * (1.1 * gmag[n] * std::fabs(u[n]) + umag[n] * (std::fabs(silu) + 1e-5 * gmag[n])) + 1e-6;
    }
    auto dg = upload(wg), du = upload(wu);
    for (const bool gate_is_sibling : {false, true}) {
      auto dout = poisoned_f32(N), dunused = poisoned_f32(N);
      const void* main_w = (gate_is_sibling ? du : dg).get();
      const void* sib_w = (gate_is_sibling ? dg : du).get();
      cuda::MatvecParams q{main_w, type, dx.as<float>(), nullptr, dunused.as<float>(), K, N, 1};
      q.norm_w = dn.as<float>(), q.norm_eps = 1e-5f;
      q.siblings[0] = cuda::MatvecParams::Sibling{sib_w, nullptr, dunused.as<float>(), N, type};
      q.n_siblings = 1;
      q.swiglu_out = dout.as<float>(), q.swiglu_gate_is_sibling = gate_is_sibling;
      ASSERT_TRUE(cuda::matvec_fuses(q));
      cuda::launch_matvec(q, nullptr);
      EXPECT_TRUE(close(std::string("wide swiglu epilogue ") + quant::type_name(type) +
                            (gate_is_sibling ? " gate as sibling" : ""),
                        download<float>(dout, N), ref, atol, 1e-6));
      for (float v : download<float>(dunused, N)) ASSERT_TRUE(std::isnan(v)) << "a product was written";
    }
  }

  for (const int64_t n_main : {64, 3000}) {  // R = 2 and R = 4 groups for the Q4_K matrices
    const Type types[3] = {Type::Q4_K, Type::Q6_K, Type::Q4_K};
    const int64_t Ns[3] = {n_main, 130, 257};
    std::vector<std::vector<uint8_t>> w;
    std::vector<cuda::DeviceBuffer> dw, dy;
    for (int i = 0; i < 3; ++i) {
      w.push_back(random_weights(rng, types[i], K, Ns[i]));
      dw.push_back(upload(w.back())), dy.push_back(poisoned_f32(Ns[i]));
    }
    cuda::MatvecParams p{dw[0].get(), types[0], dx.as<float>(), nullptr, dy[0].as<float>(), K, Ns[0], 1};
    p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
    for (int i = 1; i < 3; ++i)
      p.siblings[i - 1] = cuda::MatvecParams::Sibling{dw[i].get(), nullptr, dy[i].as<float>(), Ns[i], types[i]};
    p.n_siblings = 2;
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    for (int i = 0; i < 3; ++i) {
      std::vector<double> ref, mag, mx;
      reference(w[i], types[i], xn, K, Ns[i], 1, nullptr, ref, mag, mx);
      EXPECT_TRUE(close("wide mixed sibling " + std::to_string(i) + " N=" + std::to_string(Ns[i]),
                        download<float>(dy[i], Ns[i]), ref, tol(mag), 0.0));
    }
  }
}

// Fewer row slices (MatvecParams::max_slices: 1, 2 or the default 4) on a 4096-wide row, the paths smaller devices
// and wider rows take, each against the reference.
TEST(WeightKernels, MatvecSlicesMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(5151);
  const int64_t K = 4096, N = 1000;
  for (const Type type : {Type::Q4_0, Type::Q4_K}) {
    const auto w = random_weights(rng, type, K, N);
    const auto x = random_floats(rng, K), nw = random_floats(rng, K);
    auto dw = upload(w), dx = upload(x), dn = upload(nw);
    std::vector<double> ref, mag, mx;
    reference(w, type, rms_normed(x, nw, 1e-5f), K, N, 1, nullptr, ref, mag, mx);
    std::vector<double> atol(mag.size());
    for (size_t i = 0; i < mag.size(); ++i) atol[i] = 1e-5 * mag[i] + 1e-6;
    for (const int slices : {1, 2, 4}) {
      auto dy = poisoned_f32(N);
      cuda::MatvecParams p{dw.get(), type, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
      p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f, p.max_slices = slices;
      ASSERT_TRUE(cuda::matvec_fuses(p));
      cuda::launch_matvec(p, nullptr);
      EXPECT_TRUE(close(std::string("matvec ") + quant::type_name(type) + " slices<=" + std::to_string(slices),
                        download<float>(dy, N), ref, atol, 0.0));
    }
  }
}

// Siblings: up to three matrices of one type and K reading the same x in one launch (q/k/v, gate/up), each with
// its own rows, bias and output, with and without the RMS norm.
TEST_P(WeightKernels, MatvecSiblingsShareOneLaunch) {
  REQUIRE_GPU();
  const Type type = GetParam();
  std::mt19937 rng(4242 + int(type));
  const int64_t K = row_lengths(type).back();
  const int64_t Ns[3] = {1000, 7, 130};
  std::vector<std::vector<uint8_t>> w;
  std::vector<std::vector<float>> bias;
  std::vector<cuda::DeviceBuffer> dw, db, dy;
  for (int64_t N : Ns) {
    w.push_back(random_weights(rng, type, K, N));
    bias.push_back(random_floats(rng, N));
    dw.push_back(upload(w.back())), db.push_back(upload(bias.back())), dy.push_back(poisoned_f32(N));
  }
  const auto x = random_floats(rng, K);
  auto dx = upload(x);
  cuda::MatvecParams p{dw[0].get(), type, dx.as<float>(), db[0].as<float>(), dy[0].as<float>(), K, Ns[0], 1};
  for (int i = 1; i < 3; ++i)
    p.siblings[i - 1] = cuda::MatvecParams::Sibling{dw[i].get(), db[i].as<float>(), dy[i].as<float>(), Ns[i], type};
  p.n_siblings = 2;
  const bool preset = type == Type::Q4_0 || type == Type::Q8_0 || type == Type::Q4_K || type == Type::Q6_K;
  ASSERT_EQ(cuda::matvec_fuses(p), preset);
  if (!preset) {
    EXPECT_THROW(cuda::launch_matvec(p, nullptr), cuda::InvalidArgument);
    return;
  }
  cuda::launch_matvec(p, nullptr);
  for (int i = 0; i < 3; ++i) {
    std::vector<double> ref, mag, mx;
    reference(w[i], type, x, K, Ns[i], 1, &bias[i], ref, mag, mx);
    std::vector<double> atol(mag.size());
    for (size_t j = 0; j < mag.size(); ++j) atol[j] = 1e-5 * mag[j] + 1e-6;
    EXPECT_TRUE(close(std::string("sibling ") + std::to_string(i) + " " + quant::type_name(type),
                      download<float>(dy[i], Ns[i]), ref, atol, 0.0));
  }
  p.residual = dx.as<float>();  // a residual needs one matrix
  EXPECT_FALSE(cuda::matvec_fuses(p));
}

// A Q4_K main matrix with a Q4_K and a Q6_K sibling (a Q4_K_M file's q, k and v) in one launch, each matrix against
// its reference, for a few rows (R = 2 groups) and many (R = 4), with the RMS norm folded in; other type mixes are
// refused.
TEST(WeightKernels, MatvecMixedTypeSiblingsShareOneLaunch) {
  REQUIRE_GPU();
  std::mt19937 rng(777);
  const int64_t K = 1024;
  for (const int64_t n_main : {64, 3000}) {
    const Type types[3] = {Type::Q4_K, Type::Q6_K, Type::Q4_K};
    const int64_t Ns[3] = {n_main, 130, 257};
    std::vector<std::vector<uint8_t>> w;
    std::vector<cuda::DeviceBuffer> dw, dy;
    for (int i = 0; i < 3; ++i) {
      w.push_back(random_weights(rng, types[i], K, Ns[i]));
      dw.push_back(upload(w.back())), dy.push_back(poisoned_f32(Ns[i]));
    }
    const auto x = random_floats(rng, K), norm_w = random_floats(rng, K, 0.5f, 1.5f);
    auto dx = upload(x), dn = upload(norm_w);
    cuda::MatvecParams p{dw[0].get(), types[0], dx.as<float>(), nullptr, dy[0].as<float>(), K, Ns[0], 1};
    p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
    for (int i = 1; i < 3; ++i)
      p.siblings[i - 1] = cuda::MatvecParams::Sibling{dw[i].get(), nullptr, dy[i].as<float>(), Ns[i], types[i]};
    p.n_siblings = 2;
    ASSERT_TRUE(cuda::matvec_fuses(p));
    cuda::launch_matvec(p, nullptr);
    const std::vector<float> xn = rms_normed(x, norm_w, 1e-5);
    for (int i = 0; i < 3; ++i) {
      std::vector<double> ref, mag, mx;
      reference(w[i], types[i], xn, K, Ns[i], 1, nullptr, ref, mag, mx);
      std::vector<double> atol(mag.size());
      for (size_t j = 0; j < mag.size(); ++j) atol[j] = 1e-5 * mag[j] + 1e-6;
      EXPECT_TRUE(close("mixed sibling " + std::to_string(i) + " N=" + std::to_string(Ns[i]),
                        download<float>(dy[i], Ns[i]), ref, atol, 0.0));
    }
    p.type = Type::Q6_K;  // Q6_K main with a Q4_K sibling: not a supported mix
    p.w = dw[1].get(), p.siblings[0] = cuda::MatvecParams::Sibling{dw[0].get(), nullptr, dy[0].as<float>(), Ns[0],
                                                                   Type::Q4_K};
    p.n_siblings = 1;
    EXPECT_FALSE(cuda::matvec_fuses(p));
  }
}

// gate and up in one launch writing silu(gate) * up (the SwiGlu epilogue) or gelu_tanh(gate) * up (GeGlu), for the
// formats the int16 kernel serves, with the gate as main matrix and as sibling, row counts that leave a partial
// group, and the norm folded in.
TEST(WeightKernels, MatvecSwiGluEpilogue) {
  REQUIRE_GPU();
  std::mt19937 rng(31337);
  const int64_t K = 2048;
  for (const Type type : {Type::Q4_K, Type::Q4_0, Type::Q6_K, Type::Q8_0})
    for (const int64_t N : {13, 5003})
      for (const bool gate_is_sibling : {false, true})
      for (const bool gelu : {false, true}) {
        const auto wg = random_weights(rng, type, K, N), wu = random_weights(rng, type, K, N);
        const auto x = random_floats(rng, K), norm_w = random_floats(rng, K, 0.5f, 1.5f);
        auto dg = upload(wg), du = upload(wu), dx = upload(x), dn = upload(norm_w);
        auto dout = poisoned_f32(N), dunused = poisoned_f32(N);
        const auto& main_w = gate_is_sibling ? du : dg;
        const auto& sib_w = gate_is_sibling ? dg : du;
        cuda::MatvecParams p{main_w.get(), type, dx.as<float>(), nullptr, dunused.as<float>(), K, N, 1};
        p.norm_w = dn.as<float>(), p.norm_eps = 1e-5f;
        p.siblings[0] = cuda::MatvecParams::Sibling{sib_w.get(), nullptr, dunused.as<float>(), N, type};
        p.n_siblings = 1;
        p.swiglu_out = dout.as<float>(), p.swiglu_gate_is_sibling = gate_is_sibling, p.glu_gelu = gelu;
        ASSERT_TRUE(cuda::matvec_fuses(p));
        cuda::launch_matvec(p, nullptr);
        const std::vector<float> xn = rms_normed(x, norm_w, 1e-5);
        std::vector<double> g, gmag, gmx, u, umag, umx;
        reference(wg, type, xn, K, N, 1, nullptr, g, gmag, gmx);
        reference(wu, type, xn, K, N, 1, nullptr, u, umag, umx);
        // Each product is within 1e-5 of its sum |w x| (the int16 rounding of x); silu' lies in [-0.1, 1.1], the
        // tanh GELU's in [-0.13, 1.13].
        std::vector<double> ref(N), atol(N);
        for (int64_t n = 0; n < N; ++n) {
          const double inner = 0.7978845608028654 * g[n] * (1.0 + 0.044715 * g[n] * g[n]);  // sqrt(2 / pi) (...)
          const double a = gelu ? 0.5 * g[n] * (1.0 + std::tanh(inner)) : g[n] / (1.0 + std::exp(-g[n]));
          ref[n] = a * u[n];
          atol[n] = 1e-5 * (1.13 * gmag[n] * std::fabs(u[n]) + umag[n] * (std::fabs(a) + 1e-5 * gmag[n])) + 1e-6;
        }
        EXPECT_TRUE(close(std::string(gelu ? "geglu" : "swiglu") + " epilogue " + quant::type_name(type) +
                              " N=" + std::to_string(N) + (gate_is_sibling ? " gate as sibling" : ""),
                          download<float>(dout, N), ref, atol, 1e-6));
        // Neither product is stored.
        for (float v : download<float>(dunused, N)) ASSERT_TRUE(std::isnan(v)) << "a product was written";
      }
}

TEST_P(WeightKernels, DequantF16MatchesReference) {
  REQUIRE_GPU();
  const Type type = GetParam();
  std::mt19937 rng(99 + int(type));
  for (int64_t K : row_lengths(type)) {
    const int64_t N = 9, row0 = 2, rows = 5;
    const auto w = random_weights(rng, type, K, N);
    auto dw = upload(w);
    cuda::DeviceBuffer out(K * rows * 2);
    CUDA_CHECK(cudaMemset(out.get(), 0xff, K * rows * 2));  // 0xffff is a half NaN
    cuda::launch_dequant_f16({dw.get(), type, K, row0, rows, out.as<uint16_t>()}, nullptr);
    const auto got16 = download<uint16_t>(out, K * rows);
    std::vector<float> got(got16.size());
    std::vector<double> ref;
    for (size_t i = 0; i < got16.size(); ++i) got[i] = quant::f16_to_f32(got16[i]);
    for (int64_t r = 0; r < rows; ++r)
      for (float v : ref_row(w, type, K, row0 + r)) ref.push_back(quant::f16_to_f32(quant::f32_to_f16(v)));
    // One half ulp of slack: the device may form d*q - m with a fused multiply-add before rounding to half.
    EXPECT_TRUE(close(std::string("dequant_f16 ") + quant::type_name(type) + " K=" + std::to_string(K), got, ref,
                      {1e-7}, 1.0 / 1024));
  }
}

TEST_P(WeightKernels, GemmMatchesReference) {
  REQUIRE_GPU();
  const Type type = GetParam();
  cuda::Context ctx;
  std::mt19937 rng(7 + int(type));
  for (int64_t K : row_lengths(type))
    for (int64_t N : {7, 300})
      for (int64_t T : {2, 33}) {
        const auto w = random_weights(rng, type, K, N);
        const auto x = random_floats(rng, K * T);
        const auto bias = random_floats(rng, N);
        std::vector<double> ref, mag, mx;
        reference(w, type, x, K, N, T, &bias, ref, mag, mx);
        auto dw = upload(w), dx = upload(x), db = upload(bias);
        // Small scratch forces several slices for N = 300; full scratch does one.
        for (bool sliced : {true, false}) {
          const size_t sb = sliced ? cuda::gemm_min_scratch(K, N, T) : cuda::gemm_full_scratch(K, N, T);
          cuda::DeviceBuffer scratch(sb);
          auto dy = poisoned_f32(N * T);
          cuda::launch_gemm({dw.get(), type, dx.as<float>(), db.as<float>(), dy.as<float>(), K, N, T, scratch.get(), sb},
                            ctx.blas(), ctx.compute());
          ctx.synchronize();
          // W and X are rounded to half (relative 2^-11 each) before a float32-accumulated product: the error is
          // bounded by 2^-10 * sum |w x| plus accumulation.
          std::vector<double> atol(mag.size());
          for (size_t i = 0; i < mag.size(); ++i) atol[i] = (1.0 / 1024 + 1e-5) * mag[i] + 1e-6;
          EXPECT_TRUE(close(std::string("gemm ") + quant::type_name(type) + " K=" + std::to_string(K) +
                                " N=" + std::to_string(N) + " T=" + std::to_string(T) + (sliced ? " sliced" : ""),
                            download<float>(dy, N * T), ref, atol, 0.0));
        }
      }
}

// Two matrices of one x and shape (a layer's k and v, GemmParams::w2): one batched cuBLAS call where the scratch
// holds both, one after the other where it does not; either output order in memory (the batch goes from the lower
// one); mixed types (Q4_K_M's Q6_K v beside its Q4_K k); F16 matrices read in place (no batch).
TEST(WeightKernels, GemmPairMatchesReference) {
  REQUIRE_GPU();
  cuda::Context ctx;
  std::mt19937 rng(91);
  const int64_t K = 512, N = 96, T = 70;
  const std::pair<Type, Type> types[] = {{Type::Q4_K, Type::Q6_K}, {Type::Q8_0, Type::Q8_0}, {Type::F16, Type::F16}};
  for (const auto& [t1, t2] : types) {
    const auto w1 = random_weights(rng, t1, K, N), w2 = random_weights(rng, t2, K, N);
    const auto x = random_floats(rng, K * T);
    const auto b1 = random_floats(rng, N), b2 = random_floats(rng, N);
    std::vector<double> ref1, mag1, mx1, ref2, mag2, mx2;
    reference(w1, t1, x, K, N, T, &b1, ref1, mag1, mx1);
    reference(w2, t2, x, K, N, T, &b2, ref2, mag2, mx2);
    auto dw1 = upload(w1), dw2 = upload(w2), dx = upload(x), db1 = upload(b1), db2 = upload(b2);
    for (const bool whole : {true, false})
      for (const bool second_lower : {false, true}) {
        const size_t sb = whole ? cuda::gemm_pair_scratch(K, N, T) : cuda::gemm_full_scratch(K, N, T);
        cuda::DeviceBuffer scratch(sb);
        auto dy = poisoned_f32(size_t(3 * N * T));  // the outputs a gap apart, in either order
        float* lo = dy.as<float>();
        float* hi = lo + 2 * N * T;
        cuda::GemmParams p{dw1.get(), t1, dx.as<float>(), db1.as<float>(), second_lower ? hi : lo, K, N, T,
                           scratch.get(), sb};
        p.w2 = dw2.get(), p.type2 = t2, p.bias2 = db2.as<float>(), p.y2 = second_lower ? lo : hi;
        cuda::launch_gemm(p, ctx.blas(), ctx.compute());
        ctx.synchronize();
        const auto all = download<float>(dy, size_t(3 * N * T));
        const auto at = [&](const float* y) {
          const auto from = all.begin() + (y - lo);
          return std::vector<float>(from, from + N * T);
        };
        const std::string what = std::string("gemm pair ") + quant::type_name(t1) + "+" + quant::type_name(t2) +
                                 (whole ? " batched" : " in turn") + (second_lower ? ", second lower" : "");
        for (int m = 0; m < 2; ++m) {  // the bound of GemmMatchesReference
          const std::vector<double>& mag = m ? mag2 : mag1;
          std::vector<double> atol(mag.size());
          for (size_t i = 0; i < mag.size(); ++i) atol[i] = (1.0 / 1024 + 1e-5) * mag[i] + 1e-6;
          EXPECT_TRUE(close(what + (m ? " (second)" : " (first)"), at(m ? p.y2 : p.y), m ? ref2 : ref1, atol, 0.0));
        }
        // The gap between the outputs is never written.
        const float* gap = lo + N * T;
        EXPECT_TRUE(std::all_of(all.begin() + (gap - lo), all.begin() + (hi - lo),
                                [](float v) { return std::isnan(v); }))
            << what;
      }
  }
}

TEST_P(WeightKernels, GetRowsMatchesReference) {
  REQUIRE_GPU();
  const Type type = GetParam();
  std::mt19937 rng(55 + int(type));
  for (int64_t K : row_lengths(type)) {
    const int64_t n_rows = 11;
    const auto w = random_weights(rng, type, K, n_rows);
    const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
    auto dw = upload(w), di = upload(ids);
    auto out = poisoned_f32(K * ids.size());
    cuda::launch_get_rows({dw.get(), type, di.as<int32_t>(), out.as<float>(), K, n_rows, int64_t(ids.size())}, nullptr);
    std::vector<double> ref;
    for (int32_t id : ids)
      for (float v : ref_row(w, type, K, id)) ref.push_back(v);
    // The device may contract d*q - m into one fused operation: one float ulp of the terms.
    EXPECT_TRUE(close(std::string("get_rows ") + quant::type_name(type) + " K=" + std::to_string(K),
                      download<float>(out, K * ids.size()), ref, {1e-7}, 1e-6));
  }
}

INSTANTIATE_TEST_SUITE_P(AllTypes, WeightKernels, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(quant::type_name(info.param)); });

TEST(WeightKernels, RejectsBadParams) {
  // Launchers validate before touching the device, so these run (and must throw) without a GPU too.
  float dummy = 0;
  EXPECT_THROW(cuda::launch_matvec({nullptr, Type::F32, &dummy, nullptr, &dummy, 4, 4, 1}, nullptr),
               cuda::InvalidArgument);
  EXPECT_THROW(cuda::launch_matvec({&dummy, Type::Q4_K, &dummy, nullptr, &dummy, 100, 4, 1}, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cuda::launch_matvec({&dummy, Type::Q8_K, &dummy, nullptr, &dummy, 256, 4, 1}, nullptr),
               quant::UnsupportedType);
}

}  // namespace
