// Attention over the f16 KV cache: write the batch's new K/V at positions read from device memory, then attend
// causally (query t sees cache slots [0, positions[t]]) with the sequence split into fixed chunks whose partial
// softmax states are merged by a combine step (flash-decoding), so a single decode token still fills the GPU.
// Cache layout per layer: K [head_dim, n_ctx, n_head_kv] (each kv head's slots contiguous), V likewise with hd_v.
// Element types (graph::KvType): f16 values; or q8_0, int8 quants in that same layout beside one binary16 scale per
// 32 values along the head dimension, scales [head_dim / 32, n_ctx, n_head_kv] (value = q * scale; GGUF Q8_0
// rounding, graph/ir.h); or q4_0, half a byte per value ([head_dim / 2, n_ctx, n_head_kv] bytes, each 32-value block
// as GGUF Q4_0's 16 quant bytes: kv_q4_0.cuh) beside the same scales. The quantized caches are read by the two
// tensor-core kernels only (head_dim = hd_v = 64, 128 or 256; the split kernel's groups 1/2/4/8): kv_quant_supported
// says which shapes, and launch_attention refuses the others.
// A paged cache (KvPaging, kv_paging.cuh) keeps the layout with n_ctx the pool's slots; every writer and reader maps a
// token's positions to slots through its block-table row, position -1 is padding (nothing written, a zero output),
// and a batch may hold several sequences: launch_attention runs the prefill kernel over per-run query tiles of one
// sequence each (paged_batch.h) and the split kernels over the other tokens.
#pragma once
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "cuda/kernels/kv_paging.cuh"
#include "graph/ir.h"

namespace cuda {

struct KvWriteParams {
  const float* k = nullptr;          // [hd, n_head_kv, T]
  const float* v = nullptr;          // [hd_v, n_head_kv, T]
  const int32_t* positions = nullptr;// [T], device; slots outside [0, n_ctx) are skipped (validated by the host)
  void* k_cache = nullptr;           // this layer: [hd, n_ctx, n_head_kv] binary16 (int8 for q8_0, nibbles for q4_0)
  void* v_cache = nullptr;           // this layer: [hd_v, n_ctx, n_head_kv] likewise
  int64_t n_ctx = 0;
  int64_t n_head_kv = 0;
  int64_t hd = 0;
  int64_t hd_v = 0;
  int64_t T = 0;
  graph::KvType kv_type = graph::KvType::F16;
  uint16_t* k_scales = nullptr;      // q8_0, q4_0: this layer's [hd / 32, n_ctx, n_head_kv] binary16 scales; else null
  uint16_t* v_scales = nullptr;      // q8_0, q4_0: [hd_v / 32, n_ctx, n_head_kv]
  KvPaging paging = {};              // a paged cache: slots through the block table; default: slot = position
};
void launch_kv_write(const KvWriteParams& p, cudaStream_t stream);

// A decode step's q and new K/V formed by the attention launch itself from the raw q/k/v products
// (attention_new_token.cuh): AttentionKernelParams::q is then the raw q; each q and k head is normalised where norm
// weights are given (Qwen 3, Gemma 3: both or neither) and rotated by the plain rope (no YaRN ramp, no cos/sin
// factor), and k and v go into the cache at the token's slot. Set k to ask for it; only the tensor-core split kernel
// does it: one token, or a paged step without prefill tiles whose tokens are each of its own sequence; an f16 cache,
// head_dim = hd_v (launch_attention refuses the rest).
struct AttentionNewToken {
  const float* k = nullptr;             // [hd, n_head_kv, T], the raw k product
  const float* v = nullptr;             // [hd_v, n_head_kv, T]
  const float* q_norm_w = nullptr;      // [hd] or null (then k_norm_w null too: no norms)
  const float* k_norm_w = nullptr;      // [hd] or null
  const double* base_powers = nullptr;  // [n_rot / 2] in device memory (rope_base_powers)
  const float* freq_factors = nullptr;  // [n_rot / 2] or null
  float freq_scale = 1.0f;
  float norm_eps = 0.0f;
  int32_t n_rot = 0;                    // even, <= hd; dimensions from n_rot on pass through
  graph::RopeMode mode = graph::RopeMode::Normal;
  // Launched as a programmatic dependent of the q/k/v launch (pdl.cuh): the rope angles and the first tile's cached
  // slots are read before its wait, q, k and v after it.
  bool programmatic = false;
  // A KV head's G q heads spread over 2^q_split_shift blocks (0, 1 or 2; G >> shift >= 1), each forming its own
  // heads and (every block of the token's slot) the same new k and v: more blocks at short contexts, where a KV
  // head's one block formed and rotated nine heads in turn (Qwen3-30B-A3B: four blocks a launch). The executor's
  // ExecutorOptions::new_token_q_split.
  int32_t q_split_shift = 0;
};

struct AttentionKernelParams {
  const float* q = nullptr;          // [hd, n_head, T]
  const int32_t* positions = nullptr;// [T], device
  const void* k_cache = nullptr;     // this layer, as KvWriteParams
  const void* v_cache = nullptr;
  float* out = nullptr;              // [hd_v, n_head, T]
  // Or null: the same outputs rounded to half (__float2half_rn, as launch_x_to_half rounds) at the same index, for a
  // product after the launch that reads its x in half (Executor::half_x_for): that product's conversion launch goes.
  // T > 1 only (a one-token step's o product reads float x).
  __half* out_half = nullptr;
  float* partial = nullptr;          // scratch: attention_scratch_floats(...) floats, zeroed once before the first
                                     // launch (its tail holds counters the kernels leave at zero)
  int64_t n_ctx = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;             // divides n_head (GQA: head h reads kv head h / (n_head / n_head_kv))
  int64_t hd = 0;                    // even, <= 256
  int64_t hd_v = 0;                  // even, <= 256
  int64_t T = 0;
  float scale = 1.0f;
  int32_t max_splits = 0;            // splits per (head, token) at most (attention_max_splits); the split length
                                     // is chosen on the device from each token's position, so capture-safe
  int32_t window = 0;                // > 0: the query at position p sees only slots (p - window, p] (sliding-window
                                     // layers); the tensor-core kernels alone implement it, by masking
  graph::KvType kv_type = graph::KvType::F16;
  const uint16_t* k_scales = nullptr;// q8_0, q4_0: as KvWriteParams; else null
  const uint16_t* v_scales = nullptr;
  KvPaging paging = {};              // a paged cache; positions up to max_blocks * block_size, -1 padding
  // Attention sinks (gpt-oss; graph/ir.h AttentionParams::sinks): per-head logits s_h that join each softmax's
  // denominator unscaled (a column of value s_h and no V row). The tensor-core kernels alone take them
  // (kv_quant_supported shapes): the prefill kernel at its final normalisation, the split kernel where its one split
  // or the merge of its splits forms the sum.
  const float* sinks = nullptr;      // [n_head] or null
  // Paged batches of kPrefillMinTokens+ tokens: the prefill kernel's query tiles, {n_tiles, (t0, n) x max_tiles}
  // in device memory, and tiled[T] (non-zero: a tile attends token t, the split kernels skip it), written per run
  // (PagedTiles, paged_batch.h). Null tiles: tiles of 64 consecutive tokens of one sequence, as without paging.
  const int32_t* tiles = nullptr;
  const int32_t* tiled = nullptr;
  int32_t max_tiles = 0;
  // Only with tiles: the prefill launch after the split launch of the step's other tokens instead of before it,
  // overlapping it (programmatic; the two write different tokens' outputs), so that a step of decode tokens alone,
  // which has no tile, costs the split launch and not a second launch after it. The prefill grid's block (0, 0)
  // waits for the split grid before ending, so that the launch reading both waits for both (pdl.cuh).
  bool tiles_after_split = false;
  AttentionNewToken new_token = {};  // k set: q is the raw q of one decode token (above)
};

// Whether the attention kernels read a quantized (q8_0, q4_0) cache of this shape (head_dim = hd_v = 64, 128 or 256,
// n_head / n_head_kv 1, 2, 4 or 8); the executor refuses other shapes with a message before any launch.
bool kv_quant_supported(int64_t n_head, int64_t n_head_kv, int64_t hd, int64_t hd_v);
// Whether a kernel masks a sliding window for this shape: the tensor-core kernels' shapes (kv_quant_supported).
bool window_supported(int64_t n_head, int64_t n_head_kv, int64_t hd, int64_t hd_v);
// The refusal for a shape kv_quant_supported rejects: what is needed and what this shape has (for error messages).
::std::string kv_quant_refusal(graph::KvType type, int64_t n_head, int64_t n_head_kv, int64_t hd, int64_t hd_v);

// Most splits a (head, token) is cut into for a cache of n_ctx slots and a batch of T tokens: enough that
// n_head_kv * T * splits blocks fill the device (sm_count multiprocessors), no split shorter than 16 slots.
int32_t attention_max_splits(int64_t n_ctx, int64_t n_head_kv, int64_t T, int sm_count);
size_t attention_scratch_floats(int64_t n_head, int64_t hd_v, int64_t T, int32_t max_splits);

void launch_attention(const AttentionKernelParams& p, cudaStream_t stream);

}  // namespace cuda
