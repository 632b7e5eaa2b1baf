// libFuzzer entry point: exercise_tool_calls() (exercise.h) under the per-input heap budget.
#include <cstddef>
#include <cstdint>

#include "alloc_guard.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A reply is read into a few copies and one JSON tree per call, each a few times the text's size.
  fuzz::AllocGuard guard(size, fuzz::AllocBudget{64, size_t{1} << 20});
  fuzz::exercise_tool_calls(fuzz::Bytes(data, size));
  return 0;
}
