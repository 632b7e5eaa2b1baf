// The CUDA executor: lowers every node of one graph::Graph to a pre-bound step (a kernel launcher with its params
// struct filled in) once, at construction; run() only launches them, or replays them as a captured CUDA graph.
// Per-run inputs (token ids, positions; for a paged graph also each token's block-table row, the block tables, the
// output rows and the prefill tiles planned from them) are written into fixed device memory by the run's first steps,
// so one capture serves every position and every batch of its shape. Nothing is allocated after construction.
#pragma once
#include <climits>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <tuple>
#include <unordered_set>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/dequant_ahead.h"
#include "cuda/half_weights.h"
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_i8.cuh"
#include "cuda/kernels/matvec_cols.cuh"
#include "cuda/kernels/expert_matvec.cuh"
#include "cuda/kernels/fused_elementwise.cuh"
#include "cuda/kernels/host_inputs.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/moe.cuh"
#include "cuda/kernels/moe_gemm.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/executor_options.h"
#include "cuda/product_route.h"
#include "cuda/rtc.h"
#include "cuda/weight_layouts.h"
#include "graph/ir.h"
#include "graph/plan.h"

namespace cuda {

// The KV cache of a model, per layer K [head_dim, n_ctx, n_head_kv] and V [head_dim_v, n_ctx, n_head_kv] (each kv
// head's slots contiguous, the layout cuda/kernels/attention.cuh reads), as binary16 values or, for a q8_0 / q4_0
// spec, the quants in that layout (q8_0 one int8 per value; q4_0 head_dim / 2 bytes per slot, GGUF Q4_0's nibble
// order) plus binary16 scales [head_dim / 32, n_ctx, n_head_kv]; one allocation, every per-layer array 256-byte
// aligned: K quants, V quants, K scales, V scales.
class KvCache {
 public:
  KvCache() = default;
  // Throws InvalidArgument for an empty spec or a q8_0 / q4_0 spec whose head dims are not multiples of 32.
  explicit KvCache(const graph::KvCacheSpec& spec);
  const graph::KvCacheSpec& spec() const { return spec_; }
  graph::KvType type() const { return spec_.type; }
  void* k(int32_t layer) const;
  void* v(int32_t layer) const;
  uint16_t* k_scales(int32_t layer) const;  // q8_0, q4_0; null for f16
  uint16_t* v_scales(int32_t layer) const;
  size_t bytes() const { return buffer_.bytes(); }
  void clear(cudaStream_t stream) const;  // zero (a new sequence; not needed for correctness, slots are written first)
  // Device bytes of a cache of this spec (what the constructor allocates), and of one slot of every layer
  // without the alignment padding (for memory estimates per context length).
  static size_t bytes_for(const graph::KvCacheSpec& spec);
  static double bytes_per_slot(const graph::KvCacheSpec& spec);

 private:
  struct LayerLayout {  // byte offsets inside one layer's stretch
    size_t k = 0, v = 0, k_scales = 0, v_scales = 0, bytes = 0;
  };
  static LayerLayout layout(const graph::KvCacheSpec& spec);
  uint8_t* layer_base(int32_t layer) const;
  graph::KvCacheSpec spec_;
  LayerLayout layout_;
  DeviceBuffer buffer_;
};

class Executor {
 public:
  // The graph must have been planned by `plan`; weights is the device weight arena; kv must match g.kv when the
  // graph has Attention nodes. Throws cuda::InvalidArgument / quant::UnsupportedType for nodes it cannot lower.
  Executor(const Context& ctx, const graph::Graph& g, const graph::Plan& plan, const uint8_t* weights, KvCache* kv,
           ExecutorOptions options = {});
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Appends a step after the graph's own (the decode session's sampler); invalidates any captured graph.
  void append_step(std::function<void(cudaStream_t)> step);
  // One more copy for the run's first step, which reads the inputs from page-locked host memory (HostCopy: n int32
  // values from src, at most *n_at when n_at is set; both page-locked host memory as the device addresses it,
  // device_address_of_pinned); the caller writes src before each run(), after the previous run finished.
  // Invalidates any captured graph. Throws cuda::InvalidArgument past HostCopies::kMax copies in all.
  void add_host_input(const int32_t* src, void* dst, int32_t n, const int32_t* n_at = nullptr);

  // The Tokens input read from alt_src instead of the staging in the runs where *use_alt_at (page-locked host memory)
  // is non-zero (HostCopy::alt_src): the decode session's run-ahead. Invalidates any captured graph.
  void set_tokens_alternative(const int32_t* alt_src, const int32_t* use_alt_at);
  // The Tokens input gathered per token (HostCopy::gather_rows): the token_from given to write_inputs names, for
  // each token, an index into src (any memory the device can read) or -1 for the staged token. A paged session's
  // pipelined steps take tokens from the argmax rows of the step before. Invalidates any captured graph.
  void set_tokens_gather(const int32_t* src);
  // The argmax node's ids also written by its kernel into page-locked host memory (ArgmaxParams::host_out; ring as
  // the device addresses it): a run's row r to ring[slot * stride + r], slot the last set_ring_slot's value (read by
  // the run's first kernel). A paged session's ids reach the host and the next step's token gather with no copy
  // after the graph. Invalidates any captured graph; throws cuda::InvalidArgument unless argmax is an Argmax node
  // of at most stride rows.
  void set_argmax_ring(graph::NodeId argmax, int32_t* ring, int64_t stride);
  // The ring slot of the next run(); call after write_inputs (which waits until the previous run has read its own).
  void set_ring_slot(int32_t slot);

  // Writes inputs.of(kind) for every Input node (sizes must match the node) into the page-locked staging that the
  // run's first steps read; waits for this executor's previous run first (wait(); with staging_event, until its first
  // kernel has read the staging). A paged graph's inputs are
  // checked first (cuda/paged_batch.h: positions in [-1, seq_capacity), rows, the blocks each token reaches, output
  // rows; InvalidArgument, nothing written) and its prefill tiles planned from them.
  void write_inputs(const graph::RunInputs& inputs);
  // The same with the gather indices of set_tokens_gather (empty: every token from inputs.tokens).
  void write_inputs(const graph::RunInputs& inputs, std::span<const int32_t> token_from);
  // One sequence: write_inputs(RunInputs{tokens, positions}).
  void write_inputs(std::span<const int32_t> tokens, std::span<const int32_t> positions);
  // The next runs' live tokens: the first n of the graph's n_tokens are the batch, the rest padding that nothing
  // reads back (a paged step padded up to its bucket); n also covers the output rows that are read. A graph run as
  // plain launches (cuda_graph off) then computes its prompt products (the wgmma prompt kernel's and cuBLAS's,
  // ExecutorOptions::live_tokens; not where the graph has expert products) on those n columns only, their padding
  // columns left as they were; a captured graph replays every column. 0: all of them. Throws InvalidArgument for n
  // outside [0, n_tokens].
  void set_live_tokens(int32_t n);
  // Queues all steps on the compute stream: plain launches, or (cuda_graph) one replay of the captured graph.
  void run();
  // Waits until the last run() queued here has finished (other work on the stream after it may still run).
  void wait() const { done_.synchronize(); }

  // Device address of a node's data (activations in the arena, F32 weights in the weight arena).
  void* device_ptr(graph::NodeId id) const;
  // Copies a node's F32 data to host memory (synchronizes).
  std::vector<float> read_f32(graph::NodeId id) const;

  size_t n_steps() const { return steps_.size(); }
  size_t n_fused() const;  // nodes folded into a neighbour's kernel (by kind: fusion_summary)
  // Whether the graph the next run() replays (by the positions last written) is captured.
  bool captured() const { return bool(variants_[variant_next()].exec); }
  // Runs whose positions are all below this replay a second graph, in which the attention + o launches attend
  // themselves (attention_o.cuh; the split attention serves longer contexts) and a new-token attention launch spreads
  // each KV head's q heads over more blocks (new_token_q_split_shift): positions within one split's tiles.
  static constexpr int32_t kShortSlots = 256;
  size_t arena_bytes() const { return arena_.bytes(); }

 private:
  using Step = std::function<void(cudaStream_t)>;
  // How each node is lowered, decided for the whole graph before any step is built (plan_fusions, in node order,
  // executor_fusion.cpp); lower() then reads one line per op.
  enum class Lowering : uint8_t {
    Own,             // its own step (none for Input, Weight and Reshape)
    InReaders,       // an RmsNorm computed by the matvecs that read it (each normalises x itself)
    Epilogue,        // an Add or SwiGlu written by the launch that computes one of its operands (a matvec, a norm)
    InSibling,       // a MulMat computed by an earlier sibling's launch (same x)
    AttentionO,      // the o MulMat of an attention + o launch (its residual Add is an Epilogue)
    InAttention,     // a Rope applied by its Attention's step (launch_rope_kv), which is RopesAndAttend
    InQkv,           // a Rope applied by the q/k/v launch, which also wrote K/V; its Attention is AttendOnly
    RopesAndAttend,  // an Attention whose step rotates q and k, writes K/V and attends
    AttendOnly,      // an Attention whose q/k/v launch rotated q and k and wrote K/V: the step only attends
    InRopeKv,        // a per-head q or k RmsNorm applied by its RopesAndAttend attention's rope_kv launch
    AddsResidual,    // an RmsNorm whose launch also adds the residual and writes its one reader, an Add (Epilogue)
    InNorm,          // an Add computed by the launch of the RmsNorm that reads it first (fold_add_norm)
    InRoute,         // a TopK (ids stored) or Softmax (not stored) computed by its MoeWeights' routing launch
    InExperts,       // a MoeWeights whose routing the expert launches do themselves (route_in_experts; not stored)
    RouterParts,     // a router MulMat computed as partial products for its routing launch (never stored)
    InImage,         // a SwiGlu formed by the x image launch of the wgmma product reading it (never stored)
    InImages,        // an RmsNorm applied by its i8 readers' image launches (fold_norm_into_images; never stored)
  };
  void plan_fusions();
  void plan_mul_mat(const graph::Node& n);
  void plan_rope(const graph::Node& n);
  void lower(const graph::Node& n);
  void lower_get_rows(const graph::Node& n);
  void lower_rms_norm(const graph::Node& n);
  void lower_mul_mat(const graph::Node& n);
  void lower_gemm(const graph::Node& n);
  void lower_binary(const graph::Node& n);
  void lower_unary(const graph::Node& n);  // Silu, Scale, Softcap
  void lower_swiglu(const graph::Node& n);
  void lower_geglu(const graph::Node& n);
  void lower_slice(const graph::Node& n);
  void lower_rope(const graph::Node& n);
  void lower_attention(const graph::Node& n);
  void push_attention(const graph::Node& n, const AttentionKernelParams& a);
  void lower_softmax(const graph::Node& n);
  void lower_last_token(const graph::Node& n);
  void lower_gather(const graph::Node& n);
  KvPaging paging_of(const graph::Node& attention) const;  // a paged graph's block-table inputs; else none
  void lower_argmax(const graph::Node& n);
  // The mixture-of-experts ops (executor_moe.cpp).
  void lower_top_k(const graph::Node& n);
  void lower_moe_weights(const graph::Node& n);
  void lower_mul_mat_id(const graph::Node& n);
  void lower_swiglu_oai(const graph::Node& n);
  void lower_weighted_sum(const graph::Node& n);
  // Their decode fusions (executor_moe.cpp): routing in one launch, gate/up with the activation, down with the
  // weighted sum and the residual add (expert_matvec.cuh).
  void allocate_moe_buffers();
  void plan_moe_route(const graph::Node& moe_weights);
  void plan_mul_mat_id(const graph::Node& n);
  void plan_moe_glu_out(const graph::Node& n);
  bool plan_expert_glu(const graph::Node& n);
  const graph::Node* glu_pair_second(const graph::Node& n, const graph::Node*& sw) const;
  const float* expert_bias(const graph::Node& mulmat_id) const;
  const float* product_bias(const graph::Node& mulmat) const {  // a MulMat's bias (input 2), or null
    return mulmat.inputs.size() > 2 && mulmat.inputs[2] != graph::kNoNode ? f32_in(mulmat, 2) : nullptr;
  }
  bool router_parts_of(const graph::Node& router, const ::std::vector<graph::NodeId>& readers,
                       RouterPartsParams& out) const;
  struct ExpertDown {  // a down MulMatId's launch: its params, the WeightedSum and Add (or kNoNode) it writes
    ExpertDownParams p;
    graph::NodeId sum = graph::kNoNode, add = graph::kNoNode;
  };
  bool expert_down_of(const graph::Node& down, graph::NodeId h_as_runs, ExpertDown& out) const;
  void take_expert_down(const graph::Node& down, const ExpertDown& d);
  void glu_after_route(const graph::Node& gate, ExpertGluParams& glu);
  MoeRouteParams* routing_launch_of(graph::NodeId topk);
  void route_in_experts(const graph::Node& gate, const graph::Node& up, graph::NodeId down_mm, ExpertGluParams& glu,
                        ExpertDown& down);
  const MoeRouteParams* route_with_copies(graph::NodeId topk, graph::NodeId* moe_weights) const;
  void fold_moe_norm(const graph::Node& gate, const graph::Node& up, ExpertGluParams& glu, ExpertDown* down);
  Lowering lowering(graph::NodeId id) const { return lowering_.at(size_t(id)); }
  void drop_capture();  // the steps or their inputs changed: the next run() launches plainly, then captures anew
  const void* weight_ptr(const graph::Node& w) const;
  const uint16_t* half_copy(const graph::Node& w) const;  // w's rows in ExecutorOptions::half_weights, or null
  bool regrouped(const graph::Node& w) const;  // a weight regrouped at upload (q6_kx8.cuh, q4_0_cols.cuh)
  static ::std::string describe(const graph::Node& n);  // "node 3 'name' (op)", for error messages
  bool q4_0_cols(const graph::Node& w) const;  // a Q4_0 weight regrouped by columns
  // The launch a MulMat of a weight takes (product_route.h, as work_buffers sizes it); Matvec for another matrix.
  ProductRoute route(const graph::Node& mulmat) const;
  bool batch_mm_takes(const graph::Node& m) const { return route(m) == ProductRoute::SmallBatch; }
  bool matvec_cols_takes(const graph::Node& m) const { return route(m) == ProductRoute::FewColumns; }
  bool prompt_takes(const graph::Node& m) const { return route(m) == ProductRoute::PromptWgmma; }
  const float* f32_in(const graph::Node& n, size_t i) const;
  RopeKernelParams rope_params(const graph::Node& rope) const;
  bool attention_matches_kv(const graph::Node& attention) const;
  float* f32_out(const graph::Node& n) const;
  void launch_all(cudaStream_t s) const;
  // Fusions by kind, for the -v capture note (executor_fusion.cpp).
  enum class Fusion {
    Norm, Residual, Sibling, SwiGlu, SmallBatchGlu, RopeKv, RopeKvEpilogue, AttentionO, NormAdd, AddNorm, QkNorms,
    MoeRoute, ExpertGlu, ExpertDown, SmallBatchStack, RouteInExperts, NewTokenAttention, GluInImage, MoeNorm,
    MoeGluOut, NormInImages, GemmPair, kCount
  };
  // Fusions (executor_fusion.cpp), decided by plan_fusions in node order.
  MatvecParams matvec_params(const graph::Node& mulmat) const;
  bool norm_foldable(const graph::Node& norm) const;
  bool fold_norm(const graph::Node& norm);
  void fold_norm_add(const graph::Node& norm);
  void fold_add_norm(const graph::Node& norm);
  void fold_glu_into_up(const graph::Node& glu);
  void fold_glu_into_image(const graph::Node& glu);
  void fold_norm_into_images(const graph::Node& norm);  // executor_norm_images.cpp
  bool i8_takes(const graph::Node& mulmat) const;
  void stack_small_batch(const graph::Node& mulmat);
  void pair_gemm_siblings(const graph::Node& mulmat);
  bool feeds_glu(const graph::Node& mulmat) const;
  bool gemm_reads_float_x(const graph::Node& mulmat) const;
  int64_t launch_rows(const graph::Node& mulmat) const;
  bool product_converts_x(const graph::Node& mulmat) const;
  void* half_x_for(const graph::Node& n) const;
  void fold_qk_norms(const graph::Node& attention);
  const graph::Node* folded_qk_norm(const graph::Node& rope) const;
  bool attend_new_token(AttentionKernelParams& at, const RopeKvParams& f, const graph::Node& rope_q);
  bool attend_new_tokens(AttentionKernelParams& at, const RopeKvParams& f, const graph::Node& att);
  bool raw_heads_intact(const graph::Node& att, const RopeKvParams& f) const;
  bool raw_heads_kept(const graph::Node& att, graph::NodeId q_src, graph::NodeId k_src) const;
  bool slots_overlap(graph::NodeId a, graph::NodeId b) const;
  bool take_new_token(AttentionKernelParams& at, const RopeKvParams& f, const graph::Node& rope_q, bool programmatic);
  int32_t new_token_q_split_shift(const AttentionKernelParams& at) const;
  // The attention + o launch (executor_fusion.cpp): the o MulMat read by it, and the residual Add it computes.
  struct AttentionO {
    graph::NodeId mulmat = graph::kNoNode, add = graph::kNoNode;
    size_t acc = 0;  // its accumulator: fixed_accs_ row, in the order the launches run
  };
  AttentionO attention_o_of(const graph::Node& attention) const;
  bool reads_fixed_point_ok(const graph::Node& add) const;
  void plan_attention_o(const AttentionO& f);
  void lower_attention_o(const graph::Node& mulmat, const AttentionO& f);
  bool attends_in_o(const graph::Node& attention) const;
  void read_fixed_point_x(const graph::Node& mulmat, MatvecParams& p) const;
  bool short_next() const { return has_short_ && max_pos_ < kShortSlots; }
  bool alone_next() const { return alone_; }
  int variant_next() const { return int(short_next()) + 2 * int(alone_next()); }
  graph::NodeId add_written_at(const graph::Node& producer, ::std::initializer_list<graph::NodeId> unwritten) const;
  graph::NodeId residual_add(const graph::Node& mulmat, const MatvecParams& p) const;
  void fold_residual(const graph::Node& mulmat, MatvecParams& p);
  void merge_siblings(const graph::Node& mulmat, MatvecParams& p);
  void fold_swiglu_epilogue(const graph::Node& mulmat, MatvecParams& p);
  bool rope_kv_fusable(const graph::Node& attention) const;
  graph::NodeId reader_past_views(graph::NodeId id) const;
  void fold_rope_kv_epilogue(const graph::Node& mulmat, MatvecParams& p);
  const double* rope_powers(float freq_base, int32_t n_rot);
  void count_fusion(Fusion kind) { ++fused_count_[size_t(kind)]; }
  ::std::string fusion_summary() const;
  bool slot_free_between(graph::NodeId slot_owner, graph::NodeId from, graph::NodeId to,
                         ::std::initializer_list<graph::NodeId> unwritten = {}) const;
  const FusedElementwise* fused(const FusedShape& shape);

  const Context& ctx_;
  const graph::Graph& g_;
  const graph::Plan& plan_;
  const uint8_t* weights_;
  KvCache* kv_;
  ExecutorOptions opt_;
  DeviceBuffer lab_pad_;  // ExecutorOptions::lab_pad_bytes, never read
  DeviceBuffer arena_;
  DeviceBuffer gemm_scratch_;
  DequantAhead dequant_ahead_;  // the dequantising route's half copies, made on a side stream ahead of their products
  DeviceBuffer attn_scratch_;
  DeviceBuffer moe_scratch_;  // expert grouping of the prefill MulMatId launches (moe_gemm.cuh)
  // What the last prefill MulMatId lowered onto moe_scratch_ leaves there for the next (MoeGemmOptions): the grouping
  // of `ids`, and the half copy of `x` (K, x_slots). Steps run in lowering order, so a launch finds it as lowered.
  struct MoeScratchHolds {
    graph::NodeId ids = graph::kNoNode, x = graph::kNoNode;
    int64_t n_expert = 0, K = 0, x_slots = 0;
  };
  MoeScratchHolds moe_scratch_holds_;
  DeviceBuffer batch_mm_counters_;  // the small-batch products' shared-tile counters (batch_mm.cuh), zeroed once
  DeviceBuffer argmax_scratch_;     // a few rows' argmax parts and counters (ArgmaxParams::scratch), zeroed once
  PinnedBuffer input_staging_;
  PinnedBuffer gather_rows_;  // set_tokens_gather: one index a token, written by write_inputs
  // paged_host_io: the block table's values to copy this run (rows up to the highest a token uses), and the ring
  // (set_argmax_ring): its argmax node, where it writes, and the slot, staged and then on the device.
  PinnedBuffer table_count_;
  graph::NodeId ring_node_ = graph::kNoNode;
  int32_t* ring_ = nullptr;
  int64_t ring_stride_ = 0;
  PinnedBuffer ring_slot_;
  DeviceBuffer ring_slot_device_;
  HostCopies host_inputs_;  // the first step's copies: the Input nodes' staging, then add_host_input's
  DeviceBuffer paged_tiles_;        // a paged graph's prefill tiles (PagedTiles), copied from the staging's end
  int32_t paged_reach_ = 0;         // the widest window of its attention layers, 0 when one attends everything
  std::vector<Step> steps_;
  std::map<std::tuple<int, int64_t, int64_t>, std::unique_ptr<FusedElementwise>> fused_;  // by (kind, n, nb)
  bool rtc_failed_ = false;
  std::vector<std::pair<graph::NodeId, graph::InputParams::Kind>> inputs_;
  std::vector<int> input_copy_;  // by inputs_ entry: its host_inputs_ copy, -1 for a block table (a memcpy step)
  std::vector<std::vector<graph::NodeId>> users_;  // readers of each node
  std::vector<Lowering> lowering_;                 // by node (plan_fusions)
  // Up MulMats of a few tokens whose small-batch or few-column launch applies the SwiGLU / GeGLU that reads them
  // (fold_glu_into_up): the gate product it reads, and the activation's node, whose slot it writes.
  struct UpGlu {
    graph::NodeId gate = graph::kNoNode, glu = graph::kNoNode;
    bool gelu = false;
  };
  std::map<graph::NodeId, UpGlu> glu_epilogues_;
  // Small-batch launches of several matrices that read the same x (stack_small_batch): the MulMats, first the
  // launching one.
  std::map<graph::NodeId, std::vector<graph::NodeId>> small_batch_stacks_;
  // Dequantising GEMM launches that also compute a later sibling of the same x and shape (pair_gemm_siblings): by
  // the launching MulMat, the sibling's.
  std::map<graph::NodeId, graph::NodeId> gemm_pairs_;
  // fold_norm_into_images: by i8 MulMat launch, its side of the link, and the x it reads or the y it writes instead
  // of its own (the Add's slot); the sums of squares, one folded norm's at a time.
  struct NormLink {
    I8NormLink link;
    const float* x = nullptr;
    float* y = nullptr;
  };
  std::map<graph::NodeId, NormLink> norm_links_;
  DeviceBuffer norm_sums_;
  std::map<graph::NodeId, MatvecParams> matvecs_;  // MulMats launched as a matvec: their params, every fusion in
  std::map<graph::NodeId, AttentionO> attention_o_plan_;  // by Attention node: its attention + o launch (up front)
  std::map<graph::NodeId, MoeRouteParams> moe_routes_;    // by MoeWeights node: its routing launch
  std::map<graph::NodeId, ExpertGluParams> expert_glus_;  // by the first MulMatId of a gate/up pair
  std::map<graph::NodeId, ExpertDownParams> expert_downs_;  // by a down MulMatId
  // Prefill: by the gate/up product whose launch writes the pair's activation (the later one, or the first when the
  // pair runs in one launch: then its weight and bias are the gate's, which w and bias hold).
  struct MoeGluLaunch {
    MoeGluOut glu;
    const void* w = nullptr;
    const float* bias = nullptr;
  };
  std::map<graph::NodeId, MoeGluLaunch> moe_glu_outs_;
  std::map<graph::NodeId, const __half*> moe_glu_x_;  // prefill: by a down MulMatId, that activation as its x
  DeviceBuffer expert_runs_;  // h handed from a gate/up launch to its down launch as int16 runs (one layer's)
  std::map<graph::NodeId, RouterPartsParams> router_parts_;  // by router MulMat: its partial-products launch
  DeviceBuffer router_parts_buffer_;  // those partial products (one layer's)
  // A folded feed-forward norm's x w ([n_embd]) and sums of squares (a router part each), one token's (fold_moe_norm).
  DeviceBuffer router_norm_;
  DeviceBuffer route_copy_;  // a routing launch's ids and weights, also here for the fused expert launches
  size_t route_step_end_ = SIZE_MAX;  // steps_.size() right after the last routing launch's step
  std::vector<unsigned long long*> fixed_acc_;     // Add nodes held in 64-bit fixed point: their accumulator
  DeviceBuffer fixed_accs_;                        // those accumulators, [attention_o_plan_.size()][D]
  int64_t fixed_d_ = 0;                            // D of each
  bool has_short_ = false;
  bool short_now_ = false;        // the graph being launched or captured: the attention steps read it
  // Paged steps whose tokens are each of its own sequence (write_inputs: alone_) run a graph variant whose attention
  // launches form the new tokens themselves (attend_new_tokens); alone_now_: the graph launched or captured.
  bool has_alone_ = false;
  bool alone_ = false;  // write_inputs: has_alone_ and the last inputs' tokens each of its own sequence
  bool alone_now_ = false;
  int32_t max_pos_ = INT32_MAX;   // the largest position of the inputs last written (write_inputs)
  std::map<::std::pair<float, int32_t>, DeviceBuffer> rope_powers_;  // base^(-2i/n_rot) by (base, n_rot)
  size_t fused_count_[size_t(Fusion::kCount)] = {};
  struct LastGemm {  // the latest prefill product: its input converts once for siblings right after it
    size_t step = SIZE_MAX;  // steps_.size() just after it
    const float* x = nullptr;
    int64_t K = 0, T = 0;
  } last_gemm_;
  // set_live_tokens' count (0: every token), read at launch by the steps of products over the graph's tokens.
  int32_t live_tokens_ = 0;
  // The graph has expert products (MulMatId): its routing and expert tiles work on every token, padding included,
  // and would read the stale padding columns the live products leave, so its products compute every column.
  bool expert_products_ = false;
  // Columns a prompt product of T columns computes this run: the live tokens where lower_gemm let it
  // (live_columns_apply), else T.
  int64_t live_columns(int64_t T) const { return live_tokens_ > 0 && live_tokens_ < T ? live_tokens_ : T; }
  // Whether a product of T columns built here follows set_live_tokens: plain launches, the switch on, no expert
  // products in the graph, as many columns as the graph has tokens (its tokens; or its output rows where the output
  // bucket is as large, which is why the count given must cover the output rows too).
  bool live_columns_apply(int64_t T) const;
  struct LastImage {  // the latest prompt product: its image of x serves a sibling right after it (q/k, gate/up)
    size_t step = SIZE_MAX;  // steps_.size() just after it
    const float* x = nullptr;
    const float* gate = nullptr;
    int64_t K = 0, T = 0;
    quant::Type type = quant::Type::F32;
    bool regrouped = false;
  } last_image_;
  // A captured graph: [0] every run, [1] runs below kShortSlots when attends_in_o(), [2] and [3] the same for runs
  // whose tokens are each of its own sequence (has_alone_).
  struct Variant {
    int runs = 0;
    Graph graph;
    GraphExec exec;
  };
  // staging_event: recorded after each run's first kernel; an event node of the captured graphs, so declared before
  // them (destroyed after them).
  Event inputs_read_ = Event::create();
  Variant variants_[4];
  Event done_ = Event::create();  // recorded after each run()
};

}  // namespace cuda
