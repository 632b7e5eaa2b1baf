// What may come next in a request's output, decided token by token: the sampler sees only the allowed tokens' logits
// (the others at -infinity), then the constraint takes the token it drew. JSON mode is one (json_constraint.h). A
// constrained step is always drawn on the host from its logits row, never by the device's argmax or sampler.
#pragma once
#include <cstdint>
#include <span>

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

}  // namespace runtime
