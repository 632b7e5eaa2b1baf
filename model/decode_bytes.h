// The weight bytes one decode step reads, the numerator of `bench`'s bandwidth figure. A token reads every matrix
// once, except that it reads one row of an untied token embedding and, in a mixture of experts, only the experts it
// routes to: n_expert_used of each layer's n_expert (the model's active parameters, as bytes).
#pragma once
#include <cstdint>

#include "model/config.h"
#include "model/weights.h"

namespace model {

struct DecodeBytes {
  uint64_t per_token = 0;       // weight bytes one decode step reads
  uint64_t expert_total = 0;    // bytes of the expert tensors (and their biases), all experts: resident, mostly unread
  uint64_t expert_active = 0;   // the part of per_token read from expert tensors
  int32_t n_expert = 0;         // 0 for a dense model
  int32_t n_expert_used = 0;

  bool active_only() const { return n_expert > 0 && n_expert_used < n_expert; }
};

DecodeBytes decode_bytes(const Config& c, const Weights& w);

}  // namespace model
