// The CPU session: graphs built per batch shape, planned once and run on graph::ReferenceExecutor, whose KV cache
// persists between calls so a prefill and the following one-token decodes continue one sequence.
#pragma once
#include <map>
#include <memory>
#include <utility>

#include "graph/plan.h"
#include "graph/reference.h"
#include "model/model.h"
#include "runtime/session.h"

namespace runtime {

class CpuSession final : public Session {
 public:
  // n_ctx must be positive; n_threads <= 0 = hardware concurrency.
  CpuSession(std::shared_ptr<const model::Model> model, int32_t n_ctx, int32_t n_threads,
             graph::KvType kv_type = graph::KvType::F16);

  std::span<const float> eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) override;
  int32_t n_ctx() const override { return n_ctx_; }
  int32_t n_vocab() const override;
  std::string device_name() const override;
  uint64_t kv_cache_bytes() const override;

 private:
  struct Compiled {
    graph::Graph graph;
    graph::Plan plan;
    graph::NodeId logits = graph::kNoNode;  // "result_output"
  };
  const Compiled& compiled(int32_t n_tokens, bool all_logits);

  std::shared_ptr<const model::Model> model_;
  int32_t n_ctx_;
  graph::KvType kv_type_;
  graph::ReferenceExecutor exec_;
  // Keyed by (n_tokens, all_logits). Decode reuses (1, false) every step; prefill shapes are evicted in bulk.
  std::map<std::pair<int32_t, bool>, Compiled> graphs_;
  std::vector<int32_t> positions_;  // [n_tokens]
};

}  // namespace runtime
