// Per-input heap budget for the fuzz entry points: while a guard lives, any single allocation, or the growth of the
// live heap above what it was when the guard started, beyond factor * input size + slack prints a stack and aborts,
// so libFuzzer saves the input as a crash. This is the "no allocation out of proportion to the file" rule; libFuzzer's
// own -malloc_limit_mb / -rss_limit_mb stay on as absolute caps. Needs ASan (malloc hooks); set
// LLM_FUZZ_ALLOC_FACTOR=0 to turn it off, or to another factor to change it.
#pragma once
#include <cstddef>

#include "exercise.h"

namespace fuzz {

class AllocGuard {
 public:
  AllocGuard(size_t input_size, AllocBudget budget);
  ~AllocGuard();
  AllocGuard(const AllocGuard&) = delete;
  AllocGuard& operator=(const AllocGuard&) = delete;
};

}  // namespace fuzz
