// `llm-run bench --parallel 1,4,16,64`: aggregate prefill and decode throughput at each number of sequences, on a
// paged session (runtime/parallel_bench.h), as a table in the manner of the reference runtime's batched bench.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "app/session_flags.h"

namespace app {

struct ParallelBenchFlags {
  std::vector<int32_t> parallel;   // sequence counts
  std::vector<int32_t> n_prompt;   // prompt tokens per sequence
  std::vector<int32_t> n_gen;      // generated tokens per sequence
  int32_t batch_tokens = 2048;     // prompt tokens per batch at most
  std::string output = "md";       // md | json
  float temp = 0;                  // > 0: sequences draw their tokens at this temperature (server defaults otherwise)
  bool pipeline = false;           // greedy decode as the server runs it (runtime::run_parallel_bench's pipeline)
};

int run_parallel_bench(RunFlags run, const ParallelBenchFlags& f);

}  // namespace app
