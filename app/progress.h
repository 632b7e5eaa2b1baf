// A one-line progress bar on stderr, drawn only when stderr is a terminal (logs and pipes stay clean).
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace app {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();  // finishes the line if anything was drawn
  // Redraws at most ~10 times a second; done/total in bytes.
  void update(uint64_t done, uint64_t total);
  void finish();

 private:
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace app
