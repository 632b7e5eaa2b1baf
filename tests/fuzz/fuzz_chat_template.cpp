// libFuzzer entry point: exercise_chat_template() (exercise.h) under the per-input heap budget.
#include <cstddef>
#include <cstdint>

#include "alloc_guard.h"
#include "exercise.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Templates may legitimately build text and lists up to the render limits whatever their own size: exercise_chat.cpp
  // renders under 256 KiB, but ChatTemplate::parse renders a probe under the default limits (32 MiB strings). One
  // allocation past twice that means a size limit is not enforced.
  fuzz::AllocGuard guard(size, fuzz::AllocBudget{64, size_t{256} << 20, size_t{96} << 20});
  fuzz::exercise_chat_template(fuzz::Bytes(data, size));
  return 0;
}
