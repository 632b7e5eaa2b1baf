// Helpers the small-batch and prompt product tests share (test_batch_mm.cpp, test_prompt_products.cpp): regrouped
// Q6_K as the upload lays it out, the half tiles' bound of every output, a random product with its CPU reference,
// and the check that a launch left the split counters zero.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "gpu_test.h"

namespace product_test {

using quant::Type;
using namespace gpu_test;
using Case = LayoutCase;

// Q6_K rows [K, N] as the upload regroups them (Q6_Kx8, q6_kx8.cuh).
inline std::vector<uint8_t> regrouped(const std::vector<uint8_t>& w, int64_t K, int64_t N) {
  std::vector<uint8_t> g(w.size());
  cuda::q6_kx8_regroup_host(w.data(), g.data(), K, N);
  return g;
}

// The half tiles' bound (gpu_test::half_tile_tolerance) of every output of W [K, N] (as in the file) times x [K, T]:
// ceil(K / 16) k-steps, then up to 4 warps' k groups and 8 splits of K added after.
inline std::vector<double> tile_tolerance(Type type, const std::vector<uint8_t>& w, const std::vector<float>& x,
                                          int64_t K, int64_t N, int64_t T, const std::vector<float>* bias) {
  std::vector<double> atol(size_t(N * T));
  const std::vector<uint8_t> wz = type == Type::Q4_K ? q4_k_codes_zeroed(w) : w;
  for (int64_t n = 0; n < N; ++n) {
    const auto row = ref_row(w, type, K, n), zrow = ref_row(wz, type, K, n);
    for (int64_t t = 0; t < T; ++t)
      atol[size_t(t * N + n)] = half_tile_tolerance(type, row, zrow, &x[size_t(t * K)], K,
                                                    bias ? std::fabs((*bias)[size_t(n)]) : 0.0,
                                                    double((K + 15) / 16 + 12));
  }
  return atol;
}

// A random product of the wgmma kernel's formats (W regrouped as the upload lays it out where c.regrouped, x, a bias
// used where with_bias) on the device, with the CPU reference and its bound.
struct WgmmaProduct {
  cuda::DeviceBuffer dw, dx, db;
  std::vector<double> ref, atol;
};
inline WgmmaProduct wgmma_product(std::mt19937& rng, const Case& c, int64_t K, int64_t N, int64_t T, bool with_bias) {
  auto w = random_weights(rng, c.type, K, N);
  const auto x = random_floats(rng, K * T);
  const auto bias = random_floats(rng, N);
  WgmmaProduct r;
  std::vector<double> mag, mx;
  reference(w, c.type, x, K, N, T, with_bias ? &bias : nullptr, r.ref, mag, mx);
  r.atol = tile_tolerance(c.type, w, x, K, N, T, with_bias ? &bias : nullptr);
  if (c.regrouped) w = regrouped(w, K, N);
  r.dw = upload(w), r.dx = upload(x), r.db = upload(bias);
  return r;
}

// Every launch leaves the split counters zero for the next.
inline void expect_counters_zero(const cuda::DeviceBuffer& counters) {
  const auto left = download<uint32_t>(counters, cuda::kBatchMmCounterBytes / 4);
  ASSERT_EQ(std::count(left.begin(), left.end(), 0u), std::ptrdiff_t(left.size())) << "counters left nonzero";
}

}  // namespace product_test
