// The generation flags shared by the root command and chat: -n, -s, --temp, --top-k, --top-p, --min-p, the
// penalties and --ignore-eos, with the popular runtimes' defaults.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/generate.h"

namespace app {

struct SamplingFlags {
  runtime::GenerateOptions gen;
  uint64_t seed = 0;
  bool seed_given = false;
  std::vector<std::string> logit_bias;  // -l / --logit-bias specs, "ID+BIAS" or "ID-BIAS" (llama.cpp's syntax)
};

// One --logit-bias spec: "15043+1", "15043-0.5", "2-inf" (the token never comes). UsageError when malformed.
std::pair<int32_t, float> parse_logit_bias(const std::string& spec);

void add_sampling_flags(CLI::App& cmd, SamplingFlags& flags);

// Fills in a random seed when none was given and validates the sampler settings (UsageError on bad values).
void finalize_sampling(SamplingFlags& flags);

// Once the model is known: UsageError for a --logit-bias token id outside its vocabulary.
void check_logit_bias(const SamplingFlags& flags, int32_t n_vocab);

}  // namespace app
