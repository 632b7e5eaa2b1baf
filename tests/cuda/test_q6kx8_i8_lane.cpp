// The lane arithmetic of regrouped Q6_K on the i8 kernel (cuda/kernels/q6kx8_i8_lane.cuh), on the host: a warp's 32
// lanes load their bytes at the header's offsets, build their A fragments and mask their halves of B fragments laid
// out as batch_mm_i8.cu's image lays out x, an emulated mma.m16n8k32 (the PTX fragment layouts, integer sums)
// multiplies them, and add_sums / block_d turn the lanes' C values into sums. Those must be the dequantized rows (the CPU reference's
// decoder, on the file's layout) times the image's integers and steps, within float rounding. No device needed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/kernels/q6kx8_i8_lane.cuh"
#include "gpu_test.h"

namespace {

using namespace gpu_test;
using quant::Type;
namespace ql = cuda::q6kx8_i8;

constexpr int kTokens = 4;
constexpr float kSteps = 32639.0f;  // batch_mm_i8.cu's split of x into int16 steps per run of 32

// x of kTokens tokens as the image holds it: per token and run of 32 a step, per element an integer c (x ~ c step).
struct Image {
  std::vector<int> c;       // [token][K]
  std::vector<float> step;  // [token][K / 32]
};
Image image_of(const std::vector<float>& x, int64_t K) {
  Image im{std::vector<int>(size_t(kTokens * K)), std::vector<float>(size_t(kTokens * K / 32))};
  for (int t = 0; t < kTokens; ++t)
    for (int64_t r = 0; r < K / 32; ++r) {
      float m = 0.0f;
      for (int j = 0; j < 32; ++j) m = std::fmax(m, std::fabs(x[size_t(t * K + 32 * r + j)]));
      const float inv = m > 0.0f ? kSteps / m : 0.0f;
      for (int j = 0; j < 32; ++j)
        im.c[size_t(t * K + 32 * r + j)] = int(std::nearbyint(x[size_t(t * K + 32 * r + j)] * inv));
      im.step[size_t(t * (K / 32) + r)] = m * (1.0f / kSteps);
    }
  return im;
}

// Byte j of a register as a signed value.
int sbyte(uint32_t v, int j) { return int(int8_t(uint8_t(v >> (8 * j)))); }

// One warp's mma.sync.m16n8k32.row.col.s32.s8.s8.s32 with zero C (lane = 4 g + q): A registers 0 / 2 hold row g at
// k 4 q .. and 16 + 4 q .., registers 1 / 3 row g + 8; B registers 0 / 1 column g at k 4 q .. and 16 + 4 q ..; C values
// 0, 1 row g columns 2 q, 2 q + 1, values 2, 3 row g + 8.
void emulated_mma(const uint32_t (&a)[32][4], const uint32_t (&b)[32][2], int (&c)[32][4]) {
  int A[16][32] = {}, B[32][8] = {};
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, q = lane & 3;
    for (int j = 0; j < 4; ++j) {
      A[g][4 * q + j] = sbyte(a[lane][0], j), A[g + 8][4 * q + j] = sbyte(a[lane][1], j);
      A[g][16 + 4 * q + j] = sbyte(a[lane][2], j), A[g + 8][16 + 4 * q + j] = sbyte(a[lane][3], j);
      B[4 * q + j][g] = sbyte(b[lane][0], j), B[16 + 4 * q + j][g] = sbyte(b[lane][1], j);
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane >> 2, q = lane & 3;
    for (int v = 0; v < 4; ++v) {
      const int row = g + 8 * (v >> 1), col = 2 * q + (v & 1);
      int s = 0;
      for (int k = 0; k < 32; ++k) s += A[row][k] * B[k][col];
      c[lane][v] = s;
    }
  }
}

// Lane 4 g + q's B registers for k-block kb (0-based along K): column g is token g / 2's high bytes (g even) or low
// bytes (odd), v = 256 hi + lo with lo in [-128, 127]; register 0 elements 8 q .. 8 q + 3, register 1 8 q + 4 ...
void b_fragment(const Image& im, int64_t K, int64_t kb, int lane, uint32_t (&b)[2]) {
  const int g = lane >> 2, q = lane & 3, t = g >> 1;
  for (int r = 0; r < 2; ++r) {
    b[r] = 0;
    for (int j = 0; j < 4; ++j) {
      const int v = im.c[size_t(t * K + 32 * kb + 8 * q + 4 * r + j)], hi = (v + 128) >> 8, lo = v - 256 * hi;
      b[r] |= (uint32_t(g % 2 == 0 ? hi : lo) & 0xffu) << (8 * j);
    }
  }
}

// What a lane loads of block `block` of a regrouped row (the device loads the same offsets).
ql::RowRegs load(const uint8_t* row, int block, int q) {
  const uint8_t* run = ql::run_of(row, block);
  const int b = block & 7;
  ql::RowRegs r;
  for (int p = 0; p < 4; ++p) {
    std::memcpy(&r.ql[p], run + ql::ql_offset(b, p, q), 8);
    std::memcpy(&r.qh[p], run + ql::qh_offset(b, p, q), 4);
  }
  std::memcpy(&r.sc, run + ql::scales_offset(b), 16);
  r.d = 0;
  std::memcpy(&r.d, run + ql::d_offset(b), 2);
  return r;
}

TEST(Q6Kx8I8Lane, EmulatedProductsMatchTheDequantizedRows) {
  std::mt19937 rng(6608);
  for (int64_t K : {2048, 4096}) {
    const int64_t N = 16;  // one tile: lane g's rows g and g + 8
    const auto w = random_weights(rng, Type::Q6_K, K, N);
    std::vector<uint8_t> regrouped(w.size());
    cuda::q6_kx8_regroup_host(w.data(), regrouped.data(), K, N);
    const auto x = random_floats(rng, size_t(kTokens * K));
    const Image im = image_of(x, K);
    const size_t rb = quant::row_bytes(Type::Q6_K, K);
    float acc[32][2] = {};
    for (int block = 0; block < int(K / ql::kBlockElems); ++block) {
      ql::RowRegs regs[32][2];
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r)
          regs[lane][r] = load(regrouped.data() + size_t((lane >> 2) + 8 * r) * rb, block, lane & 3);
      float A[32][2] = {};
      for (int kb = 0; kb < 8; ++kb) {
        uint32_t a[32][4], b1[32][2], b2[32][2];
        for (int lane = 0; lane < 32; ++lane) {
          ql::a_fragment(regs[lane][0], regs[lane][1], kb, a[lane]);
          uint32_t b[2];
          b_fragment(im, K, int64_t(block) * 8 + kb, lane, b);
          ql::b_halves(lane & 3, b[0], b[1], b1[lane], b2[lane]);
        }
        int c1[32][4], c2[32][4];
        emulated_mma(a, b1, c1);
        emulated_mma(a, b2, c2);
        for (int lane = 0; lane < 32; ++lane) {
          const float xs = im.step[size_t((lane & 3) * (K / 32) + block * 8 + kb)];
          ql::add_sums(regs[lane][0], regs[lane][1], kb, c1[lane], c2[lane], xs, A[lane]);
        }
      }
      for (int lane = 0; lane < 32; ++lane)
        for (int r = 0; r < 2; ++r) acc[lane][r] = std::fma(ql::block_d(regs[lane][r]), A[lane][r], acc[lane][r]);
    }
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < 2; ++r) {
        const int64_t n = (lane >> 2) + 8 * r;
        const int t = lane & 3;
        const auto values = ref_row(w, Type::Q6_K, K, n);  // the GGUF layout's decoder
        double want = 0.0, mag = 0.0;
        for (int64_t k = 0; k < K; ++k) {
          const double term =
              double(values[size_t(k)]) * im.c[size_t(t * K + k)] * double(im.step[size_t(t * (K / 32) + k / 32)]);
          want += term, mag += std::fabs(term);
        }
        ASSERT_NEAR(acc[lane][r], want, 1e-5 * mag + 1e-30)
            << "K=" << K << " row " << n << " token " << t << " (lane " << lane << ")";
      }
  }
}

// Every code at every byte and run: c - 32 as a signed byte (the random rows above need not reach each one).
TEST(Q6Kx8I8Lane, SignedCodesCoverEveryCode) {
  for (int hi = 0; hi < 2; ++hi)
    for (int w = 0; w < 2; ++w)
      for (int c = 0; c < 64; ++c)
        for (int j = 0; j < 4; ++j) {
          // Value 4 w + j of the lane's 8: its ql byte's nibble (low for run 0, high for run 1), its high bits in
          // nibble 4 w + j of h (bits 0-1 for run 0, 2-3 for run 1).
          const uint32_t ql = uint32_t(c & 15) << (8 * j + 4 * hi);
          const uint32_t h = uint32_t(c >> 4) << (4 * (4 * w + j) + 2 * hi);
          const uint32_t got = ql::signed_codes(ql, h, w, hi);
          for (int o = 0; o < 4; ++o)
            ASSERT_EQ(sbyte(got, o), o == j ? c - 32 : -32)
                << "code " << c << " run " << hi << " word " << w << " byte " << j << ", out byte " << o;
        }
}

}  // namespace
