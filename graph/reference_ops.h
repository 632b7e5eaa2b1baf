// The CPU reference kernels, one params struct each, shapes in GGUF order. The executor (reference.cpp) unpacks a node
// into these; tests and other modules may call them directly. Floats in, floats out; sums and transcendental
// functions are evaluated in double and rounded once, and no result depends on how work is split over threads.
#pragma once
#include <cstdint>
#include <span>

#include "graph/ir.h"
#include "quant/types.h"

namespace graph {

class ThreadPool;

namespace ref {

// Σ a[k]·b[k] in double (products of floats are exact in double), in a fixed summation order.
double dot(const float* a, const float* b, int64_t n);

struct MulMatArgs {
  const float* w = nullptr;     // [K, N]: N rows of K; or null, with wq:
  const uint8_t* wq = nullptr;  // N rows of K elements of `wtype`, row_bytes apart, dequantized one row at a time
  quant::Type wtype = quant::Type::F32;
  size_t row_bytes = 0;
  const float* x = nullptr;     // [K, T]
  const float* bias = nullptr;  // [N] or null
  float* out = nullptr;         // [N, T]
  int64_t k = 0, n = 0, t = 0;
};
void mul_mat(const MulMatArgs& a, ThreadPool* pool);

struct RmsNormArgs {
  const float* x = nullptr;  // [ne0, rows]
  const float* w = nullptr;  // [ne0] or null
  float* out = nullptr;      // [ne0, rows]
  int64_t ne0 = 0, rows = 0;
  float eps = 0.0f;
};
void rms_norm(const RmsNormArgs& a);

struct RopeArgs {
  const float* x = nullptr;             // [head_dim, n_head, T]
  const int32_t* positions = nullptr;   // [T]
  const float* freq_factors = nullptr;  // [n_rot / 2] or null
  float* out = nullptr;                 // [head_dim, n_head, T]
  int64_t head_dim = 0, n_head = 0, t = 0;
  RopeParams p;
  double* trig = nullptr;               // scratch: n_rot doubles
};
void rope(const RopeArgs& a);

struct AttentionArgs {
  const float* q = nullptr;            // [head_dim, n_head, T]
  const float* k = nullptr;            // [head_dim, n_head_kv, T]
  const float* v = nullptr;            // [head_dim_v, n_head_kv, T]
  const int32_t* positions = nullptr;  // [T], each in [0, n_ctx) (paged: [-1, max_blocks * block_size), -1 padding)
  float* k_cache = nullptr;            // this layer: [head_dim, n_head_kv, n_ctx]
  float* v_cache = nullptr;            // this layer: [head_dim_v, n_head_kv, n_ctx]
  // Paged cache (block_size > 0): token t's position p is slot block_table[kv_seq[t] * max_blocks + p / block_size]
  // * block_size + p % block_size (graph/ir.h, Op::Attention).
  const int32_t* kv_seq = nullptr;     // [T], each in [0, n_seq)
  const int32_t* block_table = nullptr;// [n_seq][max_blocks], each in [0, n_ctx / block_size)
  int32_t block_size = 0, max_blocks = 0, n_seq = 0;
  const float* sinks = nullptr;        // [n_head] when p.sinks: one more logit per head in the softmax denominator
  KvType kv_type = KvType::F16;        // Q8_0, Q4_0: values enter the cache quantized and dequantized (graph/ir.h),
                                       // per head in blocks of 32; F16 keeps them as given (floats, the exact
                                       // reference)
  float* out = nullptr;                // [head_dim_v * n_head, T]
  int64_t t = 0, n_ctx = 0;
  AttentionParams p;
  double* scratch = nullptr;           // per thread: scratch_stride doubles (thread i at i * scratch_stride)
  int64_t scratch_stride = 0;          // attention_scratch_per_thread(the graph's kv)
};
// Doubles of scratch one thread needs: a score per position a query can see, and an accumulator.
int64_t attention_scratch_per_thread(const KvCacheSpec& kv);
// Throws std::out_of_range (before touching the cache) when a position lies outside the cache, or (paged) a token's
// row or a block it reaches lies outside the block table or the pool.
void attention(const AttentionArgs& a, ThreadPool* pool);

// Element-wise ops over n elements; for mul, b may hold only nb = ne0 elements, broadcast over rows.
void add(const float* a, const float* b, float* out, int64_t n);
void mul(const float* a, const float* b, int64_t nb, float* out, int64_t n);
void silu(const float* a, float* out, int64_t n);
void swiglu(const float* gate, const float* up, float* out, int64_t n);
// GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), evaluated in double. (llama.cpp's CPU
// backend instead rounds x to f16 and reads a table of f16 results, about 1e-3 relative from this.)
double gelu_tanh(double x);
void geglu(const float* gate, const float* up, float* out, int64_t n);     // gelu_tanh(gate) * up
void scale(const float* a, float s, float* out, int64_t n);                // a * s
void softcap(const float* a, float cap, float* out, int64_t n);            // cap * tanh(a / cap)
// Elements [offset, offset + n) of each of `rows` rows of ne0 elements, packed into out [n, rows].
void slice(const float* a, int64_t ne0, int64_t rows, int64_t offset, int64_t n, float* out);
void softmax(const float* a, float* out, int64_t ne0, int64_t rows);        // per row of ne0
void argmax(const float* a, int32_t* out, int64_t ne0, int64_t rows);       // per row, lower index on ties

// ---- mixture of experts (reference_moe.cpp) ----

// The k largest of each row of n, largest first, equal values in index order: out [k, rows].
void top_k(const float* a, int32_t* out, int64_t n, int64_t k, int64_t rows);

struct MoeWeightsArgs {
  const float* scores = nullptr;  // [n_expert, T]
  const int32_t* ids = nullptr;   // [k, T], each in [0, n_expert)
  float* out = nullptr;           // [k, T]
  int64_t n_expert = 0, k = 0, t = 0;
  MoeWeightsParams p;
};
// Throws std::out_of_range for an id outside [0, n_expert).
void moe_weights(const MoeWeightsArgs& a);

struct MulMatIdArgs {
  const float* w = nullptr;       // [K, N, n_expert] as floats; or null, with wq:
  const uint8_t* wq = nullptr;    // the same as N * n_expert rows of `wtype`, row_bytes apart (rows dequantized as
  quant::Type wtype = quant::Type::F32;  // they are read: only the chosen experts' rows)
  size_t row_bytes = 0;
  const float* x = nullptr;       // [K, x_slots, T], x_slots 1 (shared by the k experts of a token) or k
  const int32_t* ids = nullptr;   // [k, T]
  const float* bias = nullptr;    // [N, n_expert] or null
  float* out = nullptr;           // [N, k, T]
  int64_t K = 0, N = 0, n_expert = 0, x_slots = 1, k = 0, t = 0;
};
// Every output element is one dot product in the fixed order of dot() (plus its bias): the same for any grouping
// of tokens into batches or of work over threads. Throws std::out_of_range for an id outside [0, n_expert).
void mul_mat_id(const MulMatIdArgs& a, ThreadPool* pool);

void swiglu_oai(const float* gate, const float* up, float* out, int64_t n, const SwiGluOaiParams& p);
// out [ne0, T] = sum over j < k of w[j, t] a[:, j, t] (j ascending, in double).
void weighted_sum(const float* a, const float* w, float* out, int64_t ne0, int64_t k, int64_t t);

}  // namespace ref
}  // namespace graph
