// The CUDA session: weights uploaded once into one device arena, an f16 KV cache, graphs built per batch shape and
// lowered once to cuda::Executor steps; the decode graph is captured as a CUDA graph after a warm-up and replayed.
// decode_sample() runs the decode step and the GPU sampler as one captured graph, and (no penalties, req.more) queues
// the next step, fed with this one's sample on the device, before it waits: the GPU does not wait for the host
// between tokens (docs/kernel-notes.md, "Decode run-ahead").
#pragma once
#ifdef LLM_HAVE_CUDA_SESSION
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "cuda/context.h"
#include "cuda/executor.h"
#include "cuda/kernels/sampling.cuh"
#include "cuda/rtc.h"
#include "cuda/weights.h"
#include "graph/plan.h"
#include "model/build_graph.h"
#include "model/model.h"
#include "runtime/cuda_footprint.h"
#include "runtime/session.h"

namespace runtime {

struct CudaSessionOptions {
  int device = 0;
  bool verbose = false;
  CudaPlanShape plan;      // the largest evaluation to check free memory for at load (runtime/cuda_footprint.h)
  graph::KvType kv_type = graph::KvType::F16;
  // The CUDA path's switches (cuda_graph: false for --no-cuda-graph or LLM_CUDA_GRAPH=0; the weight layouts, NVRTC
  // kernels, decode run-ahead, timing-only omitted steps), as cuda::ExecutorOptions::from_env read them; read from
  // the environment by default too, so that the GPU tests run with an A/B switch set cover its path.
  cuda::ExecutorOptions exec = cuda::ExecutorOptions::from_env();
  LogSink log;             // notes and -v details
  ProgressSink progress;   // the weight upload
  int32_t n_seq = 0;       // > 0: a paged KV cache for that many sequences (SessionOptions::n_seq)
  int32_t kv_block_size = 64;
  uint64_t half_weights_budget = 0;  // SessionOptions::half_weights_bytes (cuda/half_weights.h)
};

class CudaSession final : public Session {
 public:
  // n_ctx 0 = the model's training context, capped to what fits in free device memory (with a note on stderr).
  // Before uploading anything, checks that weights, KV cache and work buffers fit in free device memory: throws
  // DeviceMemoryError (runtime/memory_plan.h) when they do not. Throws cuda::Error when no usable device exists,
  // SessionError for n_ctx < 0.
  CudaSession(std::shared_ptr<const model::Model> model, int32_t n_ctx, CudaSessionOptions options);
  ~CudaSession() override;  // waits for a decode step queued ahead

  std::span<const float> eval(std::span<const int32_t> tokens, int32_t start_pos, bool all_logits) override;
  std::optional<int32_t> decode_sample(int32_t token, int32_t pos, const SampleRequest& req) override;
  std::optional<PagedLayout> paged_layout() const override { return paged_; }
  std::span<const float> eval_paged(const PagedBatch& batch) override;
  void launch_paged(const PagedBatch& batch) override;
  PagedResult take_paged() override;
  std::span<const int32_t> paged_argmax() const override { return argmax_; }
  std::span<const int32_t> paged_draws() const override { return draws_; }
  int32_t prepare_paged(int32_t max_tokens) override;
  int32_t n_ctx() const override { return paged_ ? paged_->seq_capacity() : n_ctx_; }
  int32_t n_vocab() const override;
  std::string device_name() const override;
  uint64_t kv_cache_bytes() const override { return kv_->bytes(); }
  uint64_t half_weights_bytes() const override { return half_weights_.bytes(); }

 private:
  struct Compiled {
    graph::Graph graph;
    graph::Plan plan;
    graph::NodeId logits = graph::kNoNode;
    graph::NodeId argmax = graph::kNoNode;  // "result_argmax" (paged graphs)
    std::unique_ptr<cuda::Executor> exec;
  };
  std::unique_ptr<Compiled> compile(int32_t n_tokens, bool all_logits);
  std::unique_ptr<Compiled> compile(const model::BatchShape& shape, bool capture);
  Compiled& compiled_paged(int32_t n_tokens, int32_t n_outputs);
  int32_t output_bucket(int32_t token_bucket) const;
  std::vector<cuda::WeightDesc> weight_descs() const;  // the model's weights as cuda/ chooses their layouts
  // After the upload: the layouts cuda/weight_layouts.h chooses, offsets in regrouped_.
  void regroup_weights(std::span<const cuda::WeightDesc> descs);
  // The half copies (--half-weights) planned within the budget and the memory left after the weights, the
  // executor's smallest work buffers and reserve_ctx slots of cache; noted when the budget or memory cuts it short.
  cuda::HalfWeightsPlan plan_half_weights(std::span<const cuda::WeightDesc> descs, const Footprint& fp,
                                          uint64_t free_bytes, int32_t reserve_ctx) const;
  // Before a graph's executor allocates `bytes`: frees cached prompt graphs if that makes room, else throws
  // DeviceMemoryError naming the batch size.
  void ensure_free(uint64_t bytes, int32_t n_tokens);
  Compiled& compiled(int32_t n_tokens, bool all_logits);
  void check_batch(std::span<const int32_t> tokens, int32_t start_pos) const;
  void sampler_graphs(const SamplerParams& p);  // builds decode_ for these parameters (no-op when they are current)
  void stage_decode(int slot, uint64_t step, std::span<const int32_t> window, bool token_from_previous);
  void detail(const std::string& message) const { log(opt_.log, LogLevel::Detail, message); }

  std::shared_ptr<const model::Model> model_;
  int32_t n_ctx_;                      // KV slots (paged: the pool's)
  CudaSessionOptions opt_;
  std::optional<PagedLayout> paged_;
  // Paged graphs by (token bucket, output bucket): batches are padded up to powers of two, so a handful of shapes
  // (each captured once) serve every step and nothing is built or allocated once they exist.
  std::map<std::pair<int32_t, int32_t>, std::unique_ptr<Compiled>> paged_graphs_;
  PagedBatch padded_;
  // Paged steps' results, copied into page-locked memory (several times faster than into pageable memory): the
  // logits rows when the caller needs them, and the argmax of every output row in one of two slots, used in turn,
  // from which the next step may gather tokens on the device (PagedBatch::token_from_row) while the host still
  // reads the other.
  cuda::PinnedBuffer paged_out_;
  cuda::PinnedBuffer paged_ids_;  // [2][ids_stride_]
  int32_t ids_stride_ = 0;        // the largest output bucket
  struct Launched {               // a step launch_paged queued and take_paged has not taken
    int slot = 0;
    int32_t n_out = 0;
    bool logits_out = false;  // its logits are being copied out
    bool drawn = false;       // the device draws its rows (draws_ then holds them once it is done)
    bool wants_host = false;  // logits or draws asked for: taken before another step is launched, so its logits
                              // are still on the device when it is taken
  };
  std::deque<Launched> launched_;
  cuda::Event slot_done_[2];      // recorded after each slot's step and its copies
  uint64_t n_launched_ = 0;
  int32_t last_outputs_ = -1;     // output rows of the step launched last
  std::vector<int32_t> taken_argmax_;
  std::vector<char> draw_asked_;          // by output row of the newest step with draws
  const Compiled* last_compiled_ = nullptr;  // the newest step's graph (its logits, for a row left undrawn)
  void copy_paged_logits(const Compiled& c, int32_t n_out);  // its logits into paged_out_, queued on the stream
  std::vector<int32_t> gather_;   // the step's token gather indices, padded
  std::span<const int32_t> argmax_;
  // Per-sequence draws (PagedBatch::draws, cuda/kernels/sample_rows.cuh): each output row's parameters and window,
  // read by the kernel from page-locked memory, and the tokens it writes there; sized at start for the largest
  // output bucket.
  cuda::PinnedBuffer draw_rows_, draw_windows_, draw_out_;
  std::span<const int32_t> draws_;
  // Stages and launches the draws of b (n_out rows of logits); returns whether a row that asked for one is left to
  // the host.
  bool launch_draws(const PagedBatch& b, const Compiled& c, int32_t n_out);
  std::unique_ptr<cuda::Context> ctx_;
  cuda::DeviceWeights weights_;
  std::unordered_set<uint64_t> regrouped_;  // arena offsets of the matrices regrouped at upload
  cuda::HalfWeights half_weights_;          // half copies of prompt products' matrices (--half-weights; may be none)
  bool rope_pairs_adjacent_ = false;        // q and k rows reordered at upload for their rope pairs
  std::unique_ptr<cuda::KvCache> kv_;
  std::unique_ptr<cuda::RtcCache> rtc_;
  std::map<std::pair<int32_t, bool>, std::unique_ptr<Compiled>> graphs_;
  std::vector<int32_t> positions_;
  std::vector<float> logits_;

  // Device sampling: the (1, false) graph plus the sampler, captured together, twice (slots 0 and 1, used in turn)
  // so that the next token's step can be queued while this one's runs: its inputs are then the position and step
  // after this one's, and the token this one samples, which its first kernel reads from tokens_host_ (no
  // penalties: the window is not needed). Rebuilt when the sampling parameters change.
  struct DecodeStaging {  // head of each slot's staging, followed by the penalty window
    cuda::SamplingState state;
    int32_t token_from_previous = 0;  // the run's token is the other slot's sampled id
    int32_t pad[3] = {};
  };
  std::unique_ptr<Compiled> decode_[2];
  SamplerParams sample_params_;
  cuda::DeviceBuffer history_;      // [n_ctx] the penalty window
  cuda::DeviceBuffer sample_state_; // cuda::SamplingState
  cuda::DeviceBuffer sample_scratch_;
  cuda::PinnedBuffer staging_[2];   // per slot: DecodeStaging + window, read by each replay's first kernel
  cuda::PinnedBuffer tokens_host_;  // [2] each slot's sampled id, written there by the sampling kernels
  struct Ahead {  // the step queued ahead: valid while its inputs are what the next call should bring
    bool valid = false;
    int slot = 0;
    int32_t pos = 0;
    uint64_t step = 0;
    int32_t token = 0;  // the token it takes (the id sampled by the step before it)
  } ahead_;
  int last_slot_ = 1;
};

}  // namespace runtime
#endif  // LLM_HAVE_CUDA_SESSION
