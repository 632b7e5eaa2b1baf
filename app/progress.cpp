// Progress bar drawing; see progress.h.
#include "app/progress.h"

#include <unistd.h>

#include <cstdio>

namespace app {

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) != 0),
      start_(std::chrono::steady_clock::now()), last_() {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  const auto now = std::chrono::steady_clock::now();
  if (drawn_ && done < total && now - last_ < std::chrono::milliseconds(100)) return;
  last_ = now;
  drawn_ = true;
  constexpr int kWidth = 30;
  const double frac = static_cast<double>(done) / static_cast<double>(total);
  const int filled = static_cast<int>(frac * kWidth);
  const double secs = std::chrono::duration<double>(now - start_).count();
  const double mib_s = secs > 0 ? static_cast<double>(done) / secs / (1024.0 * 1024.0) : 0.0;
  std::fprintf(stderr, "\r%s [%.*s%*s] %3d%%  %.0f MiB/s", label_.c_str(), filled,
               "##############################", kWidth - filled, "", static_cast<int>(frac * 100), mib_s);
  std::fflush(stderr);
}

void ProgressBar::finish() {
  if (enabled_ && drawn_) {
    std::fputc('\n', stderr);
    drawn_ = false;
  }
}

}  // namespace app
