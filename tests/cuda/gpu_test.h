// Shared helpers of the CUDA kernel tests: skip without a device, typed device buffers, random weights of any block
// format, the matvec reference on the CPU reference's own functions (graph/reference_ops.h), and the
// |a - b| <= atol + rtol * |ref| comparison that prints the first mismatches and the max error.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/check.h"
#include "cuda/kernels/product_stack.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/raii.h"
#include "graph/reference_ops.h"
#include "quant/half.h"
#include "quant/types.h"

#define REQUIRE_GPU() \
  if (!::cuda::device_available()) GTEST_SKIP() << "no CUDA device"

namespace gpu_test {

// A device copy of a host vector, and back.
template <class T>
cuda::DeviceBuffer upload(const std::vector<T>& v) {
  cuda::DeviceBuffer b(std::max<size_t>(v.size() * sizeof(T), 1));
  if (!v.empty()) CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return b;
}
template <class T>
std::vector<T> download(const cuda::DeviceBuffer& b, size_t n) {
  std::vector<T> v(n);
  CUDA_CHECK(cudaDeviceSynchronize());
  if (n) CUDA_CHECK(cudaMemcpy(v.data(), b.get(), n * sizeof(T), cudaMemcpyDeviceToHost));
  return v;
}
// A device buffer of n floats filled with NaN, so that unwritten outputs fail every comparison.
// A weight format as a few-token product kernel takes it: a GGUF type, and for Q6_K whether it was regrouped at
// upload (Q6_Kx8, q6_kx8.cuh). Named "Q6_Kx8" for the regrouped, the type's name otherwise (test parameter names).
struct LayoutCase {
  quant::Type type;
  bool regrouped;
};
inline std::string layout_name(const LayoutCase& c) {
  return std::string(quant::type_name(c.type)) + (c.regrouped ? "x8" : "");
}

// The SwiGLU / GeGLU epilogue's reference (cuda::GluEpilogue): act(gate) * up for each element of the up
// product's reference, and its tolerance scaled by |act(gate)|.
inline double glu_act(double gate, bool gelu) {
  return gelu ? graph::ref::gelu_tanh(gate) : gate / (1.0 + std::exp(-gate));
}
inline void glu_reference(const std::vector<float>& gate, bool gelu, std::vector<double>& ref,
                          std::vector<double>& atol) {
  for (size_t i = 0; i < ref.size(); ++i) {
    const double a = glu_act(gate[i], gelu);
    ref[i] *= a, atol[i] = atol[i] * std::fabs(a) + 1e-6;
  }
}

inline cuda::DeviceBuffer poisoned_f32(size_t n) {
  cuda::DeviceBuffer b(std::max<size_t>(n * 4, 1));
  CUDA_CHECK(cudaMemset(b.get(), 0xff, n * 4));  // 0xffffffff is a NaN
  return b;
}

inline std::vector<float> random_floats(std::mt19937& rng, size_t n, float lo = -1.0f, float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

// Byte offsets of the binary16 scale fields inside one block (patched to sane values after random filling).
inline std::vector<int> half_fields(quant::Type t) {
  using quant::Type;
  switch (t) {
    case Type::Q4_0: case Type::Q5_0: case Type::Q8_0: return {0};
    case Type::Q4_1: case Type::Q5_1: case Type::Q4_K: case Type::Q5_K: return {0, 2};
    case Type::Q2_K: return {80, 82};
    case Type::Q3_K: return {108};
    case Type::Q6_K: return {208};
    default: return {};
  }
}

// N rows of K elements of type t: random bits everywhere (every quant pattern occurs) with scales in a range that
// keeps values O(1); plain float formats get uniform values in [-1, 1].
inline std::vector<uint8_t> random_weights(std::mt19937& rng, quant::Type t, int64_t K, int64_t N);

// Matrices of N[m] rows stacked for one launch (cuda::ProductStack, q/k/v): random weights of one type, kept in the
// file's layout for the reference (w) and uploaded regrouped where asked, each with a poisoned [N, T] output; `bias`
// (device, N[1] floats) on the second.
struct StackedMatrices {
  std::vector<std::vector<uint8_t>> w;
  std::vector<cuda::DeviceBuffer> dw, dy;
  cuda::ProductStack stack;
  int64_t total = 0;
};
inline StackedMatrices stacked_matrices(std::mt19937& rng, quant::Type t, bool regrouped, int64_t K, int64_t T,
                                        int n_mats, const int64_t* N, const float* bias) {
  StackedMatrices s;
  for (int m = 0; m < n_mats; ++m) {
    s.w.push_back(random_weights(rng, t, K, N[m]));
    std::vector<uint8_t> up = s.w.back();
    if (regrouped) cuda::q6_kx8_regroup_host(s.w.back().data(), up.data(), K, N[m]);
    s.dw.push_back(upload(up));
    s.dy.push_back(poisoned_f32(size_t(N[m] * T)));
    s.stack.w[m] = s.dw.back().get(), s.stack.y[m] = s.dy.back().as<float>(), s.stack.N[m] = N[m];
    s.stack.bias[m] = m == 1 ? bias : nullptr;
    s.total += N[m];
  }
  s.stack.n = n_mats;
  return s;
}

inline std::vector<uint8_t> random_weights(std::mt19937& rng, quant::Type t, int64_t K, int64_t N) {
  const auto& tr = quant::traits(t);
  const size_t rb = quant::row_bytes(t, K);
  std::vector<uint8_t> w(rb * N);
  if (t == quant::Type::F32 || t == quant::Type::F16 || t == quant::Type::BF16) {
    auto f = random_floats(rng, size_t(K * N));
    for (size_t i = 0; i < f.size(); ++i) {
      if (t == quant::Type::F32) std::memcpy(&w[i * 4], &f[i], 4);
      const uint16_t h = t == quant::Type::F16 ? quant::f32_to_f16(f[i]) : quant::f32_to_bf16(f[i]);
      if (t != quant::Type::F32) std::memcpy(&w[i * 2], &h, 2);
    }
    return w;
  }
  for (auto& b : w) b = uint8_t(rng());
  std::uniform_real_distribution<float> sd(0.002f, 0.02f);
  const auto fields = half_fields(t);
  for (int64_t r = 0; r < N; ++r)
    for (int64_t b = 0; b < K / tr.block_elems; ++b)
      for (int off : fields) {
        const uint16_t h = quant::f32_to_f16(sd(rng) * (rng() & 1 ? 1.0f : -1.0f));
        std::memcpy(&w[r * rb + b * tr.block_bytes + off], &h, 2);
      }
  return w;
}

// Row r of a weight matrix, dequantized by the CPU reference.
inline std::vector<float> ref_row(const std::vector<uint8_t>& w, quant::Type t, int64_t K, int64_t r) {
  std::vector<float> out(K);
  quant::dequantize_row(t, w.data() + r * quant::row_bytes(t, K), out.data(), K);
  return out;
}

// y_ref[t*N + n] = sum_k w[n,k] x[k,t] (+ bias[n]) as the CPU reference computes it (graph::ref::dot on the rows the
// CPU reference dequantizes, in double), and per element the absolute scale sum |w x| and the largest |w x| for
// tolerances.
inline void reference(const std::vector<uint8_t>& w, quant::Type type, const std::vector<float>& x, int64_t K,
                      int64_t N, int64_t T, const std::vector<float>* bias, std::vector<double>& y,
                      std::vector<double>& mag, std::vector<double>& maxterm) {
  y.assign(N * T, 0), mag.assign(N * T, 0), maxterm.assign(N * T, 0);
  for (int64_t n = 0; n < N; ++n) {
    const auto row = ref_row(w, type, K, n);
    for (int64_t t = 0; t < T; ++t) {
      double m = 0, mx = 0;
      for (int64_t k = 0; k < K; ++k) {
        const double p = std::fabs(double(row[k]) * x[t * K + k]);
        m += p, mx = std::max(mx, p);
      }
      y[t * N + n] = (bias ? (*bias)[n] : 0.0) + graph::ref::dot(row.data(), &x[t * K], K);
      mag[t * N + n] = m, maxterm[t * N + n] = mx;
    }
  }
}

// Q4_K rows with every code zeroed: each element then reads -dmin m of its sub-block (half_tile_tolerance's zrow).
inline std::vector<uint8_t> q4_k_codes_zeroed(std::vector<uint8_t> w) {
  for (size_t b = 0; b < w.size(); b += 144) std::fill(w.begin() + b + 16, w.begin() + b + 144, uint8_t(0));
  return w;
}

// The bound on |y - y_ref| of one output of a product on the half tiles (cuda/kernels/unpack_half.cuh, then
// mma.m16n8k16 into float32) against the reference's double, from the reference's weight row, x, |bias| and `adds`,
// the float32 additions along the longest path of the sum (ceil(K / 16) k-steps, plus partial sums merged after).
// W and x rounded to half (round to nearest: relative u = 2^-11 each for normal values, absolute 2^-25 below 2^-14),
// so a product w^ x^ differs from w x by at most (2^-10 + 2^-22) |w x| + 2^-25 (1 + 2^-11)(|w| + |x|); the products of
// halves are exact in float32, and each addition loses at most 2 ulps of float32 (2^-22) of the magnitude so far
// (truncating alignment included). Q4_0, Q8_0 and MXFP4 reach their halves by one rounding of the exact value: the
// above. Q6_K and Q4_K round in half arithmetic: w^ = fl(q' fl(d sc)) for Q6_K, fl(q fl(d sc) - fl(dmin m)) for Q4_K
// (q' = q - 32 and q exact). With A = |q' d sc| = |w| (Q6_K) or |q d sc| + |dmin m| (Q4_K; >= |w|, and much larger
// where the two cancel): |w^ - w| <= u A + u (|w| + u A) <= (2u + u^2) A for normal scales, and with |x^ - x| <= u |x|,
// |w^ x^ - w x| <= |w^ - w| |x| (1 + u) + u |w x| <= (3u + 2^-20) A |x|. Subnormal scales and results add at most
// (32 + 1) 2^-25 (1 + u) < 2^-19 per |x| (|q'| <= 32 times the scale's 2^-25, the result's). For Q4_K, -dmin m of each
// element is zrow, the row with its codes zeroed (q4_k_codes_zeroed; zrow = row for the other formats), so
// A = |w - z| + |z|.
inline double half_tile_tolerance(quant::Type t, const std::vector<float>& row, const std::vector<float>& zrow,
                                  const float* x, int64_t K, double bias_abs, double adds) {
  const bool half_math = t == quant::Type::Q4_K || t == quant::Type::Q6_K;
  double mag = 0, sum_abs = 0, amag = 0, xabs = 0;
  for (int64_t i = 0; i < K; ++i) {
    const double wi = row[size_t(i)], ax = std::fabs(double(x[i]));
    const double A = t == quant::Type::Q4_K ? std::fabs(wi - zrow[size_t(i)]) + std::fabs(zrow[size_t(i)])
                                            : std::fabs(wi);
    mag += std::fabs(wi) * ax;
    sum_abs += std::fabs(wi) + ax;
    amag += A * ax;
    xabs += ax;
  }
  const double sums = std::ldexp(1.0, -22) * (1.0 + adds) * (mag + bias_abs) + std::ldexp(1.0, -24) * sum_abs;
  return half_math ? (3 * std::ldexp(1.0, -11) + std::ldexp(1.0, -20)) * amag + std::ldexp(1.0, -19) * xabs + sums +
                         1e-6
                   : std::ldexp(1.0, -10) * (mag + bias_abs) + sums + 1e-6;
}

// The int16 matvec's own error bound (matvec_i16_units.cuh): x is held per run of 16 as int16 steps, each element
// off by at most max|x_run| / 65534, and each step multiplies a weight's integer part times its scales, c_k (the
// format's offset, as Q4_0's 8 d or Q4_K's min, is applied to the exact sum of x). Per output of one row and one
// column x[0..K): sum_k |c_k| max|x_run(k)| / 65534, with |c_k| bounded from the block's scales: Q8_0 |d q|, Q4_0
// 15 |d|, Q4_K 15 |d sc|, Q6_K 63 |d sc|, MXFP4 |e2m1(q) 2^(e-127)| (the weight itself). Zero for the other formats
// (their tests rely on the sum over many runs). Random data usually lands far inside it, but rows of a block or two
// (K = 32 for Q4_0, 256 for Q6_K) can come near. run, steps: other run lengths and step counts (the s8 small-batch
// kernel's runs of 32 with 32639 steps, batch_mm_i8.cuh): an element off by max|x_run| / (2 steps).
inline double int16_row_bound(const uint8_t* row, quant::Type t, const float* x, int64_t K, int64_t run = 16,
                              double steps = 32767.0) {
  using quant::Type;
  if (t != Type::Q8_0 && t != Type::Q4_0 && t != Type::Q6_K && t != Type::Q4_K && t != Type::MXFP4) return 0.0;
  const auto f16 = [](const uint8_t* p) { return double(quant::f16_to_f32(uint16_t(p[0] | (p[1] << 8)))); };
  std::vector<float> wv;
  if (t == Type::MXFP4) {
    wv.resize(size_t(K));
    quant::dequantize_row(t, row, wv.data(), K);
  }
  std::vector<double> c(static_cast<size_t>(K));  // the coefficient of each x_k
  for (int64_t k = 0; k < K; ++k) {
    if (t == Type::Q8_0) {
      const uint8_t* b = row + 34 * (k / 32);
      c[size_t(k)] = std::fabs(f16(b) * double(int8_t(b[2 + k % 32])));
    } else if (t == Type::Q4_0) {
      c[size_t(k)] = 15.0 * std::fabs(f16(row + 18 * (k / 32)));
    } else if (t == Type::Q4_K) {
      const uint8_t* b = row + 144 * (k / 256);
      const int j = int(k % 256) / 32;  // the 6-bit scale of sub-block j (GGUF's Q4_K packing)
      const uint8_t* s = b + 4;
      const int sc = j < 4 ? (s[j] & 63) : ((s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4));
      c[size_t(k)] = 15.0 * std::fabs(f16(b) * sc);
    } else if (t == Type::MXFP4) {
      c[size_t(k)] = std::fabs(double(wv[size_t(k)]));
    } else {
      const uint8_t* b = row + 210 * (k / 256);
      c[size_t(k)] = 63.0 * std::fabs(f16(b + 208) * double(int8_t(b[192 + (k % 256) / 16])));
    }
  }
  double out = 0.0;
  for (int64_t r = 0; r < K / run; ++r) {
    double m = 0, sc = 0;
    for (int64_t k = run * r; k < run * r + run; ++k) m = std::max(m, std::fabs(double(x[k])));
    for (int64_t k = run * r; k < run * r + run; ++k) sc += c[size_t(k)];
    out += sc * m / (2.0 * steps);
  }
  return out;
}

// int16_row_bound of every output of W [K, N] times x [K, T], as y[t N + n].
inline std::vector<double> int16_bound(const std::vector<uint8_t>& w, quant::Type t, const std::vector<float>& x,
                                       int64_t K, int64_t N, int64_t T, int64_t run = 16, double steps = 32767.0) {
  std::vector<double> out(size_t(N * T), 0.0);
  const size_t rb = quant::row_bytes(t, K);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t tt = 0; tt < T; ++tt)
      out[size_t(tt * N + n)] = int16_row_bound(w.data() + size_t(n) * rb, t, &x[size_t(tt * K)], K, run, steps);
  return out;
}

// x / sqrt(mean(x^2) + eps) * w as the CPU reference's RMSNorm computes it: the input the fused-norm matvecs must see.
inline std::vector<float> rms_normed(const std::vector<float>& x, const std::vector<float>& w, double eps) {
  std::vector<float> xn(x.size());
  graph::ref::rms_norm({x.data(), w.data(), xn.data(), int64_t(x.size()), 1, float(eps)});
  return xn;
}

// Checks |got - ref| <= atol[i] + rtol * |ref| element-wise (atol per element, or one value for all); NaN fails.
// Prints the first few mismatches and the max error with context `what`.
inline ::testing::AssertionResult close(const std::string& what, const std::vector<float>& got,
                                        const std::vector<double>& ref, const std::vector<double>& atol,
                                        double rtol) {
  if (got.size() != ref.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs " << ref.size();
  size_t bad = 0;
  double max_err = 0;
  size_t max_at = 0;
  std::string first;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(double(got[i]) - ref[i]);
    const double tol = (atol.size() == 1 ? atol[0] : atol[i]) + rtol * std::fabs(ref[i]);
    if (!(err <= tol)) {
      if (bad < 8)
        first += "\n  [" + std::to_string(i) + "] got " + std::to_string(got[i]) + " ref " + std::to_string(ref[i]) +
                 " |err| " + std::to_string(err) + " tol " + std::to_string(tol);
      ++bad;
    }
    if (!(err <= max_err)) max_err = err, max_at = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << what << ": " << bad << " of " << got.size()
                                       << " elements out of tolerance; max |err| " << max_err << " at " << max_at
                                       << first;
}

// The SwiGLU (GeGLU) epilogue of a product whose plain outputs are ref within atol ([N, T]): random gates in
// [-4, 4], launch(gate) runs the product with the epilogue and its output over the gate, and the result must be
// act(gate) ref within the scaled bound (glu_reference).
template <class Launch>
::testing::AssertionResult glu_epilogue_matches(std::mt19937& rng, int64_t N, int64_t T, bool gelu,
                                                const std::vector<double>& ref, const std::vector<double>& atol,
                                                const std::string& what, Launch launch) {
  const auto gate = random_floats(rng, size_t(N * T), -4.0f, 4.0f);
  std::vector<double> gref(ref), gtol(atol);
  glu_reference(gate, gelu, gref, gtol);
  auto dg = upload(gate);
  launch(dg.as<float>());
  return close(what, download<float>(dg, size_t(N * T)), gref, gtol, 0.0);
}

}  // namespace gpu_test
