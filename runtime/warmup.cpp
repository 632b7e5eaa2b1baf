// Untimed warm-up evaluations (see warmup.h).
#include "runtime/warmup.h"

#include <chrono>
#include <vector>

namespace runtime {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

double warm_up_generation(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options) {
  const auto t0 = std::chrono::steady_clock::now();
  session.eval(prompt, options.n_past, /*all_logits=*/false);
  const int64_t pos = int64_t{options.n_past} + static_cast<int64_t>(prompt.size());
  if (options.n_predict != 0 && pos < session.n_ctx()) {
    const std::vector<int32_t> history(prompt.begin(), prompt.end());
    const int32_t token = prompt.back();
    for (uint64_t step = 1; step <= 2; ++step) {
      const SampleRequest req{&options.sampling, step, history, /*more=*/false};  // the same step twice
      if (!session.decode_sample(token, static_cast<int32_t>(pos), req))
        session.eval(std::span<const int32_t>(&token, 1), static_cast<int32_t>(pos), /*all_logits=*/false);
    }
  }
  return ms_since(t0);
}

double warm_up_batch(Session& session, std::span<const int32_t> tokens, bool all_logits) {
  const auto t0 = std::chrono::steady_clock::now();
  session.eval(tokens, 0, all_logits);
  return ms_since(t0);
}

}  // namespace runtime
