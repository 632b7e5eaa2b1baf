// The CPU token sampler: penalties, greedy, top-k, top-p, min-p, temperature and a seeded draw from a counter-based
// Philox4x32-10 generator. It is the specification the GPU sampler reproduces; every rule is spelled out below.
//
// Inputs of one draw: logits l[0..V) (float32), the token history (prompt + generated so far), the step counter
// (0 for the first generated token, +1 per token) and the parameters. Filters run in this fixed order:
//
//  0. Logit bias: for every (id, b) of logit_bias, in order, with id in [0, V): l[id] = l[id] + b in float32
//     (OpenAI's logit_bias; llama.cpp's sampler chain applies it first as well). b = -inf bans the id.
//  1. Penalties, when repeat_penalty != 1 or presence_penalty != 0 or frequency_penalty != 0, over the window = the
//     last repeat_last_n tokens of the history (-1 = the whole history, 0 = no penalties). For every token id c that
//     occurs n_c > 0 times in the window, in float32:
//         l[c] = l[c] > 0 ? l[c] / repeat_penalty : l[c] * repeat_penalty;
//         l[c] = l[c] - (float(n_c) * frequency_penalty + presence_penalty);
//  2. temp <= 0: greedy. Return the id of the largest (penalised) logit, the lower id on exact ties. Done.
//  3. Candidates are sorted by logit descending, ties by lower id. Every later step keeps a prefix of this order,
//     and never fewer than one candidate.
//  4. top-k (k > 0 and k < V): keep the first k.
//  5. top-p (p < 1): with q_i = exp(double(l_i) - double(l_0)) over the kept candidates (l_0 = the largest) and
//     Q = their sum accumulated in sorted order in double, keep the shortest prefix whose running sum of q_i
//     reaches p * Q (running >= p * Q, compared in double).
//  6. min-p (p > 0): keep candidates with exp(double(l_i) - double(l_0)) >= double(min_p).
//  7. Temperature: w_i = exp((double(l_i) - double(l_0)) / double(temp)) over the kept candidates; W = their sum,
//     accumulated in sorted order in double.
//  8. Draw: u = uniform(seed, step) (below); target = double(u) * W; walk the kept candidates in sorted order
//     accumulating w_i in double and return the first whose running sum exceeds target (the last one if rounding
//     leaves none).
//
// uniform(seed, step): one Philox4x32-10 block (Salmon et al. 2011, as Random123 and cuRAND define it: multipliers
// 0xD2511F53 / 0xCD9E8D57, Weyl key increments 0x9E3779B9 / 0xBB67AE85, 10 rounds, key bumped between rounds) with
//   key     = { uint32(seed), uint32(seed >> 32) }
//   counter = { uint32(step), uint32(step >> 32), 0, 0 }
// and u = float(x0 >> 8) * 2^-24 from the first output word x0: 24 random bits, exact in float, u in [0, 1).
#pragma once
#include <array>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace runtime {

// Defaults as llama.cpp's.
struct SamplerParams {
  float temp = 0.8f;               // <= 0: greedy
  int32_t top_k = 40;              // <= 0: off
  float top_p = 0.95f;             // >= 1: off
  float min_p = 0.05f;             // <= 0: off
  float repeat_penalty = 1.0f;     // 1: off
  int32_t repeat_last_n = 64;      // window of the penalties; -1 = whole history, 0 = off
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // step 0: (token id, added to its logit)

  bool penalties() const {
    return repeat_last_n != 0 && (repeat_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f);
  }
};

// Philox4x32-10 of one counter block under one key.
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);
// The uniform float in [0, 1) that draw number `step` uses (see the file comment).
float sampler_uniform(uint64_t seed, uint64_t step);

// Throws std::invalid_argument naming the field for values outside their domain (NaN, top_p > 1 is allowed and
// means off, repeat_penalty <= 0, repeat_last_n < -1, a logit bias on a negative id or NaN / +inf).
void validate(const SamplerParams& p);

// Applies the penalties of step 1 in place (exposed for tests and for the GPU sampler's reference).
void apply_penalties(const SamplerParams& p, std::span<const int32_t> history, std::span<float> logits);

// Greedy argmax: the largest value, lower index on exact ties. logits must not be empty.
int32_t argmax(std::span<const float> logits);

class Sampler {
 public:
  explicit Sampler(SamplerParams params);  // validates

  // One draw (see the file comment). history ids outside [0, V) are ignored by the penalties.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history, uint64_t step);

  const SamplerParams& params() const { return params_; }

 private:
  SamplerParams params_;
  std::vector<float> work_;        // [V] penalised logits
  std::vector<int32_t> order_;     // [V] candidate ids, sorted
  std::vector<double> weight_;     // [kept] scratch
};

}  // namespace runtime
