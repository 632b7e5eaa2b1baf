// Work accounting for one chat-template render. Operations whose cost grows with the data (loop iterations, macro
// calls, scanning or building long strings, comparing or printing containers) tick the meter the interpreter
// installs on its thread, so a hostile template stops with TemplateError(Limit) instead of spinning. A thread-local
// meter spares every string helper an extra parameter; it is installed and removed by WorkMeterScope (RAII).
#pragma once
#include <cstddef>
#include <cstdint>

namespace chat::jinja {

struct WorkMeter {
  int64_t used = 0;
  int64_t limit = INT64_MAX;
  size_t max_string = SIZE_MAX;  // bytes in any one string being built (printing a value, JSON, ...)
};

// Installs `meter` for this thread for the scope's lifetime (restoring the previous one, if any).
class WorkMeterScope {
 public:
  explicit WorkMeterScope(WorkMeter& meter);
  ~WorkMeterScope();
  WorkMeterScope(const WorkMeterScope&) = delete;
  WorkMeterScope& operator=(const WorkMeterScope&) = delete;

 private:
  WorkMeter* saved_;
};

// Adds n units of work to the installed meter; throws TemplateError(Limit) once its limit is passed. Without an
// installed meter (values built by C++ callers) it does nothing.
void tick(int64_t n);

// Throws TemplateError(Limit) when a string being built has grown past the installed meter's max_string.
void check_string(size_t bytes);

// One unit per KiB: the cost of scanning or building a string of `bytes`.
inline void tick_bytes(uint64_t bytes) {
  if (bytes >= 1024) tick(static_cast<int64_t>(bytes >> 10));
}

}  // namespace chat::jinja
