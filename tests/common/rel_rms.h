// Relative RMS of the difference between two logits rows (or any two float vectors): the measure every GPU-vs-CPU
// comparison of the suite bounds.
#pragma once
#include <algorithm>
#include <cmath>
#include <span>

namespace testing_metrics {

inline double rel_rms(std::span<const float> a, std::span<const float> ref) {
  double sq = 0, sq_ref = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double d = double(a[i]) - double(ref[i]);
    sq += d * d, sq_ref += double(ref[i]) * double(ref[i]);
  }
  return std::sqrt(sq / std::max(sq_ref, 1e-300));
}

}  // namespace testing_metrics
