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
                                       int32_t batch_tokens, uint32_t seed, const SamplerParams* sampling,
                                       bool pipeline) {
  if (n_parallel <= 0 || n_prompt < 0 || n_gen < 0 || batch_tokens <= 0 || n_prompt + n_gen <= 0)
    throw OptionsError("parallel bench: sequences, batch size and prompt + generated tokens must be positive");
  if (pipeline && sampling)
    throw OptionsError("parallel bench: the pipelined decode is greedy (argmax on the device), not sampled");
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
    b.token_from_row.clear();
  };
  // Each sequence's tokens so far (the penalty windows of its draws) and its next one, when sequences sample.
  std::vector<std::vector<int32_t>> history(static_cast<size_t>(n_parallel));
  std::vector<Sampler> samplers;
  if (sampling)
    for (int32_t s = 0; s < n_parallel; ++s) {
      SamplerParams p = *sampling;
      p.seed += uint64_t(s);
      samplers.emplace_back(p);
    }
  const auto add = [&](int32_t s, int32_t pos, bool output) {
    if (output) b.output_rows.push_back(static_cast<int32_t>(b.tokens.size()));
    const auto& h = history[size_t(s)];
    const int32_t id = sampling && pos < static_cast<int32_t>(h.size()) ? h[size_t(pos)] : token(rng);
    if (sampling && pos == static_cast<int32_t>(h.size())) history[size_t(s)].push_back(id);
    b.tokens.push_back(id);
    b.positions.push_back(pos);
    b.kv_seq.push_back(s);
  };
  // After a step whose output rows are the sequences in order: each one's next token, drawn on the device or here.
  const auto draw_all = [&](std::span<const float> logits, uint64_t step) {
    const std::span<const int32_t> drawn = session.paged_draws();
    const size_t V = static_cast<size_t>(session.n_vocab());
    for (int32_t s = 0; s < n_parallel; ++s) {
      const size_t o = size_t(s);
      history[o].push_back(o < drawn.size() && drawn[o] >= 0
                               ? drawn[o]
                               : samplers[o].sample(logits.subspan(o * V, V), history[o], step));
    }
  };
  const auto ask_draws = [&](uint64_t step) {
    b.need_logits = !sampling;
    b.draws.clear();
    if (!sampling) return;
    for (int32_t s = 0; s < n_parallel; ++s)
      b.draws.push_back(RowDraw{&samplers[size_t(s)].params(), step, history[size_t(s)]});
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
  int queued = 0;  // pipeline: steps launched and not yet taken, at most two (Session::launch_paged)
  for (int32_t step = 0; step < n_gen; ++step) {
    clear();
    for (int32_t s = 0; s < n_parallel; ++s) add(s, n_prompt + step, true);
    if (pipeline) {
      b.need_logits = false;
      // Output row s of the step before is sequence s's token; the first step takes the random ids add() gave.
      if (step > 0)
        for (int32_t s = 0; s < n_parallel; ++s) b.token_from_row.push_back(s);
      session.launch_paged(b);
      if (++queued == 2) session.take_paged(), --queued;
      continue;
    }
    ask_draws(uint64_t(step));
    const std::span<const float> logits = session.eval_paged(b);
    if (sampling) draw_all(logits, uint64_t(step));
  }
  for (; queued > 0; --queued) session.take_paged();
  r.decode_s = now_s() - t0;
  return r;
}

}  // namespace runtime
