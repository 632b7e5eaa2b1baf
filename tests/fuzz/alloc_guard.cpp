// Heap accounting through the sanitizer allocator's malloc/free hooks (see alloc_guard.h).
#include "alloc_guard.h"

#include <sanitizer/allocator_interface.h>
#include <sanitizer/common_interface_defs.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace fuzz {
namespace {

// Only the fuzzing thread allocates while a guard is active (the targets run single-threaded).
bool g_active = false;
uint64_t g_limit = 0;   // live heap growth
uint64_t g_single = 0;  // one allocation
int64_t g_live = 0;  // bytes allocated minus bytes freed since the guard started

[[noreturn]] void over_budget(const char* what, uint64_t bytes, uint64_t limit) {
  g_active = false;
  std::fprintf(stderr, "\n==fuzz== %s of %llu bytes exceeds the per-input budget of %llu bytes\n", what,
               static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(limit));
  __sanitizer_print_stack_trace();
  std::abort();
}

void on_malloc(const volatile void*, size_t size) {
  if (!g_active) return;
  if (size > g_single) over_budget("one allocation", size, g_single);
  g_live += static_cast<int64_t>(size);
  if (g_live > static_cast<int64_t>(g_limit)) over_budget("live heap growth", static_cast<uint64_t>(g_live), g_limit);
}

void on_free(const volatile void* p) {
  if (!g_active || p == nullptr) return;
  g_live -= static_cast<int64_t>(__sanitizer_get_allocated_size(const_cast<const void*>(p)));
}

uint64_t factor_override(uint64_t fallback) {
  const char* env = std::getenv("LLM_FUZZ_ALLOC_FACTOR");
  return env && *env ? std::strtoull(env, nullptr, 10) : fallback;
}

}  // namespace

AllocGuard::AllocGuard(size_t input_size, AllocBudget budget) {
  static const bool installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free) != 0;
  static const uint64_t factor = factor_override(budget.factor);
  if (!installed || factor == 0) return;
  g_limit = factor * input_size + budget.slack_bytes;
  g_single = std::min(g_limit, budget.max_single_bytes);
  g_live = 0;
  g_active = true;
}

AllocGuard::~AllocGuard() { g_active = false; }

}  // namespace fuzz
