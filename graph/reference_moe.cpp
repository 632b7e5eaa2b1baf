// The CPU reference kernels of the mixture-of-experts ops (see reference_ops.h): routing (top-k, the weights of the
// chosen experts), the per-expert product over 3-D expert tensors, gpt-oss's clamped SwiGLU and the weighted sum.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/reference_ops.h"
#include "graph/thread_pool.h"

namespace graph::ref {
namespace {

// Below this many multiply-adds a product runs on the calling thread (as in reference_ops.cpp).
constexpr int64_t kParallelWork = int64_t{1} << 18;

// llama.cpp clamps the sum of the chosen weights before dividing by it: the smallest normal f16.
constexpr double kMinWeightSum = 6.103515625e-5;

void check_id(int32_t id, int64_t n_expert, int64_t j, int64_t t, const char* op) {
  if (id < 0 || id >= n_expert)
    throw std::out_of_range(std::string(op) + ": expert id " + std::to_string(id) + " (slot " + std::to_string(j) +
                            ", token " + std::to_string(t) + ") is outside [0, " + std::to_string(n_expert) + ")");
}

}  // namespace

void top_k(const float* a, int32_t* out, int64_t n, int64_t k, int64_t rows) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = a + r * n;
    std::iota(order.begin(), order.end(), 0);
    // A stable sort by value, descending: equal values keep index order (llama.cpp's CPU argsort is std::sort,
    // which sorts up to 16 elements by insertion, stably; past that its order of ties is unspecified).
    std::stable_sort(order.begin(), order.end(), [x](int32_t i, int32_t j) { return x[i] > x[j]; });
    std::copy(order.begin(), order.begin() + k, out + r * k);
  }
}

void moe_weights(const MoeWeightsArgs& a) {
  std::vector<double> vals(static_cast<size_t>(a.k));
  for (int64_t t = 0; t < a.t; ++t) {
    const int32_t* ids = a.ids + t * a.k;
    float* w = a.out + t * a.k;
    for (int64_t j = 0; j < a.k; ++j) {
      check_id(ids[j], a.n_expert, j, t, "moe_weights");
      vals[j] = a.scores[t * a.n_expert + ids[j]];
    }
    if (a.p.softmax) {
      double max = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t j = 0; j < a.k; ++j) max = std::max(max, vals[j]);
      for (int64_t j = 0; j < a.k; ++j) sum += (vals[j] = std::exp(vals[j] - max));
      for (int64_t j = 0; j < a.k; ++j) vals[j] /= sum;
    }
    if (a.p.normalize) {
      double sum = 0;
      for (int64_t j = 0; j < a.k; ++j) sum += vals[j];
      sum = std::max(sum, kMinWeightSum);
      for (int64_t j = 0; j < a.k; ++j) vals[j] /= sum;
    }
    for (int64_t j = 0; j < a.k; ++j) w[j] = static_cast<float>(vals[j]);
  }
}

void mul_mat_id(const MulMatIdArgs& a, ThreadPool* pool) {
  // Group the (token, slot) pairs by expert, so that each expert's rows are read (and dequantized) once per call
  // however many tokens chose it, and experts nobody chose are not read at all.
  std::vector<std::vector<int64_t>> users(static_cast<size_t>(a.n_expert));  // expert -> t * k + j
  for (int64_t t = 0; t < a.t; ++t)
    for (int64_t j = 0; j < a.k; ++j) {
      const int32_t e = a.ids[t * a.k + j];
      check_id(e, a.n_expert, j, t, "mul_mat_id");
      users[static_cast<size_t>(e)].push_back(t * a.k + j);
    }
  std::vector<int64_t> chosen;  // experts with users, ascending
  for (int64_t e = 0; e < a.n_expert; ++e)
    if (!users[static_cast<size_t>(e)].empty()) chosen.push_back(e);

  // One work item = one output row n of one chosen expert, for all of that expert's users.
  const auto n_items = static_cast<int64_t>(chosen.size()) * a.N;
  auto rows = [&](int64_t i0, int64_t i1, int) {
    std::vector<float> row(a.wq ? static_cast<size_t>(a.K) : 0);
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t e = chosen[static_cast<size_t>(i / a.N)], n = i % a.N;
      const int64_t wrow = e * a.N + n;  // row of the [K, N * n_expert] matrix the expert tensor is
      const float* w = a.w ? a.w + wrow * a.K : row.data();
      if (!a.w) quant::dequantize_row(a.wtype, a.wq + static_cast<size_t>(wrow) * a.row_bytes, row.data(), a.K);
      const double bias = a.bias ? a.bias[e * a.N + n] : 0.0;
      for (const int64_t u : users[static_cast<size_t>(e)]) {
        const int64_t t = u / a.k, j = u % a.k;
        const float* x = a.x + (t * a.x_slots + (a.x_slots == 1 ? 0 : j)) * a.K;
        a.out[u * a.N + n] = static_cast<float>(dot(w, x, a.K) + bias);
      }
    }
  };
  if (pool && pool->size() > 1 && a.N * a.K * a.k * a.t >= kParallelWork) {
    pool->parallel_for(n_items, rows);
  } else {
    rows(0, n_items, 0);
  }
}

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, const SwiGluOaiParams& p) {
  for (int64_t i = 0; i < n; ++i) {
    const double g = std::min(gate[i], p.limit);
    const double u = std::clamp(up[i], -p.limit, p.limit);
    out[i] = static_cast<float>(g / (1.0 + std::exp(-static_cast<double>(p.alpha) * g)) * (u + 1.0));
  }
}

void weighted_sum(const float* a, const float* w, float* out, int64_t ne0, int64_t k, int64_t t) {
  for (int64_t tt = 0; tt < t; ++tt)
    for (int64_t i = 0; i < ne0; ++i) {
      double s = 0;
      for (int64_t j = 0; j < k; ++j) s += static_cast<double>(w[tt * k + j]) * a[(tt * k + j) * ne0 + i];
      out[tt * ne0 + i] = static_cast<float>(s);
    }
}

}  // namespace graph::ref
