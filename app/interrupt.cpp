// SIGINT flag; see interrupt.h.
#include "app/interrupt.h"

#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>

namespace app {
namespace {

std::atomic<bool> g_interrupted{false};
struct sigaction g_previous;

extern "C" void on_sigint(int) {
  if (g_interrupted.exchange(true)) _exit(130);  // second Ctrl-C: leave now
}

}  // namespace

InterruptGuard::InterruptGuard() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &g_previous);
}

InterruptGuard::~InterruptGuard() { sigaction(SIGINT, &g_previous, nullptr); }

bool interrupted() { return g_interrupted.load(std::memory_order_relaxed); }

void clear_interrupt() { g_interrupted.store(false, std::memory_order_relaxed); }

}  // namespace app
