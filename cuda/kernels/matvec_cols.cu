// Few-column products on the int16 decode matvec's units (matvec_cols.cuh). Layout as the one-column kernel
// (matvec_i16.cu): a block is 1-4 row slices of one thread per 32-weight unit of K, each slice streaming its share of
// the block's row groups, R rows at a time, with the next group's weights loaded before the current one is dotted.
// What differs: the block first reads the NC columns of x (every thread a share), quantizes them to int16 runs
// (mv16::quantize_run) and keeps them in shared memory, [column][unit][20 words], so that a thread reads its unit's
// runs of one column with five 16-byte loads, conflict-free, once per group for all R rows; and the R x NC partial
// sums of a group are reduced across the warp in one transposed butterfly (warp_sum_transposed).
// Columns past T (T = 3 runs as 4) are zero runs: their products are zero and not stored.
// Every sum is formed in a fixed order (units in a warp by the butterfly, warps in warp order): the same bits every
// run, whatever the grid.
#include "cuda/kernels/matvec_cols.cuh"

#include <cuda_fp16.h>

#include <algorithm>
#include <string>

#include "cuda/check.h"
#include "cuda/device_info.h"
#include "cuda/kernels/matvec_i16_limits.cuh"
#include "cuda/kernels/matvec_i16_units.cuh"
#include "cuda/kernels/pdl.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "cuda/kernels/reduce.cuh"

namespace cuda {
namespace {

constexpr int kMaxThreads = kI16MaxUnits;  // one thread a unit, K <= 16384
constexpr int kRunWords = 20;               // a unit's two mv16::Run: q[0..7], s, S of each
constexpr size_t kMaxPartBytes = 48 << 10;  // the partial sums' share of shared memory
constexpr size_t kReserveBytes = 1024;      // static shared memory and slack
constexpr int kRows = 2;                    // rows a group: R x NC sums and R raw units (twice) in registers

// Columns a launch of T tokens computes: the instance of 2, 4 or 8.
int cols_for(int64_t T) { return T <= 2 ? 2 : 4; }

size_t runs_bytes(int64_t K, int64_t T) { return size_t(cols_for(T)) * i16_threads_per_slice(K) * kRunWords * 4; }

// Four words of a run's int16 pairs as one 16-byte shared-memory store or load, and back.
__device__ __forceinline__ float4 words4(const int32_t* q) {
  return make_float4(__int_as_float(q[0]), __int_as_float(q[1]), __int_as_float(q[2]), __int_as_float(q[3]));
}
__device__ __forceinline__ void unwords4(float4 v, int32_t* q) {
  q[0] = __float_as_int(v.x), q[1] = __float_as_int(v.y), q[2] = __float_as_int(v.z), q[3] = __float_as_int(v.w);
}

// The block's x: column c's unit i (i < tps) at runs + (c * tps + i) * kRunWords, zero runs past K / 32 and T.
template <class U, int NC>
__device__ __forceinline__ void quantize_columns(const float* x, int64_t K, int T, int tps, float* runs) {
  const int n_units = int(K / 32);
  for (int i = int(threadIdx.x); i < NC * tps; i += int(blockDim.x)) {
    const int c = i / tps, u = i - c * tps;
    float xa[16], xb[16];
    if (c < T && u < n_units) {
      const float* xc = x + int64_t(c) * K + U::seg0(u);
      mv16::load16<false>(xc, xa);
      mv16::load16<false>(xc + U::kOff1, xb);
    } else {
#pragma unroll
      for (int k = 0; k < 16; ++k) xa[k] = xb[k] = 0.0f;
    }
    const mv16::Run a = mv16::quantize_run(xa), b = mv16::quantize_run(xb);
    float4* dst = reinterpret_cast<float4*>(runs + size_t(i) * kRunWords);
    dst[0] = words4(a.q), dst[1] = words4(a.q + 4), dst[2] = make_float4(a.s, a.S, b.s, b.S);
    dst[3] = words4(b.q), dst[4] = words4(b.q + 4);
  }
}

// A unit's two runs as quantize_columns stored them.
__device__ __forceinline__ void load_runs(const float* at, mv16::Run& x0, mv16::Run& x1) {
  const float4* src = reinterpret_cast<const float4*>(at);
  const float4 q0 = src[0], q1 = src[1], sc = src[2], q2 = src[3], q3 = src[4];
  unwords4(q0, x0.q), unwords4(q1, x0.q + 4);
  x0.s = sc.x, x0.S = sc.y, x1.s = sc.z, x1.S = sc.w;
  unwords4(q2, x1.q), unwords4(q3, x1.q + 4);
}

// A unit's weights decoded once for all the columns (codes as dp2a operands, scales as floats), then dotted with
// each column's runs. The generic form dots the raw unit per column; the regrouped Q6_K decodes first (lab, Q6_Kx8
// at 2 columns: 32 us a dot per column, 24 decoded once; the same decoding took Q4_K from 44 to 31 us at 4 columns,
// still behind the small-batch kernel's 27, so Q4_K takes 2 columns only).
template <class U>
struct Decode {
  using D = typename U::Raw;
  static __device__ __forceinline__ D decode(const typename U::Raw& r, int64_t) { return r; }
  static __device__ __forceinline__ float dot(const D& d, int64_t u, const mv16::Run& x0, const mv16::Run& x1) {
    return U::dot(d, u, x0, x1);
  }
};

// Q4_K: the nibbles, the two sub-blocks' integer scales and float mins, d and dmin decoded once for the columns;
// each column's dot then forms the sums exactly as the one-column unit does (Unit<Q4_K>::dot): the same bits.
template <>
struct Decode<mv16::Unit<quant::Type::Q4_K>> {
  struct D {
    uint32_t lo[4], hi[4];
    int sc0, sc1;
    float mn0, mn1, d, dmin;
  };
  static __device__ __forceinline__ D decode(const mv16::Unit<quant::Type::Q4_K>::Raw& r, int64_t u) {
    D o;
    const uint32_t q[4] = {r.qs.x, r.qs.y, r.qs.z, r.qs.w};
    mv16::nibbles<0>(q, o.lo);
    mv16::nibbles<4>(q, o.hi);
    const uint32_t sm = mv::q4k_scales(r.head, uint32_t(u));
    o.sc0 = int(sm & 0xffu), o.sc1 = int((sm >> 8) & 0xffu);
    o.mn0 = mv16::byte_float<2>(sm), o.mn1 = mv16::byte_float<3>(sm);
    o.d = mv::h2f(r.head.x & 0xffffu), o.dmin = mv::h2f(r.head.x >> 16);
    return o;
  }
  static __device__ __forceinline__ float dot(const D& o, int64_t, const mv16::Run& x0, const mv16::Run& x1) {
    const float i0 = float(mv16::dot16(o.lo, x0) * o.sc0) * x0.s, i1 = float(mv16::dot16(o.hi, x1) * o.sc1) * x1.s;
    return o.d * (i0 + i1) - o.dmin * (o.mn0 * x0.S + o.mn1 * x1.S);
  }
};

// Q6_K regrouped: d sc (q - 32) per run of 16.
template <>
struct Decode<mv16::UnitQ6_Kx8> {
  struct D {
    uint32_t q0[4], q1[4];
    float f0, f1;  // d sc of each run
  };
  static __device__ __forceinline__ D decode(const mv16::UnitQ6_Kx8::Raw& r, int64_t) {
    D o;
    const uint32_t l[4] = {r.l.x, r.l.y, r.l.z, r.l.w}, hw[2] = {r.h.x, r.h.y};
    q6_kx8_codes(l, hw, o.q0, o.q1);
    const float d = mv::h2f(r.d);
    o.f0 = d * float(int8_t(r.sc & 0xffu)), o.f1 = d * float(int8_t((r.sc >> 8) & 0xffu));
    return o;
  }
  static __device__ __forceinline__ float dot(const D& d, int64_t, const mv16::Run& x0, const mv16::Run& x1) {
    const float a = fmaf(float(mv16::dot16(d.q0, x0)), x0.s, -32.0f * x0.S);
    const float b = fmaf(float(mv16::dot16(d.q1, x1)), x1.s, -32.0f * x1.S);
    return fmaf(d.f0, a, d.f1 * b);
  }
};

// Block b owns row groups [b * gpb, (b + 1) * gpb) of R rows; slice s of them the groups g0 + s, g0 + s + slices, ...
// A stacked launch (Extra: a ProductStack) numbers the groups of its matrices one after the other.
template <quant::Type Q, bool kAlt, int R, int NC, typename... Extra>
__global__ void __launch_bounds__(kMaxThreads, 1)
    matvec_cols_kernel(MatvecColsParams p, size_t row_bytes, int64_t groups_per_block, int slices, Extra... extra) {
  using U = typename mv16::UnitFor<Q, kAlt>::type;
  constexpr int kSums = R * NC;
  // The runs of x (runs_bytes), then [warp of a slice][gpb * R rows][NC] partial sums.
  extern __shared__ float4 smem4[];
  float* runs = reinterpret_cast<float*>(smem4);
  const int tps = int(blockDim.x) / slices;
  float* part = runs + size_t(NC) * tps * kRunWords;
  const int slice = int(threadIdx.x) / tps;
  const int u = int(threadIdx.x) - slice * tps, lane = u & 31, warp = u >> 5;
  const int n_warps = tps >> 5;
  const bool active = u < p.K / 32;
  const int64_t n_groups = (p.N + R - 1) / R;
  const int64_t g0 = int64_t(blockIdx.x) * groups_per_block;
  const int64_t g1 = g0 + groups_per_block < n_groups ? g0 + groups_per_block : n_groups;
  const int64_t cap = groups_per_block * R;
  // The one-matrix instances keep their code as measured (a stack's lookup, even when it folds away, moved their
  // PTX); the stacked ones find each group's matrix (stacked_matrix).
  constexpr bool kStacked = sizeof...(Extra) > 0;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  typename U::Raw cur[R], nxt[R];
  // A group's rows from one pointer (mv16::load_rows), the unit's offset computed once.
  const uint32_t u_offset = U::offset(u), rb32 = uint32_t(row_bytes);
  const int u_inner = u & U::kInner;
  const auto load_rows = [&](typename U::Raw(&dst)[R], const uint8_t* wm, int64_t n0, int64_t N) {
    mv16::load_rows<U>(dst, wm + n0 * int64_t(row_bytes) + u_offset, N - 1 - n0, rb32, u_inner);
  };
  const auto load_group = [&](typename U::Raw(&dst)[R], int64_t g) {
    if constexpr (kStacked) {  // every matrix but the last a whole number of groups (check_product_stack)
      const StackedMatrix m = stacked_matrix((extra, ...), g * R);
      load_rows(dst, static_cast<const uint8_t*>(m.w), g * R - m.row0, m.N);
    } else {
      load_rows(dst, w, g * R, p.N);
    }
  };
  const int64_t first = g0 + slice;
  pdl_launch_dependents();
  if (active && first < g1) load_group(cur, first);  // weights: before the wait, overlapping the previous kernel
  pdl_wait();
  quantize_columns<U, NC>(p.x, p.K, int(p.T), tps, runs);
  __syncthreads();

  for (int64_t g = first; g < g1; g += slices) {
    if (active && g + slices < g1) load_group(nxt, g + slices);
    typename Decode<U>::D dec[R];
#pragma unroll
    for (int r = 0; r < R; ++r) dec[r] = Decode<U>::decode(cur[r], u);
    float acc[kSums];
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      mv16::Run x0, x1;
      load_runs(runs + size_t(c * tps + u) * kRunWords, x0, x1);
#pragma unroll
      for (int r = 0; r < R; ++r) acc[r * NC + c] = active ? Decode<U>::dot(dec[r], u, x0, x1) : 0.0f;
    }
    const float v = warp_sum_transposed<kSums>(acc, lane);
    if ((lane & (32 / kSums - 1)) == 0) part[(warp * cap + (g - g0) * R) * NC + lane / (32 / kSums)] = v;
#pragma unroll
    for (int r = 0; r < R; ++r) cur[r] = nxt[r];
  }
  __syncthreads();
  for (int64_t i = threadIdx.x; i < (g1 - g0) * R * NC; i += blockDim.x) {
    const int64_t row = i / NC;
    float y = 0.0f;
    if constexpr (kStacked) {
      const StackedMatrix m = stacked_matrix((extra, ...), g0 * R + row);
      const int64_t n = g0 * R + row - m.row0;
      const int c = int(i - row * NC);
      if (n >= m.N || c >= p.T) continue;
      for (int wi = 0; wi < n_warps; ++wi) y += part[wi * cap * NC + i];
      m.y[c * m.N + n] = y + (m.bias ? m.bias[n] : 0.0f);  // no epilogue in a stack (launch_matvec_cols)
    } else {
      const int64_t n = g0 * R + row;
      const int c = int(i - row * NC);
      if (n >= p.N || c >= p.T) continue;
      for (int wi = 0; wi < n_warps; ++wi) y += part[wi * cap * NC + i];
      if (p.bias) y += p.bias[n];
      p.y[c * p.N + n] = glu_finish(p.glu, y, c * p.N + n);
    }
  }
}

template <quant::Type Q, bool kAlt, int NC, bool kStack>
void launch_cols(const MatvecColsParams& p, cudaStream_t stream, const ProductStack* stack) {
  constexpr int R = kRows;
  constexpr auto kernel = [] {
    if constexpr (kStack) return matvec_cols_kernel<Q, kAlt, R, NC, ProductStack>;
    else return matvec_cols_kernel<Q, kAlt, R, NC>;
  }();
  static const size_t opted = kernel_opt_in_smem(reinterpret_cast<const void*>(kernel));  // once, before capture
  (void)opted;
  const int tps = i16_threads_per_slice(p.K);
  const int slices = ::std::max(1, ::std::min(kI16MaxSlices, kMaxThreads / tps));
  const int threads = tps * slices, n_warps = tps / 32;
  const size_t runs = runs_bytes(p.K, p.T);
  const int64_t n_groups = (p.N + R - 1) / R, sms = current_device_sm_count();
  const size_t group_bytes = size_t(n_warps) * R * NC * 4;
  // Occupancy with the partial sums of a one-block-per-SM share: no less than any grid of more blocks needs.
  const int64_t cap = int64_t(kMaxPartBytes / group_bytes);
  const int64_t share = ::std::min(cap, (n_groups + sms - 1) / sms);
  const int bps = ::std::max(1, kernel_blocks_per_sm(reinterpret_cast<const void*>(kernel), threads,
                                                     runs + size_t(share) * group_bytes));
  const int64_t gpb = ::std::min(cap, (n_groups + sms * bps - 1) / (sms * bps));
  const int64_t grid = (n_groups + gpb - 1) / gpb;
  LLM_REQUIRE(grid <= 0x7fffffff, "matvec_cols: too many rows");
  if constexpr (kStack)
    launch_pdl(kernel, dim3(unsigned(grid)), dim3(unsigned(threads)), runs + size_t(gpb) * group_bytes, stream, p,
               quant::row_bytes(p.type, p.K), gpb, slices, *stack);
  else
    launch_pdl(kernel, dim3(unsigned(grid)), dim3(unsigned(threads)), runs + size_t(gpb) * group_bytes, stream, p,
               quant::row_bytes(p.type, p.K), gpb, slices);
}

template <quant::Type Q, bool kAlt = false>
void launch_for_cols(const MatvecColsParams& p, cudaStream_t stream, const ProductStack* stack) {
  const bool two = cols_for(p.T) == 2;
  if (stack) two ? launch_cols<Q, kAlt, 2, true>(p, stream, stack) : launch_cols<Q, kAlt, 4, true>(p, stream, stack);
  else two ? launch_cols<Q, kAlt, 2, false>(p, stream, stack) : launch_cols<Q, kAlt, 4, false>(p, stream, stack);
}

}  // namespace

bool matvec_cols_supports(quant::Type type, bool regrouped, int64_t K, int64_t N, int64_t T) {
  using quant::Type;
  // The regrouped Q6_K and Q4_K only at 2 columns: at 3-4 a Q4_K_M 8B decoded 4% slower than on the small-batch
  // kernel (Q4_K: lab 29 us against 27 at 3 and 4 columns; at 2, 21 against 27: docs/kernel-notes.md, session 38).
  const int64_t max_tokens = regrouped || type == Type::Q4_K ? 2 : kMatvecColsMaxTokens;
  if (T < 2 || T > max_tokens || N <= 0 || K <= 0 || K / 32 > kMaxThreads) return false;
  if (regrouped ? !(type == Type::Q6_K && K % 2048 == 0)
                : !(type == Type::Q4_0 || type == Type::Q8_0 || type == Type::Q6_K || type == Type::Q4_K))
    return false;
  if (K % quant::traits(type).block_elems != 0) return false;
  // The runs of x and at least one group's partial sums (R rows, every warp) in the device's shared memory.
  const size_t least_part = size_t(i16_threads_per_slice(K) / 32) * kRows * cols_for(T) * 4;
  return runs_bytes(K, T) + least_part + kReserveBytes <= current_device_smem_optin();
}

void launch_matvec_cols(const MatvecColsParams& p, cudaStream_t stream, const ProductStack* stack) {
  LLM_REQUIRE(p.w && p.x && p.y, "matvec_cols: null pointer");
  LLM_REQUIRE(matvec_cols_supports(p.type, p.regrouped, p.K, p.N, p.T),
              "few-column product: type " + ::std::string(quant::type_name(p.type)) +
                  (p.regrouped ? " (regrouped)" : "") + ", K = " + ::std::to_string(p.K) +
                  ", T = " + ::std::to_string(p.T) + " not served");
  LLM_REQUIRE((reinterpret_cast<uintptr_t>(p.w) & 15) == 0 && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0,
              "few-column product: weights and x must be 16-byte aligned");
  if (p.regrouped) LLM_REQUIRE(q6_kx8_fits(p.w, p.K), "Q6_Kx8 rows: K % 2048 == 0, 16-byte aligned");
  if (stack) {
    LLM_REQUIRE(!p.glu.gate, "few-column stack: no SwiGLU epilogue");
    check_product_stack(*stack, p.w, p.N, p.K, p.regrouped, "few-column");
  }
  using quant::Type;
  switch (p.type) {
    case Type::Q4_0: launch_for_cols<Type::Q4_0>(p, stream, stack); break;
    case Type::Q8_0: launch_for_cols<Type::Q8_0>(p, stream, stack); break;
    case Type::Q4_K: launch_for_cols<Type::Q4_K>(p, stream, stack); break;
    case Type::Q6_K:
      if (p.regrouped) launch_for_cols<Type::Q6_K, true>(p, stream, stack);
      else launch_for_cols<Type::Q6_K>(p, stream, stack);
      break;
    default: throw InvalidArgument(::std::string("few-column product: no kernel for ") + quant::type_name(p.type));
  }
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
