// A request as the engine's workers hold it (engine.cpp, engine_batched.cpp); not part of the engine's API.
#pragma once
#include <atomic>
#include <cstdint>

#include "runtime/engine.h"

namespace runtime {

struct Engine::Job {
  uint64_t id = 0;
  EngineRequest request;
  EngineCallback callback;
  std::atomic<bool> cancelled{false};  // cancel(), the callback's false, or a shutdown that cancels
};

}  // namespace runtime
