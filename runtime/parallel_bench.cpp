// Batched throughput without a scheduler (see parallel_bench.h).
#include "runtime/parallel_bench.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <string>

namespace runtime {

namespace {
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

ParallelBenchResult run_parallel_bench(Session& session, int32_t n_parallel, int32_t n_prompt, int32_t n_gen,
                                       int32_t batch_tokens, uint32_t seed) {
  if (n_parallel <= 0 || n_prompt < 0 || n_gen < 0 || batch_tokens <= 0 || n_prompt + n_gen <= 0)
    throw OptionsError("parallel bench: sequences, batch size and prompt + generated tokens must be positive");
  const std::optional<PagedLayout> layout = session.paged_layout();
  if (!layout) throw SessionError("parallel bench: the session has no paged KV cache (this device has no batched "
                                  "session yet)");
  const int32_t bs = layout->block_size;
  const int32_t per_seq = (n_prompt + n_gen + bs - 1) / bs;  // blocks one sequence needs
  if (n_parallel > layout->n_seq || per_seq > layout->max_blocks || int64_t{n_parallel} * per_seq > layout->n_blocks)
    throw SessionError("parallel bench: " + std::to_string(n_parallel) + " sequences of " +
                       std::to_string(n_prompt + n_gen) + " tokens need " + std::to_string(n_parallel * per_seq) +
                       " blocks of " + std::to_string(bs) + " but the session has " +
                       std::to_string(layout->n_blocks) + " for " + std::to_string(layout->n_seq) + " sequences");
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(0, session.n_vocab() - 1);
  PagedBatch b;
  b.block_table.assign(size_t(layout->n_seq) * size_t(layout->max_blocks), 0);
  for (int32_t s = 0; s < n_parallel; ++s)  // sequence s: its own run of blocks
    for (int32_t i = 0; i < per_seq; ++i) b.block_table[size_t(s) * layout->max_blocks + size_t(i)] = s * per_seq + i;
  const auto clear = [&] {
    b.tokens.clear();
    b.positions.clear();
    b.kv_seq.clear();
    b.output_rows.clear();
  };
  const auto add = [&](int32_t s, int32_t pos, bool output) {
    if (output) b.output_rows.push_back(static_cast<int32_t>(b.tokens.size()));
    b.tokens.push_back(token(rng));
    b.positions.push_back(pos);
    b.kv_seq.push_back(s);
  };

  ParallelBenchResult r;
  double t0 = now_s();
  clear();
  for (int32_t s = 0; s < n_parallel; ++s)
    for (int32_t p = 0; p < n_prompt; ++p) {
      add(s, p, p == n_prompt - 1);  // the logits that start each sequence's generation
      if (static_cast<int32_t>(b.tokens.size()) == batch_tokens) {
        session.eval_paged(b);
        clear();
      }
    }
  if (!b.tokens.empty()) session.eval_paged(b);
  r.prefill_s = now_s() - t0;
  t0 = now_s();
  for (int32_t step = 0; step < n_gen; ++step) {
    clear();
    for (int32_t s = 0; s < n_parallel; ++s) add(s, n_prompt + step, true);
    session.eval_paged(b);
  }
  r.decode_s = now_s() - t0;
  return r;
}

}  // namespace runtime
