// CPU session on the reference executor (see session_cpu.h).
#include "runtime/session_cpu.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/build_graph.h"

namespace runtime {

CpuSession::CpuSession(std::shared_ptr<const model::Model> model, int32_t n_ctx, int32_t n_threads,
                       graph::KvType kv_type)
    : model_(std::move(model)), n_ctx_(n_ctx), kv_type_(kv_type), exec_(n_threads) {
  if (n_ctx_ <= 0) throw SessionError("context size must be positive, got " + std::to_string(n_ctx_));
  check_kv_type(model_->config(), kv_type_);
}

CpuSession::CpuSession(std::shared_ptr<const model::Model> model, const PagedLayout& layout, int32_t n_threads,
                       graph::KvType kv_type)
    : model_(std::move(model)), n_ctx_(layout.n_blocks * layout.block_size), paged_(layout), kv_type_(kv_type),
      exec_(n_threads) {
  if (layout.n_blocks <= 0 || layout.max_blocks <= 0 || layout.n_seq <= 0 || layout.block_size <= 0)
    throw SessionError("a paged KV cache needs blocks, a block size and sequences");
  check_kv_type(model_->config(), kv_type_);
}

int32_t CpuSession::n_vocab() const { return model_->config().n_vocab; }

std::string CpuSession::device_name() const {
  return "CPU reference (" + std::to_string(exec_.n_threads()) + (exec_.n_threads() == 1 ? " thread)" : " threads)");
}

uint64_t CpuSession::kv_cache_bytes() const {
  const model::Config& c = model_->config();
  return uint64_t(c.n_layer) * uint64_t(n_ctx_) * uint64_t(c.n_head_kv) * uint64_t(c.head_dim + c.head_dim_v) *
         sizeof(float);
}

const CpuSession::Compiled& CpuSession::compiled(int32_t n_tokens, bool all_logits) {
  const auto key = std::make_pair(n_tokens, all_logits);
  if (auto it = graphs_.find(key); it != graphs_.end()) return it->second;
  // Prompts of many different lengths would otherwise accumulate graphs; keep the decode graph, drop the rest.
  if (graphs_.size() >= 8) std::erase_if(graphs_, [](const auto& kv) { return kv.first.first != 1; });
  return graphs_.emplace(key, compile(model::BatchShape{.n_tokens = n_tokens, .all_logits = all_logits,
                                                       .n_ctx = n_ctx_})).first->second;
}

const CpuSession::Compiled& CpuSession::compiled_paged(int32_t n_tokens, int32_t n_outputs) {
  const auto key = std::make_pair(n_tokens, n_outputs);
  if (auto it = paged_graphs_.find(key); it != paged_graphs_.end()) return it->second;
  // Building a graph costs far less than running it on the CPU, so exact shapes (no padding) and a small cache.
  if (paged_graphs_.size() >= 16) paged_graphs_.clear();
  const model::BatchShape shape{.n_tokens = n_tokens, .all_logits = false, .n_ctx = n_ctx_,
                                .block_size = paged_->block_size, .max_blocks = paged_->max_blocks,
                                .n_seq = paged_->n_seq, .n_outputs = n_outputs};
  return paged_graphs_.emplace(key, compile(shape)).first->second;
}

CpuSession::Compiled CpuSession::compile(const model::BatchShape& shape) const {
  Compiled c;
  c.graph = model::build_graph(model_->config(), model_->weights(), shape);
  c.graph.kv.type = kv_type_;  // the cache's element type is the session's choice, not the model's
  c.plan = graph::plan(c.graph);
  c.logits = c.graph.find("result_output");
  c.argmax = c.graph.find("result_argmax");
  return c;
}

std::span<const float> CpuSession::eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) {
  if (paged_) throw SessionError("eval: this session's KV cache is paged (use eval_paged)");
  check_eval_batch(tokens, start_pos, n_ctx_, n_vocab());
  const int64_t n = static_cast<int64_t>(tokens.size());
  const Compiled& c = compiled(static_cast<int32_t>(n), all_logits);
  positions_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions_[static_cast<size_t>(i)] = static_cast<int32_t>(start_pos + i);
  exec_.run(c.graph, c.plan, tokens, positions_);
  return exec_.output_f32(c.logits);
}

}  // namespace runtime

namespace runtime {

std::span<const float> CpuSession::eval_paged(const PagedBatch& b) {
  if (!paged_) return Session::eval_paged(b);
  if (!queued_.empty()) throw SessionError("eval_paged: a launched step is not taken yet");
  launch_paged(b);
  return take_paged().logits;
}

void CpuSession::launch_paged(const PagedBatch& b) {
  if (!paged_) return Session::launch_paged(b);
  check_paged_batch(b, *paged_, n_vocab());
  check_paged_launch(b, queued_.size(), !queued_.empty() && queued_.back().wants_host,
                     last_argmax_ ? static_cast<int32_t>(last_argmax_->size()) : -1);
  std::span<const float> logits;
  if (b.token_from_row.empty()) {
    logits = run_paged(b);
  } else {
    PagedBatch resolved = b;  // the CPU has the step before's argmax at hand
    for (size_t t = 0; t < b.tokens.size(); ++t)
      if (b.token_from_row[t] >= 0) resolved.tokens[t] = (*last_argmax_)[size_t(b.token_from_row[t])];
    resolved.token_from_row.clear();
    logits = run_paged(resolved);
  }
  StepResult r;
  r.logits.assign(logits.begin(), logits.end());
  r.argmax.assign(argmax_.begin(), argmax_.end());
  r.wants_host = b.need_logits || b.asks_draws();
  last_argmax_ = r.argmax;
  queued_.push_back(std::move(r));
}

PagedResult CpuSession::take_paged() {
  if (!paged_) return Session::take_paged();
  if (queued_.empty()) throw SessionError("take_paged: no step is queued");
  taken_ = std::move(queued_.front());
  queued_.pop_front();
  argmax_ = taken_.argmax;
  return PagedResult{taken_.logits, taken_.argmax, {}};
}

std::span<const float> CpuSession::run_paged(const PagedBatch& b) {
  // A graph always has an output: a batch that wants no logits computes those of its first token, unread.
  static constexpr int32_t kFirstToken[] = {0};
  const std::span<const int32_t> rows = b.output_rows.empty() ? std::span(kFirstToken) : std::span(b.output_rows);
  const Compiled& c = compiled_paged(static_cast<int32_t>(b.tokens.size()), static_cast<int32_t>(rows.size()));
  exec_.run(c.graph, c.plan, graph::RunInputs{b.tokens, b.positions, b.kv_seq, b.block_table, rows});
  argmax_ = exec_.output_i32(c.argmax).first(b.output_rows.size());
  // No draws are made here: a batch that asks for any gets the logits to sample them itself.
  if (b.output_rows.empty() || (!b.need_logits && !b.asks_draws())) return {};
  return exec_.output_f32(c.logits);
}

}  // namespace runtime
