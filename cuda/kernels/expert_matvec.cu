// The chosen experts' decode products with their neighbours fused in (expert_matvec.cuh).
// A block is `slices` row slices of tps threads, one thread per 32-weight unit of K (tps = K / 32 rounded up to a
// warp), as the dense int16 matvec (matvec_i16.cu): each thread dots its unit of kR rows at a time with x's int16
// runs (matvec_i16_units.cuh), the next rows' weights loaded before the current ones are dotted.
// - expert_glu: grid (row chunks, k, T). The block's slot has one expert and one input column: the first slice
//   quantizes x once into shared memory for all slices, and every group is kR rows of gate and the same kR rows of
//   up, so the block holds both halves of its outputs and writes act(gate, up).
// - expert_down: grid (row chunks, T). The block's rows are summed over the token's k slots, so it quantizes the k
//   input columns into shared memory, and slice s takes the slots s, s + slices, ...; each thread adds its slots'
//   products times their routing weights before the warp sums, and the block adds the slices' sums in slice order.
// Why these shapes: experts' rows are short (K = 768-4096, 24-128 units), so one block per matrix row range, as the
// float matvec_id kernel has, left most of its 128 threads idle and reached 7-20% of the copy bandwidth (docs/moe.md).
#include "cuda/kernels/expert_matvec.cuh"

#include <algorithm>
#include <initializer_list>
#include <numeric>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/moe_route_block.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"
#include "cuda/kernels/reduce.cuh"
#include "cuda/kernels/swiglu.cuh"

namespace cuda {
namespace {

constexpr int kR = 2;                 // rows of a group, per matrix
static_assert(kR % 2 == 0, "expert_down's slot pointers follow its partial sums 8-byte aligned");
constexpr int kMaxThreads = 256;      // a block: slices x tps
constexpr int kMaxUnits = kMaxThreads;
constexpr int kRunWords = 20;         // a unit's two runs as 32-bit words: q[0..7], s, S of each
constexpr size_t kMaxSmem = 48 << 10; // dynamic shared memory without opt-in

template <quant::Type T>
constexpr bool kHasUnit = T == quant::Type::Q4_0 || T == quant::Type::Q8_0 || T == quant::Type::Q4_K ||
                          T == quant::Type::Q6_K || T == quant::Type::MXFP4;

// Run h (0, 1) of unit u of the column x, quantized into shared memory: field f of run h at runs[(10 h + f) *
// stride + u]. Plain loads: the previous kernel wrote x (pdl.cuh).
template <class U>
__device__ __forceinline__ void put_run(const float* x, int u, int h, float* runs, int stride) {
  float a[16];
  mv16::load16<false>(x + U::seg0(u) + (h ? U::kOff1 : 0), a);
  const mv16::Run r = mv16::quantize_run(a);
  float* at = runs + 10 * h * stride + u;
#pragma unroll
  for (int f = 0; f < 8; ++f) at[f * stride] = __int_as_float(r.q[f]);
  at[8 * stride] = r.s, at[9 * stride] = r.S;
}

// Both runs of unit u (put_run).
template <class U>
__device__ __forceinline__ void put_runs(const float* x, int u, float* runs, int stride) {
  put_run<U>(x, u, 0, runs, stride);
  put_run<U>(x, u, 1, runs, stride);
}

__device__ __forceinline__ void get_runs(const float* runs, int stride, int u, mv16::Run& x0, mv16::Run& x1) {
#pragma unroll
  for (int f = 0; f < 8; ++f)
    x0.q[f] = __float_as_int(runs[f * stride + u]), x1.q[f] = __float_as_int(runs[(10 + f) * stride + u]);
  x0.s = runs[8 * stride + u], x0.S = runs[9 * stride + u];
  x1.s = runs[18 * stride + u], x1.S = runs[19 * stride + u];
}

// A run as expert_glu hands it to expert_down (kExpertRunBytes): q[0..7], s, S, two words of padding.
__device__ __forceinline__ void store_run(void* at, const mv16::Run& r) {
  uint4* o = static_cast<uint4*>(at);
  o[0] = make_uint4(r.q[0], r.q[1], r.q[2], r.q[3]);
  o[1] = make_uint4(r.q[4], r.q[5], r.q[6], r.q[7]);
  o[2] = make_uint4(__float_as_uint(r.s), __float_as_uint(r.S), 0u, 0u);
}

// Unit u's two runs from the handed-over runs of one column (run i at column + i kExpertRunBytes) into the
// shared-memory fields, as put_runs writes them.
template <class U>
__device__ __forceinline__ void copy_runs(const uint8_t* column, int64_t u, float* runs, int stride) {
  const uint4* a = reinterpret_cast<const uint4*>(column + (U::seg0(u) / 16) * kExpertRunBytes);
  const uint4* b = reinterpret_cast<const uint4*>(column + ((U::seg0(u) + U::kOff1) / 16) * kExpertRunBytes);
  const uint4 a0 = a[0], a1 = a[1], a2 = a[2], b0 = b[0], b1 = b[1], b2 = b[2];
  const uint32_t fa[10] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w, a2.x, a2.y};
  const uint32_t fb[10] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w, b2.x, b2.y};
#pragma unroll
  for (int f = 0; f < 10; ++f)
    runs[f * stride + u] = __uint_as_float(fa[f]), runs[(10 + f) * stride + u] = __uint_as_float(fb[f]);
}

struct Shape {
  int tps;     // threads per slice
  int slices;
  int gpb;     // row groups per block
  unsigned chunks;
  size_t smem;
  size_t route_at;  // the route's scratch (route::Shared), bytes into the dynamic shared memory
};

// Where a block's routing scratch goes: after the rest (with a route: ExpertGluParams::route).
void add_route_scratch(Shape& s, const MoeRouteSource& r) {
  s.route_at = route_scratch_at(s.smem);
  if (r.logits) s.smem = s.route_at + kRouteBlockSmem;
}

__device__ __forceinline__ route::Shared& route_scratch(float* sh, size_t route_at) {
  return *reinterpret_cast<route::Shared*>(reinterpret_cast<char*>(sh) + route_at);
}

template <quant::Type T, bool kRecoded>
__global__ void __launch_bounds__(kMaxThreads) expert_glu_kernel(ExpertGluParams p, size_t row_bytes, int gpb,
                                                                 int slices, size_t route_at) {
  using U = typename mv16::UnitFor<T, kRecoded>::type;
  using Raw = typename U::Raw;
  extern __shared__ float sh[];
  const int tps = int(blockDim.x) / slices, slice = int(threadIdx.x) / tps, u = int(threadIdx.x) % tps;
  const int lane = u & 31, warp = u >> 5;
  const int n_warps = tps >> 5;
  const bool active = u < p.K / 32;
  const int N = int(p.N), n_groups = (N + kR - 1) / kR;
  const int g0 = int(blockIdx.x) * gpb, g1 = g0 + gpb < n_groups ? g0 + gpb : n_groups;
  const int64_t j = blockIdx.y, t = blockIdx.z;
  float* runs = sh;                   // [kRunWords][tps]
  float* part = sh + kRunWords * tps; // [n_warps][gpb][2 kR]: gate rows, then up rows
  const int cap = gpb * 2 * kR;
  float* hv = part + n_warps * cap;   // runs_out: the block's outputs [gpb kR], then quantized by runs of 16
  if (!p.programmatic) pdl_launch_dependents();
  pdl_wait();  // no-op for a plain launch (expert_matvec.cuh)
  if (p.programmatic) pdl_launch_dependents();  // the down launch reads the ids before its own wait
  int32_t e;
  if (p.route.logits) {  // the block's own routing of its token (uniform: every thread takes part)
    route::Shared& rs = route_scratch(sh, route_at);
    route::route_token(rs, p.route, t, false);
    e = rs.id[j];
  } else {
    e = p.ids[t * p.k + j];
  }
  float* y = p.out ? p.out + (t * p.k + j) * p.N : nullptr;
  const int n_end = g1 * kR < N ? g1 * kR : N;
  uint8_t* runs_out = p.runs_out ? static_cast<uint8_t*>(p.runs_out) + (t * p.k + j) * (p.N / 16) * kExpertRunBytes
                                 : nullptr;
  if (e < 0 || e >= p.n_expert) {
    if (runs_out) {
      for (int r = g0 * kR / 16 + int(threadIdx.x); r < n_end / 16; r += int(blockDim.x))
        store_run(runs_out + size_t(r) * kExpertRunBytes, mv16::Run{});
    } else {
      for (int n = g0 * kR + int(threadIdx.x); n < n_end; n += int(blockDim.x)) y[n] = 0.0f;
    }
    return;
  }
  const size_t expert_bytes = size_t(N) * row_bytes;
  const uint8_t* wg = static_cast<const uint8_t*>(p.gate) + size_t(e) * expert_bytes;
  const uint8_t* wu = static_cast<const uint8_t*>(p.up) + size_t(e) * expert_bytes;
  // Lanes past the last unit read the last unit again and dot it with zero runs of x (exactly 0): no branch around
  // a row's dot. A group's rows from one pointer (mv16::load_rows).
  const int n_units = int(p.K / 32);
  const int u_read = active ? u : n_units - 1, u_inner = u_read & U::kInner;
  const uint32_t u_offset = U::offset(u_read), rb32 = uint32_t(row_bytes);
  const auto load = [&](Raw(&dg)[kR], Raw(&du)[kR], int g) {
    if constexpr (mv16::kSplitUnit<U>) {  // recoded MXFP4 (mxfp4_recode.cuh): codes, then scales, per expert
      const uint32_t nb = uint32_t(n_units);
      const size_t codes = size_t(g * kR) * nb * 16 + u_offset;
      const size_t scales = size_t(N) * nb * 16 + size_t(g * kR) * nb + u_read;
      mv16::load_split_rows<U>(dg, wg + codes, wg + scales, N - 1 - g * kR, nb);
      mv16::load_split_rows<U>(du, wu + codes, wu + scales, N - 1 - g * kR, nb);
    } else {
      const size_t at = size_t(g * kR) * row_bytes + u_offset;
      mv16::load_rows<U>(dg, wg + at, N - 1 - g * kR, rb32, u_inner);
      mv16::load_rows<U>(du, wu + at, N - 1 - g * kR, rb32, u_inner);
    }
  };
  Raw cg[kR], cu[kR], ng[kR], nu[kR];
  const int first = g0 + slice;
  // The first two groups in flight while x is quantized (one, then the next only after the barrier: gpt-oss-20b,
  // eight groups a slice, tg128 607.7 -> 617.9 on an H200; Qwen3-30B-A3B, four, level; session 45).
  if (first < g1) load(cg, cu, first);
  if (first + slices < g1) load(ng, nu, first + slices);
  // x's runs, one a thread (two units' worth of threads take one unit each), so that the barrier waits for one run.
  for (int i = int(threadIdx.x); i < 2 * n_units; i += int(blockDim.x)) {
    const int h = i >= n_units;
    put_run<U>(p.x + t * p.K, i - h * n_units, h, runs, tps);
  }
  // A folded norm's scale: its sums' loads issued before the barrier, used after it.
  const float scale = p.norm_ss ? route::folded_norm_scale(p.norm_ss, p.norm_parts, p.T, t, p.K, p.norm_eps) : 1.0f;
  __syncthreads();
  mv16::Run x0{}, x1{};
  if (active) get_runs(runs, tps, u, x0, x1);
  if (p.norm_ss) x0.s *= scale, x0.S *= scale, x1.s *= scale, x1.S *= scale;
#pragma unroll 2
  for (int g = first; g < g1; g += slices) {
    float acc[2 * kR];
#pragma unroll
    for (int r = 0; r < kR; ++r) {
      acc[r] = U::dot(cg[r], u_read, x0, x1);
      acc[kR + r] = U::dot(cu[r], u_read, x0, x1);
    }
    const float v = warp_sum_rows<2 * kR>(acc, lane);
    if ((lane & (32 / (2 * kR) - 1)) == 0) part[warp * cap + (g - g0) * 2 * kR + lane / (32 / (2 * kR))] = v;
#pragma unroll
    for (int r = 0; r < kR; ++r) cg[r] = ng[r], cu[r] = nu[r];
    if (g + 2 * slices < g1) load(ng, nu, g + 2 * slices);
  }
  __syncthreads();
  for (int i = int(threadIdx.x); i < (g1 - g0) * kR; i += int(blockDim.x)) {
    const int gl = i / kR, r = i % kR, n = g0 * kR + i;
    if (n >= N) continue;
    float gs = 0.0f, us = 0.0f;
    for (int w = 0; w < n_warps; ++w) gs += part[w * cap + gl * 2 * kR + r], us += part[w * cap + gl * 2 * kR + kR + r];
    if (p.gate_bias) gs += p.gate_bias[int64_t(e) * p.N + n];
    if (p.up_bias) us += p.up_bias[int64_t(e) * p.N + n];
    const float h = activate(p.act, gs, us, p.alpha, p.limit);
    if (runs_out) {
      hv[i] = h;
    } else {
      y[n] = h;
    }
  }
  if (!runs_out) return;
  __syncthreads();
  // The block's rows start and end on runs of 16 (the launcher's groups per block, N a multiple of 16).
  for (int r = int(threadIdx.x); r < (n_end - g0 * kR) / 16; r += int(blockDim.x))
    store_run(runs_out + size_t(g0 * kR / 16 + r) * kExpertRunBytes, mv16::quantize_run(hv + 16 * r));
}

template <quant::Type T, bool kRecoded>
__global__ void __launch_bounds__(kMaxThreads) expert_down_kernel(ExpertDownParams p, size_t row_bytes, int gpb,
                                                                  int slices, size_t route_at) {
  using U = typename mv16::UnitFor<T, kRecoded>::type;
  using Raw = typename U::Raw;
  extern __shared__ float sh[];
  const int tps = int(blockDim.x) / slices, slice = int(threadIdx.x) / tps, u = int(threadIdx.x) % tps;
  const int lane = u & 31, warp = u >> 5;
  const int n_warps = tps >> 5;
  const int n_units = int(p.K / 32);
  const bool active = u < n_units;
  const int N = int(p.N), n_groups = (N + kR - 1) / kR;
  const int g0 = int(blockIdx.x) * gpb, g1 = g0 + gpb < n_groups ? g0 + gpb : n_groups;
  const int64_t t = blockIdx.y;
  const int k = int(p.k);
  float* runs = sh;                           // [k][kRunWords][tps]
  float* part = sh + k * kRunWords * tps;     // [slices][n_warps][gpb][kR]
  const int cap = gpb * kR;
  // Each slot's expert rows (null: no expert), after the partial sums (8-byte aligned: see down_shape).
  const uint8_t** slot_w = reinterpret_cast<const uint8_t**>(part + slices * n_warps * cap);
  const int32_t* ids = p.route.logits ? nullptr : p.ids + t * p.k;  // with a route: the block's own choices
  const float* weights = p.route.logits ? nullptr : p.weights + t * p.k;
  const size_t expert_bytes = size_t(N) * row_bytes;
  const auto expert_rows = [&](int j) -> const uint8_t* {
    const int32_t e = ids[j];
    return e >= 0 && e < p.n_expert ? static_cast<const uint8_t*>(p.w) + size_t(e) * expert_bytes : nullptr;
  };
  pdl_launch_dependents();
  if (p.route.logits) {  // the block's own routing of its token, from scores written before the gate/up launch
    route::Shared& rs = route_scratch(sh, route_at);
    route::route_token(rs, p.route, t, true);
    ids = rs.id, weights = rs.weight;
  }
  // The first two tasks' weights: before the wait where the ids were written before the previous launch began
  // (ExpertDownParams::ids_before_wait, or a route), so that they stream while the gate/up launch finishes.
  const bool ids_early = p.ids_before_wait || p.route.logits;
  const int nj = (k - slice + slices - 1) / slices;  // this slice's slots: slice + jj * slices, jj < nj (>= 1)
  const int n_tasks = (g1 - g0) * nj;
  const uint32_t u_offset = U::offset(u), rb32 = uint32_t(row_bytes);
  const int u_inner = u & U::kInner;
  const auto load = [&](Raw(&d)[kR], const uint8_t* w, int gi) {
    if (!w) return;
    const int g = g0 + gi;
    if constexpr (mv16::kSplitUnit<U>) {  // recoded MXFP4 (mxfp4_recode.cuh)
      const uint32_t nb = uint32_t(n_units);
      mv16::load_split_rows<U>(d, w + size_t(g * kR) * nb * 16 + u_offset,
                               w + size_t(N) * nb * 16 + size_t(g * kR) * nb + u, N - 1 - g * kR, nb);
    } else {
      mv16::load_rows<U>(d, w + size_t(g * kR) * row_bytes + u_offset, N - 1 - g * kR, rb32, u_inner);
    }
  };
  // Tasks (group gi, slot jj) in order: jj counts up to nj, then the next group.
  const auto advance = [&](int& gi, int& jj) {
    jj = jj + 1 == nj ? 0 : jj + 1;
    if (jj == 0) ++gi;
  };
  // w0 and w1 in turn (w0 the even tasks, w1 the odd), each loaded again as soon as it is dotted: two tasks' weights
  // in flight while a warp waits (the form with cur = nxt after each dot waited for the next task's at the copy).
  Raw w0[kR], w1[kR];
  int ga = 0, ja = 0;  // the task whose weights load next
  if (!ids_early) pdl_wait();
  if (active && n_tasks > 0) load(w0, expert_rows(slice + ja * slices), ga);
  advance(ga, ja);
  if (active && n_tasks > 1) load(w1, expert_rows(slice + ja * slices), ga);
  advance(ga, ja);
  if (ids_early) pdl_wait();
  for (int i = int(threadIdx.x); i < k; i += int(blockDim.x)) slot_w[i] = expert_rows(i);
  for (int i = int(threadIdx.x); i < k * n_units; i += int(blockDim.x)) {
    const int j = i / n_units, uu = i - j * n_units;
    float* at = runs + j * kRunWords * tps;
    if (p.x_runs) {
      copy_runs<U>(static_cast<const uint8_t*>(p.x_runs) + (t * p.k + j) * (p.K / 16) * kExpertRunBytes, uu, at, tps);
    } else {
      put_runs<U>(p.x + (t * p.k + j) * p.K, uu, at, tps);
    }
  }
  __syncthreads();  // the runs and slot_w

  // Tasks (group, this slice's slot jj); groups outer so each group's slots end together. A task's indices advance
  // by counting (no division in the loop); with one slot a slice (k = slices: Qwen3-MoE's top 8 at K <= 2048) its
  // x runs and weight stay in registers.
  mv16::Run x0, x1;
  float wj = 0.0f;
  const auto slot_inputs = [&](int jj) {
    const int j = slice + jj * slices;
    get_runs(runs + j * kRunWords * tps, tps, u, x0, x1);
    wj = weights[j];
  };
  if (active) slot_inputs(0);
  float acc[kR] = {};
  int gi = 0, jj = 0;
  const auto task = [&](Raw(&w)[kR], int q) {
    if (nj > 1 && active && jj > 0) slot_inputs(jj);
    if (slot_w[slice + jj * slices] && active) {
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = fmaf(wj, U::dot(w[r], u, x0, x1), acc[r]);
    }
    if (active && q + 2 < n_tasks) load(w, slot_w[slice + ja * slices], ga);
    advance(ga, ja);
    if (jj == nj - 1) {  // the group's last slot of this slice
      const float v = warp_sum_rows<kR>(acc, lane);
      if ((lane & (32 / kR - 1)) == 0) part[(slice * n_warps + warp) * cap + gi * kR + lane / (32 / kR)] = v;
#pragma unroll
      for (int r = 0; r < kR; ++r) acc[r] = 0.0f;
      if (nj > 1 && active) slot_inputs(0);
    }
    advance(gi, jj);
  };
  for (int q = 0; q < n_tasks; q += 2) {
    task(w0, q);
    if (q + 1 >= n_tasks) break;
    task(w1, q + 1);
  }
  __syncthreads();
  for (int i = int(threadIdx.x); i < (g1 - g0) * kR; i += int(blockDim.x)) {
    const int n = g0 * kR + i;
    if (n >= N) continue;
    float v = 0.0f;
    for (int s = 0; s < slices * n_warps; ++s) v += part[s * cap + i];
    if (p.bias) {
      for (int j = 0; j < k; ++j)
        if (const int32_t e = ids[j]; e >= 0 && e < p.n_expert)
          v = fmaf(weights[j], p.bias[e * p.N + n], v);
    }
    if (p.residual) v += p.residual[t * p.N + n];
    p.out[t * p.N + n] = v;
  }
}

bool has_unit(quant::Type t) {
  using quant::Type;
  return t == Type::Q4_0 || t == Type::Q8_0 || t == Type::Q4_K || t == Type::Q6_K || t == Type::MXFP4;
}

// The unit loads' needs: 16-byte Q4_K rows (uint4 loads), 2-byte rows for the others but MXFP4 (any byte), float4
// columns of x.
bool rows_fit(quant::Type type, const void* w, int64_t K, const void* x) {
  if (K <= 0 || K % 32 != 0 || K / 32 > kMaxUnits || !has_unit(type)) return false;
  const size_t rb = quant::row_bytes(type, K);
  const size_t align = type == quant::Type::Q4_K ? 16 : type == quant::Type::MXFP4 ? 1 : 2;
  const auto a = [](const void* q) { return reinterpret_cast<uintptr_t>(q); };
  return a(w) % align == 0 && rb % align == 0 && a(x) % 16 == 0;
}

// Recoded MXFP4 experts (mxfp4_recode.cuh): 16-byte aligned codes.
bool recoded_fits(quant::Type type, int64_t K, int64_t N, std::initializer_list<const void*> tensors) {
  if (type != quant::Type::MXFP4 || !mxfp4_split_fits(K, N)) return false;
  for (const void* t : tensors)
    if (reinterpret_cast<uintptr_t>(t) % 16 != 0) return false;
  return true;
}

// A launch's own routing (or none): of its experts, slots and tokens, within what a block's routing serves.
bool route_fits(const MoeRouteSource& r, int64_t n_expert, int64_t k, int64_t T) {
  if (!r.logits) return true;
  return r.n_expert == n_expert && r.k == k && r.T == T && n_expert <= kRouteBlockMaxExperts && k <= 32 &&
         r.n_parts >= 1;
}

int threads_per_slice(int64_t K) { return int((K / 32 + 31) / 32 * 32); }

constexpr int kMaxGluGroups = 128;  // a block's partial sums: at most 8 warps x 128 groups x 2 kR floats = 16 KiB
constexpr int kMaxDownGroups = 64;  // at most 8 warps x 64 groups x kR floats = 4 KiB

// Blocks of `threads` threads one multiprocessor holds at once (at least one).
int blocks_per_sm(const void* kernel, int threads, size_t smem) {
  return std::max(1, kernel_blocks_per_sm(kernel, threads, smem));
}

// Groups a block owns: the launch's groups spread over one wave of resident blocks, whole slices each.
int groups_per_block(int64_t groups, int64_t resident, int slices, int cap) {
  int64_t g = (groups + resident - 1) / resident;
  g = (std::max<int64_t>(g, slices) + slices - 1) / slices * slices;
  return int(std::min<int64_t>(g, cap));
}

// The gate/up launch's shape for `slices` slices a block: groups per block spread over one wave of resident blocks.
Shape glu_shape_of(const ExpertGluParams& p, const void* kernel, int slices) {
  Shape s;
  s.tps = threads_per_slice(p.K);
  const int64_t n_groups = (p.N + kR - 1) / kR;
  s.slices = slices;
  const size_t runs = size_t(kRunWords) * s.tps * sizeof(float);
  if (p.groups_per_block > 0) {
    s.gpb = p.groups_per_block;
  } else if (kernel) {
    // Groups are counted per slot: a block serves one (slot, token).
    const int64_t resident = int64_t(current_device_sm_count()) * blocks_per_sm(kernel, s.tps * s.slices, runs);
    const int64_t per_slot = std::max<int64_t>(1, resident / (p.k * p.T));
    // Handed-over runs: whole runs of 16 rows a block (groups in multiples of 8, with whole slices).
    s.gpb = groups_per_block(n_groups, per_slot, p.runs_out ? std::lcm(s.slices, 16 / kR) : s.slices,
                             kMaxGluGroups);
  } else {
    s.gpb = kMaxGluGroups;  // the most shared memory any launch takes (expert_glu_fits)
  }
  s.chunks = unsigned((n_groups + s.gpb - 1) / s.gpb);
  s.smem = runs + size_t(s.tps / 32) * s.gpb * 2 * kR * sizeof(float) +
           (p.runs_out ? size_t(s.gpb) * kR * sizeof(float) : 0);
  add_route_scratch(s, p.route);
  return s;
}

// As many slices as a block of kMaxThreads holds, or half as many where that spreads the groups more evenly over the
// multiprocessors: the launch lasts as long as its busiest multiprocessor, which holds ceil(blocks / SMs) blocks of
// gpb groups. Qwen3-30B-A3B (K = 2048, 4 slices of 64 threads, 123 registers: 2 blocks an SM) had 192 blocks of 16
// groups, 32 groups on 60 multiprocessors and 16 on the rest; with 2 slices, 384 blocks of 8 and at most 24 an SM:
// tg128 499.4 -> 514.1 on an H200. gpt-oss-20b (K = 2880, 2 slices of 96) ties at 48 and keeps its larger blocks:
// with one slice each block quantizes x in two passes (613.4 against 623.1; session 45).
Shape glu_shape(const ExpertGluParams& p, const void* kernel) {
  const int tps = threads_per_slice(p.K);
  const int64_t n_groups = (p.N + kR - 1) / kR;
  const int most = int(std::max<int64_t>(1, std::min<int64_t>(kMaxThreads / tps, n_groups)));
  Shape best = glu_shape_of(p, kernel, most);
  if (!kernel || most < 2 || p.groups_per_block > 0) return best;
  const Shape half = glu_shape_of(p, kernel, most / 2);
  const int64_t sms = current_device_sm_count(), slots = p.k * p.T;
  const auto busiest = [&](const Shape& s) { return (int64_t(s.chunks) * slots + sms - 1) / sms * s.gpb; };
  return busiest(half) < busiest(best) ? half : best;
}

Shape down_shape(const ExpertDownParams& p, const void* kernel) {
  Shape s;
  s.tps = threads_per_slice(p.K);
  s.slices = int(std::max<int64_t>(1, std::min<int64_t>(kMaxThreads / s.tps, p.k)));
  const int64_t n_groups = (p.N + kR - 1) / kR;
  const size_t runs = size_t(p.k) * kRunWords * s.tps * sizeof(float);
  if (p.groups_per_block > 0) {
    s.gpb = p.groups_per_block;
  } else if (kernel) {
    const int64_t resident = int64_t(current_device_sm_count()) * blocks_per_sm(kernel, s.tps * s.slices, runs);
    s.gpb = groups_per_block(n_groups, std::max<int64_t>(1, resident / p.T), 1, kMaxDownGroups);
  } else {
    s.gpb = kMaxDownGroups;
  }
  s.chunks = unsigned((n_groups + s.gpb - 1) / s.gpb);
  // The partial sums (kR even: a multiple of 8 bytes), then a pointer a slot.
  s.smem = runs + size_t(s.slices) * (s.tps / 32) * s.gpb * kR * sizeof(float) + size_t(p.k) * sizeof(void*);
  add_route_scratch(s, p.route);
  return s;
}

}  // namespace

bool expert_glu_fits(const ExpertGluParams& p) {
  if (!p.gate || !p.up || !p.x || p.N <= 0 || p.N > (int64_t(1) << 30) || p.k <= 0 || p.T <= 0 || p.T > 65535 ||
      p.k > 65535)
    return false;
  if (!rows_fit(p.type, p.gate, p.K, p.x) || !rows_fit(p.type, p.up, p.K, p.x)) return false;
  if (p.recoded && !recoded_fits(p.type, p.K, p.N, {p.gate, p.up})) return false;
  if (p.runs_out && (p.N % 16 != 0 || (p.groups_per_block * kR) % 16 != 0 ||
                     reinterpret_cast<uintptr_t>(p.runs_out) % 16 != 0))
    return false;
  return route_fits(p.route, p.n_expert, p.k, p.T) && p.groups_per_block <= kMaxGluGroups &&
         glu_shape(p, nullptr).smem <= kMaxSmem;
}

bool expert_down_fits(const ExpertDownParams& p) {
  if (!p.w || (!p.x && !p.x_runs) || p.N <= 0 || p.N > (int64_t(1) << 30) || p.k <= 0 || p.T <= 0 || p.T > 65535 ||
      p.k > 64)
    return false;
  if (!rows_fit(p.type, p.w, p.K, p.x ? p.x : p.x_runs)) return false;
  if (p.recoded && !recoded_fits(p.type, p.K, p.N, {p.w})) return false;
  if (p.x_runs && reinterpret_cast<uintptr_t>(p.x_runs) % 16 != 0) return false;
  return route_fits(p.route, p.n_expert, p.k, p.T) && p.groups_per_block <= kMaxDownGroups &&
         down_shape(p, nullptr).smem <= kMaxSmem;
}

void launch_expert_glu(const ExpertGluParams& p, cudaStream_t stream) {
  LLM_REQUIRE((p.ids || p.route.logits) && (p.out || p.runs_out) && p.n_expert > 0,
              "expert_glu: null pointer or no experts");
  LLM_REQUIRE(expert_glu_fits(p), "expert_glu: shape or type not served (expert_glu_fits)");
  const size_t rb = quant::row_bytes(p.type, p.K);
  dispatch_qtype(p.type, "expert_glu", [&](auto tag) {
    constexpr quant::Type T = decltype(tag)::value;
    if constexpr (kHasUnit<T>) {
      const auto run = [&](auto kernel) {
        const Shape s = glu_shape(p, reinterpret_cast<const void*>(kernel));
        launch_programmatic(p.programmatic, kernel, dim3(s.chunks, unsigned(p.k), unsigned(p.T)),
                            dim3(unsigned(s.tps * s.slices)), s.smem, stream, p, rb, s.gpb, s.slices, s.route_at);
      };
      if constexpr (T == quant::Type::MXFP4) {
        if (p.recoded) return run(expert_glu_kernel<T, true>);
      }
      run(expert_glu_kernel<T, false>);
    }
  });
  CUDA_CHECK_LAUNCH(stream);
}

void launch_expert_down(const ExpertDownParams& p, cudaStream_t stream) {
  LLM_REQUIRE(((p.ids && p.weights) || p.route.logits) && p.out && p.n_expert > 0,
              "expert_down: null pointer or no experts");
  LLM_REQUIRE(expert_down_fits(p), "expert_down: shape or type not served (expert_down_fits)");
  const size_t rb = quant::row_bytes(p.type, p.K);
  dispatch_qtype(p.type, "expert_down", [&](auto tag) {
    constexpr quant::Type T = decltype(tag)::value;
    if constexpr (kHasUnit<T>) {
      const auto run = [&](auto kernel) {
        const Shape s = down_shape(p, reinterpret_cast<const void*>(kernel));
        const dim3 grid(s.chunks, unsigned(p.T)), block(unsigned(s.tps * s.slices));
        if (p.ids_before_wait || p.route.logits) {
          launch_pdl(kernel, grid, block, s.smem, stream, p, rb, s.gpb, s.slices, s.route_at);
        } else {
          kernel<<<grid, block, s.smem, stream>>>(p, rb, s.gpb, s.slices, s.route_at);
        }
      };
      if constexpr (T == quant::Type::MXFP4) {
        if (p.recoded) return run(expert_down_kernel<T, true>);
      }
      run(expert_down_kernel<T, false>);
    }
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
