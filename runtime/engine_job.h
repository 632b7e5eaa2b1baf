// A request as the engine's workers hold it (engine.cpp, engine_batched.cpp), and how both workers stream its text;
// not part of the engine's API.
#pragma once
#include <atomic>
#include <cstdint>
#include <span>
#include <string_view>

#include "runtime/engine.h"

namespace runtime {

struct Engine::Job {
  uint64_t id = 0;
  EngineRequest request;
  EngineCallback callback;
  std::atomic<bool> cancelled{false};  // cancel(), the callback's false, or a shutdown that cancels
};

// Tokens one step of the batching worker holds at most: the budget, but never fewer than one decode per sequence.
inline int32_t step_budget(const EngineOptions& o, const PagedLayout& layout) {
  return o.step_tokens > layout.n_seq ? o.step_tokens : layout.n_seq;
}

// Sends one Text event (nothing when there is neither text nor a token); returns the callback's answer (true when
// nothing was sent).
bool send_text(const EngineCallback& callback, std::string_view text, std::span<const int32_t> ids,
               std::span<const TokenLogprobs> logprobs);

// Sends one Text event with the prompt's logprobs only (nothing when there are none); the callback's answer.
bool send_prompt_logprobs(const EngineCallback& callback, std::span<const TokenLogprobs> logprobs);

}  // namespace runtime
