// A broken invariant found while exercising an input: thrown (never caught by the exercise functions) so libFuzzer
// reports it as a crash with its message, and a regression test reports it as a failure instead of dying.
#pragma once
#include <stdexcept>
#include <string>

namespace fuzz {

class InvariantError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

[[noreturn]] inline void broken(const std::string& what) { throw InvariantError(what); }

}  // namespace fuzz
