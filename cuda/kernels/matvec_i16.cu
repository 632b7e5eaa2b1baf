// Decode matrix-vector product for one column with int16 activations (v5, docs/kernel-notes.md).
// Layout: a block is 1-4 row slices of one thread per 32-weight unit of K (matvec_i16_units.cuh); the first slice
// loads, optionally RMS-normalises, and quantizes each unit's 32 activations once and shares them (shared memory),
// and every thread then streams over its slice's share of the block's row groups, R rows at a time, with the next
// group's weights loaded before the current one is dotted (the load of group g + slices is in flight while group g
// computes). Grid: just enough blocks for the resident limit, each owning a balanced share of the row groups, so
// blocks live long and x is quantized once per block.
// Row sums: lanes reduce across the warp (butterfly over the R rows), warps across the block once at the end.
// Launched as a programmatic dependent launch (pdl.cuh): the first row group's weights load while the previous
// kernel finishes; x, the residual and the position are read after pdl_wait().
// Wide rows (K / 32 units > kMaxUnits, e.g. the down projections of n_ff 17920-32768): their own instances (kWide),
// where a thread walks `passes` ranges of K in turn (unit pass * tps + u), each range over all its slice's groups,
// adding into the same partial sums; x's runs of every unit are quantized by the whole block into shared memory.
#include <algorithm>
#include <utility>

#include <cuda_fp16.h>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/attention_o.cuh"
#include "cuda/kernels/gelu.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/matvec_i16_limits.cuh"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/reduce.cuh"
#include "cuda/kernels/rope_angle.cuh"
#include "cuda/kernels/swiglu.cuh"

namespace cuda {
namespace {

constexpr int kMaxUnits = kI16MaxUnits;  // threads a slice: K <= 16384 in one pass
constexpr int kMaxSlices = kI16MaxSlices;  // row slices sharing x in a block
constexpr size_t kMaxPartBytes = 48 << 10; // static limit of dynamic shared memory without opt-in
using mv16::load16;
constexpr int kRunFields = 20;  // a unit's two mv16::Run as 32-bit words in shared memory: q[0..7], s, S of each

// 16 values of the 64-bit fixed-point residual stream (attention_o.cuh) as floats, read after pdl_wait(). Each from
// its 32-bit halves, high + low * 2^-32 in one fma (fixed_to_float): a 64-bit integer conversion is a long
// instruction sequence, and here it would sit on every block's critical path (kernel notes, session 15).
__device__ __forceinline__ void load16_fixed(const long long* p, float (&v)[16]) {
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const longlong2 a = reinterpret_cast<const longlong2*>(p)[i];
    v[2 * i] = fixed_to_float(a.x), v[2 * i + 1] = fixed_to_float(a.y);
  }
}

// The matrices of one launch (the main one and its siblings); row groups are numbered across them, group g of
// matrix i being g - first[i] of that matrix (a group never straddles two matrices).
// SwiGLU mode (glu_out set): two matrices of N rows, gate (0) and up (1), with their row groups interleaved
// (group 2i is gate's group i, 2i + 1 up's) so that a block, owning an even number of groups, holds both halves of
// its outputs and writes silu(gate) * up (gelu_tanh(gate) * up in the kGeGlu instances) to glu_out instead of y.
// RoPE + KV epilogue (MatvecParams::rope_kv): role[i] says which of q (0), k (1), v (2) matrix i is.
struct Segments {
  const uint8_t* w[3];
  const float* bias[3];
  float* y[3];
  int64_t N[3];
  int64_t first[4];  // first group of each matrix; first[n] = total groups
  int n;
  float* glu_out;
  int8_t role[3];
};

__device__ __forceinline__ int segment_of(const Segments& sg, int64_t g) {
  if (sg.glu_out) return int(g & 1);
  return g < sg.first[1] ? 0 : (g < sg.first[2] ? 1 : 2);
}

// First row of group g within its matrix s.
template <int R>
__device__ __forceinline__ int64_t group_row0(const Segments& sg, int64_t g, int s) {
  return sg.glu_out ? (g >> 1) * R : (g - sg.first[s]) * R;
}

// Row i of the block's groups: its partial sums from every warp, added in warp order (every epilogue forms y so).
__device__ __forceinline__ float block_sum(const float* part, int64_t cap, int n_warps, int64_t i) {
  float y = 0.0f;
  for (int w = 0; w < n_warps; ++w) y += part[w * cap + i];
  return y;
}

// The RoPE + KV-cache epilogue (MatvecRopeKv): rows in pairs (2i, 2i + 1), never split between blocks or groups
// because a group's first row is a multiple of R (even); each pair's sums are formed as the plain epilogue forms y.
template <int R>
__device__ __forceinline__ void write_rope_kv(const MatvecParams& p, const Segments& sg, const float* part,
                                              int64_t cap, int64_t g0, int64_t g1, int n_warps, int32_t pos) {
  const MatvecRopeKv& e = p.rope_kv;
  const int64_t slot = kv_write_slot(e.paging, 0, pos, e.n_ctx);  // -1: padding, or outside the cache
  const bool in_cache = slot >= 0;
  for (int64_t k = threadIdx.x; k < (g1 - g0) * R / 2; k += blockDim.x) {
    const int64_t i = 2 * k, g = g0 + i / R;
    const int s = segment_of(sg, g);
    const int64_t n = group_row0<R>(sg, g, s) + i % R;
    if (n >= sg.N[s]) continue;  // N is even: n + 1 < N too
    float y0 = block_sum(part, cap, n_warps, i), y1 = block_sum(part, cap, n_warps, i + 1);
    if (sg.bias[s]) y0 += sg.bias[s][n], y1 += sg.bias[s][n + 1];
    const int role = sg.role[s];
    const int64_t hd = role == 2 ? e.head_dim_v : e.head_dim, h = n / hd, d = n % hd;
    if (role != 2 && d < e.n_rot) {
      if (e.ext_factor != 0.0f || e.attn_factor != 1.0f)
        rope_rotate_scaled(pos, e.freq_scale, e.base_powers[d / 2], e.freq_factors, d / 2, e.ext_factor, e.corr_low,
                           e.corr_high, e.attn_factor, y0, y1, y0, y1);
      else
        rope_rotate(pos, e.freq_scale, e.base_powers[d / 2], e.freq_factors, d / 2, y0, y1, y0, y1);
    }
    if (role == 0) {
      e.q_out[n] = y0, e.q_out[n + 1] = y1;
    } else if (in_cache) {
      uint16_t* c = (role == 1 ? e.k_cache : e.v_cache) + (h * e.n_ctx + slot) * hd + d;
      *reinterpret_cast<__half2*>(c) = __floats2half2_rn(y0, y1);  // d even: 4-byte aligned
    }
  }
}

// The fixed-point reader (kFixedX) of slice r < 2: run r of this unit read, normalised (x * w; the sum of squares
// into red) and quantized into the shared-memory fields; the float copy by block u mod grid. Two slices share the
// reader's work: 32 values of 64 bits in one thread would not fit beside the norm's weights. Not inlined: inlined,
// the compiler scheduled the kernel's main loop differently (105 registers against 114) and the gate/up launch took
// ~1.5 us longer (7B tg128 513.8 against 528.1; docs/kernel-notes.md, session 15).
__device__ __noinline__ void read_fixed_run(const long long* x_fixed, float* x_copy, const float* norm_w, float* runs,
                                            float* red, int64_t seg0, int64_t off1, int tps, int slice, int u,
                                            int lane, int warp, int n_warps, bool active, int64_t block) {
  if (slice >= 2) return;  // whole warps
  const int r = slice;
  float v[16], s2 = 0.0f;
  if (active) {
    const int64_t at = seg0 + r * off1;
    load16_fixed(x_fixed + at, v);
    if (x_copy && u % int64_t(gridDim.x) == block) {
#pragma unroll
      for (int i = 0; i < 16; i += 4)
        *reinterpret_cast<float4*>(x_copy + at + i) = make_float4(v[i], v[i + 1], v[i + 2], v[i + 3]);
    }
    if (norm_w) {
      float w[16];
      load16<true>(norm_w + at, w);
#pragma unroll
      for (int i = 0; i < 16; ++i) s2 = fmaf(v[i], v[i], s2), v[i] *= w[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = 0.0f;
  }
  if (norm_w) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) s2 += __shfl_xor_sync(0xffffffffu, s2, o);
    if (lane == 0) red[r * n_warps + warp] = s2;
  }
  const mv16::Run q = mv16::quantize_run(v);
#pragma unroll
  for (int f = 0; f < 8; ++f) runs[(10 * r + f) * tps + u] = __int_as_float(q.q[f]);
  runs[(10 * r + 8) * tps + u] = q.s, runs[(10 * r + 9) * tps + u] = q.S;
}

// Wide rows (kWide): the two runs of x of every unit, read, normalised and quantized by all the block's threads
// (unit i by thread i mod blockDim.x) into shared memory, field f of unit i at runs[f * n_slots + i] (units from K / 32
// to n_slots as zero runs). Returns the folded norm's scale (1 without one) once the barrier has published them.
// Unlike the one-pass launches, whose slice 0 alone reads x, every thread takes a share: a thread here needs the runs
// of `passes` units, so the reading is spread over the block's (up to 512) threads, not one slice's.
template <class U>
__device__ __forceinline__ float quantize_x_wide(const MatvecParams& p, float* runs, float* red, int n_slots) {
  const int64_t n_units = p.K / 32;
  const int lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
  float ss = 0.0f;
  for (int i = int(threadIdx.x); i < n_slots; i += int(blockDim.x)) {
    float xa[16], xb[16];
    if (i < n_units) {
      load16<false>(p.x + U::seg0(i), xa);
      load16<false>(p.x + U::seg0(i) + U::kOff1, xb);
      if (p.norm_w) {
        float wa[16], wb[16];
        load16<true>(p.norm_w + U::seg0(i), wa);
        load16<true>(p.norm_w + U::seg0(i) + U::kOff1, wb);
#pragma unroll
        for (int k = 0; k < 16; ++k) {
          ss = fmaf(xa[k], xa[k], fmaf(xb[k], xb[k], ss));
          xa[k] *= wa[k], xb[k] *= wb[k];
        }
      }
    } else {
#pragma unroll
      for (int k = 0; k < 16; ++k) xa[k] = xb[k] = 0.0f;
    }
    const mv16::Run a = mv16::quantize_run(xa), b = mv16::quantize_run(xb);
#pragma unroll
    for (int f = 0; f < 8; ++f)
      runs[f * n_slots + i] = __int_as_float(a.q[f]), runs[(10 + f) * n_slots + i] = __int_as_float(b.q[f]);
    runs[8 * n_slots + i] = a.s, runs[9 * n_slots + i] = a.S;
    runs[18 * n_slots + i] = b.s, runs[19 * n_slots + i] = b.S;
  }
  if (p.norm_w) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
    if (lane == 0) red[warp] = ss;
  }
  __syncthreads();  // the runs and the norm's partial sums
  if (!p.norm_w) return 1.0f;
  float total = 0.0f;
  for (int w = 0; w < int(blockDim.x) >> 5; ++w) total += red[w];
  return 1.0f / sqrtf(total / float(p.K) + p.norm_eps);
}

// Unit `slot`'s runs from quantize_x_wide's fields, with the norm's scale applied to s and S.
__device__ __forceinline__ void load_runs(const float* runs, int n_slots, int64_t slot, float scale, mv16::Run& x0,
                                          mv16::Run& x1) {
#pragma unroll
  for (int f = 0; f < 8; ++f)
    x0.q[f] = __float_as_int(runs[f * n_slots + slot]), x1.q[f] = __float_as_int(runs[(10 + f) * n_slots + slot]);
  x0.s = runs[8 * n_slots + slot] * scale, x0.S = runs[9 * n_slots + slot] * scale;
  x1.s = runs[18 * n_slots + slot] * scale, x1.S = runs[19 * n_slots + slot] * scale;
}

// Block `block` of a launch over the matrices of sg, all of type T, read by the unit mv16::UnitFor<T, kAlt>.
// The block is `slices` row slices of blockDim.x / slices threads (one per unit, as many as one block had before):
// slice s streams the groups g0 + s, g0 + s + slices, ..., and all of them share the quantized x, which slice 0
// alone reads from L2, normalises and quantizes, then publishes in shared memory. Why: every block reads all of x
// (K floats) right after pdl_wait(), so with one slice per block a 4096-wide launch re-read 16 KiB of x 512 times
// (8 MiB of L2 traffic on the launch's critical path); slices divide that by their count.
// One instantiation serves one slice too (the down projections of K >= 8192): a separate one compiled without the
// sharing made tg128 0.3-0.6% slower (7B, 8B Q4_0 and Q4_K_M, H100; kernel notes, session 13).
// kFixedX: x is read from MatvecParams::x_fixed (64-bit fixed point) by read_fixed_run, which also writes x_copy.
// kWide: rows of more than tps units (K / 32 > kMaxUnits); slice s walks its groups `passes` times, pass q reading
// units q * tps + u of them, and adds each pass's sums into the same partial sums (by the thread that wrote them, so in
// pass order). Why passes and not two units a thread at once: the raw words of R rows of a second unit in flight (and
// its 20 words of x) would not fit beside the first in the 128 registers a 512-thread block allows. One-pass launches
// (K <= 16384) run the instances without it, compiled as before (the same SASS).
// kGeGlu: the SwiGLU epilogue's GeGLU form (MatvecParams::glu_gelu), an instance of its own: its double-precision
// tanh compiled into every instance changed their code (the Q4_K + Q6_K pair launch went from 118 to 112 registers)
// and cost 8B Q4_K_M tg128 0.5% (H100, 444.2 -> 442.0).
template <quant::Type T, int R, bool kAlt, bool kFixedX = false, bool kWide = false, bool kGeGlu = false>
__device__ __forceinline__ void matvec_i16_body(const MatvecParams& p, const Segments& sg, size_t row_bytes,
                                                int64_t groups_per_block, int slices, int64_t block, int passes) {
  static_assert(!kAlt || T == quant::Type::Q6_K, "no alternative unit");
  static_assert(!(kFixedX && kWide), "the fixed-point reader serves one pass");
  using U = typename mv16::UnitFor<T, kAlt>::type;
  // [warps of a slice][groups_per_block * R] partial sums, then (slices > 1) x's runs as mv16::Run fields, SoA:
  // field f (q[0..7], s, S) of run r (0, 1) of unit u at runs[(10 r + f) * tps + u] (kWide: passes * tps units).
  extern __shared__ float part[];
  __shared__ float red[32];
  const int tps = int(blockDim.x) / slices;  // threads per slice, a multiple of 32
  const int slice = int(threadIdx.x) / tps;
  const int u = int(threadIdx.x) % tps, lane = u & 31, warp = u >> 5;
  const int n_warps = tps >> 5;
  const int64_t n_units = p.K / 32;
  const bool active = u < n_units;

  const int64_t n_groups = sg.first[sg.n];
  const int64_t g0 = block * groups_per_block;
  const int64_t g1 = g0 + groups_per_block < n_groups ? g0 + groups_per_block : n_groups;
  const int64_t cap = groups_per_block * R;
  typename U::Raw cur[R], nxt[R];
  // A group's R rows from one pointer (mv16::load_rows): the unit's offset and index are loop-invariant (per pass
  // when wide).
  const uint32_t rb32 = uint32_t(row_bytes);
  const auto load_group = [&](typename U::Raw(&dst)[R], int64_t g, uint32_t unit_offset, int unit_inner) {
    const int i = segment_of(sg, g);
    const int64_t n0 = group_row0<R>(sg, g, i);
    mv16::load_rows<U>(dst, sg.w[i] + n0 * int64_t(row_bytes) + unit_offset, sg.N[i] - 1 - n0, rb32, unit_inner);
  };
  const int64_t first = g0 + slice;  // this slice's first group
  pdl_launch_dependents();
  // Lanes past the last unit (a slice is whole warps; in a wide launch, the last pass's surplus) read the last unit
  // again, and their x is zero runs, so their dots are exactly 0 without a branch around each row's dot.
  const int64_t u_read = active ? u : n_units - 1;
  uint32_t u_offset = U::offset(u_read);
  int u_inner = int(u_read & U::kInner);
  // The first group's weights: before the wait, overlapping the previous kernel.
  if (first < g1) load_group(cur, first, u_offset, u_inner);
  pdl_wait();
  const int32_t pos = p.rope_kv.q_out ? *p.rope_kv.position : 0;  // loaded with x, under the first weights

  // This unit's 32 activations: two runs of 16 (slice 0 reads them; the others get the runs from it). With a folded
  // RMSNorm its weights load together with x, the runs are quantized from x * w before the norm's block sum is known,
  // and the norm's scale multiplies each run's s and S afterwards (the int16 quantization does not depend on a
  // common factor, up to rounding): no second L2 round trip for the weights after the sum, and the barrier that
  // publishes the runs also completes the sum.
  mv16::Run x0, x1;
  float scale = 1.0f;  // kWide: the folded norm's, applied to each pass's runs as they are loaded
  if constexpr (kWide) {
    scale = quantize_x_wide<U>(p, part + n_warps * cap, red, passes * tps);
    load_runs(part + n_warps * cap, passes * tps, u, scale, x0, x1);
  } else if constexpr (kFixedX) {
    // Run r of every unit is read by slice r (read_fixed_run; launch_i16 checks slices >= 2).
    float* runs = part + n_warps * cap;
    const auto field = [&](int r, int f) -> float& { return runs[(10 * r + f) * tps + u]; };
    read_fixed_run(p.x_fixed, p.x_copy, p.norm_w, runs, red, U::seg0(u), U::kOff1, tps, slice, u, lane, warp, n_warps,
                   active, block);
    __syncthreads();  // both runs and the norm's partial sums
#pragma unroll
    for (int f = 0; f < 8; ++f) x0.q[f] = __float_as_int(field(0, f)), x1.q[f] = __float_as_int(field(1, f));
    x0.s = field(0, 8), x0.S = field(0, 9), x1.s = field(1, 8), x1.S = field(1, 9);
    if (p.norm_w) {
      float total = 0.0f;
      for (int w = 0; w < 2 * n_warps; ++w) total += red[w];
      const float scale = 1.0f / sqrtf(total / float(p.K) + p.norm_eps);
      x0.s *= scale, x0.S *= scale, x1.s *= scale, x1.S *= scale;
    }
  } else {
    const bool reader = active && slice == 0;
    float xa[16], xb[16], ss = 0.0f;
    if (reader) {
      load16<false>(p.x + U::seg0(u), xa);
      load16<false>(p.x + U::seg0(u) + U::kOff1, xb);
      if (p.norm_w) {
        float wa[16], wb[16];
        load16<true>(p.norm_w + U::seg0(u), wa);
        load16<true>(p.norm_w + U::seg0(u) + U::kOff1, wb);
#pragma unroll
        for (int i = 0; i < 16; ++i) {
          ss = fmaf(xa[i], xa[i], fmaf(xb[i], xb[i], ss));
          xa[i] *= wa[i], xb[i] *= wb[i];
        }
      }
    } else {
#pragma unroll
      for (int i = 0; i < 16; ++i) xa[i] = xb[i] = 0.0f;
    }
    if (p.norm_w) {
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      if (lane == 0 && slice == 0) red[warp] = ss;
    }
    x0 = mv16::quantize_run(xa), x1 = mv16::quantize_run(xb);
    if (slices > 1) {
      float* runs = part + n_warps * cap;
      const auto field = [&](int r, int f) -> float& { return runs[(10 * r + f) * tps + u]; };
      if (slice == 0) {
#pragma unroll
        for (int f = 0; f < 8; ++f) field(0, f) = __int_as_float(x0.q[f]), field(1, f) = __int_as_float(x1.q[f]);
        field(0, 8) = x0.s, field(0, 9) = x0.S, field(1, 8) = x1.s, field(1, 9) = x1.S;
      }
      __syncthreads();  // the runs and the norm's partial sums
      if (slice != 0) {
#pragma unroll
        for (int f = 0; f < 8; ++f) x0.q[f] = __float_as_int(field(0, f)), x1.q[f] = __float_as_int(field(1, f));
        x0.s = field(0, 8), x0.S = field(0, 9), x1.s = field(1, 8), x1.S = field(1, 9);
      }
    } else if (p.norm_w) {
      __syncthreads();  // the norm's partial sums
    }
    if (p.norm_w) {
      float total = 0.0f;
      for (int w = 0; w < n_warps; ++w) total += red[w];
      const float scale = 1.0f / sqrtf(total / float(p.K) + p.norm_eps);
      x0.s *= scale, x0.S *= scale, x1.s *= scale, x1.S *= scale;
    }
  }

  float* const my_part = part + warp * cap + lane / (32 / R);  // the row sums this lane writes (lane % (32 / R) == 0)
  if constexpr (kWide) {
    // (g, pass) in the order pass 0 over the slice's groups, then pass 1, ...; the next one's weights are loaded
    // before the current one is dotted, across the turn from one pass to the next too.
    int pass = 0;
    for (int64_t g = first; g < g1;) {
      int64_t gn = g + slices;
      int pn = pass;
      if (gn >= g1) gn = first, ++pn;
      const int64_t uc = int64_t(pass) * tps + u, un = int64_t(pn) * tps + u;
      const int64_t un_read = un < n_units ? un : n_units - 1;
      if (pn != pass) u_offset = U::offset(un_read), u_inner = int(un_read & U::kInner);
      if (pn < passes) load_group(nxt, gn, u_offset, u_inner);
      float acc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = U::dot(cur[r], uc < n_units ? uc : n_units - 1, x0, x1);
      const float v = warp_sum_rows<R>(acc, lane);
      if ((lane & (32 / R - 1)) == 0) {
        float& y = my_part[(g - g0) * R];
        y = pass == 0 ? v : y + v;
      }
#pragma unroll
      for (int r = 0; r < R; ++r) cur[r] = nxt[r];
      if (pn == passes) break;
      if (pn != pass) load_runs(part + n_warps * cap, passes * tps, un, scale, x0, x1);
      g = gn, pass = pn;
    }
  } else {
    for (int64_t g = first; g < g1; g += slices) {
      if (g + slices < g1) load_group(nxt, g + slices, u_offset, u_inner);
      float acc[R];
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r] = U::dot(cur[r], u_read, x0, x1);
      const float v = warp_sum_rows<R>(acc, lane);
      if ((lane & (32 / R - 1)) == 0) my_part[(g - g0) * R] = v;
#pragma unroll
      for (int r = 0; r < R; ++r) cur[r] = nxt[r];
    }
  }
  __syncthreads();
  if (p.rope_kv.q_out) {
    write_rope_kv<R>(p, sg, part, cap, g0, g1, n_warps, pos);
    return;
  }
  if (sg.glu_out) {  // pairs of groups: gate rows then up rows of the same R outputs
    for (int64_t k = threadIdx.x; k < (g1 - g0) / 2 * R; k += blockDim.x) {
      const int64_t pair = k / R, r = k % R, n = ((g0 >> 1) + pair) * R + r;
      if (n >= sg.N[0]) continue;
      float gate = block_sum(part, cap, n_warps, 2 * pair * R + r);
      float up = block_sum(part, cap, n_warps, (2 * pair + 1) * R + r);
      if (sg.bias[0]) gate += sg.bias[0][n];
      if (sg.bias[1]) up += sg.bias[1][n];
      if constexpr (kGeGlu)
        sg.glu_out[n] = float(gelu_tanh(gate) * double(up));  // as the GeGlu kernel
      else
        sg.glu_out[n] = silu(gate) * up;  // as the SwiGlu kernels
    }
    return;
  }
  const int64_t rows = (g1 - g0) * R;
  for (int64_t i = threadIdx.x; i < rows; i += blockDim.x) {
    const int64_t g = g0 + i / R;
    const int s = segment_of(sg, g);
    const int64_t n = group_row0<R>(sg, g, s) + i % R;
    if (n >= sg.N[s]) continue;
    float y = block_sum(part, cap, n_warps, i);
    if (sg.bias[s]) y += sg.bias[s][n];
    if (p.residual) y += p.residual[n];  // only without siblings (matvec_fuses)
    sg.y[s][n] = y;
  }
}

template <quant::Type T, int R, bool kAlt, bool kFixedX = false, bool kWide = false, bool kGeGlu = false>
__global__ void __launch_bounds__(kMaxUnits, 1)
    matvec_i16_kernel(MatvecParams p, Segments sg, size_t row_bytes, int64_t groups_per_block, int slices, int passes) {
  matvec_i16_body<T, R, kAlt, kFixedX, kWide, kGeGlu>(p, sg, row_bytes, groups_per_block, slices, blockIdx.x, passes);
}

// Siblings of two types in one launch (a Q4_K_M file's Q4_K q/k with its Q6_K v): blocks [0, blocks_a) run the
// matrices of type TA, the rest those of type TB, all reading the same x.
template <quant::Type TA, int RA, quant::Type TB, int RB, bool kAltB, bool kWide = false>
__global__ void __launch_bounds__(kMaxUnits, 1)
    matvec_i16_pair_kernel(MatvecParams p, Segments sa, Segments sb, size_t rb_a, size_t rb_b, int64_t gpb_a,
                           int64_t gpb_b, int64_t blocks_a, int slices, int passes) {
  if (blockIdx.x < blocks_a)
    matvec_i16_body<TA, RA, false, false, kWide>(p, sa, rb_a, gpb_a, slices, blockIdx.x, passes);
  else
    matvec_i16_body<TB, RB, kAltB, false, kWide>(p, sb, rb_b, gpb_b, slices, blockIdx.x - blocks_a, passes);
}

// Resident blocks per SM of `kernel` at `threads` threads and `smem` bytes of dynamic shared memory (0: it does not
// fit), asked of the driver once per triple (cuda::kernel_blocks_per_sm).
template <class Kernel>
int blocks_per_sm_at(Kernel kernel, int threads, size_t smem) {
  return kernel_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads, smem);
}

// The one-pass launches' occupancy, asked at 1 KiB of dynamic shared memory (registers bound them), at least one.
template <class Kernel>
int blocks_per_sm(Kernel kernel, int threads) {
  return ::std::max(1, blocks_per_sm_at(kernel, threads, 1024));
}

// The matrices of p (main, then siblings) whose type is t, as segments of R-row groups.
Segments segments_of(const MatvecParams& p, quant::Type t, int R) {
  Segments sg{};
  const auto add = [&](const void* w, const float* bias, float* y, int64_t N) {
    sg.w[sg.n] = static_cast<const uint8_t*>(w), sg.bias[sg.n] = bias, sg.y[sg.n] = y, sg.N[sg.n] = N, ++sg.n;
  };
  if (p.type == t) sg.role[sg.n] = 0, add(p.w, p.bias, p.y, p.N);
  for (int i = 0; i < p.n_siblings; ++i)
    if (p.siblings[i].type == t)
      sg.role[sg.n] = int8_t(i + 1), add(p.siblings[i].w, p.siblings[i].bias, p.siblings[i].y, p.siblings[i].N);
  for (int i = 0; i < 3; ++i) sg.first[i + 1] = sg.first[i] + (i < sg.n ? (sg.N[i] + R - 1) / R : 0);
  return sg;
}

// A launch's block shape: `slices` row slices of `tps` threads (one per unit of K) sharing x (matvec_i16_body), as
// many slices as blocks of one slice would be resident on an SM (at most kMaxSlices), so an SM holds the same
// threads in fewer blocks. Wide rows: `passes` ranges of tps units each (passes * tps >= K / 32), and the runs of
// every unit in shared memory whatever the slices.
struct BlockShape {
  int tps, slices, passes = 1;
  int threads() const { return tps * slices; }
  int warps() const { return tps / 32; }  // per slice: the partial sums' rows
  size_t runs_bytes() const { return slices > 1 || passes > 1 ? size_t(kRunFields) * 4 * passes * tps : 0; }
};

template <class Kernel>
BlockShape block_shape(Kernel kernel, const MatvecParams& p) {
  const int tps = i16_threads_per_slice(p.K);
  const int per_sm = blocks_per_sm(kernel, tps);
  const int slices = ::std::min({per_sm, kMaxUnits / tps, kMaxSlices, p.max_slices});
  return {tps, slices < 1 ? 1 : slices};
}

// Wide rows: at most this many passes more than the fewest (K / 16384, rounded up) are weighed.
constexpr int kMaxExtraPasses = 4;
// Wide rows: warp-rows in flight per SM (resident warps x R rows a group) beyond which more did not stream faster in
// the kernel lab (H200, docs/kernel-notes.md): 12 warps of 4 rows as fast as 16, but 16 warps of 2 rows faster than 12.
constexpr int kRowsInFlight = 48;
// Dynamic shared memory a wide block needs beyond x's runs, at least: partial sums of two groups of 4 rows, 16 warps.
constexpr size_t kMinPartBytes = 2 * 4 * 16 * 4;

// x's runs of the fewest passes fit a block's shared memory on this device (matvec_fuses asks; the launcher then
// weighs the other pass counts that fit).
bool wide_runs_fit(int64_t units) {
  const int64_t passes = (units + kMaxUnits - 1) / kMaxUnits, tps = ((units + passes - 1) / passes + 31) / 32 * 32;
  const size_t reserve = 1024;  // the kernels' static shared memory, and more
  return BlockShape{int(tps), 1, int(passes)}.runs_bytes() + kMinPartBytes + reserve <= current_device_smem_optin();
}

// Wide rows (K / 32 > kMaxUnits): tps threads a slice for one of `passes` ranges of K, in whole warps; slices as for
// one pass. The passes are MatvecParams::passes when set, else the count (from the fewest to kMaxExtraPasses more)
// with the most useful rows in flight per SM: resident warps x R, at most kRowsInFlight, times the share of the
// passes' threads that have a unit (the last pass's idle threads stream nothing), the fewest passes among equals.
// E.g. K = 17920 (560 units) at R = 4: 2 passes of 288 threads leave 9 warps a SM (36 rows), 3 of 192 in two slices 12
// (48 rows, 97% used), 5 of 128 in four slices 16 (64, 87.5% used: 48 x 0.875 = 42); at R = 2 the 5 passes win.
template <class Kernel>
BlockShape wide_block_shape(Kernel kernel, const MatvecParams& p, int R, size_t smem_limit) {
  const int64_t units = p.K / 32;
  const int fewest = int((units + kMaxUnits - 1) / kMaxUnits);
  LLM_REQUIRE(p.passes == 0 || (p.passes >= fewest && p.passes * 32 <= units),
              "matvec: passes must be at least K / 16384 (rounded up) and at most K / 1024");
  const int lo = p.passes ? p.passes : fewest, hi = p.passes ? p.passes : fewest + kMaxExtraPasses;
  BlockShape best{0, 0, 0};
  double best_rows = 0.0;
  for (int passes = lo; passes <= hi && int64_t(passes) * 32 <= units; ++passes) {
    const int tps = int(((units + passes - 1) / passes + 31) / 32 * 32);
    if (BlockShape{tps, 1, passes}.runs_bytes() + kMinPartBytes > smem_limit) continue;
    const int slices = ::std::min({blocks_per_sm_at(kernel, tps, 1024), kMaxUnits / tps, kMaxSlices, p.max_slices});
    const BlockShape b{tps, slices < 1 ? 1 : slices, passes};
    const int warps = blocks_per_sm_at(kernel, b.threads(), b.runs_bytes()) * b.threads() / 32;
    const double rows = double(::std::min(warps * R, kRowsInFlight)) * double(units) / double(passes * tps);
    if (rows > best_rows * (1.0 + 1e-9)) best = b, best_rows = rows;
  }
  LLM_REQUIRE(best_rows > 0.0, "matvec: x's runs do not fit in a block's shared memory");
  return best;
}

// Groups per block for n_groups spread over max_blocks blocks, within the part buffer's size (part_bytes: what the
// runs of x leave of the shared memory); an even count when the groups come in (gate, up) pairs (the SwiGLU
// epilogue).
int64_t groups_per_block(int64_t n_groups, int64_t max_blocks, const BlockShape& b, int R, size_t part_bytes,
                         bool pairs = false) {
  int64_t gpb = (n_groups + max_blocks - 1) / max_blocks;
  int64_t cap = int64_t(part_bytes / (size_t(b.warps()) * R * 4));
  if (pairs) gpb = (gpb + 1) & ~int64_t(1), cap &= ~int64_t(1);
  return gpb < cap ? gpb : cap;
}

// A wide launch's resident blocks per SM with its runs of x and up to part_bytes of partial sums (at least one).
template <class Kernel>
int wide_blocks_per_sm(Kernel kernel, const BlockShape& b, size_t part_bytes) {
  const int bps = blocks_per_sm_at(kernel, b.threads(), b.runs_bytes() + part_bytes);
  return bps > 0 ? bps : 1;
}

template <quant::Type T, int R, bool kAlt = false, bool kFixedX = false, bool kWide = false, bool kGeGlu = false>
void launch_i16(const MatvecParams& p, size_t rb, cudaStream_t stream) {
  constexpr auto kernel = matvec_i16_kernel<T, R, kAlt, kFixedX, kWide, kGeGlu>;
  Segments sg = segments_of(p, T, R);
  if (p.swiglu_out) {  // gate first (swapped when it is the sibling)
    if (p.swiglu_gate_is_sibling)
      ::std::swap(sg.w[0], sg.w[1]), ::std::swap(sg.bias[0], sg.bias[1]), ::std::swap(sg.y[0], sg.y[1]);
    sg.glu_out = p.swiglu_out;
  }
  const int64_t n_groups = sg.first[sg.n];
  BlockShape b;
  int bps;
  size_t part_bytes;
  if constexpr (kWide) {
    static const size_t limit = kernel_opt_in_smem(reinterpret_cast<const void*>(kernel));
    b = wide_block_shape(kernel, p, R, limit);
    part_bytes = ::std::min(kMaxPartBytes, limit - b.runs_bytes());
    // Occupancy with the partial sums of a one-block-per-SM share (+1: a (gate, up) pair), no less than any grid
    // of more blocks will need.
    const int64_t sms = current_device_sm_count();
    const size_t share = size_t(b.warps()) * R * 4 * size_t((n_groups + sms - 1) / sms + 1);
    bps = wide_blocks_per_sm(kernel, b, ::std::min(part_bytes, share));
  } else {
    b = block_shape(kernel, p);
    bps = blocks_per_sm(kernel, b.threads());
    part_bytes = kMaxPartBytes - b.runs_bytes();
  }
  LLM_REQUIRE(!kFixedX || b.slices >= 2, "fixed-point x: two row slices read its two runs");
  const int64_t resident = int64_t(current_device_sm_count()) * bps;
  const int64_t gpb = groups_per_block(n_groups, resident, b, R, part_bytes, p.swiglu_out != nullptr);
  const int64_t grid = (n_groups + gpb - 1) / gpb;
  LLM_REQUIRE(grid <= 0x7fffffff, "too many rows");
  const size_t smem = size_t(b.warps()) * size_t(gpb) * R * 4 + b.runs_bytes();
  launch_pdl(kernel, dim3(unsigned(grid)), dim3(unsigned(b.threads())), smem, stream, p, sg, rb, gpb, b.slices,
             b.passes);
}

// Main of type TA (with same-type siblings) plus siblings of type TB: the resident blocks are shared in proportion
// to each type's bytes.
template <quant::Type TA, int RA, quant::Type TB, int RB, bool kAltB = false, bool kWide = false>
void launch_i16_pair(const MatvecParams& p, cudaStream_t stream) {
  constexpr auto kernel = matvec_i16_pair_kernel<TA, RA, TB, RB, kAltB, kWide>;
  BlockShape b;
  int bps;
  size_t part_bytes;
  if constexpr (kWide) {
    static const size_t limit = kernel_opt_in_smem(reinterpret_cast<const void*>(kernel));
    b = wide_block_shape(kernel, p, RA, limit);  // the main matrix's rows a group
    part_bytes = ::std::min(kMaxPartBytes, limit - b.runs_bytes());
    bps = wide_blocks_per_sm(kernel, b, part_bytes);
  } else {
    b = block_shape(kernel, p);
    bps = blocks_per_sm(kernel, b.threads());
    part_bytes = kMaxPartBytes - b.runs_bytes();
  }
  const size_t rb_a = quant::row_bytes(TA, p.K), rb_b = quant::row_bytes(TB, p.K);
  const Segments sa = segments_of(p, TA, RA), sb = segments_of(p, TB, RB);
  const double bytes_a = double(sa.first[sa.n]) * RA * rb_a, bytes_b = double(sb.first[sb.n]) * RB * rb_b;
  const int64_t total = int64_t(current_device_sm_count()) * bps;
  int64_t max_a = int64_t(double(total) * bytes_a / (bytes_a + bytes_b) + 0.5);
  max_a = max_a < 1 ? 1 : (max_a > total - 1 ? total - 1 : max_a);
  const int64_t gpb_a = groups_per_block(sa.first[sa.n], max_a, b, RA, part_bytes);
  const int64_t gpb_b = groups_per_block(sb.first[sb.n], total - max_a, b, RB, part_bytes);
  const int64_t blocks_a = (sa.first[sa.n] + gpb_a - 1) / gpb_a, blocks_b = (sb.first[sb.n] + gpb_b - 1) / gpb_b;
  LLM_REQUIRE(blocks_a + blocks_b <= 0x7fffffff, "too many rows");
  const size_t smem =
      size_t(b.warps()) * 4 * size_t(gpb_a * RA > gpb_b * RB ? gpb_a * RA : gpb_b * RB) + b.runs_bytes();
  launch_pdl(kernel, dim3(unsigned(blocks_a + blocks_b)), dim3(unsigned(b.threads())), smem, stream, p, sa, sb, rb_a,
             rb_b, gpb_a, gpb_b, blocks_a, b.slices, b.passes);
}

// The one-pass instances, or the wide ones for rows of more than kMaxUnits units.
template <quant::Type T, int R, bool kAlt = false>
void launch_i16_rows(const MatvecParams& p, size_t rb, cudaStream_t stream) {
  const bool wide = p.K / 32 > kMaxUnits;
  if (p.swiglu_out && p.glu_gelu)
    wide ? launch_i16<T, R, kAlt, false, true, true>(p, rb, stream)
         : launch_i16<T, R, kAlt, false, false, true>(p, rb, stream);
  else
    wide ? launch_i16<T, R, kAlt, false, true>(p, rb, stream) : launch_i16<T, R, kAlt>(p, rb, stream);
}
template <quant::Type TA, int RA, quant::Type TB, int RB, bool kAltB = false>
void launch_i16_pair_rows(const MatvecParams& p, cudaStream_t stream) {
  if (p.K / 32 > kMaxUnits) launch_i16_pair<TA, RA, TB, RB, kAltB, true>(p, stream);
  else launch_i16_pair<TA, RA, TB, RB, kAltB>(p, stream);
}

}  // namespace

bool matvec_i16_wide_runs_fit(int64_t units) { return wide_runs_fit(units); }

// Called by launch_matvec once matvec_fuses(p) holds.
void launch_matvec_i16(const MatvecParams& p, cudaStream_t stream) {
  const size_t rb = quant::row_bytes(p.type, p.K);
  // R = 4 rows per step for the 4-bit formats (~125 registers, 4 blocks of 128 threads per SM); 2 for Q6_K / Q8_0,
  // whose raw words at R = 4 spill, and for short matrices, where R = 2 keeps more blocks in flight.
  int64_t rows = p.N;  // of the main matrix's type
  bool mixed = false;
  for (int i = 0; i < p.n_siblings; ++i) {
    if (p.siblings[i].type == p.type) rows += p.siblings[i].N;
    else mixed = true;
  }
  const bool small = (rows + 3) / 4 < 2 * int64_t(current_device_sm_count());
  if (mixed) {  // matvec_fuses admitted only Q4_K with Q6_K siblings
    if (p.q6_kx8)
      small ? launch_i16_pair_rows<quant::Type::Q4_K, 2, quant::Type::Q6_K, 2, true>(p, stream)
            : launch_i16_pair_rows<quant::Type::Q4_K, 4, quant::Type::Q6_K, 2, true>(p, stream);
    else
      small ? launch_i16_pair_rows<quant::Type::Q4_K, 2, quant::Type::Q6_K, 2>(p, stream)
            : launch_i16_pair_rows<quant::Type::Q4_K, 4, quant::Type::Q6_K, 2>(p, stream);
    return;
  }
  switch (p.type) {
    case quant::Type::Q4_K:
      small ? launch_i16_rows<quant::Type::Q4_K, 2>(p, rb, stream)
            : launch_i16_rows<quant::Type::Q4_K, 4>(p, rb, stream);
      break;
    case quant::Type::Q4_0:
      if (p.x_fixed)  // matvec_fuses: same-type siblings only
        p.swiglu_out && p.glu_gelu ? launch_i16<quant::Type::Q4_0, 4, false, true, false, true>(p, rb, stream)
                                   : launch_i16<quant::Type::Q4_0, 4, false, true>(p, rb, stream);
      else
        small ? launch_i16_rows<quant::Type::Q4_0, 2>(p, rb, stream)
              : launch_i16_rows<quant::Type::Q4_0, 4>(p, rb, stream);
      break;
    case quant::Type::Q6_K:
      // Regrouped: 4 rows for an LM head (dozens of groups per block: 152 us against 158 at R = 2 on the 8B's),
      // else 2 (the 8B's v and down projections: R = 4 made tg128 1% slower).
      if (p.q6_kx8 && (rows + 3) / 4 >= 16 * int64_t(current_device_sm_count()))
        launch_i16_rows<quant::Type::Q6_K, 4, true>(p, rb, stream);
      else if (p.q6_kx8)
        launch_i16_rows<quant::Type::Q6_K, 2, true>(p, rb, stream);
      else
        launch_i16_rows<quant::Type::Q6_K, 2>(p, rb, stream);
      break;
    case quant::Type::Q8_0: launch_i16_rows<quant::Type::Q8_0, 2>(p, rb, stream); break;
    default: throw InvalidArgument("matvec_i16: unsupported type");
  }
}

}  // namespace cuda
