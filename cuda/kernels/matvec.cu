// Decode matrix-vector products. One column of the preset formats goes to the int16-activation kernel
// (matvec_i16.cu); the rest to one of two float kernels here:
// - unit kernel (Q4_0, Q8_0, Q4_K, Q6_K, the formats of the common presets): a block of 4 warps owns R rows and
//   all 128 threads stride over 32-weight units of K (matvec_rows.cuh's unit rows), so even a 1024-row matrix fills
//   the GPU; 16-byte weight loads, no int-to-float conversion, x read once per unit for all R rows.
// - chunk kernel (every type): each warp owns kRows rows (matvec_rows.cuh's chunk rows). Serves the other formats
//   and unaligned pointers.
// Both keep x in float32 (no 8-bit activations): the results match the CPU reference to float rounding.
#include "cuda/kernels/matvec.cuh"

#include "cuda/check.h"
#include "cuda/kernels/matvec_f32_cols.cuh"
#include "cuda/kernels/matvec_rows.cuh"
#include "cuda/kernels/qtype_dispatch.cuh"

namespace cuda {
namespace {

constexpr int kWarps = 4;  // warps per block
constexpr int kRows = 4;   // rows per warp
constexpr int kRowsPerBlock = kWarps * kRows;

template <quant::Type T>
__global__ void __launch_bounds__(kWarps * 32) matvec_kernel(MatvecParams p, size_t row_bytes) {
  const int64_t n0 = int64_t(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5) * kRows;
  const int64_t t = blockIdx.y;
  if (n0 >= p.N) return;
  const int rows = int(p.N - n0 < kRows ? p.N - n0 : kRows);
  mv::chunk_rows<T, kRows>(static_cast<const uint8_t*>(p.w) + n0 * row_bytes, row_bytes, p.x + t * p.K, p.K, rows,
                           p.bias ? p.bias + n0 : nullptr, p.y + t * p.N + n0);
}

constexpr int kUnitWarps = 4;

template <quant::Type T, int R>
__global__ void __launch_bounds__(kUnitWarps * 32) matvec_unit_kernel(MatvecParams p, size_t row_bytes) {
  const int64_t n0 = int64_t(blockIdx.x) * R;
  const int64_t t = blockIdx.y;
  const int rows = int(p.N - n0 < R ? p.N - n0 : R);
  mv::unit_rows<T, R, kUnitWarps * 32>(static_cast<const uint8_t*>(p.w) + n0 * row_bytes, row_bytes, p.x + t * p.K,
                                       p.K, rows, p.bias ? p.bias + n0 : nullptr, p.y + t * p.N + n0);
}

template <quant::Type T, int R>
void launch_unit(const MatvecParams& p, size_t rb, cudaStream_t stream) {
  const dim3 grid(unsigned((p.N + R - 1) / R), unsigned(p.T));
  matvec_unit_kernel<T, R><<<grid, kUnitWarps * 32, 0, stream>>>(p, rb);
}

}  // namespace

void launch_matvec_i16(const MatvecParams& p, cudaStream_t stream);  // matvec_i16.cu

void launch_matvec(const MatvecParams& p, cudaStream_t stream) {
  LLM_REQUIRE(p.w && (p.x || p.x_fixed) && p.y, "null pointer");
  LLM_REQUIRE(p.K > 0 && p.N > 0 && p.T > 0, "empty shape");
  const bool fuses = matvec_fuses(p);
  LLM_REQUIRE(!p.x_fixed || fuses, "fixed-point x: only the int16 kernel's Q4_0 launches read it");
  if (fuses) {
    launch_matvec_i16(p, stream);
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  if (p.q6_kx8) {  // only the int16 kernel reads the regrouped layouts: one launch per column
    MatvecParams c = p;
    c.T = 1;
    LLM_REQUIRE(p.T == 1 || (!p.norm_w && !p.residual && !p.swiglu_out && p.n_siblings == 0 && !p.rope_kv.q_out),
                "regrouped weights: fusions need a single column");
    for (int64_t t = 0; t < p.T; ++t) {
      c.x = p.x + t * p.K, c.y = p.y + t * p.N;
      LLM_REQUIRE(matvec_fuses(c), "regrouped weights: shape or alignment the int16 matvec does not take");
      launch_matvec_i16(c, stream);
    }
    CUDA_CHECK_LAUNCH(stream);
    return;
  }
  LLM_REQUIRE(!p.norm_w && !p.residual && !p.swiglu_out && p.n_siblings == 0,
              "norm / residual / sibling fusion requested where matvec_fuses() is false");
  if (p.type == quant::Type::F32 && p.T >= kF32ColumnsMin && p.path == MatvecPath::Auto && !p.x_fixed) {
    launch_f32_columns(p, stream);  // one pass over the matrix for many columns (a router at prefill)
    return;
  }
  LLM_REQUIRE(p.T <= 65535, "too many columns for one launch");
  LLM_REQUIRE(p.N <= int64_t(kRowsPerBlock) * 0x7fffffff, "too many rows");
  const size_t rb = quant::row_bytes(p.type, p.K);  // throws for K not a multiple of the block size
  const bool units = p.path != MatvecPath::Generic && mv::unit_fits(p.type, p.w, p.x, p.K, rb);
  dispatch_qtype(p.type, "matvec", [&](auto tag) {
    constexpr quant::Type T = decltype(tag)::value;
    if constexpr (mv::kHasUnit<T>) {
      if (units) {
        // 4 rows per block once there are enough blocks to fill the GPU twice over, else 2 (R = 8 measured slower:
        // docs/kernel-notes.md, v4 run 2).
        if (p.N * p.T >= 2048) launch_unit<T, 4>(p, rb, stream);
        else launch_unit<T, 2>(p, rb, stream);
        return;
      }
    }
    const dim3 grid(unsigned((p.N + kRowsPerBlock - 1) / kRowsPerBlock), unsigned(p.T));
    matvec_kernel<T><<<grid, kWarps * 32, 0, stream>>>(p, rb);
  });
  CUDA_CHECK_LAUNCH(stream);
}

}  // namespace cuda
