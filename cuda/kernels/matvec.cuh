// Decode matrix-vector products y = W x for every weight type, reading each weight byte once.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/kv_paging.cuh"
#include "quant/types.h"

namespace cuda {

// Which kernel serves a launch. Auto: for one column (T = 1) of Q4_0, Q8_0, Q4_K, Q6_K the int16-activation kernel
// (matvec_i16.cu) when it applies, else the float unit kernel (matvec.cu) when the pointers are aligned for it, else
// the generic chunk kernel. Unit and Generic force those kernels (lab comparisons, tests).
enum class MatvecPath { Auto, Unit, Generic };

// A sibling matrix of a matvec launch (MatvecParams::siblings). Its type is the main matrix's, or Q6_K beside a Q4_K
// main (Q4_K_M files keep some attn_v in Q6_K), which then runs in the same launch on its own blocks.
// A plain aggregate (no member initializers: GCC 12 then refuses MatvecParams braced lists as function arguments);
// MatvecParams value-initializes its siblings, and a zero type (F32) is refused.
struct MatvecSibling {
  const void* w;
  const float* bias;
  float* y;
  int64_t N;
  quant::Type type;
};

// RoPE and the KV-cache write as the epilogue of a q/k/v launch (MatvecParams::rope_kv): the main matrix is q
// ([head_dim, n_head] rows), siblings[0] k ([head_dim, n_head_kv]) and siblings[1] v ([head_dim_v, n_head_kv]).
// q is rotated into q_out; k rotated and v as is are written as f16 into the cache slot of *position (layout of
// cuda/kernels/attention.cuh; through the block table of token 0's row when `paging` has one; nothing for padding or
// a slot outside [0, n_ctx)); no product is stored in y.
// Pairs are adjacent rows (RopeMode::Normal) rotated as rope_angle.cuh does. A plain aggregate, as MatvecSibling.
struct MatvecRopeKv {
  float* q_out;                  // null: no epilogue
  uint16_t* k_cache;             // this layer's caches
  uint16_t* v_cache;
  const int32_t* position;       // device memory
  const double* base_powers;     // device memory, [n_rot / 2] (rope_base_powers)
  const float* freq_factors;     // [n_rot / 2] or null
  float freq_scale;
  int32_t n_rot;                 // even, <= head_dim
  int32_t head_dim;              // even
  int32_t head_dim_v;            // even
  int64_t n_ctx;
  KvPaging paging;               // a paged cache's block tables (kv_paging.cuh); none: slot = position
  // YaRN's ramp and the attention factor (graph::RopeParams; rope_rotate_scaled), as the rope kernel applies them
  // (gpt-oss's q and k). The defaults, ext_factor 0 and attn_factor 1, are the plain rotation.
  float ext_factor = 0.0f, corr_low = 0.0f, corr_high = 0.0f, attn_factor = 1.0f;
};

struct MatvecParams {
  const void* w = nullptr;     // [K, N]: N rows of K elements of `type`, quant::row_bytes(type, K) bytes apart
  quant::Type type = quant::Type::F32;
  const float* x = nullptr;    // [K, T]: column t at x + t*K
  const float* bias = nullptr; // [N] or null, added to every column
  float* y = nullptr;          // [N, T]: column t at y + t*N
  int64_t K = 0;
  int64_t N = 0;
  int64_t T = 1;               // columns; every column re-reads W (use the GEMM path for T > a few)
  MatvecPath path = MatvecPath::Auto;
  // Fusions, only where matvec_fuses() says so: x is first RMS-normalised and scaled by norm_w ([K]), as the
  // RmsNorm op does (x / sqrt(mean(x^2) + norm_eps) * norm_w); `residual` ([N]) is added to y.
  const float* norm_w = nullptr;
  float norm_eps = 0.0f;
  const float* residual = nullptr;
  // x as the residual stream's 64-bit fixed point (kFixedOne units, attention_o.cuh) instead of floats at x (int16
  // kernel, Q4_0 only); x_copy, when set, receives x as floats (spread over the blocks) for a later residual add.
  const long long* x_fixed = nullptr;
  float* x_copy = nullptr;
  // The SwiGlu op as the epilogue of gate and up in one launch: with one sibling of the same type and N, write
  // silu(gate) * up ([N]) here instead of either product. The gate is the main matrix, or the sibling if so flagged.
  // glu_gelu: the GeGlu op instead, gelu_tanh(gate) * up.
  float* swiglu_out = nullptr;
  bool swiglu_gate_is_sibling = false;
  bool glu_gelu = false;
  // More matrices of the same K that read the same x, computed in the same launch (int16 kernel only, no
  // residual): q/k/v or gate/up as one launch, with x loaded and quantized once per block (MatvecSibling).
  using Sibling = MatvecSibling;
  static constexpr int kMaxSiblings = 2;
  Sibling siblings[kMaxSiblings] = {};
  int n_siblings = 0;
  MatvecRopeKv rope_kv = {};
  // The launch's Q6_K matrices, all of them, regrouped at upload by runs of 8 blocks (q6_kx8.cuh), not as in GGUF.
  bool q6_kx8 = false;
  // Rows of more units than one block has threads (K > 16384, int16 kernel): how many ranges of K each thread walks
  // in turn (at least K / 16384, rounded up); 0 leaves the choice to the launcher. The kernel lab and the tests set it
  // to time and cover the other block shapes. An int16_t in the padding after q6_kx8: the struct, a kernel argument,
  // keeps its size and layout.
  int16_t passes = 0;
  // At most this many row slices sharing x in a block (1: one); tests lower it to cover the fewer-slice paths that
  // smaller devices and wider rows take.
  int max_slices = 4;
};

// True when launch_matvec(p) takes the int16-activation kernel, which is also the one that can apply norm_w and
// residual (the other kernels refuse them).
bool matvec_fuses(const MatvecParams& p);

// Throws cuda::InvalidArgument on bad params, quant::UnsupportedType for types without a kernel.
void launch_matvec(const MatvecParams& p, cudaStream_t stream);

}  // namespace cuda
