// Ctrl-C handling for long operations: while an InterruptGuard lives, the first SIGINT only sets a flag that the
// generate loop polls (the reply stops cleanly and timings are still printed); a second SIGINT before the flag is
// cleared ends the process at once, as users expect from a stuck program.
#pragma once

namespace app {

class InterruptGuard {
 public:
  InterruptGuard();   // installs the handler
  ~InterruptGuard();  // restores the previous one
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
};

bool interrupted();
void clear_interrupt();

}  // namespace app
