// Which launches the int16 decode matvec (matvec_i16.cu) takes: matvec_fuses, the executor's question before it
// plans any fusion, and its parts (formats, row alignment, the epilogues' shapes, wide rows).
#include <cstdint>

#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/matvec_i16_limits.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "quant/types.h"

namespace cuda {
namespace {

// The q/k/v shapes the RoPE + KV epilogue serves (MatvecRopeKv): whole heads of even length, k and v beside q.
bool rope_kv_epilogue_fits(const MatvecParams& p) {
  const MatvecRopeKv& e = p.rope_kv;
  if (!e.k_cache || !e.v_cache || !e.position || !e.base_powers || e.n_ctx <= 0) return false;
  if (p.n_siblings != 2 || p.residual || p.swiglu_out) return false;
  if (e.head_dim <= 0 || e.head_dim % 2 || e.head_dim_v <= 0 || e.head_dim_v % 2) return false;
  if (e.n_rot <= 0 || e.n_rot % 2 || e.n_rot > e.head_dim) return false;
  const int64_t n_kv = p.siblings[0].N / e.head_dim;
  return p.N % e.head_dim == 0 && p.siblings[0].N % e.head_dim == 0 && n_kv > 0 &&
         p.siblings[1].N == n_kv * e.head_dim_v;
}

bool i16_type(quant::Type t) {
  return t == quant::Type::Q4_K || t == quant::Type::Q6_K || t == quant::Type::Q4_0 || t == quant::Type::Q8_0;
}

// Siblings of another type than the main matrix: only Q6_K ones beside a Q4_K main (Q4_K_M files keep some
// attn_v in Q6_K), the pair launch's one instantiated combination.
bool mixed_pair_supported(quant::Type main, quant::Type sibling) {
  return main == quant::Type::Q4_K && sibling == quant::Type::Q6_K;
}

}  // namespace

bool matvec_fuses(const MatvecParams& p) {
  const auto a = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  // Whether matrices of type t are regrouped in this launch (q6_kx8.cuh, whose fits() checks whole runs of 8 blocks
  // and 16-byte alignment); 16-byte loads for those and Q4_K. The others' blocks (Q6_K 210 bytes, Q8_0 34, Q4_0 18)
  // are read by 2-byte aligned loads (load_a2) wherever they start, so their rows need 2 bytes: a Q6_K row of an odd
  // number of blocks (K = 3840, Gemma-3-12B's attn_v and tied output) starts at 2 mod 4 every other row, and with 4
  // required those fell to the generic kernel (357 GB/s, H200).
  const auto x8 = [&](quant::Type t) { return t == quant::Type::Q6_K && p.q6_kx8; };
  const auto wa = [&](quant::Type t) -> size_t { return t == quant::Type::Q4_K || x8(t) ? 16 : 2; };
  const auto rows_fit = [&](quant::Type t, const void* w) {  // K whole blocks, rows aligned for the unit loads
    if (!i16_type(t) || !w || p.K % quant::traits(t).block_elems != 0) return false;
    if (x8(t) && !q6_kx8_fits(w, p.K)) return false;
    return a(w) % wa(t) == 0 && quant::row_bytes(t, p.K) % wa(t) == 0;
  };
  if (p.path != MatvecPath::Auto || p.T != 1 || !i16_type(p.type) || (!p.x && !p.x_fixed)) return false;
  // The fixed-point x: one instantiation, Q4_0 without other-type siblings, no rope epilogue, one pass.
  if (p.x_fixed && (p.type != quant::Type::Q4_0 || p.rope_kv.q_out || p.x || p.K / 32 > kI16MaxUnits)) return false;
  if (p.K <= 0 || p.K % 32 != 0 || !rows_fit(p.type, p.w)) return false;
  if (p.K / 32 > kI16MaxUnits && !matvec_i16_wide_runs_fit(p.K / 32)) return false;  // wide rows: x's runs in shared memory
  if (p.n_siblings < 0 || p.n_siblings > MatvecParams::kMaxSiblings || (p.n_siblings > 0 && p.residual)) return false;
  for (int i = 0; i < p.n_siblings; ++i) {
    const auto& b = p.siblings[i];
    if (!b.y || b.N <= 0 || !rows_fit(b.type, b.w)) return false;
    if (b.type != p.type && !mixed_pair_supported(p.type, b.type)) return false;
  }
  if (p.swiglu_out && (p.n_siblings != 1 || p.siblings[0].type != p.type || p.siblings[0].N != p.N)) return false;
  if (p.rope_kv.q_out && !rope_kv_epilogue_fits(p)) return false;
  return (p.x ? a(p.x) : a(p.x_fixed)) % 16 == 0 && (!p.norm_w || a(p.norm_w) % 16 == 0);
}

}  // namespace cuda
