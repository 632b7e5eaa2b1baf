// libFuzzer entry point: exercise_api_request() (exercise.h) under the per-input heap budget.
#include <cstddef>
#include <cstdint>

#include "alloc_guard.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A parsed body is a tree of values over the input's bytes, a few times its size; messages are copied once more
  // through the messages parser.
  fuzz::AllocGuard guard(size, fuzz::AllocBudget{64, size_t{1} << 20});
  fuzz::exercise_api_request(fuzz::Bytes(data, size));
  return 0;
}
