// MXFP4's 4-bit codes (E2M1) as their doubled values in signed bytes, eight codes a word, for the int16 decode units
// (matvec_i16_units.cuh: dp2a takes the bytes; the halving is in the block's scale). Host and device alike, so that
// CI checks every code pattern without a GPU (tests/cuda/test_dequant_host.cpp).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "quant/dequant.cuh"

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

// ---- MXFP4 recoded at upload (cuda/kernels/mxfp4_recode.cuh) ----
// The expert tensors' blocks are split into scales and codes there; a block's 16 code bytes become four words, word i
// holding elements 4i..4i+3 in nibbles 0-3 and elements 16 + 4i..16 + 4i + 3 in nibbles 4-7 (the file keeps element j
// in the low nibble of byte j and j + 16 in its high nibble), and each code s m2 m1 m0 (sign, magnitude index) becomes
// m2 m1 m0 s, with -0 written as +0. Why: prmt reads a selector nibble's three low bits as a byte index and its msb as
// "replicate the chosen byte's sign". With the sign among the index bits and m2 as the msb, two table permutes, one on
// the codes and one on the codes with every msb flipped, xor to the code's value for all sixteen codes (a code and its
// msb-flipped twin then always share a sign, which the file's order, sign in the msb, cannot give): four elements per
// two permutes and an xor, already in element order, where doubled8 needs 13 instructions for eight.

// PTX prmt in its generic form, sign-replicate mode included (a selector nibble with its msb set gives the chosen
// byte's msb over all eight bits).
__host__ __device__ __forceinline__ uint32_t prmt_signed(uint32_t x, uint32_t y, uint32_t s) {
#ifdef __CUDA_ARCH__
  uint32_t r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(x), "r"(y), "r"(s));
  return r;
#else
  const uint64_t v = (uint64_t(y) << 32) | x;
  uint32_t r = 0;
  for (int n = 0; n < 4; ++n) {
    const uint32_t sel = (s >> (4 * n)) & 15u;
    uint32_t b = uint32_t(v >> (8 * (sel & 7u))) & 0xffu;
    if (sel & 8u) b = b & 0x80u ? 0xffu : 0u;
    r |= b << (8 * n);
  }
  return r;
#endif
}

// A file code (s m2 m1 m0) as recoded: m2 m1 m0 s, -0 as +0; and back (a recoded +0 reads as the file's +0).
__host__ __device__ constexpr uint32_t recode_code(uint32_t c) { return c == 8u ? 0u : ((c << 1) | (c >> 3)) & 15u; }
__host__ __device__ constexpr uint32_t file_code(uint32_t r) { return ((r >> 1) | (r << 3)) & 15u; }

// A block's 16 code bytes (the file's order) as the four recoded words.
__host__ __device__ inline void recode_block_codes(const uint8_t* qs, uint32_t (&w)[4]) {
  for (int i = 0; i < 4; ++i) {
    uint32_t v = 0;
    for (int k = 0; k < 4; ++k) {
      const uint32_t q = qs[4 * i + k];
      v |= recode_code(q & 15u) << (4 * k) | recode_code(q >> 4) << (16 + 4 * k);
    }
    w[i] = v;
  }
}

// Four recoded codes (a selector's low 16 bits) through the table pair (t0, t1: bytes of the code's value when its
// msb, m2, is clear; u0, u1: the complement of the value where m2 is set and the sign too, the value otherwise): byte k
// is code k's value. Indices with the sign clear hold non-negative bytes in both tables, with the sign set negative
// bytes in the first and non-negative ones (complements) in the second, so the sign fill the other permute gives is
// 0 or 0xff exactly where the xor needs it.
__host__ __device__ __forceinline__ uint32_t recoded4(uint32_t sel, uint32_t t0, uint32_t t1, uint32_t u0,
                                                      uint32_t u1) {
  return prmt_signed(t0, t1, sel) ^ prmt_signed(u0, u1, sel ^ 0x8888u);
}

// A recoded word's eight codes as doubled E2M1 values in signed bytes (as doubled8 gives them): .x elements
// 4i..4i+3 in byte order, .y elements 16 + 4i... -0 never occurs (recoded to +0); index 1's first-table byte is
// that unused slot. Nine instructions.
__host__ __device__ __forceinline__ uint2 recoded_doubled8(uint32_t w) {
  // index (m1 m0 s): values 0 -4 1 -1 2 -2 3 -3 (m2 clear); m2 set: 4 6 8 12 and the complements of -4 -6 -8 -12.
  constexpr uint32_t kT0 = 0xff01fc00u, kT1 = 0xfd03fe02u, kU0 = 0x05060304u, kU1 = 0x0b0c0708u;
  return make_uint2(recoded4(w, kT0, kT1, kU0, kU1), recoded4(w >> 16, kT0, kT1, kU0, kU1));
}

// The same eight codes as the high bytes of the halves whose bits are the code's (sign to bit 15, m2 m1 m0 to bits
// 11..9: the value times 2^-14; unpack_half.cuh's placement), low bytes zero.
__host__ __device__ __forceinline__ uint2 recoded_half_high8(uint32_t w) {
  constexpr uint32_t kT0 = 0x82028000u, kT1 = 0x86068404u, kU0 = 0x750a7708u, kU1 = 0x710e730cu;
  return make_uint2(recoded4(w, kT0, kT1, kU0, kU1), recoded4(w >> 16, kT0, kT1, kU0, kU1));
}

// The 32 floats of a recoded block (as quant::dev::dequant_chunk gives the file's block) from its 16 code bytes and
// its scale byte e: each code back to the file's (file_code), times the halved scale. For the launches that read a
// recoded tensor without the units (matvec_id's chunk rows, moe_gemm past scale byte 142).
__host__ __device__ inline void recoded_block_floats(const uint8_t* codes, uint32_t e, float (&v)[32]) {
  const float d = quant::dev::e8m0_half(e);
  for (int j = 0; j < 16; ++j) {
    // Code byte j is byte j % 4 of word j / 4: nibbles 2 (j % 4) and 2 (j % 4) + 1 of that word.
    const uint32_t byte = codes[j];
    const int i = j / 4;
    for (int h = 0; h < 2; ++h) {
      const int nib = 2 * (j % 4) + h;
      const int elem = nib < 4 ? 4 * i + nib : 16 + 4 * i + nib - 4;
      v[elem] = float(quant::dev::e2m1_doubled(file_code((byte >> (4 * h)) & 15u))) * d;
    }
  }
}

}  // namespace cuda::mx
