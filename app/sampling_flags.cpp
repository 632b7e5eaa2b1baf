// Shared generation flags; see sampling_flags.h.
#include "app/sampling_flags.h"

#include <climits>
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
      ->check(at_least(0, true));
  cmd.add_option("--repeat-last-n", s.repeat_last_n, "Tokens the penalties look back over (-1 = all, 0 = off)")
      ->default_val(s.repeat_last_n)
      ->check(CLI::Range(-1, std::numeric_limits<int32_t>::max()));
  cmd.add_option("--presence-penalty", s.presence_penalty, "Presence penalty (0 = off)")->default_val(0.0f);
  cmd.add_option("--frequency-penalty", s.frequency_penalty, "Frequency penalty (0 = off)")->default_val(0.0f);
  cmd.add_option("-l,--logit-bias", f.logit_bias,
                 "Add BIAS to token ID's logit before sampling, as ID+BIAS or ID-BIAS (ID-inf: never; repeatable)")
      ->type_name("ID(+|-)BIAS");
  cmd.add_flag("--ignore-eos", f.gen.ignore_eos, "Keep generating past end-of-generation tokens");
  cmd.add_option("-r,--reverse-prompt", f.gen.stop_strings, "Stop when the output contains this text (repeatable)");
}

std::pair<int32_t, float> parse_logit_bias(const std::string& spec) {
  const size_t sign = spec.find_first_of("+-");
  const bool digits = sign > 0 && sign != std::string::npos && sign <= 10 &&
                      spec.find_first_not_of("0123456789") == sign;
  float bias = 0;
  size_t used = 0;
  try {
    if (digits) bias = std::stof(spec.substr(sign), &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (!digits || used != spec.size() - sign || std::stoll(spec.substr(0, sign)) > INT32_MAX)
    throw UsageError("--logit-bias takes TOKEN_ID+BIAS or TOKEN_ID-BIAS (e.g. 15043+1 or 2-inf), got '" + spec + "'");
  return {static_cast<int32_t>(std::stoll(spec.substr(0, sign))), bias};
}

void finalize_sampling(SamplingFlags& f) {
  f.gen.stop_requested = [] { return interrupted(); };  // Ctrl-C ends the reply cleanly (app/interrupt.h)
  for (const std::string& spec : f.logit_bias) f.gen.sampling.logit_bias.push_back(parse_logit_bias(spec));
  f.gen.sampling.seed = f.seed_given ? f.seed : (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
  try {
    runtime::validate(f.gen.sampling);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
}

void check_logit_bias(const SamplingFlags& f, int32_t n_vocab) {
  for (const auto& [id, bias] : f.gen.sampling.logit_bias)
    if (id >= n_vocab)
      throw UsageError("--logit-bias names token " + std::to_string(id) + ", outside the model's vocabulary of " +
                       std::to_string(n_vocab));
}

}  // namespace app
