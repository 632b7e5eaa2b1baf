// Shared generation flags; see sampling_flags.h.
#include "app/sampling_flags.h"

#include <limits>
#include <random>
#include <stdexcept>

#include "app/cli.h"
#include "app/interrupt.h"

namespace app {

void add_sampling_flags(CLI::App& cmd, SamplingFlags& f) {
  cmd.add_option("-n,--n-predict", f.gen.n_predict, "Tokens to generate (-1: until end of generation or a full context)")
      ->default_val(-1)
      ->check(CLI::Range(-1, std::numeric_limits<int32_t>::max()));
  cmd.add_option("-s,--seed", f.seed, "RNG seed (default: random)")->each([&f](const std::string&) {
    f.seed_given = true;
  });
  runtime::SamplerParams& s = f.gen.sampling;
  cmd.add_option("--temp", s.temp, "Temperature; 0 = greedy")->default_val(s.temp);
  cmd.add_option("--top-k", s.top_k, "Top-k sampling (0 = off)")->default_val(s.top_k);
  cmd.add_option("--top-p", s.top_p, "Top-p sampling (1 = off)")->default_val(s.top_p)->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--min-p", s.min_p, "Min-p sampling (0 = off)")->default_val(s.min_p)->check(CLI::Range(0.0, 1.0));
  cmd.add_option("--repeat-penalty", s.repeat_penalty, "Penalty for repeated tokens (1 = off)")
      ->default_val(s.repeat_penalty)
      ->check(CLI::PositiveNumber);
  cmd.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the penalties look back over (-1 = all, 0 = off)")
      ->default_val(s.repeat_last_n)
      ->check(CLI::Range(-1, std::numeric_limits<int32_t>::max()));
  cmd.add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0 = off)")->default_val(0.0f);
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0 = off)")->default_val(0.0f);
  cmd.add_flag("--ignore-eos", f.gen.ignore_eos, "Keep generating past end-of-generation tokens");
  cmd.add_option("-r,--reverse-prompt", f.gen.stop_strings, "Stop when the output contains this text (repeatable)");
}

void finalize_sampling(SamplingFlags& f) {
  f.gen.stop_requested = [] { return interrupted(); };  // Ctrl-C ends the reply cleanly (app/interrupt.h)
  f.gen.sampling.seed = f.seed_given ? f.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  try {
    runtime::validate(f.gen.sampling);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

}  // namespace app
