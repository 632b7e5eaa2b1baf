// The chosen experts' matvecs (matvec_id.cuh). Grid (row blocks, k, T): a block reads ids[j, t] once and computes
// its rows of that expert for that (token, slot). The dense matvec's two bodies (matvec_rows.cuh): unit rows (Q4_0,
// Q8_0, Q4_K, Q6_K with aligned rows; 128 threads over a row's 32-weight units, R rows a block) and chunk rows for
// every other format (MXFP4 as in the file or recoded at upload, F16, Q5_0, Q5_K, ...: 4 rows a warp). Both keep
// x in float32, so results match the CPU reference to float rounding.
#include "cuda/kernels/matvec_id.cuh"

#include "cuda/check.h"
#include "cuda/kernels/matvec_rows.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"

namespace cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRows = 4;  // rows per warp (chunk kernel)
constexpr int kRowsPerBlock = kWarps * kRows;

// This block's expert, input column and output column; false when the id is out of range (the rows are zeroed).
struct Slot {
  const uint8_t* w;
  const float* x;
  const float* bias;
  float* y;
};
__device__ __forceinline__ bool slot_of(const MatvecIdParams& p, size_t row_bytes, Slot& s) {
  const int64_t j = blockIdx.y, t = blockIdx.z;
  const int32_t e = p.ids[t * p.k + j];
  s.y = p.y + (t * p.k + j) * p.N;
  if (e < 0 || e >= p.n_expert) return false;
  s.w = static_cast<const uint8_t*>(p.w) + size_t(e) * size_t(p.N) * row_bytes;
  s.x = p.x + (t * p.x_slots + (p.x_slots == 1 ? 0 : j)) * p.K;
  s.bias = p.bias ? p.bias + int64_t(e) * p.N : nullptr;
  return true;
}

template <quant::Type T, bool kRecoded = false>
__global__ void __launch_bounds__(kWarps * 32) matvec_id_chunk_kernel(MatvecIdParams p, size_t row_bytes) {
  const int lane = threadIdx.x & 31;
  const int64_t n0 = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * kRows;
  if (n0 >= p.N) return;
  const int rows = int(p.N - n0 < kRows ? p.N - n0 : kRows);
  Slot s;
  if (!slot_of(p, row_bytes, s)) {
    if (lane < rows) s.y[n0 + lane] = 0.0f;
    return;
  }
  if constexpr (kRecoded) {  // the expert's codes, then its scales (mxfp4_recode.cuh)
    const int64_t nb = p.K / 32;
    const Mxfp4Split e(s.w, p.N, nb);
    mv::chunk_rows<T, kRows, true>(e.codes + n0 * nb * 16, size_t(nb) * 16, s.x, p.K, rows,
                                   s.bias ? s.bias + n0 : nullptr, s.y + n0, e.scales + n0 * nb, nb);
  } else {
    mv::chunk_rows<T, kRows>(s.w + n0 * row_bytes, row_bytes, s.x, p.K, rows, s.bias ? s.bias + n0 : nullptr,
                             s.y + n0);
  }
}

constexpr int kUnitThreads = 128;

template <quant::Type T, int R>
__global__ void __launch_bounds__(kUnitThreads) matvec_id_unit_kernel(MatvecIdParams p, size_t row_bytes) {
  const int64_t n0 = int64_t(blockIdx.x) * R;
  const int rows = int(p.N - n0 < R ? p.N - n0 : R);
  Slot s;
  if (!slot_of(p, row_bytes, s)) {
    if (threadIdx.x < rows) s.y[n0 + threadIdx.x] = 0.0f;
    return;
  }
  mv::unit_rows<T, R, kUnitThreads>(s.w + n0 * row_bytes, row_bytes, s.x, p.K, rows, s.bias ? s.bias + n0 : nullptr,
                                    s.y + n0);
}

}  // namespace

void launch_matvec_id(const MatvecIdParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && p.x && p.ids && p.y, "matvec_id: null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.n_expert > 0 && p.k > 0 && p.T > 0, "matvec_id: empty shape");
  LLM_REQUIRE(p.x_slots == 1 || p.x_slots == p.k, "matvec_id: x_slots must be 1 or k");
  LLM_REQUIRE(p.k <= 65535 && p.T <= 65535 && p.N <= int64_t(kRowsPerBlock) * 0x7fffffff, "matvec_id: too large");
  const size_t rb = quant::row_bytes(p.type, p.K);  // throws for K not a multiple of the block size
  LLM_REQUIRE(!p.recoded || (p.type == quant::Type::MXFP4 && mxfp4_split_fits(p.K, p.N)),
              "matvec_id: only MXFP4 experts of whole 16-byte code groups are recoded");
  const bool units = mv::unit_fits(p.type, p.w, p.x, p.K, rb);
  dispatch_qtype(p.type, "matvec_id", [&](auto tag) {
    constexpr quant::Type T = decltype(tag)::value;
    if constexpr (mv::kHasUnit<T>) {
      if (units) {
        // 4 rows a block when the (row block, slot) pairs fill the GPU twice over, else 2 (as matvec.cu).
        if (p.N * p.k * p.T >= 2048) {
          matvec_id_unit_kernel<T, 4><<<dim3(unsigned((p.N + 3) / 4), unsigned(p.k), unsigned(p.T)),
                                        kUnitThreads, 0, stream>>>(p, rb);
        } else {
          matvec_id_unit_kernel<T, 2><<<dim3(unsigned((p.N + 1) / 2), unsigned(p.k), unsigned(p.T)),
                                        kUnitThreads, 0, stream>>>(p, rb);
        }
        return;
      }
    }
    const dim3 grid(unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(p.k), unsigned(p.T));
    if constexpr (T == quant::Type::MXFP4) {
      if (p.recoded) return matvec_id_chunk_kernel<T, true><<<grid, kWarps * 32, 0, stream>>>(p, rb);
    }
    matvec_id_chunk_kernel<T><<<grid, kWarps * 32, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
