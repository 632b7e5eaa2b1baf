// `llm-run bench --parallel` (see bench_parallel.h).
#include "app/bench_parallel.h"

#include <algorithm>
#include <cstdio>

#include "app/cli.h"
#include "runtime/parallel_bench.h"

namespace app {

int run_parallel_bench(RunFlags run, const ParallelBenchFlags& f) {
  if (f.parallel.empty()) throw UsageError("--parallel needs at least one sequence count");
  for (int32_t p : f.parallel)
    if (p <= 0) throw UsageError("--parallel values must be positive, got " + std::to_string(p));
  const int32_t most = *std::max_element(f.parallel.begin(), f.parallel.end());
  int32_t longest = 1;
  for (int32_t p : f.n_prompt)
    for (int32_t n : f.n_gen) longest = std::max(longest, p + n);
  run.session.n_seq = most;
  const int32_t bs = run.session.kv_block_size;
  const int32_t per_seq = (longest + bs - 1) / bs * bs;
  if (run.session.n_ctx == 0) run.session.n_ctx = most * per_seq;  // the pool: every sequence at its longest
  run.session.plan_batch = f.batch_tokens;
  Loaded l = load_for_run(run);
  runtime::SamplerParams sampling;  // the server's defaults but the temperature
  sampling.temp = f.temp;
  const runtime::SamplerParams* draws = f.temp > 0 ? &sampling : nullptr;
  const bool json = f.output == "json";
  std::printf(json ? "[\n" : "| PP | TG | B | N_KV | T_PP s | S_PP t/s | T_TG s | S_TG t/s | T s | S t/s |\n"
                             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  bool first = true;
  for (int32_t p : f.n_prompt)
    for (int32_t n : f.n_gen)
      for (int32_t b : f.parallel) {
        std::fprintf(stderr, "bench: pp %d tg %d x %d\n", p, n, b);
        // One untimed round first: graph builds, captures and run-time kernels are not what is measured.
        runtime::run_parallel_bench(*l.session, b, p, std::min(n, 2), f.batch_tokens, 1, draws, f.pipeline);
        const runtime::ParallelBenchResult r =
            runtime::run_parallel_bench(*l.session, b, p, n, f.batch_tokens, 2, draws, f.pipeline);
        const double pp_tps = r.prefill_s > 0 ? double(b) * p / r.prefill_s : 0;
        const double tg_tps = r.decode_s > 0 ? double(b) * n / r.decode_s : 0;
        const double total = r.prefill_s + r.decode_s;
        if (json) {
          std::printf("%s  {\"pp\": %d, \"tg\": %d, \"b\": %d, \"t_pp\": %.4f, \"s_pp\": %.2f, \"t_tg\": %.4f, "
                      "\"s_tg\": %.2f, \"device\": \"%s\"}",
                      first ? "" : ",\n", p, n, b, r.prefill_s, pp_tps, r.decode_s, tg_tps,
                      l.session->device_name().c_str());
        } else {
          std::printf("| %d | %d | %d | %d | %.3f | %.2f | %.3f | %.2f | %.3f | %.2f |\n", p, n, b, b * (p + n),
                      r.prefill_s, pp_tps, r.decode_s, tg_tps, total, total > 0 ? double(b) * (p + n) / total : 0);
        }
        std::fflush(stdout);
        first = false;
      }
  if (json) std::printf("\n]\n");
  return 0;
}

}  // namespace app
