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

struct ExecutorOptions {
  // The LLM_CUDA_* environment switches (A/B and diagnosis knobs), read once when a session starts: the defaults with
  // LLM_CUDA_GRAPH=0, LLM_CUDA_RTC=0, LLM_CUDA_Q6_KX8=0, LLM_CUDA_ATTN_O=0, LLM_CUDA_MXFP4_RECODE=0,
  // LLM_CUDA_DECODE_AHEAD=0, LLM_CUDA_DEVICE_DRAWS=0, LLM_CUDA_BATCH_MM_MIN / _MAX=0..64, _WGMMA_(LARGE_)MIN=0..65,
  // LLM_CUDA_BATCH_MM_WIDE=0, LLM_CUDA_BATCH_MM_PDL=0, LLM_CUDA_NORM_PDL=0, LLM_CUDA_GLU_EPILOGUE=1,
  // LLM_CUDA_MATVEC_COLS_MAX=0..4, LLM_CUDA_MOE_FRAGMENTS=0, LLM_CUDA_NEW_TOKEN_ATTENTION=0 and
  // LLM_CUDA_OMIT_STEPS=a,b applied. Throws InvalidArgument for a value other than 0 or 1 (or out of the counts'
  // ranges).
  static ExecutorOptions from_env();

  bool cuda_graph = true;  // capture after one warm-up run and replay; false: plain launches every run
  bool verbose = false;    // capture / re-capture notes (to `log`)
  // Where the executor's notes go (warning: a fallback the user should know of; else a -v detail); none: dropped.
  ::std::function<void(bool warning, const ::std::string& message)> log;
  int64_t matvec_max_tokens = 4;  // MulMat with T <= this uses the matvec kernels, larger T the GEMM path
  // MulMat with batch_mm_min_tokens <= T <= batch_mm_max_tokens whose weight the small-batch kernel serves
  // (batch_mm.cuh) takes it instead of the matvec or GEMM path: all of 2..64 since its fragment kernel (H100 8B
  // Q4_K_M `bench --parallel`, docs/kernel-notes.md: B = 2 306 -> 445, B = 64 3685 -> 3987 tok/s).
  // LLM_CUDA_BATCH_MM_MIN / LLM_CUDA_BATCH_MM_MAX=0..64 move the bottom and the top (MAX=0: off).
  int64_t batch_mm_min_tokens = 2;
  int64_t batch_mm_max_tokens = kBatchMmMaxTokens;
  // The small-batch products' kernels (BatchMmChoices, batch_mm.cuh), each switch for A/B runs:
  // LLM_CUDA_BATCH_MM_WIDE=0: Q4_K products of 9..48 tokens on batch_mm.cu's fragment kernel instead of
  // batch_mm_wide.cuh's (W unpacked in registers); LLM_CUDA_WIDE_THREE_SETS_MIN=0..65: its W in three register sets
  // in turn (two super-blocks loading, three blocks an SM) from that many tokens to 32 (default 17; 33 and above:
  // never); LLM_CUDA_WIDE_THREE_TILES=0: its 17..24-token products in four n-tiles of 8 tokens instead of three,
  // and a paged session's steps of 17..24 tokens in a bucket of 32 instead of 24.
  // LLM_CUDA_BATCH_MM_WGMMA_MIN, _WGMMA_LARGE_MIN (large Q4_K) and
  // _WGMMA_Q6_LARGE_MIN (large Q6_Kx8) =0..65: which products run on batch_mm_wgmma.cuh's kernel (warpgroup tensor
  // cores, 9 tokens and more; WgmmaRoute; 65 for all three: none).
  // LLM_CUDA_BATCH_MM_PDL=0: plain launches instead of programmatic ones.
  // LLM_CUDA_BATCH_MM_I8=0: Q4_K products of 2..8 tokens on batch_mm.cu's fragment kernel instead of
  // batch_mm_i8.cuh's (s8 tensor cores; Q4_K at 2 tokens takes matvec_cols.cuh's kernel before either).
  // LLM_CUDA_I8_WARPS_PER_SM=1..64 (default 8): the i8 kernel's grid (BatchMmChoices::i8_warps_per_sm).
  // LLM_CUDA_I8_Q6X8=0: regrouped Q6_K products of 2..4 tokens on the fragment kernel instead of the i8 kernel
  // (BatchMmChoices::i8_q6x8).
  // LLM_CUDA_I8_MAX_TOKENS=0..8 (default 8): the i8 kernel's Q4_K products up to that many tokens, the rest on the
  // fragment kernel (BatchMmChoices::i8_max_tokens).
  BatchMmChoices batch_mm;
  // The RMSNorms of steps of several tokens (a batched decode's layers, two each) launched to overlap the kernel
  // before them (pdl.cuh). LLM_CUDA_NORM_PDL=0 for A/B runs.
  bool programmatic_norms = true;
  // The SwiGLU / GeGLU of up to kBatchMmGluMaxTokens tokens as the epilogue of an up product on the small-batch
  // kernel (fold_glu_into_up), instead of gate and up stacked in one launch and the activation a launch of its own
  // (false, the default: 8B Q4_K_M at 4 / 8 sequences +1.8% / +2.4%). The few-column kernel's up products keep the
  // epilogue (2 sequences: 2% faster with it). LLM_CUDA_GLU_EPILOGUE=1 for A/B runs.
  bool glu_epilogue = false;
  // The x image of a product on the wgmma kernel formed from a SwiGLU's gate and up by the product's own image launch
  // (fold_glu_into_image), instead of an element-wise launch for the SwiGLU (8B Q4_K_M, B = 32 / 64: +0.9 / +0.5%,
  // same bits; H200, session 40). LLM_CUDA_GLU_IMAGES=0 for A/B runs.
  bool glu_images = true;
  // The same on the i8 kernel's image (batch_mm_i8.cuh: Q4_K down projections of 3..8 tokens, regrouped Q6_K ones of
  // 3..4; the others keep the element-wise launch): 8B Q4_K_M on an H100, B = 3 / 4 +0.5 / +0.2%, same bits (session 55).
  // LLM_CUDA_GLU_IMAGES_I8=0 for A/B runs.
  bool glu_images_i8 = true;
  // An add + RMSNorm of 3..8 tokens whose readers are all i8 products and whose Add's product operand is one too
  // (fold_norm_into_images): that product adds the residual and writes its tiles' sums of squares, the readers'
  // image launches normalise, and the norm runs no launch (I8NormLink): 8B Q4_K_M on an H100, B = 3 / 4 +2.3-2.8% /
  // +2.5-3.0% (session 55). LLM_CUDA_NORM_IMAGES=0 for A/B runs.
  bool norm_images = true;
  // A paged step's prefill attention launched after its split attention, overlapping it
  // (AttentionKernelParams::tiles_after_split; 8B Q4_K_M, B = 16 / 32 / 64: +0.4 / +0.4 / +0.5%, H200, session 40).
  // LLM_CUDA_TILES_AFTER_SPLIT=0 for A/B runs.
  bool tiles_after_split = true;
  // The attention writes its outputs in half too where the product after it (the o projection of 9..16 tokens on the
  // wide kernel, or a prompt's on cuBLAS; not the wgmma prompt kernel's) reads x in half, instead of a conversion
  // launch between them (AttentionKernelParams::out_half; lower_attention: 8B Q4_K_M, B = 16 +1.0%, pp512 +1.1% while
  // the prompt's o ran on cuBLAS, H100, session 62).
  // LLM_CUDA_ATTN_HALF_X=0 for A/B runs.
  bool attention_half_x = true;
  // A paged run's tokens whose blocks are consecutive in the pool find their slots without the block table
  // (KvPaging::run_base, plan_run_bases): no table read after the position's in the f16 attention kernels and the KV
  // writers. 8B Q4_K_M, H100, `bench --parallel --pipeline` (each sequence's blocks consecutive): B = 1 / 4 / 16
  // +0.6 / +0.3 / +0.7% (session 62). A server's pool hands out low ids first and takes a finished request's partial
  // block back first, so one stream's blocks are mostly consecutive; cached prefix blocks are not (the table then).
  // LLM_CUDA_PAGED_RUN_BASES=0 for A/B runs.
  bool paged_run_bases = true;
  // Prompt products of 65..prompt_wgmma_max_tokens tokens of Q4_K and regrouped Q6_K on the wgmma kernel with W
  // unpacked in registers (launch_prompt_wgmma), instead of W dequantized to half through memory for cuBLAS; a
  // SwiGLU before a down product formed by its x image (fold_glu_into_image). 8B Q4_K_M, H100 (session 63): pp128
  // +50%, pp256 +19%, pp384 +7%, pp512 +8%; from 640 tokens on cuBLAS wins (pp640 -7%, pp1024 -2%, pp2048 -21%: the
  // kernel reads x's image from L2 once per 128 rows and stays at ~430-490 TFLOP/s against cuBLAS's ~620, which the
  // dequantisation no longer outweighs). LLM_CUDA_PROMPT_WGMMA=0 for A/B runs; LLM_CUDA_PROMPT_WGMMA_MAX moves the
  // bound.
  bool prompt_wgmma = true;
  int64_t prompt_wgmma_max_tokens = 512;
  // Q4_K and Q6_Kx8 prompt products of prompt_gemm_min_tokens..prompt_gemm_max_tokens tokens (and more than 64) on
  // the warp-specialised kernel (launch_prompt_gemm: W and x copied into shared-memory rings by producer warps, tiles
  // of 128 rows by 256 tokens) instead of the wgmma prompt kernel or cuBLAS. A lab kernel, off until it wins its A/B:
  // its first form (W by 144-byte bulk copies) ran pp512 at 14.0k tok/s against the wgmma kernel's 24.8k (H100,
  // session 64); the form here (W by cp.async) is not yet measured. LLM_CUDA_PROMPT_GEMM=1.
  bool prompt_gemm = false;
  int64_t prompt_gemm_min_tokens = 0, prompt_gemm_max_tokens = int64_t(1) << 20;  // LLM_CUDA_PROMPT_GEMM_MIN, _MAX
  // The warp-specialised kernel in clusters of two blocks on 256 rows sharing x's stages (multicast copies: x read
  // from L2 once per 256 rows; launch_prompt_gemm's pairs). Not yet measured. LLM_CUDA_PROMPT_GEMM_PAIRS=1.
  bool prompt_gemm_pairs = false;
  // Prefill expert products of Q4_K and recoded MXFP4 on moe_fragments.cu's kernels (weights straight into mma
  // fragments); false: moe_gemm.cu's half tiles for every format. LLM_CUDA_MOE_FRAGMENTS=0 for A/B runs.
  bool moe_fragments = true;
  // Prefill: the later product of a mixture's gate/up pair writes the activation as half, the down product's x
  // (MoeGluOut, plan_moe_glu_out), so the SwiGLU launch, the down launch's x pass and the product's float output go.
  // LLM_CUDA_MOE_GLU_OUT=0 for A/B runs.
  bool moe_glu_out = true;
  // There, a Q4_K pair at up to 40 users an expert in one launch (moe_gemm_pairs): each block takes 64 rows of both
  // products and forms the activation in shared memory, so neither product is stored. LLM_CUDA_MOE_GLU_PAIRS=0 for
  // A/B runs.
  bool moe_glu_pairs = true;
  // Decode: a mixture's routing (of up to 64 experts) done by its gate/up and down launches themselves, each block
  // routing its token from the router's partial products (ExpertGluParams::route), so no routing launch runs; false:
  // the routing launch. LLM_CUDA_MOE_ROUTE_IN_EXPERTS=0 for A/B runs.
  bool moe_route_in_experts = true;
  // Decode of one token: a mixture's feed-forward RmsNorm folded into its router's parts launch, which hands x w and
  // the sums of squares to the routing and the gate/up launch (fold_moe_norm), so no norm launch runs.
  // LLM_CUDA_MOE_NORM=0 for A/B runs.
  bool moe_norm = true;
  // Decode of one token with per-head q/k norms (Qwen 3, Gemma 3), unpaged f16 cache: the split attention launch
  // forms q, k and v itself from the raw products (AttentionNewToken), so no norm + rope + KV launch runs before
  // it; false: that launch. LLM_CUDA_NEW_TOKEN_ATTENTION=0 for A/B runs.
  bool new_token_attention = true;
  // That attention launch as a programmatic dependent of the q/k/v launch (AttentionNewToken::programmatic: the
  // rope angles and the first tile's cached slots before its wait; Qwen3-30B-A3B tg128 +2.2%, H200, session 44).
  // The gate/up expert launch let start at the routing's beginning and the one-token RMSNorm launched the same way
  // lost (-3.7% / -2.2%, kernel notes); the gate/up launch now starts once the routing's logits are read (glu_pdl).
  // LLM_CUDA_NEW_TOKEN_PDL=0 for A/B runs.
  bool new_token_pdl = true;
  // The q/k/v launch's rope + KV epilogue (fold_rope_kv_epilogue) also for a scaled rope (YaRN's ramp, the attention
  // factor: gpt-oss), so no rope_kv launch runs. LLM_CUDA_SCALED_ROPE_EPILOGUE=0 for A/B runs.
  bool scaled_rope_epilogue = true;
  // That launch's blocks a KV head below kShortSlots positions (1, 2 or 4, as far as the group divides): each forms
  // and attends with its share of the group's q heads (AttentionNewToken::q_split_shift, new_token_q_split_shift).
  // LLM_CUDA_NEW_TOKEN_QSPLIT=1..4 for A/B runs.
  int64_t new_token_q_split = 4;
  // Paged steps read their block table in the inputs' kernel (only the rows up to the highest a token uses, instead
  // of a copy of the whole table as a graph node), and the argmax kernel writes a step's ids straight into the
  // session's page-locked ring (set_argmax_ring) instead of a copy after the graph: two copy-engine round trips
  // fewer between two steps. LLM_CUDA_PAGED_HOST_IO=0 for A/B runs.
  bool paged_host_io = true;
  // write_inputs waits for the previous run's first kernel (an event after it) instead of the whole run: the
  // paged session's pipelined step k + 1 is queued while step k runs instead of after it (session 35's two
  // stagings lost, with two graph executables alternating; this keeps one). With paged_host_io, 8B Q4_K_M on an
  // H100: `bench --parallel --pipeline` B = 1 / 4 / 16 +0.4 / +0.4 / +0.2%, a served stream +0.6% (session 55);
  // the gap between two pipelined steps' kernels ~1.4 us, as between unpaged decode steps. LLM_CUDA_STAGING_EVENT=0
  // for A/B runs.
  bool staging_event = true;
  // Decode of one token: a gate/up expert launch right after its routing launch as a programmatic dependent, the
  // routing letting it start once its logits are read (glu_after_route); false: a plain launch. LLM_CUDA_GLU_PDL=0
  // for A/B runs.
  bool glu_pdl = true;
  // MulMat with 2 <= T <= matvec_cols_max_tokens whose weight the few-column int16 kernel serves (matvec_cols.cuh)
  // takes it before the small-batch kernel. LLM_CUDA_MATVEC_COLS_MAX=0..4 moves the top (0 or 1: off).
  int64_t matvec_cols_max_tokens = kMatvecColsMaxTokens;
  // Decode fusions into the int16 matvec (cuda/executor_fusion.cpp): an RmsNorm whose only readers are such
  // matvecs is folded into them; an Add of a matvec's output and another tensor becomes the matvec's epilogue.
  bool fuse = true;
  // When set, Add / Mul / SwiGlu run as NVRTC kernels generated for their exact shapes (cached on disk); otherwise,
  // or when run-time compilation fails (noted on stderr), the ahead-of-time kernels.
  RtcCache* rtc = nullptr;
  // Timing only (scripts/gpu-step-shares.sh): the steps of nodes whose name is one of these or ends in "." + one
  // of them ("attn_kqv", "ffn_down") are left out, so a step's share of the decode time shows as the speed-up
  // without it. The results are wrong; sessions warn on stderr (LLM_CUDA_OMIT_STEPS).
  ::std::vector<::std::string> omit_steps_of;
  // Arena offsets of the weights the session regrouped at upload: Q6_K into Q6_Kx8 (q6_kx8.cuh), Q4_0 o
  // projections by columns (q4_0_cols.cuh, read by the attention + o launch), MXFP4 experts recoded
  // (mxfp4_recode.cuh); null: none.
  const ::std::unordered_set<uint64_t>* regrouped_offsets = nullptr;
  // Half-precision copies of matrices (half_weights.h, --half-weights): a product the GEMM path takes multiplies its
  // matrix's copy instead of dequantizing the matrix into scratch first; null or no copy: the dequantizing GEMM.
  const HalfWeights* half_weights = nullptr;
  // The session reordered the q and k rows of every head so that NeoX rope pairs lie side by side (weight_layouts.h,
  // RopePairs): NeoX ropes then run in the normal form.
  bool rope_pairs_adjacent = false;

  // Read by the session around the executor, kept here so that every switch is read in one place:
  bool rtc_kernels = true;    // create the NVRTC cache that `rtc` points to (LLM_CUDA_RTC=0: ahead-of-time kernels)
  LayoutOptions layouts;      // which weight layouts to regroup at upload (weight_layouts.h)
  bool decode_ahead = true;   // queue the next decode step before returning a token (LLM_CUDA_DECODE_AHEAD=0: no)
  bool device_draws = true;   // paged sessions sample rows on the device (LLM_CUDA_DEVICE_DRAWS=0: on the host)
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
  bool captured() const { return bool(variants_[short_next()].exec); }
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
  bool batch_mm_takes(const graph::Node& mulmat) const;  // launched by the small-batch kernel (lower_gemm)
  bool matvec_cols_takes(const graph::Node& mulmat) const;  // launched by the few-column kernel (lower_gemm)
  enum class PromptKernel { None, Wgmma, Gemm };
  PromptKernel prompt_kernel(const graph::Node& mulmat) const;  // which prompt kernel launches it (lower_gemm)
  const float* f32_in(const graph::Node& n, size_t i) const;
  RopeKernelParams rope_params(const graph::Node& rope) const;
  bool attention_matches_kv(const graph::Node& attention) const;
  float* f32_out(const graph::Node& n) const;
  void launch_all(cudaStream_t s) const;
  // Fusions by kind, for the -v capture note (executor_fusion.cpp).
  enum class Fusion {
    Norm, Residual, Sibling, SwiGlu, SmallBatchGlu, RopeKv, RopeKvEpilogue, AttentionO, NormAdd, AddNorm, QkNorms,
    MoeRoute, ExpertGlu, ExpertDown, SmallBatchStack, RouteInExperts, NewTokenAttention, GluInImage, MoeNorm,
    MoeGluOut, NormInImages, kCount
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
  bool feeds_glu(const graph::Node& mulmat) const;
  bool gemm_reads_float_x(const graph::Node& mulmat) const;
  int64_t launch_rows(const graph::Node& mulmat) const;
  bool product_converts_x(const graph::Node& mulmat) const;
  void* half_x_for(const graph::Node& n) const;
  void fold_qk_norms(const graph::Node& attention);
  bool attend_new_token(AttentionKernelParams& at, const RopeKvParams& f, const graph::Node& rope_q);
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
  DeviceBuffer arena_;
  DeviceBuffer gemm_scratch_;
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
  int32_t max_pos_ = INT32_MAX;   // the largest position of the inputs last written (write_inputs)
  std::map<::std::pair<float, int32_t>, DeviceBuffer> rope_powers_;  // base^(-2i/n_rot) by (base, n_rot)
  size_t fused_count_[size_t(Fusion::kCount)] = {};
  struct LastGemm {  // the latest prefill product: its input converts once for siblings right after it
    size_t step = SIZE_MAX;  // steps_.size() just after it
    const float* x = nullptr;
    int64_t K = 0, T = 0;
  } last_gemm_;
  struct LastImage {  // the latest prompt product: its image of x serves a sibling right after it (q/k, gate/up)
    size_t step = SIZE_MAX;  // steps_.size() just after it
    const float* x = nullptr;
    const float* gate = nullptr;
    int64_t K = 0, T = 0;
    quant::Type type = quant::Type::F32;
    bool regrouped = false;
  } last_image_;
  struct Variant {  // a captured graph: [0] every run, [1] runs below kShortSlots when attends_in_o()
    int runs = 0;
    Graph graph;
    GraphExec exec;
  };
  // staging_event: recorded after each run's first kernel; an event node of the captured graphs, so declared before
  // them (destroyed after them).
  Event inputs_read_ = Event::create();
  Variant variants_[2];
  Event done_ = Event::create();  // recorded after each run()
};

}  // namespace cuda
