// libFuzzer entry point: exercise_json_schema() (exercise.h) under the per-input heap budget.
#include <cstddef>
#include <cstdint>

#include "alloc_guard.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // A schema's grammar is a few dozen bytes of program per byte of schema; maxLength/maxItems bounds up to 4096 make
  // the most of one keyword, and its positions are counted, not allocated.
  fuzz::AllocGuard guard(size, fuzz::AllocBudget{512, size_t{16} << 20});
  fuzz::exercise_json_schema(fuzz::Bytes(data, size));
  return 0;
}
