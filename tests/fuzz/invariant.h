// A broken invariant found while exercising an input: thrown (never caught by the exercise functions) so libFuzzer
// reports it as a crash with its message, and a regression test reports it as a failure instead of dying.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fuzz {

class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] inline void broken(const std::string& what) { throw InvariantError(what); }

// LLM_FUZZ_VERBOSE=1: print how far each input got and the expected error that stopped it (replaying one input).
inline void note(const std::string& what) {
  static const bool verbose = std::getenv("LLM_FUZZ_VERBOSE") != nullptr;
  if (verbose) std::fprintf(stderr, "fuzz: %s\n", what.c_str());
}

}  // namespace fuzz
