// The CPU sampler, written to follow runtime/sampler.h rule by rule (that comment is the specification).
#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>
#include <unordered_map>

namespace runtime {

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // Weyl key increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key[0] += kW0;
      key[1] += kW1;
    }
    const uint64_t p0 = uint64_t{kM0} * ctr[0];
    const uint64_t p1 = uint64_t{kM1} * ctr[2];
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
  }
  return ctr;
}

float sampler_uniform(uint64_t seed, uint64_t step) {
  const auto x = philox4x32_10({uint32_t(step), uint32_t(step >> 32), 0u, 0u}, {uint32_t(seed), uint32_t(seed >> 32)});
  return float(x[0] >> 8) * 0x1p-24f;
}

void validate(const SamplerParams& p) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("sampling: " + what); };
  if (std::isnan(p.temp)) bad("temperature is NaN");
  if (!(p.top_p >= 0.0f)) bad("top-p must be in [0, 1], got " + std::to_string(p.top_p));
  if (!(p.min_p >= 0.0f && p.min_p <= 1.0f)) bad("min-p must be in [0, 1], got " + std::to_string(p.min_p));
  if (!(p.repeat_penalty > 0.0f) || !std::isfinite(p.repeat_penalty))
    bad("repeat penalty must be a positive number, got " + std::to_string(p.repeat_penalty));
  if (p.repeat_last_n < -1) bad("repeat-last-n must be -1 (whole history), 0 (off) or positive, got " +
                                std::to_string(p.repeat_last_n));
  if (!std::isfinite(p.presence_penalty)) bad("presence penalty must be finite");
  if (!std::isfinite(p.frequency_penalty)) bad("frequency penalty must be finite");
  for (const auto& [id, b] : p.logit_bias) {
    if (id < 0) bad("logit bias on token id " + std::to_string(id));
    if (std::isnan(b) || b == INFINITY) bad("logit bias of token " + std::to_string(id) + " must be a number below +inf");
  }
}

void apply_penalties(const SamplerParams& p, std::span<const int32_t> history, std::span<float> logits) {
  if (!p.penalties() || history.empty()) return;
  size_t n = history.size();
  if (p.repeat_last_n > 0) n = std::min(n, static_cast<size_t>(p.repeat_last_n));
  std::unordered_map<int32_t, int32_t> count;
  for (int32_t id : history.subspan(history.size() - n))
    if (id >= 0 && static_cast<size_t>(id) < logits.size()) ++count[id];
  for (const auto& [id, c] : count) {
    float& l = logits[static_cast<size_t>(id)];
    l = l > 0.0f ? l / p.repeat_penalty : l * p.repeat_penalty;
    l = l - (float(c) * p.frequency_penalty + p.presence_penalty);
  }
}

int32_t argmax(std::span<const float> logits) {
  if (logits.empty()) throw std::invalid_argument("argmax: no logits");
  size_t best = 0;
  // NaN never wins: '>' is false against it, and a NaN at index 0 is replaced by the first number.
  for (size_t i = 1; i < logits.size(); ++i)
    if (logits[i] > logits[best] || (std::isnan(logits[best]) && !std::isnan(logits[i]))) best = i;
  return static_cast<int32_t>(best);
}

Sampler::Sampler(SamplerParams params) : params_(params) { validate(params_); }

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, uint64_t step) {
  const size_t V = logits.size();
  if (V == 0) throw std::invalid_argument("sampling: no logits");
  work_.assign(logits.begin(), logits.end());
  for (size_t i = 0; i < V; ++i)
    if (std::isnan(work_[i]) || work_[i] == INFINITY)
      throw std::runtime_error("sampling: logit of token " + std::to_string(i) + " is " + std::to_string(work_[i]));
  for (const auto& [id, b] : params_.logit_bias)
    if (static_cast<size_t>(id) < V) work_[static_cast<size_t>(id)] += b;
  apply_penalties(params_, history, work_);
  if (params_.temp <= 0.0f) return argmax(work_);

  // 3-4: sort (only the top k need ordering), ties by lower id.
  const float* l = work_.data();
  const auto before = [l](int32_t a, int32_t b) { return l[a] > l[b] || (l[a] == l[b] && a < b); };
  size_t n = (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < V) ? static_cast<size_t>(params_.top_k) : V;
  order_.resize(V);
  std::iota(order_.begin(), order_.end(), 0);
  std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(), before);

  const double l0 = l[order_[0]];
  // 5: top-p over the softmax of the kept candidates (temperature not yet applied, as in llama.cpp).
  if (params_.top_p < 1.0f) {
    weight_.resize(n);
    double total = 0.0;
    for (size_t i = 0; i < n; ++i) total += (weight_[i] = std::exp(double(l[order_[i]]) - l0));
    const double target = double(params_.top_p) * total;
    double running = 0.0;
    for (size_t i = 0; i < n; ++i) {
      running += weight_[i];
      if (running >= target) {
        n = i + 1;
        break;
      }
    }
  }
  // 6: min-p relative to the most likely candidate.
  if (params_.min_p > 0.0f) {
    size_t keep = 1;
    while (keep < n && std::exp(double(l[order_[keep]]) - l0) >= double(params_.min_p)) ++keep;
    n = keep;
  }
  // 7-8: temperature, then one draw by inverse CDF over the sorted candidates.
  weight_.resize(n);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) total += (weight_[i] = std::exp((double(l[order_[i]]) - l0) / double(params_.temp)));
  const double target = double(sampler_uniform(params_.seed, step)) * total;
  double running = 0.0;
  for (size_t i = 0; i < n; ++i) {
    running += weight_[i];
    if (running > target) return order_[i];
  }
  return order_[n - 1];
}

}  // namespace runtime
