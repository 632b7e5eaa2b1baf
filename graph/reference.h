// The CPU reference executor: interprets any graph in float32 (dot products accumulate in double), the definition of
// what every GPU kernel must compute and the fallback when no GPU is present. Results do not depend on the thread
// count or on the batch size: each output element is computed by one thread in a fixed order, so a prompt fed in one
// batch gives exactly the same values as the same tokens fed one at a time.
#pragma once
#include <cstdint>
#include <compare>
#include <map>
#include <memory>
#include <span>
#include <vector>

#include "graph/ir.h"
#include "graph/plan.h"

namespace graph {

class ThreadPool;  // graph/thread_pool.h

class ReferenceExecutor {
 public:
  // n_threads <= 0: std::thread::hardware_concurrency(). Large matrix products are split over rows; small ones (decode
  // of tiny models) run on the calling thread, since waking workers would cost more than the work.
  explicit ReferenceExecutor(int n_threads = 0);
  ~ReferenceExecutor();
  ReferenceExecutor(const ReferenceExecutor&) = delete;
  ReferenceExecutor& operator=(const ReferenceExecutor&) = delete;

  // Runs every node of g in order, with activations placed by p (made by graph::plan for this graph).
  //  - tokens fill every Input node of kind Tokens, positions every Input of kind Positions; each span must hold
  //    exactly that node's element count (a graph without such an input ignores the span).
  //  - positions must be >= 0, and below g.kv.n_ctx when the graph has Attention nodes (std::out_of_range); token
  //    ids (and any GetRows ids) must index a row of their table (std::out_of_range).
  //  - the KV cache is allocated (zeroed) on the first run from g.kv and re-allocated (zeroed) whenever a graph with
  //    a different KvCacheSpec runs; otherwise it persists across runs, so a prefill graph and then n_tokens=1
  //    decode graphs continue one sequence. Attention at position p reads cache slots [0, p] of its layer: slots
  //    below p must have been written by this or an earlier run (call clear_kv() to start a new sequence).
  //    A batch enters the cache before any of its tokens attends, so the order of tokens in a batch is free.
  //  - weights are read through their WeightParams::host bytes: F32 in place, other types dequantized to float on
  //    first use and kept (keyed by host pointer, type and size), except tables only read by GetRows, whose rows are
  //    dequantized as needed.
  // Throws std::invalid_argument for a plan that does not fit the graph, an op parameter that contradicts g.kv, or
  // a weight without host data; quant::UnsupportedType for weights of an unsupported type. One run at a time: an
  // executor is not meant to be shared between threads.
  void run(const Graph& g, const Plan& p, std::span<const int32_t> tokens, std::span<const int32_t> positions);
  // The general form: every Input node takes inputs.of(its kind). Paged graphs (g.kv.paged()): positions may be -1
  // (padding: no cache write, zero attention output) and reach up to kv.seq_capacity(); a token's block-table row
  // and the blocks it reaches are checked before the cache changes (std::out_of_range).
  void run(const Graph& g, const Plan& p, const RunInputs& inputs);

  // The values of a node after the last run: a graph output, any node when the plan was plan_all_live, or an Input.
  // Spans point into executor memory, valid until the next run(). Throws std::invalid_argument for a node of the
  // wrong dtype, a node id of the last graph out of range, or a node whose buffer may have been reused.
  std::span<const float> output_f32(NodeId id) const;
  std::span<const int32_t> output_i32(NodeId id) const;

  // Zeroes the KV cache (a new sequence).
  void clear_kv();
  const KvCacheSpec& kv_spec() const { return kv_spec_; }
  // One layer of the cache, layout [slot][kv_head][dim]: n_ctx * n_head_kv * head_dim_{k,v} floats.
  std::span<const float> k_cache(int32_t layer) const;
  std::span<const float> v_cache(int32_t layer) const;

  int n_threads() const;
  // Drops the dequantized weight copies (call when the weights they were made from are unmapped).
  void clear_weight_cache();
  // Float copies of quantized weights are kept up to this many bytes (then matrix products dequantize each row as
  // they go, with the same floats): small models run at full speed, large ones stay near the file's size in memory.
  static constexpr uint64_t kDefaultWeightCacheBudget = uint64_t{1} << 30;
  void set_weight_cache_budget(uint64_t bytes) { weight_cache_budget_ = bytes; }
  uint64_t weight_cache_bytes() const { return weight_cache_bytes_; }

 private:
  // Where a node's data lives after the last run, and whether output_*() may read it.
  struct NodeView {
    const void* data = nullptr;
    int64_t elements = 0;
    DType dtype = DType::F32;
    bool readable = false;
  };
  const NodeView& view_of(NodeId id, DType want) const;

  struct WeightKey {
    const void* host;
    quant::Type type;
    uint64_t nbytes;
    auto operator<=>(const WeightKey&) const = default;
  };
  friend struct Runner;  // the per-op code of run(), in reference.cpp

  const float* weight_f32(const Node& w);  // full float copy of a weight, cached by host pointer
  const float* cached_weight_f32(const Node& w) const;  // the same if already at hand, else nullptr
  bool check_and_bind(const Graph& g, const Plan& p);  // true when g has Attention nodes
  void ensure_kv(const KvCacheSpec& spec);

  std::unique_ptr<ThreadPool> pool_;
  std::vector<uint8_t> arena_storage_;    // over-allocated for alignment; arena_ points inside
  uint8_t* arena_ = nullptr;
  uint64_t arena_capacity_ = 0;
  std::vector<const float*> src_;         // per node: float data (weights resolved lazily, views to their roots)
  std::vector<NodeView> views_;           // per node of the last run: readable span for output_*()
  std::vector<double> scratch_;           // attention: n_ctx + head_dim_v doubles per thread
  std::vector<double> trig_;              // rope: cos and sin of one position, n_rot doubles
  // Dequantized weights keyed by their host bytes; F32 weights with aligned data are used in place instead.
  std::map<WeightKey, std::vector<float>> weight_cache_;
  uint64_t weight_cache_bytes_ = 0;
  uint64_t weight_cache_budget_ = kDefaultWeightCacheBudget;
  bool weight_cache_has_room(const Node& w) const;
  KvCacheSpec kv_spec_;
  bool kv_allocated_ = false;
  std::vector<float> k_cache_, v_cache_;  // [layer][slot][kv_head][dim]
};

}  // namespace graph
