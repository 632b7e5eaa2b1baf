// ExecutorOptions::from_env: every LLM_CUDA_* switch read in one place (see executor.h).
#include <algorithm>
#include <cstdlib>
#include <string>
#include <string_view>

#include "cuda/check.h"
#include "cuda/executor_options.h"

namespace cuda {

namespace {

// An on/off switch: unset or empty keeps the default, "0" and "1" set it; anything else is refused, so a typo does
// not silently measure the wrong build.
bool read_flag(const char* name, bool default_value) {
  const char* e = std::getenv(name);
  if (!e || !*e) return default_value;
  const std::string_view v = e;
  if (v == "0") return false;
  if (v == "1") return true;
  throw InvalidArgument(std::string(name) + "=" + e + ": expected 0 or 1");
}

// A token count 0..max: unset or empty keeps the default; anything else is refused, as for read_flag.
int64_t read_count(const char* name, int64_t default_value, int64_t max) {
  const char* e = std::getenv(name);
  if (!e || !*e) return default_value;
  char* end = nullptr;
  const long long v = std::strtoll(e, &end, 10);
  if (*end != '\0' || v < 0 || v > max)
    throw InvalidArgument(std::string(name) + "=" + e + ": expected 0.." + std::to_string(max));
  return v;
}

}  // namespace

ExecutorOptions ExecutorOptions::from_env() {
  ExecutorOptions o;
  o.cuda_graph = read_flag("LLM_CUDA_GRAPH", o.cuda_graph);
  o.rtc_kernels = read_flag("LLM_CUDA_RTC", o.rtc_kernels);
  o.layouts.q6_kx8 = read_flag("LLM_CUDA_Q6_KX8", o.layouts.q6_kx8);
  o.layouts.attention_o = read_flag("LLM_CUDA_ATTN_O", o.layouts.attention_o);
  o.layouts.rope_pairs = read_flag("LLM_CUDA_ROPE_PAIRS", o.layouts.rope_pairs);
  o.layouts.mxfp4_recode = read_flag("LLM_CUDA_MXFP4_RECODE", o.layouts.mxfp4_recode);
  o.decode_ahead = read_flag("LLM_CUDA_DECODE_AHEAD", o.decode_ahead);
  o.device_draws = read_flag("LLM_CUDA_DEVICE_DRAWS", o.device_draws);
  o.batch_mm_min_tokens = read_count("LLM_CUDA_BATCH_MM_MIN", o.batch_mm_min_tokens, kBatchMmMaxTokens);
  o.batch_mm_max_tokens = read_count("LLM_CUDA_BATCH_MM_MAX", o.batch_mm_max_tokens, kBatchMmMaxTokens);
  o.batch_mm.wide = read_flag("LLM_CUDA_BATCH_MM_WIDE", o.batch_mm.wide);
  o.batch_mm.wide_three_sets_min_tokens =
      read_count("LLM_CUDA_WIDE_THREE_SETS_MIN", o.batch_mm.wide_three_sets_min_tokens, kBatchMmMaxTokens + 1);
  o.batch_mm.wide_three_tiles = read_flag("LLM_CUDA_WIDE_THREE_TILES", o.batch_mm.wide_three_tiles);
  o.batch_mm.wide_q6x8 = read_flag("LLM_CUDA_WIDE_Q6X8", o.batch_mm.wide_q6x8);
  o.batch_mm.wgmma.min_tokens =
      read_count("LLM_CUDA_BATCH_MM_WGMMA_MIN", o.batch_mm.wgmma.min_tokens, kBatchMmMaxTokens + 1);
  o.batch_mm.wgmma.large_min_tokens =
      read_count("LLM_CUDA_BATCH_MM_WGMMA_LARGE_MIN", o.batch_mm.wgmma.large_min_tokens, kBatchMmMaxTokens + 1);
  o.batch_mm.wgmma.q6x8_large_min_tokens = read_count("LLM_CUDA_BATCH_MM_WGMMA_Q6_LARGE_MIN",
                                                      o.batch_mm.wgmma.q6x8_large_min_tokens, kBatchMmMaxTokens + 1);
  o.batch_mm.programmatic = read_flag("LLM_CUDA_BATCH_MM_PDL", o.batch_mm.programmatic);
  o.batch_mm.i8 = read_flag("LLM_CUDA_BATCH_MM_I8", o.batch_mm.i8);
  o.batch_mm.i8_warps_per_sm = int(read_count("LLM_CUDA_I8_WARPS_PER_SM", o.batch_mm.i8_warps_per_sm, 64));
  if (o.batch_mm.i8_warps_per_sm < 1) throw InvalidArgument("LLM_CUDA_I8_WARPS_PER_SM=0: expected 1..64");
  o.batch_mm.i8_q6x8 = read_flag("LLM_CUDA_I8_Q6X8", o.batch_mm.i8_q6x8);
  o.batch_mm.i8_max_tokens = read_count("LLM_CUDA_I8_MAX_TOKENS", o.batch_mm.i8_max_tokens, kBatchMmI8MaxTokens);
  o.programmatic_norms = read_flag("LLM_CUDA_NORM_PDL", o.programmatic_norms);
  o.glu_epilogue = read_flag("LLM_CUDA_GLU_EPILOGUE", o.glu_epilogue);
  o.glu_images = read_flag("LLM_CUDA_GLU_IMAGES", o.glu_images);
  o.glu_images_i8 = read_flag("LLM_CUDA_GLU_IMAGES_I8", o.glu_images_i8);
  o.norm_images = read_flag("LLM_CUDA_NORM_IMAGES", o.norm_images);
  o.tiles_after_split = read_flag("LLM_CUDA_TILES_AFTER_SPLIT", o.tiles_after_split);
  o.attention_half_x = read_flag("LLM_CUDA_ATTN_HALF_X", o.attention_half_x);
  o.paged_run_bases = read_flag("LLM_CUDA_PAGED_RUN_BASES", o.paged_run_bases);
  o.prompt_wgmma = read_flag("LLM_CUDA_PROMPT_WGMMA", o.prompt_wgmma);
  o.prompt_wgmma_max_tokens = read_count("LLM_CUDA_PROMPT_WGMMA_MAX", o.prompt_wgmma_max_tokens, int64_t(1) << 20);
  o.prompt_wgmma_min_weights =
      read_count("LLM_CUDA_PROMPT_WGMMA_MIN_KN", o.prompt_wgmma_min_weights, int64_t(1) << 40);
  o.gemm_pairs = read_flag("LLM_CUDA_GEMM_PAIRS", o.gemm_pairs);
  o.dequant_ahead_urgent = read_flag("LLM_CUDA_DEQUANT_AHEAD_URGENT", o.dequant_ahead_urgent);
  o.dequant_ahead_anchors = read_flag("LLM_CUDA_DEQUANT_AHEAD_ANCHORS", o.dequant_ahead_anchors);
  o.dequant_ahead_bytes =
      size_t(read_count("LLM_CUDA_DEQUANT_AHEAD_MIB", int64_t(o.dequant_ahead_bytes >> 20), int64_t(1) << 20)) << 20;
  o.live_tokens = read_flag("LLM_CUDA_LIVE_TOKENS", o.live_tokens);
  o.moe_fragments = read_flag("LLM_CUDA_MOE_FRAGMENTS", o.moe_fragments);
  o.moe_compact_tiles = read_flag("LLM_CUDA_MOE_COMPACT_TILES", o.moe_compact_tiles);
  o.router_outer_tiles = read_flag("LLM_CUDA_ROUTER_OUTER", o.router_outer_tiles);
  o.moe_glu_out = read_flag("LLM_CUDA_MOE_GLU_OUT", o.moe_glu_out);
  o.moe_glu_pairs = read_flag("LLM_CUDA_MOE_GLU_PAIRS", o.moe_glu_pairs);
  o.moe_route_in_experts = read_flag("LLM_CUDA_MOE_ROUTE_IN_EXPERTS", o.moe_route_in_experts);
  o.moe_norm = read_flag("LLM_CUDA_MOE_NORM", o.moe_norm);
  o.new_token_attention = read_flag("LLM_CUDA_NEW_TOKEN_ATTENTION", o.new_token_attention);
  o.new_token_pdl = read_flag("LLM_CUDA_NEW_TOKEN_PDL", o.new_token_pdl);
  o.batch_new_tokens = read_flag("LLM_CUDA_BATCH_NEW_TOKENS", o.batch_new_tokens);
  o.batch_new_tokens_wide_min =
      read_count("LLM_CUDA_BATCH_NEW_TOKENS_WIDE_MIN", o.batch_new_tokens_wide_min, int64_t(1) << 20);
  o.scaled_rope_epilogue = read_flag("LLM_CUDA_SCALED_ROPE_EPILOGUE", o.scaled_rope_epilogue);
  o.new_token_q_split = read_count("LLM_CUDA_NEW_TOKEN_QSPLIT", o.new_token_q_split, 4);
  o.glu_pdl = read_flag("LLM_CUDA_GLU_PDL", o.glu_pdl);
  o.paged_host_io = read_flag("LLM_CUDA_PAGED_HOST_IO", o.paged_host_io);
  o.staging_event = read_flag("LLM_CUDA_STAGING_EVENT", o.staging_event);
  o.matvec_cols_max_tokens = read_count("LLM_CUDA_MATVEC_COLS_MAX", o.matvec_cols_max_tokens, kMatvecColsMaxTokens);
  o.lab_pad_bytes = size_t(read_count("LLM_CUDA_LAB_PAD_MIB", int64_t(o.lab_pad_bytes >> 20), 4096)) << 20;
  // Timing only (scripts/gpu-step-shares.sh): comma-separated node names whose steps are left out.
  if (const char* e = std::getenv("LLM_CUDA_OMIT_STEPS"); e && *e)
    for (std::string_view s = e; !s.empty();) {
      const size_t comma = std::min(s.find(','), s.size());
      if (comma > 0) o.omit_steps_of.emplace_back(s.substr(0, comma));
      s.remove_prefix(std::min(comma + 1, s.size()));
    }
  return o;
}

}  // namespace cuda
