// The mixture-of-experts kernels against the CPU reference's own per-op functions (graph/reference_ops.h): top-k
// (ties in index order), the routing weights (softmax, renormalisation), the chosen experts' products in both forms
// (the decode matvec and the expert-grouped prefill tiles) for every weight type the test models use, biases and
// per-slot inputs, gpt-oss's clamped SwiGLU and the weighted sum.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/matvec_id.cuh"
#include "cuda/kernels/moe.cuh"
#include "cuda/kernels/moe_gemm.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "gpu_test.h"
#include "graph/reference_ops.h"

namespace {

using namespace gpu_test;
namespace ref = graph::ref;

std::vector<double> widened(const std::vector<float>& v) { return std::vector<double>(v.begin(), v.end()); }

// The prefill tiles' grid (moe_gemm_tile_slots) against every expert's user tiles, counted here from ids of every
// kind: distinct experts a token (TopK's), all of a token's slots on one expert, every token on one expert, ids out of
// range (no expert's), and one user an expert (the bound reached exactly). Host only: runs without a GPU too.
TEST(MoeTileGrid, SlotsHoldEveryExpertsUserTiles) {
  std::mt19937 rng(77);
  const auto tiles = [](const std::vector<int32_t>& ids, int64_t n_expert, int64_t per_tile) {
    std::vector<int64_t> count(static_cast<size_t>(n_expert));
    for (const int32_t e : ids)
      if (e >= 0 && e < n_expert) ++count[size_t(e)];
    int64_t t = 0;
    for (const int64_t c : count) t += (c + per_tile - 1) / per_tile;
    return t;
  };
  for (const int64_t n_expert : {1, 8, 32, 80, 128, 256})
    for (const int64_t per_tile : {64, 96})
      for (int trial = 0; trial < 40; ++trial) {
        const int64_t k = 1 + int64_t(rng() % uint32_t(std::min<int64_t>(n_expert, 8)));
        const int64_t T = 1 + int64_t(rng() % 700);
        std::vector<int32_t> ids(static_cast<size_t>(k * T));
        const int kind = trial % 4;
        std::vector<int32_t> perm(static_cast<size_t>(n_expert));
        for (int64_t t = 0; t < T; ++t) {
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng);
          for (int64_t j = 0; j < k; ++j) {
            int32_t e = perm[size_t(j)];
            if (kind == 1) e = perm[0];                                  // a token's slots on one expert
            if (kind == 2) e = 0;                                        // every token on expert 0
            if (kind == 3 && rng() % 4 == 0) e = int32_t(n_expert + 3);  // out of range: no expert's
            ids[size_t(t * k + j)] = e;
          }
        }
        const int64_t slots = cuda::moe_gemm_tile_slots(n_expert, k, T, per_tile);
        EXPECT_LE(tiles(ids, n_expert, per_tile), slots)
            << n_expert << " experts, k " << k << ", T " << T << ", tiles of " << per_tile << ", kind " << kind;
      }
  // One user an expert: as many tiles as experts, the bound's worst case.
  std::vector<int32_t> one(128);
  std::iota(one.begin(), one.end(), 0);
  EXPECT_EQ(tiles(one, 128, 64), cuda::moe_gemm_tile_slots(128, 8, 16, 64));
}

TEST(MoeKernels, TopKMatchesReferenceWithTies) {
  REQUIRE_GPU();
  std::mt19937 rng(31);
  for (int64_t n : {8, 32, 33, 128, 200})
    for (int64_t k : {1, 2, 4, 8})
      for (bool ties : {false, true}) {
        const int64_t rows = 13;
        auto a = random_floats(rng, size_t(n * rows), -3.0f, 3.0f);
        if (ties)  // a handful of levels: many exactly equal values, which must come out in index order
          for (auto& x : a) x = std::round(x * 1.5f);
        std::vector<int32_t> want(size_t(k * rows));
        ref::top_k(a.data(), want.data(), n, k, rows);
        auto da = upload(a);
        cuda::DeviceBuffer out(size_t(k * rows) * 4);
        cuda::launch_top_k({da.as<float>(), out.as<int32_t>(), n, k, rows}, nullptr);
        EXPECT_EQ(download<int32_t>(out, want.size()), want) << "n=" << n << " k=" << k << " ties=" << ties;
      }
}

TEST(MoeKernels, WeightsMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(32);
  const int64_t n_expert = 16, k = 4, T = 9;
  const auto scores = random_floats(rng, size_t(n_expert * T), -4.0f, 4.0f);
  std::vector<int32_t> ids(size_t(k * T));
  ref::top_k(scores.data(), ids.data(), n_expert, k, T);
  auto ds = upload(scores), di = upload(ids);
  for (bool softmax : {false, true})
    for (bool normalize : {false, true}) {
      std::vector<float> want(ids.size());
      ref::moe_weights({scores.data(), ids.data(), want.data(), n_expert, k, T, {softmax, normalize}});
      auto out = poisoned_f32(ids.size());
      cuda::MoeWeightsKernelParams p{ds.as<float>(), di.as<int32_t>(), out.as<float>(), n_expert, k, T};
      p.softmax = softmax, p.normalize = normalize;
      cuda::launch_moe_weights(p, nullptr);
      EXPECT_TRUE(close("moe_weights softmax=" + std::to_string(softmax) + " normalize=" + std::to_string(normalize),
                        download<float>(out, want.size()), widened(want), {1e-7}, 1e-6));
    }
}

TEST(MoeKernels, SwiGluOaiAndWeightedSumMatchReference) {
  REQUIRE_GPU();
  std::mt19937 rng(33);
  const int64_t n = 1000;
  const auto gate = random_floats(rng, n, -12.0f, 12.0f), up = random_floats(rng, n, -12.0f, 12.0f);  // both clamps
  std::vector<float> want(n);
  const graph::SwiGluOaiParams sp;
  ref::swiglu_oai(gate.data(), up.data(), want.data(), n, sp);
  auto dg = upload(gate), du = upload(up);
  auto out = poisoned_f32(n);
  cuda::launch_swiglu_oai({dg.as<float>(), du.as<float>(), out.as<float>(), n, sp.alpha, sp.limit}, nullptr);
  EXPECT_TRUE(close("swiglu_oai", download<float>(out, n), widened(want), {1e-6}, 1e-5));

  const int64_t ne0 = 77, k = 4, T = 5;
  const auto a = random_floats(rng, size_t(ne0 * k * T)), w = random_floats(rng, size_t(k * T), 0.0f, 1.0f);
  std::vector<float> ws(size_t(ne0 * T));
  ref::weighted_sum(a.data(), w.data(), ws.data(), ne0, k, T);
  auto da = upload(a), dw = upload(w);
  auto wout = poisoned_f32(ws.size());
  cuda::launch_weighted_sum({da.as<float>(), dw.as<float>(), wout.as<float>(), ne0, k, T}, nullptr);
  EXPECT_TRUE(close("weighted_sum", download<float>(wout, ws.size()), widened(ws), {1e-6}, 1e-5));
}

// Random blocks as gpu_test::random_weights, with MXFP4's scale bytes kept in a range of O(1) values (random ones
// reach 2^127).
std::vector<uint8_t> expert_weights(std::mt19937& rng, quant::Type t, int64_t K, int64_t rows) {
  auto w = random_weights(rng, t, K, rows);
  if (t == quant::Type::MXFP4)
    for (size_t b = 0; b < w.size(); b += 17) w[b] = uint8_t(121 + rng() % 6);
  return w;
}

struct IdCase {
  quant::Type type;
  int64_t K, N, n_expert, k, T;
  bool per_slot_x, bias;
  bool skewed = false;  // every token's first slot takes expert 0: one expert with T users, many user tiles
};

void run_mul_mat_id(const IdCase& c, std::mt19937& rng) {
  const std::string what = std::string(quant::type_name(c.type)) + " K=" + std::to_string(c.K) + " N=" +
                           std::to_string(c.N) + " experts=" + std::to_string(c.n_expert) + " k=" +
                           std::to_string(c.k) + " T=" + std::to_string(c.T) + (c.per_slot_x ? " per-slot x" : "") +
                           (c.bias ? " bias" : "");
  const auto w = expert_weights(rng, c.type, c.K, c.N * c.n_expert);
  const int64_t X = c.per_slot_x ? c.k : 1;
  const auto x = random_floats(rng, size_t(c.K * X * c.T));
  const auto bias = random_floats(rng, size_t(c.N * c.n_expert));
  std::vector<int32_t> ids(size_t(c.k * c.T));  // distinct experts per token, as TopK gives them
  std::vector<int32_t> perm(size_t(c.n_expert));
  for (int64_t t = 0; t < c.T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    if (t % 3 == 0) std::sort(perm.begin(), perm.begin() + c.k);  // some tokens share their experts' order
    if (c.skewed) std::swap(perm[0], *std::find(perm.begin(), perm.end(), 0));
    std::copy(perm.begin(), perm.begin() + c.k, ids.begin() + t * c.k);
  }
  std::vector<float> want(size_t(c.N * c.k * c.T));
  ref::MulMatIdArgs ra;
  ra.wq = w.data(), ra.wtype = c.type, ra.row_bytes = quant::row_bytes(c.type, c.K), ra.x = x.data();
  ra.ids = ids.data(), ra.bias = c.bias ? bias.data() : nullptr, ra.out = want.data();
  ra.K = c.K, ra.N = c.N, ra.n_expert = c.n_expert, ra.x_slots = X, ra.k = c.k, ra.t = c.T;
  ref::mul_mat_id(ra, nullptr);
  // Tolerances from the size of the terms, mag = sum |w x| over K against the reference's double. matvec_id: float32
  // products and sums. moe_gemm: the half tiles (gpu_test::half_tile_tolerance), ceil(K / 16) k-steps.
  const std::vector<uint8_t> wz = c.type == quant::Type::Q4_K ? q4_k_codes_zeroed(w) : w;
  std::vector<double> atol(want.size()), htol(want.size());
  const double k_steps = double((c.K + 15) / 16);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t j = 0; j < c.k; ++j) {
      const int32_t e = ids[size_t(t * c.k + j)];
      for (int64_t n = 0; n < c.N; ++n) {
        const auto row = ref_row(w, c.type, c.K, e * c.N + n);
        const auto zrow = c.type == quant::Type::Q4_K ? ref_row(wz, c.type, c.K, e * c.N + n) : row;
        const float* xs = &x[size_t((t * X + (X == 1 ? 0 : j)) * c.K)];
        double mag = 0;
        for (int64_t i = 0; i < c.K; ++i) mag += std::fabs(double(row[size_t(i)]) * xs[i]);
        const size_t o = size_t((t * c.k + j) * c.N + n);
        const double b = c.bias ? std::fabs(double(bias[size_t(e * c.N + n)])) : 0.0;
        atol[o] = 2e-6 * mag + 1e-6;
        htol[o] = half_tile_tolerance(c.type, row, zrow, xs, c.K, b, k_steps);
      }
    }
  // The arena's alignment for the weights (their offsets are 256-byte aligned there).
  auto dw = upload(w), dx = upload(x), di = upload(ids), db = upload(bias);
  cuda::MatvecIdParams p;
  p.w = dw.get(), p.type = c.type, p.x = dx.as<float>(), p.x_slots = X, p.ids = di.as<int32_t>();
  p.bias = c.bias ? db.as<float>() : nullptr, p.K = c.K, p.N = c.N, p.n_expert = c.n_expert, p.k = c.k, p.T = c.T;
  const size_t bytes = cuda::moe_gemm_scratch_bytes(c.n_expert, c.k, c.T, c.K, X);
  cuda::DeviceBuffer scratch(bytes);
  // The matvec, the prefill tiles as they run (the fragment kernels where one applies) and the half tiles alone, each
  // on the plain grid, then both on the compact grid (MoeGemmOptions::compact_tiles): the same dots, so the same bits.
  const auto all = [&](const std::string& how) {
    std::vector<std::vector<float>> got;
    for (int way = 0; way < 5; ++way) {
      auto out = poisoned_f32(want.size());
      p.y = out.as<float>();
      cuda::MoeGemmOptions o;
      o.half_tiles = way == 2 || way == 4;
      o.compact_tiles = way >= 3;
      if (way == 0) cuda::launch_matvec_id(p, nullptr);
      else cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr, o);
      got.push_back(download<float>(out, want.size()));
      if (way >= 3) {
        EXPECT_TRUE(got.back() == got[size_t(way - 2)]) << "compact grid, " << (way == 3 ? "tiles " : "half tiles ")
                                                        << what << how;
        continue;
      }
      const std::string name = way == 0 ? "matvec_id " : way == 1 ? "moe_gemm " : "moe_gemm half tiles ";
      EXPECT_TRUE(close(name + what + how, got.back(), widened(want), way == 0 ? atol : htol, 0.0));
    }
    return got;
  };
  const auto plain = all("");
  if (c.type != quant::Type::MXFP4 || !cuda::mxfp4_split_fits(c.K, c.N)) return;
  // Recoded at upload (mxfp4_recode.cuh): the same values, so the same bits from the same kernels (== also takes -0
  // for +0, the one code the recoding changes in value's sign); the fragment kernel takes its products in another
  // order inside each chunk (moe_fragments.cu), so it is held to the reference's bound above instead.
  cuda::DeviceBuffer mx_scratch(size_t(17 * c.N * (c.K / 32)));
  cuda::launch_mxfp4_recode(dw.as<uint8_t>(), c.K, c.N, c.n_expert, mx_scratch.as<uint8_t>(), mx_scratch.bytes(),
                            nullptr);
  p.recoded = true;
  const auto recoded = all(" recoded");
  EXPECT_TRUE(recoded[0] == plain[0]) << "matvec_id recoded " << what;
  EXPECT_TRUE(recoded[2] == plain[2]) << "moe_gemm half tiles recoded " << what;
}

TEST(MoeKernels, MulMatIdMatchesReferenceForEveryModelType) {
  REQUIRE_GPU();
  std::mt19937 rng(34);
  using quant::Type;
  for (const Type t : {Type::F32, Type::F16, Type::Q8_0, Type::Q4_0, Type::Q5_0, Type::Q4_K, Type::Q5_K, Type::Q6_K,
                       Type::MXFP4}) {
    const int64_t K = quant::traits(t).block_elems == 256 ? 512 : 320;  // 320: ten chunks, a partial K-step of 64
    run_mul_mat_id({t, K, 128, 8, 2, 1, false, false}, rng);  // decode, qwen3moe-like
    run_mul_mat_id({t, K, 70, 8, 4, 3, true, true}, rng);     // a few tokens, per-slot x (down), biases, odd N
    run_mul_mat_id({t, K, 64, 8, 4, 37, false, true}, rng);   // prefill: several users per expert, partial tiles
  }
  // gpt-oss-20b's expert shape (K 2880: 90 MXFP4 blocks; 32 experts, top 4) in a short prefill, and many tokens
  // of one expert group (~75 users an expert: the 128-user tiles).
  run_mul_mat_id({Type::MXFP4, 2880, 200, 32, 4, 20, false, true}, rng);
  run_mul_mat_id({Type::Q8_0, 256, 64, 4, 2, 150, false, false}, rng);
  // Tiles of 64 users (few users per expert on average) with one expert chosen by every token: four user tiles of
  // that expert, per-slot x; a K of 81 chunks (a partial 128-element slice) and N past one 128-row tile.
  run_mul_mat_id({Type::Q4_0, 2592, 200, 16, 2, 200, true, true, true}, rng);
  // Q6_K's and Q4_K's fragment tiles (64 users): four user tiles of expert 0, N past one 128-row tile (Q4_K with
  // per-slot x and biases). Q6_K's K of three blocks: rows and slices at every 2-byte alignment mod 16.
  run_mul_mat_id({Type::Q6_K, 768, 136, 16, 2, 200, false, false, true}, rng);
  run_mul_mat_id({Type::Q4_K, 768, 136, 16, 2, 200, true, true, true}, rng);
  // Many experts of a few users each (Qwen3-30B-A3B's 128, and 80: a partial round of the tile grid's scan over the
  // experts, moe_tiles.cuh's tile_place): one user tile an expert, the grid's last pairs past the live ones.
  run_mul_mat_id({Type::Q4_K, 512, 128, 128, 8, 40, false, false}, rng);
  run_mul_mat_id({Type::Q6_K, 768, 64, 80, 4, 30, true, true}, rng);
  // Recoded MXFP4's 96-user fragment tiles (~40-90 users an expert): four user tiles of expert 0 and a partial row
  // tile; then an odd count of blocks (91: the last K step half empty) at N 128.
  run_mul_mat_id({Type::MXFP4, 2880, 200, 8, 2, 300, true, true, true}, rng);
  run_mul_mat_id({Type::MXFP4, 2912, 128, 8, 2, 200, false, true}, rng);
}

// MXFP4 recoded at upload, at every scale byte (each block its own, 0..255: the tiles' paths below 99, up to 128,
// up to 142 and past it, where values overflow half): matvec_id and the half tiles give the file layout's bits
// (both NaN where the half tiles overflow to inf against a zero code); the fragment tiles agree with the half tiles
// within the order of their sums.
TEST(MoeKernels, RecodedMxfp4GivesTheFileLayoutsBitsAtEveryScale) {
  REQUIRE_GPU();
  std::mt19937 rng(36);
  const int64_t K = 2880, N = 96, n_expert = 4, k = 2, T = 24;
  auto w = random_weights(rng, quant::Type::MXFP4, K, N * n_expert);
  for (size_t b = 0; b < w.size(); b += 17) w[b] = uint8_t((b / 17) % 256);
  const auto x = random_floats(rng, size_t(K * T));
  std::vector<int32_t> ids(size_t(k * T));
  for (int64_t t = 0; t < T; ++t)
    ids[size_t(t * k)] = int32_t(t % n_expert), ids[size_t(t * k + 1)] = int32_t((t + 1) % n_expert);
  auto dw = upload(w), dx = upload(x), di = upload(ids);
  const size_t bytes = cuda::moe_gemm_scratch_bytes(n_expert, k, T, K, 1);
  cuda::DeviceBuffer scratch(bytes);
  cuda::MatvecIdParams p;
  p.w = dw.get(), p.type = quant::Type::MXFP4, p.x = dx.as<float>(), p.ids = di.as<int32_t>();
  p.K = K, p.N = N, p.n_expert = n_expert, p.k = k, p.T = T;
  enum class Way { kMatvec, kTiles, kHalfTiles };
  const auto run = [&](Way way) {
    auto out = poisoned_f32(size_t(N * k * T));
    p.y = out.as<float>();
    cuda::MoeGemmOptions o;
    o.half_tiles = way == Way::kHalfTiles;
    if (way == Way::kMatvec) cuda::launch_matvec_id(p, nullptr);
    else cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr, o);
    return download<float>(out, size_t(N * k * T));
  };
  const auto plain_rows = run(Way::kMatvec), plain_tiles = run(Way::kHalfTiles);
  // sum |w x| per output: the half tiles over the weights with every code's sign cleared and |x|.
  auto wa = w;
  for (size_t b = 0; b < wa.size(); b += 17)
    for (size_t j = 1; j < 17; ++j) wa[b + j] &= 0x77;
  std::vector<float> xa(x.size());
  for (size_t i = 0; i < x.size(); ++i) xa[i] = std::fabs(x[i]);
  auto dwa = upload(wa), dxa = upload(xa);
  p.w = dwa.get(), p.x = dxa.as<float>();
  const auto mag = run(Way::kHalfTiles);
  p.w = dw.get(), p.x = dx.as<float>();
  cuda::DeviceBuffer mx_scratch(size_t(17 * N * (K / 32)));
  cuda::launch_mxfp4_recode(dw.as<uint8_t>(), K, N, n_expert, mx_scratch.as<uint8_t>(), mx_scratch.bytes(), nullptr);
  p.recoded = true;
  const auto recoded_rows = run(Way::kMatvec), recoded_half = run(Way::kHalfTiles), recoded_tiles = run(Way::kTiles);
  const auto same = [](float a, float b) { return a == b || (std::isnan(a) && std::isnan(b)); };
  int finite = 0;
  for (size_t i = 0; i < plain_rows.size(); ++i) {
    ASSERT_TRUE(same(plain_rows[i], recoded_rows[i])) << "matvec_id output " << i;
    ASSERT_TRUE(same(plain_tiles[i], recoded_half[i])) << "moe_gemm half tiles output " << i;
    // The fragment kernel (moe_fragments.cu): the same products of halves, summed in another order inside each
    // 16-element chunk; fp32 sums of 180 mma steps differ by under 2^-14 sum |w x|. Overflowed outputs (inf, or NaN
    // from inf - inf) depend on which products overflow, not on the order: the same bits.
    if (!std::isfinite(recoded_half[i]) || !std::isfinite(mag[i])) {
      ASSERT_TRUE(same(recoded_half[i], recoded_tiles[i])) << "moe_gemm output " << i;
    } else {
      ++finite;
      ASSERT_LE(std::fabs(recoded_tiles[i] - recoded_half[i]), std::ldexp(double(mag[i]), -14) + 1e-30)
          << "moe_gemm output " << i << " against the half tiles";
    }
  }
  EXPECT_GT(finite, 100) << "too few outputs within half's range to compare";
}

// The prefill tiles' results do not depend on the batch: a token's outputs have the same bits whether it runs among
// 150 tokens, among the first 40, or in reverse order (other tiles, other columns, other neighbours in each tile).
TEST(MoeKernels, PrefillTilesAreBatchInvariant) {
  REQUIRE_GPU();
  for (const quant::Type type : {quant::Type::Q4_K, quant::Type::Q6_K, quant::Type::Q8_0}) {
    SCOPED_TRACE(quant::type_name(type));
    std::mt19937 rng(35);
    const int64_t K = 512, N = 160, n_expert = 8, k = 2, T = 150, sub = 40;
    const auto w = expert_weights(rng, type, K, N * n_expert);
    const auto x = random_floats(rng, size_t(K * T));
    std::vector<int32_t> ids(static_cast<size_t>(k * T)), perm(static_cast<size_t>(n_expert));
    for (int64_t t = 0; t < T; ++t) {
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), rng);
      std::copy(perm.begin(), perm.begin() + k, ids.begin() + t * k);
    }
    auto run = [&](const std::vector<float>& xv, const std::vector<int32_t>& iv, int64_t t_count) {
      auto dw = upload(w), dx = upload(xv), di = upload(iv);
      auto out = poisoned_f32(size_t(N * k * t_count));
      cuda::MatvecIdParams p;
      p.w = dw.get(), p.type = type, p.x = dx.as<float>(), p.ids = di.as<int32_t>(), p.y = out.as<float>();
      p.K = K, p.N = N, p.n_expert = n_expert, p.k = k, p.T = t_count;
      const size_t bytes = cuda::moe_gemm_scratch_bytes(n_expert, k, t_count, K, 1);
      cuda::DeviceBuffer scratch(bytes);
      cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr);
      return download<float>(out, size_t(N * k * t_count));
    };
    const auto all = run(x, ids, T);
    const auto first = run(std::vector<float>(x.begin(), x.begin() + sub * K),
                           std::vector<int32_t>(ids.begin(), ids.begin() + sub * k), sub);
    std::vector<float> xr(x.size());
    std::vector<int32_t> ir(ids.size());
    for (int64_t t = 0; t < T; ++t) {
      std::copy(x.begin() + t * K, x.begin() + (t + 1) * K, xr.begin() + (T - 1 - t) * K);
      std::copy(ids.begin() + t * k, ids.begin() + (t + 1) * k, ir.begin() + (T - 1 - t) * k);
    }
    const auto rev = run(xr, ir, T);
    const size_t row = size_t(N * k);
    for (int64_t t = 0; t < T; ++t)
      for (size_t i = 0; i < row; ++i) {
        const float a = all[size_t(t) * row + i];
        ASSERT_EQ(a, rev[size_t(T - 1 - t) * row + i]) << "reversed batch, token " << t << " element " << i;
        if (t < sub) {
          ASSERT_EQ(a, first[size_t(t) * row + i]) << "first " << sub << " tokens, token " << t;
        }
      }
  }
}

}  // namespace

// The prefill activation epilogue (MoeGemmOptions::glu): the later product of a gate/up pair writes act(gate, up) as
// half, the down product's x, instead of its floats; the down launch then reads it (x_half). Against the unfused
// launches (both products stored, the element-wise activation, the down launch's own x pass): the same half bits and
// the same down outputs, for the fragment kernels (Q4_K, Q6_K), the half tiles (Q8_0), both activations and either
// product launched second; and Q4_K's pair in one launch (MoeGluOut::up_w), the same half bits.
TEST(MoeKernels, ActivationEpilogueGivesTheUnfusedBits) {
  REQUIRE_GPU();
  std::mt19937 rng(37);
  const int64_t K = 512, N = 256, n_expert = 8, k = 2, T = 45, N_down = 96;  // N: the down product's K, whole blocks
  std::vector<int32_t> ids(static_cast<size_t>(k * T)), perm(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy(perm.begin(), perm.begin() + k, ids.begin() + t * k);
  }
  // x small enough that the activations stay within half's range (Q6_K's random weights reach ~80).
  const auto x = random_floats(rng, size_t(K * T), -0.1f, 0.1f);
  const auto bias = random_floats(rng, size_t(N * n_expert));
  auto dx = upload(x), di = upload(ids), db = upload(bias);
  const size_t users = size_t(k * T), acts = users * size_t(N);
  const size_t bytes = cuda::moe_glu_scratch_bytes(n_expert, k, T, K, 1, N);
  ASSERT_GE(bytes, cuda::moe_gemm_scratch_bytes(n_expert, k, T, N, k));  // the down launch's own need fits too
  cuda::DeviceBuffer scratch(bytes);
  auto* act_half = reinterpret_cast<__half*>(scratch.as<uint8_t>() + cuda::moe_glu_out_offset(n_expert, k, T, K, 1));
  for (const quant::Type type : {quant::Type::Q4_K, quant::Type::Q6_K, quant::Type::Q8_0})
    for (const cuda::ExpertAct act : {cuda::ExpertAct::SwiGlu, cuda::ExpertAct::SwiGluOai})
      for (const bool gate_second : {false, true}) {
        const std::string what = std::string(quant::type_name(type)) +
                                 (act == cuda::ExpertAct::SwiGlu ? " swiglu" : " swiglu_oai") +
                                 (gate_second ? ", gate launched second" : ", up launched second");
        auto dg = upload(expert_weights(rng, type, K, N * n_expert));
        auto du = upload(expert_weights(rng, type, K, N * n_expert));
        auto dd = upload(expert_weights(rng, type, N, N_down * n_expert));
        const graph::SwiGluOaiParams oai;
        cuda::MatvecIdParams p;
        p.type = type, p.x = dx.as<float>(), p.ids = di.as<int32_t>(), p.bias = db.as<float>();
        p.K = K, p.N = N, p.n_expert = n_expert, p.k = k, p.T = T;
        // Unfused: both products stored, the element-wise activation, the down launch converting it.
        auto gate = poisoned_f32(acts), up = poisoned_f32(acts), h = poisoned_f32(acts);
        p.w = dg.get(), p.y = gate.as<float>();
        cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr);
        p.w = du.get(), p.y = up.as<float>();
        cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr);
        if (act == cuda::ExpertAct::SwiGlu)
          cuda::launch_swiglu({gate.as<float>(), up.as<float>(), h.as<float>(), int64_t(acts)}, nullptr);
        else
          cuda::launch_swiglu_oai({gate.as<float>(), up.as<float>(), h.as<float>(), int64_t(acts), oai.alpha,
                                   oai.limit},
                                  nullptr);
        const auto h_host = download<float>(h, acts);
        cuda::MatvecIdParams pd = p;
        pd.w = dd.get(), pd.x = h.as<float>(), pd.x_slots = k, pd.bias = nullptr, pd.K = N, pd.N = N_down;
        const size_t yu_count = users * size_t(N_down);
        auto y_unfused = poisoned_f32(yu_count);
        pd.y = y_unfused.as<float>();
        cuda::MoeGemmOptions ou;
        ou.reuse_groups = true;  // as the executor runs a down product: the pair's grouping, so the same tiles
        cuda::launch_moe_gemm(pd, scratch.get(), bytes, nullptr, ou);
        // Fused: the first product stored, the second writing the activation, the down launch reading it.
        auto first = poisoned_f32(acts), unused = poisoned_f32(acts);
        CUDA_CHECK(cudaMemset(act_half, 0xff, acts * 2));
        p.w = gate_second ? du.get() : dg.get(), p.y = first.as<float>();
        cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr);
        cuda::MoeGemmOptions o;
        o.glu.other = first.as<float>(), o.glu.out = act_half, o.glu.acc_is_gate = gate_second, o.glu.act = act;
        o.glu.alpha = oai.alpha, o.glu.limit = oai.limit;
        p.w = gate_second ? dg.get() : du.get(), p.y = unused.as<float>();
        cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr, o);
        const auto same_activations = [&](const std::string& how) {
          std::vector<uint16_t> got(acts);
          CUDA_CHECK(cudaMemcpy(got.data(), act_half, acts * 2, cudaMemcpyDeviceToHost));
          for (size_t i = 0; i < acts; ++i) {
            const __half want = __float2half_rn(h_host[i]);
            ASSERT_EQ(got[i], *reinterpret_cast<const uint16_t*>(&want)) << what << how << ", activation " << i;
          }
        };
        same_activations("");
        // Both products in one launch (moe_gemm_pairs: Q4_K here), neither stored.
        if (cuda::moe_gemm_pairs(type, n_expert, k, T) && !gate_second) {
          CUDA_CHECK(cudaMemset(act_half, 0xff, acts * 2));
          cuda::MoeGemmOptions op;
          op.glu.out = act_half, op.glu.act = act, op.glu.alpha = oai.alpha, op.glu.limit = oai.limit;
          op.glu.up_w = du.get(), op.glu.up_bias = db.as<float>();
          p.w = dg.get(), p.y = unused.as<float>();
          cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr, op);
          same_activations(", one launch");
          // On the compact grid (one tile a block) too.
          CUDA_CHECK(cudaMemset(act_half, 0xff, acts * 2));
          op.compact_tiles = true;
          cuda::launch_moe_gemm(p, scratch.get(), bytes, nullptr, op);
          same_activations(", one launch, compact grid");
        }
        auto y_fused = poisoned_f32(users * size_t(N_down));
        pd.y = y_fused.as<float>(), pd.x = unused.as<float>();  // not read: x_half
        cuda::MoeGemmOptions od;
        od.reuse_groups = true, od.x_half = act_half;
        cuda::launch_moe_gemm(pd, scratch.get(), bytes, nullptr, od);
        // Bit for bit (memcmp: an inf activation would make NaN outputs, equal bits that == calls different).
        const auto yf = download<float>(y_fused, y_fused.bytes() / 4), yu = download<float>(y_unfused, yu_count);
        EXPECT_EQ(0, std::memcmp(yf.data(), yu.data(), yu_count * 4)) << what << ": down outputs";
      }
}
