// The command line's runtime sinks (see runtime_sinks.h).
#include "app/runtime_sinks.h"

#include <cstdio>
#include <memory>
#include <string>

#include "app/progress.h"

namespace app {

runtime::LogSink stderr_log() {
  return [](runtime::LogLevel level, const std::string& message) {
    const char* kind = level == runtime::LogLevel::Note ? "note: " : level == runtime::LogLevel::Warning ? "warning: " : "";
    std::fprintf(stderr, "llm-run: %s%s\n", kind, message.c_str());
  };
}

runtime::ProgressSink progress_bars() {
  auto bar = std::make_shared<std::unique_ptr<ProgressBar>>();
  return [bar](std::string_view what, uint64_t done, uint64_t total) {
    if (!*bar) *bar = std::make_unique<ProgressBar>(std::string(what));
    (*bar)->update(done, total);
    if (done >= total) bar->reset();  // finishes the line
  };
}

}  // namespace app
