// libFuzzer entry point: exercise_model() (exercise.h) under the per-input heap budget.
#include <cstddef>
#include <cstdint>

#include "alloc_guard.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::AllocGuard guard(size, fuzz::AllocBudget{64, size_t{4} << 20});
  fuzz::exercise_model(fuzz::Bytes(data, size));
  return 0;
}
