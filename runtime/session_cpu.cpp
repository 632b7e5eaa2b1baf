// CPU session on the reference executor (see session_cpu.h).
#include "runtime/session_cpu.h"

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
  Compiled c;
  c.graph = model::build_graph(model_->config(), model_->weights(), n_tokens, all_logits, n_ctx_);
  c.graph.kv.type = kv_type_;  // the cache's element type is the session's choice, not the model's
  c.plan = graph::plan(c.graph);
  c.logits = c.graph.find("result_output");
  return graphs_.emplace(key, std::move(c)).first->second;
}

std::span<const float> CpuSession::eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) {
  check_eval_batch(tokens, start_pos, n_ctx_, n_vocab());
  const int64_t n = static_cast<int64_t>(tokens.size());
  const Compiled& c = compiled(static_cast<int32_t>(n), all_logits);
  positions_.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) positions_[static_cast<size_t>(i)] = static_cast<int32_t>(start_pos + i);
  exec_.run(c.graph, c.plan, tokens, positions_);
  return exec_.output_f32(c.logits);
}

}  // namespace runtime
