// Log-softmax of one logits row and its top entries (see logprobs.h).
#include "runtime/logprobs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

namespace runtime {

TokenLogprobs token_logprobs(std::span<const float> logits, int32_t sampled, int32_t n_top) {
  const auto n_vocab = static_cast<int64_t>(logits.size());
  if (sampled < 0 || sampled >= n_vocab)
    throw std::invalid_argument("token_logprobs: token " + std::to_string(sampled) + " is outside the vocabulary");
  if (n_top < 0 || n_top > kMaxTopLogprobs)
    throw std::invalid_argument("token_logprobs: n_top must be between 0 and " + std::to_string(kMaxTopLogprobs));

  // log sum exp with the maximum taken out, so no exp overflows; -inf logits add nothing.
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - double(max));
  const double log_z = double(max) + std::log(sum);
  const auto logprob = [&](int32_t id) { return static_cast<float>(double(logits[size_t(id)]) - log_z); };

  TokenLogprobs out;
  out.sampled = {sampled, logprob(sampled)};
  const auto n = static_cast<size_t>(std::min<int64_t>(n_top, n_vocab));
  if (n == 0) return out;
  // Only the n best ids are put in order (a partial sort), not the whole vocabulary.
  std::vector<int32_t> ids(static_cast<size_t>(n_vocab));
  std::iota(ids.begin(), ids.end(), 0);
  const auto before = [&](int32_t a, int32_t b) {
    const float la = logits[size_t(a)], lb = logits[size_t(b)];
    return la > lb || (la == lb && a < b);
  };
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(n), ids.end(), before);
  out.top.reserve(n);
  for (size_t i = 0; i < n; ++i) out.top.push_back({ids[i], logprob(ids[i])});
  return out;
}

}  // namespace runtime
