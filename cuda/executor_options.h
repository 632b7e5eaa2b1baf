// The executor's options: every switch a session passes to cuda::Executor (and reads around it), with the
// measurements that set each default. Read from the LLM_CUDA_* environment in one place (executor_options.cpp).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "cuda/half_weights.h"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/matvec_cols.cuh"
#include "cuda/rtc.h"
#include "cuda/weight_layouts.h"

namespace cuda {

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
  // and a paged session's steps of 17..24 tokens in a bucket of 32 instead of 24. LLM_CUDA_WIDE_Q6X8=0: the large
  // regrouped Q6_K products that the wgmma kernel does not take (9..16 tokens) on the fragment kernel instead of the
  // wide one (BatchMmChoices::wide_q6x8).
  // LLM_CUDA_BATCH_MM_WGMMA_MIN, LLM_CUDA_BATCH_MM_WGMMA_LARGE_MIN (large Q4_K) and
  // LLM_CUDA_BATCH_MM_WGMMA_Q6_LARGE_MIN (large Q6_Kx8) =0..65: which products run on batch_mm_wgmma.cuh's kernel
  // (warpgroup tensor cores, 9 tokens and more; WgmmaRoute; 65 for all three: none).
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
  // Prompt products of fewer weights than this (K x N) on the dequantising GEMM (cuBLAS) instead: the wgmma kernel
  // loses on small matrices, whose few tiles leave its split-K bookkeeping and x image unpaid for. H100 (`bench -p T
  // -n 0 -r 3`, two rounds; sessions 72-73), 0 (every size on the kernel) -> 1e7 (the default):
  // - Qwen3-30B-A3B Q4_K_M (q and o 2048 x 4096, k and v 2048 x 512: all four below): pp512 19 498 / 19 387 ->
  //   20 991 / 20 923 (+7.7%), pp256 14 114 / 14 208 -> 16 231 / 16 042, pp128 8 921 / 8 910 -> 10 524 / 10 500.
  // - Llama-3-8B Q4_K_M (k and v 4096 x 1024 below; q and o 4096 x 4096 and the feed-forward above): pp512 25 067 /
  //   25 106 -> 25 381 / 25 619 (5e6), pp256 18 042 / 17 904 -> 18 616 / 18 629, pp128 13 151 / 13 128 -> 14 022 /
  //   13 938. With q and o too (2e7) the 8B gains another ~1.5% at 128 and 256 tokens (14 179 / 14 114, 18 875 /
  //   18 848) and is level at 512, but a 1B's feed-forward (2048 x 8192) would leave the kernel as well, and every
  //   product on cuBLAS costs the 8B 16-38% (not measured on a 1B): 1e7 stays.
  // LLM_CUDA_PROMPT_WGMMA_MIN_KN moves it (0: every size on the wgmma kernel, as before session 72).
  int64_t prompt_wgmma_min_weights = 10'000'000;
  // Two small prompt products of one x and shape on the dequantising GEMM (a layer's k and v) as one batched cuBLAS
  // call (Executor::pair_gemm_siblings): alone each fills under half the GPU. H100 (session 75), `bench -p T -n 0 -r
  // 3`, two rounds: Qwen3-30B-A3B Q4_K_M pp512 21 050 / 21 205 -> 21 614 / 21 639 (+2.4%), pp128 10 790 -> 10 863,
  // pp2048 level; Llama-3-8B Q4_K_M pp512 25 497 / 25 675 -> 25 888 / 25 907 (+1.2%); gpt-oss-20b level. Logits the
  // same bytes on Qwen3-30B-A3B, gpt-oss-20b and the test models (cuBLASLt ran the batch as it ran each product;
  // GpuSession.GemmPairsKeepTheLogits allows summation order). LLM_CUDA_GEMM_PAIRS=0 for A/B runs.
  bool gemm_pairs = true;
  // Prompt products on the dequantising route in a graph with a prompt's expert launches (a mixture's small q, k, v
  // and o) have their half copies made ahead on a side stream (cuda/dequant_ahead.h): device bytes for a ring of
  // three slots; products whose matrices fit a third of it take it. Queued right before the layer's first expert
  // launch (dequant_ahead_anchors) at the device's highest priority (dequant_ahead_urgent), they run beside its
  // tiles. H100 (session 76), `bench -p 512 -n 0 -r 3`, five rounds: Qwen3-30B-A3B Q4_K_M 21 880 / 21 731 / 21 855 /
  // 21 784 / 21 905 -> 22 068 / 22 128 / 22 072 / 22 063 / 22 168 (+1.2%); pp128 +1.3%, pp2048 -0.4%; gpt-oss-20b
  // 20 203 / 20 385 -> 20 443. Forked after the slot's previous product instead (no anchors) they ran beside small
  // launches and slowed them by as much as they saved: level (+0.2% / +0.7%); with anchors at the default priority
  // -3.2% (capped grids then, removed). LLM_CUDA_DEQUANT_AHEAD_MIB=0 for A/B runs.
  size_t dequant_ahead_bytes = size_t(256) << 20;
  bool dequant_ahead_urgent = true;   // LLM_CUDA_DEQUANT_AHEAD_URGENT=0 for A/B runs
  bool dequant_ahead_anchors = true;  // LLM_CUDA_DEQUANT_AHEAD_ANCHORS=0 for A/B runs
  // A graph run as plain launches (not captured: a paged session's prompt steps of more than 64 tokens) computes its
  // prompt products (the wgmma prompt kernel's and cuBLAS's) on the run's live tokens only (Executor::
  // set_live_tokens), not on its bucket's padding: a 401-token prompt in a 512-token step, a 600-token one in a
  // 1 024-token step (H100: that one's first token 36 -> 29 ms, session 67); not in graphs with expert products.
  // LLM_CUDA_LIVE_TOKENS=0 for A/B runs (every column of the bucket computed, as before).
  bool live_tokens = true;
  // Prefill expert products of Q4_K and recoded MXFP4 on moe_fragments.cu's kernels (weights straight into mma
  // fragments); false: moe_gemm.cu's half tiles for every format. LLM_CUDA_MOE_FRAGMENTS=0 for A/B runs.
  bool moe_fragments = true;
  // The prefill expert tiles on a grid of the live (expert, user tile) pairs only (MoeGemmOptions::compact_tiles),
  // instead of experts x T / 64 whose blocks past an expert's count exit (93% of a Qwen3-30B-A3B pp512 down
  // launch's 16 384; Nsight, session 77). H100, session 79: Qwen3-30B-A3B pp512 +3.2%, gpt-oss-20b +0.7%, the same
  // logits. LLM_CUDA_MOE_COMPACT_TILES=0 for A/B runs (the plain grid).
  bool moe_compact_tiles = true;
  // A prompt's router products (float32 partial sums, launch_router_parts) in 64 x 64 tiles, k-major in shared
  // memory, where n_expert % 64 == 0: the same bits as the 16 x 32 tiles, 3 shared loads for 32 fmas instead of 6.
  // Qwen3-30B-A3B Q4_K_M pp512, H100 (session 75): 21 491 / 21 192 against 21 191 / 21 272 alone, 21 748 / 21 870
  // against 21 614 / 21 639 with gemm_pairs. LLM_CUDA_ROUTER_OUTER=0 for A/B runs.
  bool router_outer_tiles = true;
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
  // Paged decode steps of fewer than kPrefillMinTokens tokens, each of its own sequence, f16 cache, plain rope: the
  // split attention launch forms every token's q, k and v itself from the raw products (AttentionNewToken, with the
  // q/k norms where the model has them), so no rope + KV launch runs before it. Such steps run a graph variant of
  // their own; a step with two tokens of one sequence (a prompt chunk) the other. Only where the plan keeps the raw
  // q, k and v intact up to the attention (Executor::raw_heads_intact, session 72's fix). 8B Q4_K_M, H100: bench
  // --parallel 4 +2.0 / +2.8%, 8 +0.5 / +1.1% (session 72). LLM_CUDA_BATCH_NEW_TOKENS=0 for A/B runs.
  bool batch_new_tokens = true;
  // Graphs of kPrefillMinTokens+ tokens take that variant too from this many tokens (their steps of one token a
  // sequence hold no prefill tile, so the prefill launch goes as well); 0: none. 8B Q4_K_M, H100, `bench --parallel
  // ... -p 512 -n 128 --pipeline`, two rounds, off -> 16 (session 73): 16 sequences 3 860 / 3 858 -> 3 703 / 3 699
  // (-4.1%, as session 71 found), 32 5 583 / 5 548 -> 5 665 / 5 668 (+1.8%), 64 8 268 / 8 276 -> 8 418 / 8 431
  // (+1.9%); off -> 32: 24 level, 32 +1.7 / +1.5%, 48 +1.3 / +1.4%. So from 32 (the 16- and 24-token graphs keep
  // the rope + KV launch). LLM_CUDA_BATCH_NEW_TOKENS_WIDE_MIN moves it (0: off).
  int64_t batch_new_tokens_wide_min = 32;
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
  // Lab instrument, timing only (LLM_CUDA_LAB_PAD_MIB; docs/kernel-notes.md, session 80): an executor of a captured
  // (decode) graph first allocates this many bytes it never touches, so that its own buffers land that much further
  // on. gpt-oss-20b decoded 2.5% faster while the prompt graph held its 18 MB ring (session 77) with the same decode
  // graph; this tells whether where the decode buffers land is the cause. Deleted once measured.
  size_t lab_pad_bytes = 0;
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

}  // namespace cuda
