// Device-side dequantization of the GGUF block formats, shared by every CUDA kernel that reads weights (matvec,
// dequantize-to-half for GEMM, get_rows). The unit is a "chunk" of 32 consecutive elements of a row: a whole block
// of the 32-element formats, one eighth of a K-quant super-block, 32 plain floats. Every kernel spreads chunks over
// threads, so one definition per format serves them all; layouts follow quant/blocks.h and the CPU reference in
// quant/dequantize.cpp element for element.
#pragma once
#include <vector_types.h>  // uint4 / float4, also for host compilers
#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif

#include <cstdint>

#include "quant/blocks.h"
#include "quant/half.h"
#include "quant/types.h"

// Everything here is host + device: the host instantiation lets CPU-only CI check the device layouts bit for bit
// against the reference dequantizer (tests/cuda/test_dequant_host.cpp).
#if defined(__CUDACC__)
#define LLM_DQ_FN __host__ __device__ __forceinline__
#define LLM_DQ_UNROLL _Pragma("unroll")
#else
#define LLM_DQ_FN inline
#define LLM_DQ_UNROLL
#endif

namespace quant::dev {

// Read-only cached load on the device, a plain load on the host.
template <class V>
LLM_DQ_FN V ldg(const V* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

inline constexpr int kChunk = 32;  // elements per chunk, every format

// binary16 -> float: the hardware conversion on the device (exact for every finite value and infinity, like the
// integer version in quant/half.h, which would cost a branchy loop per element), quant/half.h on the host.
LLM_DQ_FN float h2f(uint16_t h) {
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(h));
#else
  return f16_to_f32(h);
#endif
}

// Bytes of one row of n elements of type T (n a multiple of the block size, checked by the host).
template <Type T>
struct Layout;
#define LLM_LAYOUT(T, BLOCK_T, ELEMS)                                    \
  template <>                                                           \
  struct Layout<Type::T> {                                              \
    using Block = BLOCK_T;                                              \
    static constexpr int kBlockElems = ELEMS;                           \
    static constexpr int kBlockBytes = int(sizeof(BLOCK_T));            \
  };
LLM_LAYOUT(F32, float, 1)
LLM_LAYOUT(F16, uint16_t, 1)
LLM_LAYOUT(BF16, uint16_t, 1)
LLM_LAYOUT(Q4_0, BlockQ4_0, kQK4_0)
LLM_LAYOUT(Q4_1, BlockQ4_1, kQK4_1)
LLM_LAYOUT(Q5_0, BlockQ5_0, kQK5_0)
LLM_LAYOUT(Q5_1, BlockQ5_1, kQK5_1)
LLM_LAYOUT(Q8_0, BlockQ8_0, kQK8_0)
LLM_LAYOUT(Q2_K, BlockQ2_K, kQK_K)
LLM_LAYOUT(Q3_K, BlockQ3_K, kQK_K)
LLM_LAYOUT(Q4_K, BlockQ4_K, kQK_K)
LLM_LAYOUT(Q5_K, BlockQ5_K, kQK_K)
LLM_LAYOUT(Q6_K, BlockQ6_K, kQK_K)
LLM_LAYOUT(MXFP4, BlockMXFP4, kQK_MXFP4)
#undef LLM_LAYOUT

template <Type T>
inline constexpr bool kIsFloat = T == Type::F32 || T == Type::F16 || T == Type::BF16;

// Bytes from the start of a row to the start of chunk c (quant formats only; chunks never straddle blocks).
template <Type T>
LLM_DQ_FN const uint8_t* chunk_block(const uint8_t* row, int64_t c) {
  constexpr int per_block = Layout<T>::kBlockElems / kChunk;
  return row + (c / per_block) * Layout<T>::kBlockBytes;
}

LLM_DQ_FN uint32_t load_u32_unaligned(const uint8_t* p) {
  return uint32_t(p[0]) | uint32_t(p[1]) << 8 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 24;
}
LLM_DQ_FN uint16_t load_u16(const uint8_t* p) {  // 2-byte aligned (all block starts are)
  return *reinterpret_cast<const uint16_t*>(p);
}

// Scale / min of sub-block j (0..7) of Q4_K and Q5_K: 6-bit values packed into 12 bytes.
LLM_DQ_FN void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Signed 6-bit scale i (0..15) of Q3_K: low 4 bits in the nibbles of bytes 0..7, high 2 bits in bytes 8..11.
LLM_DQ_FN int q3k_scale(int i, const uint8_t* s) {
  const int lo = i < 8 ? (s[i] & 0x0f) : (s[i - 8] >> 4);
  const int hi = (s[8 + (i & 3)] >> (2 * (i >> 2))) & 3;
  return (lo | (hi << 4)) - 32;
}

// 2^(e - 128), MXFP4's E8M0 scale halved (quant/mxfp4.cpp): built from bits, exact for every e including the two
// whose result is a subnormal float.
LLM_DQ_FN float e8m0_half(uint32_t e) {
  const uint32_t bits = e >= 2 ? (e - 1) << 23 : uint32_t(0x00200000) << e;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
#endif
}

// An E2M1 code's value doubled (quant/blocks.h kE2M1Doubled), from a register instead of a table in memory: the
// magnitudes 0 1 2 3 4 6 8 12 of codes 0-7 as nibbles of one word; bit 3 the sign, with -0 read as +0 (ggml).
LLM_DQ_FN int e2m1_doubled(uint32_t code) {
  const int mag = int((0xC8643210u >> (4 * (code & 7u))) & 15u);
  return code & 8u ? -mag : mag;
}

// Elements [32c, 32c + 32) of a row of type T into v. For the float formats, `valid` (>= 1) is how many of those
// exist in the row (rows of any length); missing ones read as 0. Quant rows are whole blocks: `valid` is ignored.
template <Type T>
LLM_DQ_FN void dequant_chunk(const uint8_t* row, int64_t c, int valid, float (&v)[kChunk]) {
  if constexpr (T == Type::F32) {
    const float* p = reinterpret_cast<const float*>(row) + c * kChunk;
    if (valid >= kChunk && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
LLM_DQ_UNROLL
      for (int i = 0; i < kChunk; i += 4) {
        const float4 f = ldg(reinterpret_cast<const float4*>(p + i));
        v[i] = f.x, v[i + 1] = f.y, v[i + 2] = f.z, v[i + 3] = f.w;
      }
    } else {
LLM_DQ_UNROLL
      for (int i = 0; i < kChunk; ++i) v[i] = i < valid ? p[i] : 0.0f;
    }
  } else if constexpr (T == Type::F16 || T == Type::BF16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(row) + c * kChunk;
    auto cvt = [](uint16_t h) { return T == Type::F16 ? h2f(h) : bf16_to_f32(h); };
    if (valid >= kChunk && (reinterpret_cast<uintptr_t>(p) & 15) == 0) {
LLM_DQ_UNROLL
      for (int i = 0; i < kChunk; i += 8) {
        const uint4 u = ldg(reinterpret_cast<const uint4*>(p + i));
        const uint32_t w[4] = {u.x, u.y, u.z, u.w};
LLM_DQ_UNROLL
        for (int k = 0; k < 4; ++k) {
          v[i + 2 * k] = cvt(uint16_t(w[k] & 0xffffu));
          v[i + 2 * k + 1] = cvt(uint16_t(w[k] >> 16));
        }
      }
    } else {
LLM_DQ_UNROLL
      for (int i = 0; i < kChunk; ++i) v[i] = i < valid ? cvt(p[i]) : 0.0f;
    }
  } else if constexpr (T == Type::Q4_0 || T == Type::Q4_1) {
    // Element j in the low nibble of qs[j], element j + 16 in the high nibble.
    const uint8_t* b = chunk_block<T>(row, c);
    const float d = h2f(load_u16(b));
    const float m = T == Type::Q4_1 ? h2f(load_u16(b + 2)) : 0.0f;
    const uint8_t* qs = b + (T == Type::Q4_1 ? 4 : 2);
LLM_DQ_UNROLL
    for (int j = 0; j < 16; j += 2) {
      const uint32_t q2 = load_u16(qs + j);
LLM_DQ_UNROLL
      for (int k = 0; k < 2; ++k) {
        const int q = (q2 >> (8 * k)) & 0xff;
        if constexpr (T == Type::Q4_0) {
          v[j + k] = float((q & 0x0f) - 8) * d;
          v[j + k + 16] = float((q >> 4) - 8) * d;
        } else {
          v[j + k] = float(q & 0x0f) * d + m;
          v[j + k + 16] = float(q >> 4) * d + m;
        }
      }
    }
  } else if constexpr (T == Type::Q5_0 || T == Type::Q5_1) {
    // As Q4 plus a fifth bit per element in the little-endian word qh (bit j for element j).
    const uint8_t* b = chunk_block<T>(row, c);
    const float d = h2f(load_u16(b));
    const float m = T == Type::Q5_1 ? h2f(load_u16(b + 2)) : 0.0f;
    const uint8_t* qhp = b + (T == Type::Q5_1 ? 4 : 2);
    const uint32_t qh = T == Type::Q5_1 ? *reinterpret_cast<const uint32_t*>(qhp) : load_u32_unaligned(qhp);
    const uint8_t* qs = qhp + 4;
LLM_DQ_UNROLL
    for (int j = 0; j < 16; j += 2) {
      const uint32_t q2 = load_u16(qs + j);
LLM_DQ_UNROLL
      for (int k = 0; k < 2; ++k) {
        const int jj = j + k;
        const int q = (q2 >> (8 * k)) & 0xff;
        const int lo = (q & 0x0f) | int((qh >> jj) & 1u) << 4;
        const int hi = (q >> 4) | int((qh >> (jj + 16)) & 1u) << 4;
        if constexpr (T == Type::Q5_0) {
          v[jj] = float(lo - 16) * d;
          v[jj + 16] = float(hi - 16) * d;
        } else {
          v[jj] = float(lo) * d + m;
          v[jj + 16] = float(hi) * d + m;
        }
      }
    }
  } else if constexpr (T == Type::Q8_0) {
    const uint8_t* b = chunk_block<T>(row, c);
    const float d = h2f(load_u16(b));
LLM_DQ_UNROLL
    for (int j = 0; j < 32; j += 2) {
      const uint32_t q2 = load_u16(b + 2 + j);
      v[j] = float(int8_t(q2 & 0xff)) * d;
      v[j + 1] = float(int8_t(q2 >> 8)) * d;
    }
  } else if constexpr (T == Type::Q2_K) {
    // Chunk c: half n = c / 4 (qs[32n..32n+31]), 2-bit plane p = c % 4; sub-blocks of 16 use scales[2c], [2c+1].
    const uint8_t* b = chunk_block<T>(row, c);
    const int cc = int(c & 7), n = cc >> 2, p = cc & 3;
    const float d = h2f(load_u16(b + 80)), dmin = h2f(load_u16(b + 82));
    const uint32_t* qs = reinterpret_cast<const uint32_t*>(b + 16 + 32 * n);  // block offset 16: 4-byte aligned
LLM_DQ_UNROLL
    for (int sub = 0; sub < 2; ++sub) {
      const int sc = b[2 * cc + sub];
      const float dl = d * float(sc & 0x0f), ml = dmin * float(sc >> 4);
LLM_DQ_UNROLL
      for (int w = 0; w < 4; ++w) {
        const uint32_t q4 = qs[4 * sub + w];
LLM_DQ_UNROLL
        for (int k = 0; k < 4; ++k) v[16 * sub + 4 * w + k] = dl * float((q4 >> (8 * k + 2 * p)) & 3u) - ml;
      }
    }
  } else if constexpr (T == Type::Q3_K) {
    // Same plane order as Q2_K; the third bit of element l is bit c of hmask[l]; clear means subtract 4.
    const uint8_t* b = chunk_block<T>(row, c);
    const int cc = int(c & 7), n = cc >> 2, p = cc & 3;
    const float d = h2f(load_u16(b + 108));
    const uint8_t* hm = b;
    const uint8_t* qs = b + 32 + 32 * n;
    const uint8_t* sc = b + 96;
LLM_DQ_UNROLL
    for (int sub = 0; sub < 2; ++sub) {
      const float dl = d * float(q3k_scale(2 * cc + sub, sc));
LLM_DQ_UNROLL
      for (int l = 16 * sub; l < 16 * sub + 16; l += 2) {
        const uint32_t q2 = load_u16(qs + l), h2 = load_u16(hm + l);
LLM_DQ_UNROLL
        for (int k = 0; k < 2; ++k) {
          const int q = int((q2 >> (8 * k + 2 * p)) & 3u) - (((h2 >> (8 * k + cc)) & 1u) ? 0 : 4);
          v[l + k] = dl * float(q);
        }
      }
    }
  } else if constexpr (T == Type::Q4_K || T == Type::Q5_K) {
    // Chunk c reads qs[32(c/2) ..+32]: low nibbles for even c, high for odd; sub-block scale/min c.
    // Q5_K adds bit c of qh[l] as the fifth bit.
    const uint8_t* b = chunk_block<T>(row, c);
    const int cc = int(c & 7);
    const float d = h2f(load_u16(b)), dmin = h2f(load_u16(b + 2));
    int sc, mn;
    scale_min_k4(cc, b + 4, sc, mn);
    const float d1 = d * float(sc), m1 = dmin * float(mn);
    constexpr int qs_off = T == Type::Q4_K ? 16 : 48;  // both 16-byte aligned within 16-byte aligned blocks
    const uint4* qs = reinterpret_cast<const uint4*>(b + qs_off + 32 * (cc >> 1));
    const int shift = 4 * (cc & 1);
LLM_DQ_UNROLL
    for (int h = 0; h < 2; ++h) {
      const uint4 u = qs[h];
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
      uint32_t hw[4] = {0, 0, 0, 0};
      if constexpr (T == Type::Q5_K) {
        const uint4 hu = reinterpret_cast<const uint4*>(b + 16)[h];
        hw[0] = hu.x, hw[1] = hu.y, hw[2] = hu.z, hw[3] = hu.w;
      }
LLM_DQ_UNROLL
      for (int k = 0; k < 16; ++k) {
        int q = int((w[k >> 2] >> (8 * (k & 3) + shift)) & 0x0fu);
        if constexpr (T == Type::Q5_K) q |= int((hw[k >> 2] >> (8 * (k & 3) + cc)) & 1u) << 4;
        v[16 * h + k] = d1 * float(q) - m1;
      }
    }
  } else if constexpr (T == Type::Q6_K) {
    // Chunk c: half n = c / 4, quarter k = c % 4. Low 4 bits: ql[64n + 32(k&1) + l], high nibble when k >= 2;
    // high 2 bits: (qh[32n + l] >> 2k) & 3; scale scales[8n + 2k + l/16]; value d * scale * (q - 32).
    const uint8_t* b = chunk_block<T>(row, c);
    const int cc = int(c & 7), n = cc >> 2, k = cc & 3;
    const float d = h2f(load_u16(b + 208));
    const uint8_t* ql = b + 64 * n + 32 * (k & 1);
    const uint8_t* qh = b + 128 + 32 * n;
    const int8_t* sc = reinterpret_cast<const int8_t*>(b + 192) + 8 * n + 2 * k;
    const int lshift = 4 * (k >> 1);
LLM_DQ_UNROLL
    for (int l = 0; l < 32; l += 2) {
      const uint32_t l2 = load_u16(ql + l), h2 = load_u16(qh + l);
      const float dl = d * float(sc[l / 16]);
LLM_DQ_UNROLL
      for (int e = 0; e < 2; ++e) {
        const int q = int((l2 >> (8 * e + lshift)) & 0x0fu) | int((h2 >> (8 * e + 2 * k)) & 3u) << 4;
        v[l + e] = dl * float(q - 32);
      }
    }
  } else if constexpr (T == Type::MXFP4) {
    // One 17-byte block per chunk (byte loads: blocks are not aligned). Element j < 16 in the low nibble of qs[j],
    // j + 16 in its high nibble; an integer times a power of two, so exact in any order, as the CPU dequantizer.
    const uint8_t* b = chunk_block<T>(row, c);
    const float d = e8m0_half(ldg(b));
LLM_DQ_UNROLL
    for (int j = 0; j < 16; ++j) {
      const uint32_t q = ldg(b + 1 + j);
      v[j] = float(e2m1_doubled(q & 15u)) * d;
      v[j + 16] = float(e2m1_doubled(q >> 4)) * d;
    }
  } else {
    static_assert(T == Type::F32, "dequant_chunk: no device dequantizer for this type");
  }
}

}  // namespace quant::dev

#undef LLM_DQ_FN
#undef LLM_DQ_UNROLL
