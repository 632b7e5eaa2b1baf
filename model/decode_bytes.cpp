// Weight bytes per decoded token; see decode_bytes.h.
#include "model/decode_bytes.h"

namespace model {
namespace {

// Tensors holding one slice per expert, of which a token reads the slices of the experts it is routed to. The
// router (ffn_gate_inp) is read whole: every token scores every expert.
bool is_expert_tensor(graph::WeightRole r) {
  using R = graph::WeightRole;
  switch (r) {
    case R::FfnGateExps: case R::FfnUpExps: case R::FfnDownExps:
    case R::FfnGateExpsBias: case R::FfnUpExpsBias: case R::FfnDownExpsBias:
      return true;
    default: return false;
  }
}

}  // namespace

DecodeBytes decode_bytes(const Config& c, const Weights& w) {
  DecodeBytes d;
  d.n_expert = c.n_expert;
  d.n_expert_used = c.n_expert_used;
  const bool tied = !w.has("output.weight");
  for (const WeightInfo& t : w.all()) {
    const uint64_t bytes = t.params.nbytes;
    if (t.params.role == graph::WeightRole::TokenEmbedding && !tied) {
      d.per_token += bytes / static_cast<uint64_t>(t.shape.ne[1]);  // the looked-up row only
    } else if (c.n_expert > 0 && is_expert_tensor(t.params.role)) {
      // Experts are the outermost dimension, each the same number of bytes.
      const uint64_t active = bytes / static_cast<uint64_t>(c.n_expert) * static_cast<uint64_t>(c.n_expert_used);
      d.expert_total += bytes;
      d.expert_active += active;
      d.per_token += active;
    } else {
      d.per_token += bytes;
    }
  }
  return d;
}

}  // namespace model
