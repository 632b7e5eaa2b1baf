// What may come next in a request's output, decided token by token: the sampler sees only the allowed tokens' logits
// (the others at -infinity), then the constraint takes the token it drew. JSON mode is one (json_constraint.h). A
// constrained step is always drawn on the host from its logits row, never by the device's argmax or sampler.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace runtime {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets the logits of the tokens that may not come next to -infinity. Leaves at least one token (an end of
  // generation when nothing else fits).
  virtual void mask(std::span<float> logits) const = 0;
  // The token drawn from the masked logits.
  virtual void accept(int32_t token) = 0;
};

// The row a step draws from: the logits as they are without a constraint, else their copy in `scratch` with the
// constraint's mask (the caller then gives the constraint the token it drew).
inline std::span<const float> masked_row(const TokenConstraint* constraint, std::span<const float> logits,
                                         std::vector<float>& scratch) {
  if (!constraint) return logits;
  scratch.assign(logits.begin(), logits.end());
  constraint->mask(scratch);
  return scratch;
}

}  // namespace runtime
