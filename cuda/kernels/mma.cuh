// Warp-level tensor-core helpers (mma.sync m16n8k16, f16 in, f32 accumulate) for the attention and small-batch
// matrix kernels.
// Fragment layouts (PTX ISA, "mma.m16n8k16"), lane = 4 g + tg: A (16 x 16, row-major) register 0 holds row g,
// columns 2tg and 2tg + 1; register 1 row g + 8; registers 2, 3 the same rows, columns + 8. B (16 x 8, column-major)
// register 0 holds rows 2tg, 2tg + 1 of column g; register 1 rows + 8. C/D (16 x 8): values 0, 1 row g, columns 2tg,
// 2tg + 1; values 2, 3 row g + 8.
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

namespace cuda::mma {

__device__ __forceinline__ uint32_t pack_half2(float lo, float hi) {
  const __half2 h = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&h);
}

// D += A B for one 16 x 8 x 16 tile.
__device__ __forceinline__ void m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Four 8 x 8 f16 matrices from shared memory as they are (lanes 8i..8i+7 give the row addresses of matrix i): for a
// row-major [row][k] tile W, rows r0 + (lane & 15) at column k0 + 8 (lane >> 4) give the A operand of W's 16 x 16
// block (r0, k0) in register order.
__device__ __forceinline__ void ldmatrix_x4(const uint16_t* p, uint32_t (&r)[4]) {
  const unsigned a = unsigned(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// The same from a shared-space address (__cvta_generic_to_shared computed once by the caller).
__device__ __forceinline__ void ldmatrix_x4(uint32_t a, uint32_t (&r)[4]) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// Four 8 x 8 f16 matrices from shared memory, transposed (lanes 8i..8i+7 give the row addresses of matrix i): for
// a row-major [slot][dim] tile V, rows k0 + (lane & 7) + 8 ((lane >> 3) & 1) at column n0 + 8 (lane >> 4) give the B
// operands of V's 16 x 16 block (k0, n0): registers 0, 1 for columns n0..n0+7, registers 2, 3 for n0+8..n0+15.
__device__ __forceinline__ void ldmatrix_x4_trans(const uint16_t* p, uint32_t (&r)[4]) {
  const unsigned a = unsigned(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// An 8 x 8 f16 matrix transposed across the warp: lane 4 g + tg gives row g, columns 2 tg and 2 tg + 1 (a C
// fragment's half, packed) and gets the same of the transpose.
__device__ __forceinline__ uint32_t movmatrix_trans(uint32_t x) {
  uint32_t y;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// S (16 query rows x 8 slots) += Q K^T over HD dimensions. Q is the A operand by 16-dimension chunks; k_tile points
// at the chunk's first slot in a row-major [slot][dim] shared tile of stride ld halves (B: 2 halves of slot g per
// register, no transpose needed).
template <int HD>
__device__ __forceinline__ void qk_8slots(float (&s)[4], const uint32_t (&qf)[HD / 16][4], const uint16_t* k_tile,
                                          int ld, int lane) {
  const uint16_t* krow = k_tile + (lane >> 2) * ld + (lane & 3) * 2;
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc)
    m16n8k16(s, qf[kc], *reinterpret_cast<const uint32_t*>(krow + kc * 16),
             *reinterpret_cast<const uint32_t*>(krow + kc * 16 + 8));
}

// The same with Q too in a row-major [row][dim] shared tile (q_tile: the warp's first of its 16 rows) instead of
// registers, for N 8-slot chunks of K at once: per 16-dimension chunk one ldmatrix gives Q's A operand for all N.
template <int HD, int N>
__device__ __forceinline__ void qk_slots_q_shared(float (&s)[N][4], const uint16_t* q_tile, const uint16_t* k_tile,
                                                  int ld, int lane) {
  const uint16_t* qrow = q_tile + (lane & 15) * ld + (lane >> 4) * 8;
  const uint16_t* krow = k_tile + (lane >> 2) * ld + (lane & 3) * 2;
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    uint32_t a[4];
    ldmatrix_x4(qrow + kc * 16, a);
#pragma unroll
    for (int j = 0; j < N; ++j)
      m16n8k16(s[j], a, *reinterpret_cast<const uint32_t*>(krow + j * 8 * ld + kc * 16),
               *reinterpret_cast<const uint32_t*>(krow + j * 8 * ld + kc * 16 + 8));
  }
}

// Transposed, with 16 slots as the rows and up to 8 query heads as the columns: S^T (16 slots x 8 heads) += K Q^T.
// K is the A operand from a row-major [slot][dim] shared tile (k_tile: the first of the 16 slots, ld halves a row),
// Q^T the B operand by 16-dimension chunks (qb[kc][0]: dimensions 16 kc + 2 tg + (0, 1) of head g, [1]: + 8).
template <int HD>
__device__ __forceinline__ void kq_16slots(float (&st)[4], const uint32_t (&qb)[HD / 16][2], const uint16_t* k_tile,
                                           int ld, int lane) {
  const uint16_t* krow = k_tile + (lane & 15) * ld + (lane >> 4) * 8;
#pragma unroll
  for (int kc = 0; kc < HD / 16; ++kc) {
    uint32_t a[4];
    ldmatrix_x4(krow + kc * 16, a);
    m16n8k16(st, a, qb[kc][0], qb[kc][1]);
  }
}

// Transposed: O^T (HD x 8 heads) += V^T P^T for 16 slots. V^T is the A operand, from a row-major [slot][dim] shared
// tile (v_tile: the first of the 16 slots) through ldmatrix.trans; P^T the B operand (b[0]: slots 2 tg, 2 tg + 1 of
// head g, b[1]: slots + 8). o[n]: dimensions 16 n + g (values 0, 1: heads 2 tg, 2 tg + 1) and 16 n + g + 8 (2, 3).
template <int HD>
__device__ __forceinline__ void pv_16slots_t(float (&o)[HD / 16][4], const uint32_t (&b)[2], const uint16_t* v_tile,
                                             int ld, int lane) {
  const uint16_t* vrow = v_tile + ((lane & 7) + (lane >> 4) * 8) * ld + ((lane >> 3) & 1) * 8;
#pragma unroll
  for (int n = 0; n < HD / 16; ++n) {
    uint32_t a[4];
    ldmatrix_x4_trans(vrow + n * 16, a);
    m16n8k16(o[n], a, b[0], b[1]);
  }
}

// O (16 rows x HD) += P V for 16 slots: P is the A operand (softmax weights of two 8-slot S chunks), v_tile points at
// the first of the 16 slots in a row-major [slot][dim] shared tile of stride ld halves.
template <int HD>
__device__ __forceinline__ void pv_16slots(float (&o)[HD / 8][4], const uint32_t (&a)[4], const uint16_t* v_tile,
                                           int ld, int lane) {
  const uint16_t* vrow = v_tile + ((lane & 7) + ((lane >> 3) & 1) * 8) * ld + (lane >> 4) * 8;
#pragma unroll
  for (int nn = 0; nn < HD / 16; ++nn) {
    uint32_t b[4];
    ldmatrix_x4_trans(vrow + nn * 16, b);
    m16n8k16(o[2 * nn], a, b[0], b[1]);
    m16n8k16(o[2 * nn + 1], a, b[2], b[3]);
  }
}

}  // namespace cuda::mma
