// Log-probabilities of sampled tokens, for a server's `logprobs` / `top_logprobs`: the log-softmax of the model's
// raw logits (before penalties, temperature and the top-k / top-p / min-p filters), so a token's logprob says what
// the model thinks of it, whatever the request's sampler did. Computed on the CPU from a logits row the caller
// already has, and only for requests that ask: it costs two passes over the vocabulary per token (and a partial
// sort for the top list).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace runtime {

// Most alternatives a request may ask for per token (OpenAI's top_logprobs limit).
inline constexpr int32_t kMaxTopLogprobs = 20;

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;  // natural log; -inf where the logit was -inf
};

// One generated token: its own logprob and the n most likely tokens of the same distribution, most likely first
// (ties: lower id first), so the sampled token appears among them exactly when it ranks within n.
struct TokenLogprobs {
  TokenLogprob sampled;
  std::vector<TokenLogprob> top;  // [n]
};

// logits: one row [n_vocab]; sampled in [0, n_vocab); n_top in [0, kMaxTopLogprobs] (fewer when the vocabulary is
// smaller). Throws std::invalid_argument otherwise. Sums in double: a logprob is exact to float rounding.
TokenLogprobs token_logprobs(std::span<const float> logits, int32_t sampled, int32_t n_top);

}  // namespace runtime
