// MXFP4's 4-bit codes (E2M1) as their doubled values in signed bytes, eight codes a word, for the int16 decode units
// (matvec_i16_units.cuh: dp2a takes the bytes; the halving is in the block's scale). Host and device alike, so that
// CI checks every code pattern without a GPU (tests/cuda/test_dequant_host.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace cuda::mx {

// The byte select of PTX's prmt for selectors whose msb is clear (the sign-replicating mode is never asked for
// here): byte n of the result is byte (s >> 4n) & 7 of {y, x}, x's bytes 0-3.
__host__ __device__ __forceinline__ uint32_t byte_perm(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  return __byte_perm(x, y, s);
#else
  const uint64_t v = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) r |= uint32_t((v >> (8 * ((s >> (4 * n)) & 7u))) & 0xffu) << (8 * n);
  return r;
#endif
}

// The eight codes of a word (byte j: element j's code in its low nibble, element j + 16's in its high one) as their
// doubled E2M1 values 0, +-1, +-2, +-3, +-4, +-6, +-8, +-12 (-0 reads 0, as ggml reads it), signed bytes: .x the four
// low-nibble elements in byte order, .y the four high-nibble ones. Each code's three magnitude bits pick from the
// positive and from the negative table, its sign bit which of the two: four table permutes for the eight codes, two
// choosing by sign, two gathering the even and the odd nibbles, and five logic and shift ops, 13 instructions where
// the former four-codes-at-a-time form took 24 (docs/kernel-notes.md, session 28).
__host__ __device__ __forceinline__ uint2 doubled8(uint32_t q) {
  constexpr uint32_t kPos0 = 0x03020100u, kPos1 = 0x0c080604u;  // 0 1 2 3 4 6 8 12
  constexpr uint32_t kNeg0 = 0xfdfeff00u, kNeg1 = 0xf4f8fafcu;  // their negatives
  const uint32_t mag = q & 0x77777777u;                          // selectors with their msb clear
  const uint32_t pick = ((q >> 1) & 0x44444444u) | 0x32103210u;  // nibble n: byte n % 4, of the negatives if signed
  const uint32_t p0 = byte_perm(kPos0, kPos1, mag), n0 = byte_perm(kNeg0, kNeg1, mag);
  const uint32_t p1 = byte_perm(kPos0, kPos1, mag >> 16), n1 = byte_perm(kNeg0, kNeg1, mag >> 16);
  // Nibbles 0-3 (elements 0, 16, 1, 17) and 4-7 (elements 2, 18, 3, 19).
  const uint32_t t0 = byte_perm(p0, n0, pick), t1 = byte_perm(p1, n1, pick >> 16);
  return make_uint2(byte_perm(t0, t1, 0x6420u), byte_perm(t0, t1, 0x7531u));
}

}  // namespace cuda::mx
