// The CPU session: graphs built per batch shape, planned once and run on graph::ReferenceExecutor, whose KV cache
// persists between calls so a prefill and the following one-token decodes continue one sequence.
#pragma once
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <utility>

#include "graph/plan.h"
#include "graph/reference.h"
#include "model/build_graph.h"
#include "model/model.h"
#include "runtime/session.h"

namespace runtime {

class CpuSession final : public Session {
 public:
  // n_ctx must be positive; n_threads <= 0 = hardware concurrency.
  CpuSession(std::shared_ptr<const model::Model> model, int32_t n_ctx, int32_t n_threads,
             graph::KvType kv_type = graph::KvType::F16);
  // A paged session (eval_paged only): a pool of layout.n_blocks blocks shared by layout.n_seq sequences.
  CpuSession(std::shared_ptr<const model::Model> model, const PagedLayout& layout, int32_t n_threads,
             graph::KvType kv_type = graph::KvType::F16);

  std::span<const float> eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) override;
  std::optional<PagedLayout> paged_layout() const override { return paged_; }
  std::span<const float> eval_paged(const PagedBatch& batch) override;
  // Steps run when launched; their results wait in a queue for take_paged.
  void launch_paged(const PagedBatch& batch) override;
  PagedResult take_paged() override;
  std::span<const int32_t> paged_argmax() const override { return argmax_; }
  int32_t n_ctx() const override { return paged_ ? paged_->seq_capacity() : n_ctx_; }
  int32_t n_vocab() const override;
  std::string device_name() const override;
  uint64_t kv_cache_bytes() const override;

 private:
  struct Compiled {
    graph::Graph graph;
    graph::Plan plan;
    graph::NodeId logits = graph::kNoNode;  // "result_output"
    graph::NodeId argmax = graph::kNoNode;  // "result_argmax" (paged graphs)
  };
  const Compiled& compiled(int32_t n_tokens, bool all_logits);
  const Compiled& compiled_paged(int32_t n_tokens, int32_t n_outputs);
  Compiled compile(const model::BatchShape& shape) const;

  std::shared_ptr<const model::Model> model_;
  int32_t n_ctx_;                     // KV slots (paged: the pool's)
  std::optional<PagedLayout> paged_;
  graph::KvType kv_type_;
  graph::ReferenceExecutor exec_;
  // Keyed by (n_tokens, all_logits). Decode reuses (1, false) every step; prefill shapes are evicted in bulk.
  std::map<std::pair<int32_t, bool>, Compiled> graphs_;
  std::map<std::pair<int32_t, int32_t>, Compiled> paged_graphs_;  // keyed by (n_tokens, n_outputs)
  std::vector<int32_t> positions_;  // [n_tokens]
  // Launched paged steps' results, oldest first; the one taken last (argmax_ and its logits point into it).
  struct StepResult {
    std::vector<float> logits;
    std::vector<int32_t> argmax;
    bool wants_host = false;  // logits or draws asked for: taken before another step is launched
  };
  std::span<const float> run_paged(const PagedBatch& batch);  // one step now (exec_'s buffers hold its results)
  std::deque<StepResult> queued_;
  StepResult taken_;
  std::optional<std::vector<int32_t>> last_argmax_;  // of the step launched last, if any (token_from_row reads it)
  std::span<const int32_t> argmax_;  // of the last eval_paged / take_paged
};

}  // namespace runtime
