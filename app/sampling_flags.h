// The generation flags shared by the root command and chat: -n, -s, --temp, --top-k, --top-p, --min-p, the
// penalties and --ignore-eos, with the popular runtimes' defaults.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>

#include "runtime/generate.h"

namespace app {

struct SamplingFlags {
  runtime::GenerateOptions gen;
  uint64_t seed = 0;
  bool seed_given = false;
};

void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags);

// Fills in a random seed when none was given and validates the sampler settings (UsageError on bad values).
void finalize_sampling(SamplingFlags& flags);

}  // namespace app
