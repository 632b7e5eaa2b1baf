// The batching worker of paged sessions (see engine.h): continuous batching with chunked prefill over a paged KV
// cache with prefix sharing.
//
// Each step: finish what was cancelled; admit queued requests while a block-table row is free and the pool can
// hold their prompt (their cached prefix blocks are taken from the prefix cache; a prompt whose first block another
// running prompt is still computing waits for it); give every sequence whose tokens
// are all in the cache but its newest one a decode slot, then fill the rest of the token budget with prompt chunks,
// oldest request first; allocate the blocks those tokens reach (when the pool runs dry, the newest sequence is sent
// back to wait, its blocks kept in the prefix cache so that its return costs little); run the batch; key the blocks
// that became full; sample for every sequence whose last token was in the batch.
//
// Steps are pipelined: a step is launched before the results of the one before it are taken, so the device does
// not wait while the host handles them (text, stop strings, callbacks, the next batch). A greedy sequence's next
// token is then the argmax of its row in the step before, which the session gathers on the device
// (PagedBatch::token_from_row); the host takes that step's results while the new one runs. Where a launched step has
// a row whose token the host must draw (sampling on the host or on the device, logprobs), its results are taken
// before the next step is built. A sequence that ends on a token the next step already computes loses that work
// only; one that cannot go on past it (max_tokens, a full context) is not given the extra step.
#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <system_error>
#include <thread>

#include "graph/thread_pool.h"
#include "runtime/engine.h"
#include "runtime/engine_job.h"
#include "runtime/kv_blocks.h"
#include "runtime/sequence.h"

namespace runtime {

struct Engine::Running {
  std::shared_ptr<Job> job;
  std::unique_ptr<SequenceGeneration> gen;
  uint64_t serial = 0;            // names it in the launched steps (unique for the worker's lifetime)
  int32_t row = -1;               // block-table row while it runs
  std::vector<int32_t> blocks;    // its block table: position p lives in blocks[p / block_size]
  int32_t n_done = 0;             // tokens whose K/V is in the cache (gen->tokens()[0, n_done))
  int32_t n_sched = 0;            // those and the ones a launched step computes (n_done when none is in flight)
  int32_t n_cached = 0;           // prompt tokens the prefix cache supplied when it first started
  bool started = false;           // admitted once (a preempted sequence comes back with started set)
  int32_t n_keyed = 0;            // leading blocks keyed in the prefix cache
  uint64_t chain = 0;             // key of the last of them
  // > 0: its next token is the argmax of output row device_row of launched step device_step, not taken yet.
  uint64_t device_step = 0;
  int32_t device_row = -1;
  int32_t step_tokens = 0;        // the step being built: tokens it contributes, from n_sched
  int32_t output = -1;            // the step being built: its row in the logits, or -1
  // prompt_logprobs: the next prompt position whose token's logprob is not out yet (from the row before it); kept
  // across a preemption, so that a prompt computed again sends nothing twice.
  int32_t prompt_lp_next = 1;

  bool wants_prompt_logprobs() const { return job->request.prompt_logprobs; }
  // Whether the row of the token at position p scores the prompt token after it (prompt_logprobs, not out yet).
  bool scores_next(int32_t p) const {
    return wants_prompt_logprobs() && p + 1 >= prompt_lp_next && p + 1 < gen->n_prompt();
  }
  // Output rows the step being built gives it with s tokens: the row its next token comes from when the tokens
  // reach the end of what is pending, and one for each of its positions that scores_next (counted as a range).
  int32_t rows_for(int32_t s) const {
    int32_t rows = s > 0 && s == pending() ? 1 : 0;
    if (wants_prompt_logprobs()) {
      const int32_t lo = std::max(n_sched, prompt_lp_next - 1), hi = std::min(n_sched + s, gen->n_prompt() - 1);
      rows += std::max(0, hi - lo);
    }
    return rows;
  }

  // Tokens known (to the host, or as a device row) and not yet in a launched step.
  int32_t pending() const {
    return static_cast<int32_t>(gen->tokens().size()) + (device_step ? 1 : 0) - n_sched;
  }
};

// A launched step: its sequences (by serial), the tokens each contributed and its output row (-1 for none).
struct Engine::LaunchedStep {
  uint64_t id = 0;
  struct Part {
    uint64_t serial = 0;
    int32_t tokens = 0;
    int32_t output = -1;
    // prompt_logprobs: prompt_rows output rows from prompt_row0 on, for the prompt tokens prompt_pos0 + 1 on.
    int32_t prompt_row0 = 0, prompt_pos0 = 0, prompt_rows = 0;
  };
  std::vector<Part> parts;
  bool host_draws = false;  // a row's token is drawn from the logits or by the device's sampler (not the argmax)
};

namespace {

int32_t blocks_for(int32_t tokens, int32_t block_size) { return (tokens + block_size - 1) / block_size; }

}  // namespace

void Engine::worker_batched() {
  const PagedLayout layout = *session_->paged_layout();
  const int32_t bs = layout.block_size;
  KvBlockPool pool(layout.n_blocks, bs);
  std::vector<std::unique_ptr<Running>> running;  // admission order: the newest last
  std::deque<std::unique_ptr<Running>> preempted;  // waiting for blocks again, ahead of new requests
  std::vector<int32_t> free_rows;
  for (int32_t r = layout.n_seq - 1; r >= 0; --r) free_rows.push_back(r);
  PagedBatch batch;
  batch.block_table.assign(size_t(layout.n_seq) * size_t(layout.max_blocks), 0);
  std::optional<LaunchedStep> in_flight;  // launched, results not taken
  uint64_t next_serial = 1, next_step = 1;
  using Clock = std::chrono::steady_clock;
  const auto seconds_since = [](Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };

  const auto publish_pool_stats = [&] {  // under mutex_
    const KvBlockStats ks = pool.stats();
    stats_.kv_blocks_total = ks.n_blocks;
    stats_.kv_blocks_used = ks.used;
    stats_.kv_blocks_cached = ks.cached;
  };
  const auto usage_of = [](const Running& r) {
    return Usage{r.gen->n_prompt(), r.gen->n_generated(), r.n_cached};
  };
  // Gives back a sequence's row and blocks (its full blocks stay keyed for later prompts). A launched step may still
  // write the blocks' K/V; whatever takes them next runs after it on the device.
  const auto release = [&](Running& r) {
    pool.release(r.blocks);
    r.blocks.clear();
    r.n_done = r.n_sched = r.n_keyed = 0;
    r.chain = 0;
    r.device_step = 0, r.device_row = -1;
    if (r.row >= 0) free_rows.push_back(r.row);
    r.row = -1;
  };
  const auto end = [&](Running& r, FinishReason reason, const std::string& error) {
    try {
      r.gen->flush(r.job->callback);
    } catch (const std::exception&) {
      // A callback that throws on the held-back text loses that text; its Final must still come.
    }
    release(r);
    finish(*r.job, reason, usage_of(r), error);
    std::lock_guard lock(mutex_);
    std::erase(active_, r.job);
    publish_pool_stats();
    idle_.notify_all();
  };
  // Ends every running sequence with a part in `step` (a step that failed).
  const auto fail_step = [&](const LaunchedStep& step, const std::exception& e) {
    log(options_.log, LogLevel::Warning, std::string("batch step failed: ") + e.what());
    for (auto it = running.begin(); it != running.end();) {
      const bool in_step = std::any_of(step.parts.begin(), step.parts.end(),
                                       [&](const LaunchedStep::Part& p) { return p.serial == (*it)->serial; });
      if (in_step) {
        end(**it, FinishReason::Error, e.what());
        it = running.erase(it);
      } else {
        ++it;
      }
    }
  };
  // Whether the pool can take a sequence of n tokens now and leave every running sequence a block to grow into.
  const auto fits = [&](size_t n_tokens) {
    return pool.available() >= blocks_for(static_cast<int32_t>(n_tokens), bs) + static_cast<int32_t>(running.size());
  };
  // Whether a running sequence is still computing a prompt that shares more leading blocks with this one than the
  // prefix cache holds: the request then waits for it (a few steps), so that those blocks come from the prefix
  // cache instead of being computed twice at once (agents and chats sending the same system prompt together).
  // Blocks the cache already holds are no reason to wait: requests whose shared prefix is cached start together,
  // not one behind the other's prompt.
  // This runs for every queued prompt at every admission, so the comparisons go from cheap to dear: the first block
  // (most running prompts differ there), then block `cached`, the first this prompt would compute (prompts that
  // share only what the cache holds differ there), and only for a prompt that will wait, the blocks before it.
  const auto leader_prefilling = [&](const std::vector<int32_t>& prompt) {
    const int32_t most = (static_cast<int32_t>(prompt.size()) - 1) / bs;  // the blocks start() may take
    const auto block_equal = [&](const std::vector<int32_t>& t, int32_t i) {
      const size_t from = static_cast<size_t>(i) * bs;
      return common_full_blocks(std::span(prompt).subspan(std::min(from, prompt.size())),
                                std::span(t).subspan(std::min(from, t.size())), bs, 1) == 1;
    };
    int32_t cached = -1;  // looked up once, when some running prompt shares the first block
    for (const auto& rp : running) {
      const auto& t = rp->gen->tokens();
      if (static_cast<int32_t>(t.size()) - rp->n_done <= 1 || most == 0 || !block_equal(t, 0)) continue;
      if (cached < 0) cached = pool.cached_prefix(prompt, most);
      // More shared blocks than cached ones: blocks 0..cached all equal, and block `cached` one start() may take.
      if (cached < most && block_equal(t, cached) && common_full_blocks(prompt, t, bs, cached) == cached) return true;
    }
    return false;
  };
  // Starts (or restarts) a sequence: a row, and the longest cached prefix of its tokens, leaving at least its last
  // token to compute (the logits that start or continue its generation come from it).
  const auto start = [&](std::unique_ptr<Running> r) {
    r->row = free_rows.back();
    free_rows.pop_back();
    r->serial = next_serial++;
    const auto& tokens = r->gen->tokens();
    // A prompt whose logprobs are asked for is computed whole: its rows give them.
    const int32_t most = r->wants_prompt_logprobs() ? 0 : (static_cast<int32_t>(tokens.size()) - 1) / bs;
    r->blocks = pool.match_prefix(tokens, most);
    r->n_keyed = static_cast<int32_t>(r->blocks.size());
    r->n_done = r->n_sched = r->n_keyed * bs;
    for (int32_t i = 0; i < r->n_keyed; ++i)
      r->chain = KvBlockPool::chain_key(r->chain, std::span(tokens).subspan(size_t(i) * bs, size_t(bs)));
    if (!r->started) {
      r->n_cached = r->n_done;
      std::lock_guard lock(mutex_);
      stats_.prefix_cached_tokens += static_cast<uint64_t>(r->n_cached);
    }
    r->started = true;
    running.push_back(std::move(r));
  };
  // Sends the newest sequence back to wait and returns it; null when `keep` is the only one left. Its part of a
  // launched step is dropped when that step is taken (it is no longer running under its serial).
  const auto preempt_newest = [&](const Running* keep) -> const Running* {
    if (running.empty() || (running.size() == 1 && running.back().get() == keep)) return nullptr;
    std::unique_ptr<Running> victim = std::move(running.back());
    running.pop_back();
    release(*victim);
    const Running* sent_back = victim.get();
    preempted.push_front(std::move(victim));
    std::lock_guard lock(mutex_);
    ++stats_.preemptions;
    return sent_back;
  };
  // A row the host draws from in the step being taken: whose, and the token or the error.
  struct HostDraw {
    uint64_t serial = 0;
    SequenceGeneration* gen = nullptr;
    size_t row = 0;
    int32_t token = -1;
    std::exception_ptr error;
  };
  std::vector<HostDraw> drawn;
  std::vector<TokenLogprobs> prompt_lps;  // one part's prompt logprobs, as take() sends them
  std::optional<graph::ThreadPool> draw_pool;  // made when a step first has two such rows
  bool no_draw_pool = false;                   // the system refused its threads
  // Takes a launched step's results: its tokens are in the cache now, full blocks are keyed, and each sequence with
  // an output row takes its token (the argmax, the device's draw, or a draw from the logits here).
  const auto take = [&](const LaunchedStep& step) {
    PagedResult res;
    const Clock::time_point t0 = Clock::now();
    try {
      res = session_->take_paged();
    } catch (const std::exception& e) {
      fail_step(step, e);
      return;
    }
    const double waited = seconds_since(t0);
    {
      std::lock_guard lock(mutex_);
      stats_.device_wait_seconds += waited;
    }
    const size_t n_vocab = static_cast<size_t>(n_vocab_);
    // Rows the host draws from (a sampler on the host, a constraint's mask, logprobs) are drawn first, in parallel
    // across sequences: each has its own sampler and constraint, and a structured-output mask costs ~0.1 ms.
    drawn.clear();
    for (const LaunchedStep::Part& part : step.parts) {
      const auto it = std::find_if(running.begin(), running.end(),
                                   [&](const auto& rp) { return rp->serial == part.serial; });
      if (part.output < 0 || it == running.end()) continue;
      const size_t o = size_t(part.output);
      if ((*it)->gen->argmax_is_sample() || (o < res.draws.size() && res.draws[o] >= 0)) continue;
      drawn.push_back({part.serial, (*it)->gen.get(), o, -1, nullptr});
    }
    const auto draw = [&](HostDraw& d) {
      try {
        d.token = d.gen->sample(res.logits.subspan(d.row * n_vocab, n_vocab));
      } catch (const std::exception&) {
        d.error = std::current_exception();
      }
    };
    if (drawn.size() > 1 && !draw_pool && !no_draw_pool) {
      try {
        draw_pool.emplace(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u)));
      } catch (const std::system_error& e) {  // no threads to be had: draw one by one
        no_draw_pool = true;
        log(options_.log, LogLevel::Warning, std::string("host draws stay on one thread: ") + e.what());
      }
    }
    if (drawn.size() > 1 && draw_pool) {
      draw_pool->parallel_for(static_cast<int64_t>(drawn.size()), [&](int64_t begin, int64_t end, int) {
        for (int64_t i = begin; i < end; ++i) draw(drawn[size_t(i)]);
      });
    } else {
      for (HostDraw& d : drawn) draw(d);
    }
    for (const LaunchedStep::Part& part : step.parts) {
      const auto it = std::find_if(running.begin(), running.end(),
                                   [&](const auto& rp) { return rp->serial == part.serial; });
      if (it == running.end()) continue;  // ended or sent back since
      Running& r = **it;
      r.n_done += part.tokens;
      const auto& tokens = r.gen->tokens();
      // Full blocks become reusable prefixes (keyed once; a duplicate of a cached prefix stays this sequence's).
      while ((r.n_keyed + 1) * bs <= r.n_done) {
        r.chain = pool.publish(r.chain, std::span(tokens).subspan(size_t(r.n_keyed) * bs, size_t(bs)),
                               r.blocks[size_t(r.n_keyed)]);
        ++r.n_keyed;
      }
      if (part.prompt_rows > 0) {  // before the first generated token's event
        prompt_lps.clear();
        const int32_t n_top = r.job->request.top_logprobs;
        for (int32_t i = 0; i < part.prompt_rows; ++i) {
          const size_t o = size_t(part.prompt_row0 + i);
          const int32_t p = part.prompt_pos0 + i;  // the row of position p scores the token at p + 1
          prompt_lps.push_back(
              token_logprobs(res.logits.subspan(o * n_vocab, n_vocab), tokens[size_t(p) + 1], n_top));
        }
        r.prompt_lp_next = std::max(r.prompt_lp_next, part.prompt_pos0 + part.prompt_rows + 1);
        if (!send_prompt_logprobs(r.job->callback, prompt_lps)) r.job->cancelled = true;
      }
      if (part.output < 0) continue;
      if (r.device_step == step.id) r.device_step = 0, r.device_row = -1;  // its token is known here now
      std::optional<FinishReason> done;
      std::string error;
      try {
        const size_t o = size_t(part.output);
        const auto host = std::find_if(drawn.begin(), drawn.end(),
                                       [&](const HostDraw& d) { return d.serial == part.serial; });
        if (host != drawn.end() && host->error) std::rethrow_exception(host->error);
        const int32_t next = host != drawn.end()     ? host->token
                             : r.gen->argmax_is_sample() ? r.gen->take_device_token(res.argmax[o])
                                                         : r.gen->take_device_token(res.draws[o]);
        done = r.gen->accept(next, r.job->callback, r.job->cancelled);
      } catch (const std::exception& e) {
        log(options_.log, LogLevel::Warning, "request " + std::to_string(r.job->id) + " failed: " + e.what());
        done = FinishReason::Error;
        error = e.what();
      }
      if (done) {
        end(r, *done, error);
        running.erase(it);
      }
    }
    std::lock_guard lock(mutex_);
    publish_pool_stats();
  };

  for (;;) {
    // Requests and shutdown.
    {
      std::unique_lock lock(mutex_);
      if (running.empty() && preempted.empty() && !in_flight)
        wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_ && queue_.empty() && running.empty() && preempted.empty() && !in_flight) return;
    }
    const Clock::time_point busy_from = Clock::now();
    const auto count_busy = [&] {
      std::lock_guard lock(mutex_);
      stats_.busy_seconds += seconds_since(busy_from);
    };
    // Cancelled sequences leave first, so their rows and blocks serve the admissions below.
    for (auto it = running.begin(); it != running.end();) {
      Running& r = **it;
      if (r.job->cancelled || r.gen->cancelled_by_callback()) {
        end(r, FinishReason::Cancelled, "");
        it = running.erase(it);
      } else {
        ++it;
      }
    }
    for (auto it = preempted.begin(); it != preempted.end();) {
      if ((*it)->job->cancelled) {
        end(**it, FinishReason::Cancelled, "");
        it = preempted.erase(it);
      } else {
        ++it;
      }
    }
    // Admissions: preempted sequences first, then the queue in order.
    while (!free_rows.empty() && !preempted.empty() && fits(preempted.front()->gen->tokens().size())) {
      start(std::move(preempted.front()));
      preempted.pop_front();
    }
    while (!free_rows.empty() && preempted.empty()) {
      std::shared_ptr<Job> job =
          take_queued([&](const Job& j) {
            // A prompt whose logprobs are asked for takes nothing from the prefix cache: no leader to wait for.
            return fits(j.request.prompt.size()) && (j.request.prompt_logprobs || !leader_prefilling(j.request.prompt));
          });
      if (!job) break;
      if (job->cancelled) {
        finish(*job, FinishReason::Cancelled, {static_cast<int32_t>(job->request.prompt.size()), 0, 0}, "");
        std::lock_guard lock(mutex_);
        std::erase(active_, job);
        idle_.notify_all();
        continue;
      }
      auto r = std::make_unique<Running>();
      r->job = std::move(job);
      r->gen = std::make_unique<SequenceGeneration>(tok_, r->job->request, layout.seq_capacity());
      start(std::move(r));
    }
    // The step in flight is taken first when nothing else can run, when pipelining is off, or when the host must
    // see its results before the next step can be built.
    if (in_flight && (running.empty() || !options_.pipeline_steps || in_flight->host_draws)) {
      take(*in_flight);
      in_flight.reset();
      count_busy();
      continue;
    }
    if (running.empty()) {
      count_busy();
      continue;
    }

    // The step: decodes first (one token each), then prompt chunks up to the budget; blocks for all of them.
    int32_t budget = step_budget(options_, layout);
    const auto grow = [&](Running& r, int32_t want) {
      // Blocks for positions [0, n_sched + want); returns how many of the wanted tokens got room.
      while (static_cast<int32_t>(r.blocks.size()) < blocks_for(r.n_sched + want, bs)) {
        const int32_t b = pool.allocate();
        if (b < 0) break;
        r.blocks.push_back(b);
      }
      return std::min(want, static_cast<int32_t>(r.blocks.size()) * bs - r.n_sched);
    };
    for (auto& rp : running) rp->step_tokens = 0;
    for (size_t i = 0; i < running.size(); ++i) {
      Running& r = *running[i];
      // A sequence whose token in flight ends it anyway (max_tokens, a full context) waits for that token's results.
      if (r.pending() != 1 || (r.device_step && r.gen->ends_at_next_token())) continue;
      // Room by sending back the newest; when that is r itself, it waits with no blocks (it must not grow again).
      while (grow(r, 1) < 1) {
        const Running* sent_back = preempt_newest(&r);
        if (!sent_back || sent_back == &r) break;
      }
      if (i >= running.size() || running[i].get() != &r) break;  // r itself was the newest and went back
      r.step_tokens = std::min(1, static_cast<int32_t>(r.blocks.size()) * bs - r.n_sched);
      budget -= r.step_tokens;
    }
    for (auto& rp : running) {
      Running& r = *rp;
      if (r.pending() <= 1 || budget <= 0) continue;
      r.step_tokens = grow(r, std::min(r.pending(), budget));
      budget -= r.step_tokens;
    }
    // The session's output rows: prompts whose logprobs are asked for give one a token, so their chunks shrink
    // (the newest first) until the step's rows fit. Every other sequence needs at most one, and n_seq fit.
    if (layout.max_outputs > 0) {
      int32_t rows = 0;
      for (const auto& rp : running) rows += rp->rows_for(rp->step_tokens);
      for (auto it = running.rbegin(); rows > layout.max_outputs && it != running.rend(); ++it) {
        Running& r = **it;
        if (!r.wants_prompt_logprobs()) continue;
        while (rows > layout.max_outputs && r.step_tokens > 0) {
          rows -= r.rows_for(r.step_tokens) - r.rows_for(r.step_tokens - 1);
          --r.step_tokens;
        }
      }
    }

    batch.tokens.clear();
    batch.positions.clear();
    batch.kv_seq.clear();
    batch.output_rows.clear();
    batch.token_from_row.clear();
    std::fill(batch.block_table.begin(), batch.block_table.end(), 0);
    LaunchedStep step;
    step.id = next_step++;
    bool from_device = false;
    for (auto& rp : running) {
      Running& r = *rp;
      r.output = -1;
      std::copy(r.blocks.begin(), r.blocks.end(), batch.block_table.begin() + size_t(r.row) * layout.max_blocks);
      if (r.step_tokens == 0) continue;
      const auto& tokens = r.gen->tokens();
      LaunchedStep::Part part{r.serial, r.step_tokens, -1};
      for (int32_t k = 0; k < r.step_tokens; ++k) {
        const bool device = k == 0 && r.device_step != 0;  // the device's argmax, pending() == 1
        batch.tokens.push_back(device ? 0 : tokens[size_t(r.n_sched + k)]);
        batch.token_from_row.push_back(device ? r.device_row : -1);
        from_device = from_device || device;
        const int32_t p = r.n_sched + k;
        batch.positions.push_back(p);
        batch.kv_seq.push_back(r.row);
        // A prompt token still to score follows this one: this token's row gives its logprob.
        if (r.scores_next(p)) {
          if (part.prompt_rows == 0) {
            part.prompt_row0 = static_cast<int32_t>(batch.output_rows.size());
            part.prompt_pos0 = p;
          }
          ++part.prompt_rows;
          batch.output_rows.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
        }
      }
      if (r.step_tokens == r.pending()) {
        r.output = static_cast<int32_t>(batch.output_rows.size());
        batch.output_rows.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
      }
      part.output = r.output;
      if (part.prompt_rows > 0) step.host_draws = true;  // the host reads those rows before the next step
      step.parts.push_back(part);
    }
    if (!from_device) batch.token_from_row.clear();
    // Greedy sequences take the device's argmax, the others its draws (a session that cannot draw returns the
    // logits instead); the logits leave the device only for a sequence that wants logprobs.
    batch.need_logits = std::any_of(step.parts.begin(), step.parts.end(),
                                    [](const LaunchedStep::Part& p) { return p.prompt_rows > 0; });
    batch.draws.clear();
    for (auto& rp : running) {
      if (rp->output < 0 || rp->gen->argmax_is_sample()) continue;
      step.host_draws = true;
      if (!rp->gen->device_drawable()) {
        batch.need_logits = true;
        continue;
      }
      if (batch.draws.empty()) batch.draws.resize(batch.output_rows.size());
      batch.draws[size_t(rp->output)] = rp->gen->device_draw();
    }
    if (batch.tokens.empty()) {
      // Nothing could get a block this round (preemptions freed some), or every sequence waits for the step in
      // flight: take it.
      if (in_flight) take(*in_flight), in_flight.reset();
      count_busy();
      continue;
    }

    const Clock::time_point launch_from = Clock::now();
    try {
      session_->launch_paged(batch);
    } catch (const std::exception& e) {
      // A failed step fails the requests in it, not the engine.
      fail_step(step, e);
      count_busy();
      continue;
    }
    // The tokens are on their way: a greedy sequence's next token is its argmax row of this step.
    for (auto& rp : running) {
      Running& r = *rp;
      if (r.step_tokens == 0) continue;
      r.n_sched += r.step_tokens;
      r.device_step = 0, r.device_row = -1;
      if (r.output >= 0 && r.gen->argmax_is_sample()) r.device_step = step.id, r.device_row = r.output;
    }
    {
      std::lock_guard lock(mutex_);
      ++stats_.steps;
      stats_.step_tokens += batch.tokens.size();
      stats_.device_wait_seconds += seconds_since(launch_from);  // launching waits for the graph's inputs
    }
    // The step before's results, while this one runs.
    if (in_flight) take(*in_flight);
    in_flight = std::move(step);
    count_busy();
  }
}

}  // namespace runtime
