// The fused decode kernels of a mixture (expert_matvec.cuh, moe.cuh launch_moe_route) against the CPU reference's
// per-op functions composed as the unfused graph computes them: gate/up with their activation, down with the
// weighted sum, biases and the residual, and routing in one launch. Tolerances: float32 sums in another order than
// the reference's double, plus the int16 rounding of x by its documented bound (gpu_test.h int16_row_bound), carried
// through the activation and the weighted sum.
#include <algorithm>
#include <cstring>
#include <numeric>

#include "cuda/context.h"
#include "cuda/kernels/expert_matvec.cuh"
#include "cuda/kernels/matvec_f32_cols.cuh"
#include "cuda/kernels/moe.cuh"
#include "cuda/kernels/mxfp4_recode.cuh"
#include "gpu_test.h"
#include "graph/reference_ops.h"

namespace {

using namespace gpu_test;
namespace ref = graph::ref;
using quant::Type;

std::vector<uint8_t> expert_weights(std::mt19937& rng, Type t, int64_t K, int64_t rows) {
  auto w = random_weights(rng, t, K, rows);
  if (t == Type::MXFP4)  // scale bytes of O(1) values (random ones reach 2^127)
    for (size_t b = 0; b < w.size(); b += 17) w[b] = uint8_t(121 + rng() % 6);
  return w;
}

// k distinct experts per token; slot 1 of token 0 out of range when `invalid` (a zero row / no contribution).
std::vector<int32_t> expert_ids(std::mt19937& rng, int64_t n_expert, int64_t k, int64_t T, bool invalid) {
  std::vector<int32_t> ids(static_cast<size_t>(k * T)), perm(static_cast<size_t>(n_expert));
  for (int64_t t = 0; t < T; ++t) {
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    std::copy(perm.begin(), perm.begin() + k, ids.begin() + t * k);
  }
  if (invalid && k > 1) ids[1] = int32_t(n_expert + 3);
  return ids;
}

// The reference's products [N, k, T] of the chosen experts (zero rows for an out-of-range id), and per output the
// error a float32 int16-activation kernel may add: a few ulps of sum |w x| plus the int16 rounding bound.
struct Products {
  std::vector<float> y;
  std::vector<double> err;
};
Products products(const std::vector<uint8_t>& w, Type t, const std::vector<float>& x, int64_t x_slots,
                  const std::vector<int32_t>& ids, const std::vector<float>* bias, int64_t K, int64_t N,
                  int64_t n_expert, int64_t k, int64_t T) {
  Products p;
  p.y.assign(size_t(N * k * T), 0.0f);
  p.err.assign(p.y.size(), 0.0);
  // The reference refuses out-of-range ids: it computes expert 0 there, whose rows are then zeroed.
  std::vector<int32_t> valid = ids;
  for (auto& e : valid) e = e >= 0 && e < n_expert ? e : 0;
  ref::MulMatIdArgs ra;
  ra.wq = w.data(), ra.wtype = t, ra.row_bytes = quant::row_bytes(t, K), ra.x = x.data(), ra.ids = valid.data();
  ra.bias = bias ? bias->data() : nullptr, ra.out = p.y.data();
  ra.K = K, ra.N = N, ra.n_expert = n_expert, ra.x_slots = x_slots, ra.k = k, ra.t = T;
  ref::mul_mat_id(ra, nullptr);
  for (int64_t tt = 0; tt < T; ++tt)
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = ids[size_t(tt * k + j)];
      if (e < 0 || e >= n_expert) {
        std::fill_n(p.y.begin() + (tt * k + j) * N, N, 0.0f);
        continue;
      }
      const float* xs = &x[size_t((tt * x_slots + (x_slots == 1 ? 0 : j)) * K)];
      for (int64_t n = 0; n < N; ++n) {
        const auto row = ref_row(w, t, K, e * N + n);
        double mag = 0;
        for (int64_t i = 0; i < K; ++i) mag += std::fabs(double(row[size_t(i)]) * xs[i]);
        const uint8_t* rq = w.data() + size_t(e * N + n) * ra.row_bytes;
        p.err[size_t((tt * k + j) * N + n)] = 2e-6 * mag + 1e-6 + int16_row_bound(rq, t, xs, K);
      }
    }
  return p;
}

float act(cuda::ExpertAct a, float g, float u) {
  float out = 0.0f;
  if (a == cuda::ExpertAct::SwiGlu) {
    ref::swiglu(&g, &u, &out, 1);
  } else {
    ref::swiglu_oai(&g, &u, &out, 1, graph::SwiGluOaiParams{});
  }
  return out;
}

// The MXFP4 experts as the session leaves them on the device when it recodes them (weight_layouts.h).
void recode_on_device(cuda::DeviceBuffer& w, int64_t K, int64_t N, int64_t n_expert) {
  cuda::DeviceBuffer scratch(size_t(17 * N * (K / 32)));
  cuda::launch_mxfp4_recode(w.as<uint8_t>(), K, N, n_expert, scratch.as<uint8_t>(), scratch.bytes(), nullptr);
}

struct GluCase {
  Type type;
  int64_t K, N, n_expert, k, T;
  cuda::ExpertAct act;
  bool bias, invalid;
  bool recoded = false;  // MXFP4 recoded on the device first (mxfp4_recode.cuh)
  bool norm = false;     // x an RmsNorm's x w with its sums of squares beside (ExpertGluParams::norm_ss)
};

// Each token's x w / rms(x) as the reference's RmsNorm computes it: the input a folded norm stands for.
std::vector<float> normed(const std::vector<float>& x, const std::vector<float>& w, int64_t K, float eps) {
  std::vector<float> y(x.size());
  ref::rms_norm({x.data(), w.data(), y.data(), K, int64_t(x.size()) / K, eps});
  return y;
}

// Returns what the launch wrote.
std::vector<float> run_glu(const GluCase& c, std::mt19937& rng) {
  const std::string what = std::string("expert_glu ") + quant::type_name(c.type) + " K=" + std::to_string(c.K) +
                           " N=" + std::to_string(c.N) + " k=" + std::to_string(c.k) + " T=" + std::to_string(c.T) +
                           (c.act == cuda::ExpertAct::SwiGlu ? " swiglu" : " swiglu_oai") + (c.bias ? " bias" : "") +
                           (c.invalid ? " invalid id" : "") + (c.recoded ? " recoded" : "") +
                           (c.norm ? " norm" : "");
  const auto wg = expert_weights(rng, c.type, c.K, c.N * c.n_expert);
  const auto wu = expert_weights(rng, c.type, c.K, c.N * c.n_expert);
  // With the norm: the launch reads x w and the router parts' sums of squares of x (slices of 256, as
  // RouterPartsParams::norm_ss), the reference the normalised x.
  const auto x_in = random_floats(rng, size_t(c.K * c.T), -3.0f, 3.0f);
  const auto norm_w = random_floats(rng, size_t(c.K), 0.5f, 1.5f);
  constexpr float kEps = 1e-6f;
  const int n_parts = cuda::router_parts_count(c.K);
  std::vector<float> xw(x_in.size()), ss(size_t(n_parts * c.T), 0.0f);
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t i = 0; i < c.K; ++i) {
      const float v = x_in[size_t(t * c.K + i)];
      xw[size_t(t * c.K + i)] = v * norm_w[size_t(i)];
      ss[size_t((i / 256) * c.T + t)] += v * v;
    }
  const auto x = c.norm ? normed(x_in, norm_w, c.K, kEps) : x_in;
  const auto bg = random_floats(rng, size_t(c.N * c.n_expert)), bu = random_floats(rng, size_t(c.N * c.n_expert));
  const auto ids = expert_ids(rng, c.n_expert, c.k, c.T, c.invalid);
  const Products g = products(wg, c.type, x, 1, ids, c.bias ? &bg : nullptr, c.K, c.N, c.n_expert, c.k, c.T);
  const Products u = products(wu, c.type, x, 1, ids, c.bias ? &bu : nullptr, c.K, c.N, c.n_expert, c.k, c.T);
  // The activation of the reference's products; the tolerance is how far it moves over the box of the products'
  // errors (its largest change at the box's corners: both activations are monotone in each argument there, up to
  // SiLU's shallow minimum, which the float terms cover), plus float rounding of the activation itself.
  std::vector<double> want(g.y.size()), tol(g.y.size());
  for (size_t i = 0; i < want.size(); ++i) {
    const float a = act(c.act, g.y[i], u.y[i]);
    want[i] = a;
    double d = 0;
    for (int sg : {-1, 1})
      for (int su : {-1, 1})
        d = std::max(
            d, std::fabs(double(act(c.act, float(g.y[i] + sg * g.err[i]), float(u.y[i] + su * u.err[i]))) - a));
    tol[i] = d + 1e-6 * std::fabs(a) + 1e-6;
  }
  auto dwg = upload(wg), dwu = upload(wu), dx = upload(c.norm ? xw : x), dbg = upload(bg), dbu = upload(bu),
       di = upload(ids), dss = upload(ss);
  auto out = poisoned_f32(want.size());
  cuda::ExpertGluParams p;
  p.gate = dwg.get(), p.up = dwu.get(), p.type = c.type;
  p.gate_bias = c.bias ? dbg.as<float>() : nullptr, p.up_bias = c.bias ? dbu.as<float>() : nullptr;
  p.x = dx.as<float>(), p.ids = di.as<int32_t>(), p.out = out.as<float>(), p.act = c.act;
  if (c.norm) p.norm_ss = dss.as<float>(), p.norm_parts = n_parts, p.norm_eps = kEps;
  p.K = c.K, p.N = c.N, p.n_expert = c.n_expert, p.k = c.k, p.T = c.T;
  if (c.recoded) {
    recode_on_device(dwg, c.K, c.N, c.n_expert), recode_on_device(dwu, c.K, c.N, c.n_expert);
    p.recoded = true;
  }
  EXPECT_TRUE(cuda::expert_glu_fits(p)) << what;
  cuda::launch_expert_glu(p, nullptr);
  auto got = download<float>(out, want.size());
  EXPECT_TRUE(close(what, got, want, tol, 0.0));
  return got;
}

struct DownCase {
  Type type;
  int64_t K, N, n_expert, k, T;
  bool bias, residual, invalid;
  bool recoded = false;
};

std::vector<float> run_down(const DownCase& c, std::mt19937& rng) {
  const std::string what = std::string("expert_down ") + quant::type_name(c.type) + " K=" + std::to_string(c.K) +
                           " N=" + std::to_string(c.N) + " k=" + std::to_string(c.k) + " T=" + std::to_string(c.T) +
                           (c.bias ? " bias" : "") + (c.residual ? " residual" : "") +
                           (c.invalid ? " invalid id" : "") + (c.recoded ? " recoded" : "");
  const auto w = expert_weights(rng, c.type, c.K, c.N * c.n_expert);
  const auto x = random_floats(rng, size_t(c.K * c.k * c.T));  // one column per slot
  const auto bias = random_floats(rng, size_t(c.N * c.n_expert));
  const auto r = random_floats(rng, size_t(c.N * c.T));
  const auto rw = random_floats(rng, size_t(c.k * c.T), 0.0f, 1.0f);
  const auto ids = expert_ids(rng, c.n_expert, c.k, c.T, c.invalid);
  const Products d = products(w, c.type, x, c.k, ids, c.bias ? &bias : nullptr, c.K, c.N, c.n_expert, c.k, c.T);
  // WeightedSum then the residual Add, as the graph computes them.
  std::vector<float> ws(size_t(c.N * c.T));
  ref::weighted_sum(d.y.data(), rw.data(), ws.data(), c.N, c.k, c.T);
  std::vector<double> want(ws.size()), tol(ws.size());
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t n = 0; n < c.N; ++n) {
      const size_t i = size_t(t * c.N + n);
      want[i] = double(ws[i]) + (c.residual ? r[i] : 0.0f);
      double e = 1e-6 * (std::fabs(want[i]) + (c.residual ? std::fabs(r[i]) : 0.0)) + 1e-6;
      for (int64_t j = 0; j < c.k; ++j) {
        const size_t o = size_t((t * c.k + j) * c.N + n);
        e += std::fabs(rw[size_t(t * c.k + j)]) * (d.err[o] + 1e-6 * std::fabs(d.y[o]));
      }
      tol[i] = e;
    }
  auto dw = upload(w), dx = upload(x), db = upload(bias), dr = upload(r), drw = upload(rw), di = upload(ids);
  auto out = poisoned_f32(want.size());
  cuda::ExpertDownParams p;
  p.w = dw.get(), p.type = c.type, p.bias = c.bias ? db.as<float>() : nullptr, p.x = dx.as<float>();
  p.ids = di.as<int32_t>(), p.weights = drw.as<float>(), p.residual = c.residual ? dr.as<float>() : nullptr;
  p.out = out.as<float>(), p.K = c.K, p.N = c.N, p.n_expert = c.n_expert, p.k = c.k, p.T = c.T;
  if (c.recoded) recode_on_device(dw, c.K, c.N, c.n_expert), p.recoded = true;
  EXPECT_TRUE(cuda::expert_down_fits(p)) << what;
  cuda::launch_expert_down(p, nullptr);
  auto got = download<float>(out, want.size());
  EXPECT_TRUE(close(what, got, want, tol, 0.0));
  return got;
}

int64_t short_k(Type t) { return quant::traits(t).block_elems == 256 ? 512 : 320; }

TEST(ExpertMatvec, GluMatchesReferenceForEveryUnitType) {
  REQUIRE_GPU();
  std::mt19937 rng(71);
  for (const Type t : {Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K, Type::MXFP4}) {
    run_glu({t, short_k(t), 70, 8, 4, 1, cuda::ExpertAct::SwiGlu, false, false}, rng);
    run_glu({t, short_k(t), 37, 8, 2, 3, cuda::ExpertAct::SwiGluOai, true, true}, rng);  // odd N: a half group
  }
  run_glu({Type::Q4_K, 2048, 96, 16, 8, 1, cuda::ExpertAct::SwiGlu, false, false}, rng);    // qwen3moe's K, top 8
  run_glu({Type::MXFP4, 2880, 64, 8, 4, 2, cuda::ExpertAct::SwiGluOai, true, false}, rng);  // gpt-oss's K
  // The feed-forward norm folded into the router's launch: against the products of the reference's normalised x.
  run_glu({Type::Q4_K, 2048, 96, 16, 8, 1, cuda::ExpertAct::SwiGlu, false, false, false, true}, rng);
  run_glu({Type::Q6_K, 512, 37, 8, 2, 3, cuda::ExpertAct::SwiGlu, true, true, false, true}, rng);
  run_glu({Type::MXFP4, 2880, 64, 8, 4, 1, cuda::ExpertAct::SwiGluOai, true, false, true, true}, rng);
}

TEST(ExpertMatvec, DownMatchesReferenceForEveryUnitType) {
  REQUIRE_GPU();
  std::mt19937 rng(72);
  for (const Type t : {Type::Q4_0, Type::Q8_0, Type::Q4_K, Type::Q6_K, Type::MXFP4}) {
    run_down({t, short_k(t), 70, 8, 4, 1, false, true, false}, rng);
    run_down({t, short_k(t), 37, 8, 3, 3, true, false, true}, rng);  // k not a multiple of the slices
  }
  run_down({Type::Q6_K, 768, 200, 16, 8, 1, false, true, false}, rng);   // qwen3moe's down: 24 units a row
  run_down({Type::MXFP4, 2880, 64, 8, 4, 2, true, true, false}, rng);    // gpt-oss's
  run_down({Type::MXFP4, 2880, 40, 8, 3, 1, false, true, false}, rng);   // two slices of 2 and 1 slots
}

// MXFP4 recoded at upload: the recoded units decode the same doubled codes, so both launches give the file layout's
// bits (and meet the reference, checked inside run_glu / run_down).
TEST(ExpertMatvec, RecodedMxfp4GivesTheFileLayoutsBits) {
  REQUIRE_GPU();
  for (const bool oai : {false, true}) {
    GluCase g{Type::MXFP4, 2880, 64, 8, 4, 2, oai ? cuda::ExpertAct::SwiGluOai : cuda::ExpertAct::SwiGlu, oai, oai};
    DownCase d{Type::MXFP4, 2880, 64, 8, 4, 3, oai, true, oai};
    std::mt19937 a(81 + oai), b(81 + oai);
    const auto plain_glu = run_glu(g, a), plain_down = run_down(d, a);
    g.recoded = d.recoded = true;
    const auto recoded_glu = run_glu(g, b), recoded_down = run_down(d, b);
    EXPECT_TRUE(plain_glu == recoded_glu) << "expert_glu recoded, activation " << oai;
    EXPECT_TRUE(plain_down == recoded_down) << "expert_down recoded, biases " << oai;
  }
}

// Routing in one launch against the reference's Softmax, TopK and MoeWeights: qwen3moe's form (softmax over all,
// top k of the probabilities, renormalised) on well-separated logits, so the ids are exact; gpt-oss's (top k of
// the logits, softmax over the k) with many exact ties, which must come out in index order.
TEST(ExpertMatvec, RouteMatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(73);
  for (const bool qwen : {true, false})
    for (const int64_t n : {6, 8, 32, 128, 300})  // 300: past the block routing (256); 6: its scratch's alignment
      for (const int64_t T : {1, 5}) {
        const int64_t k = std::min<int64_t>(n / 2, 8);
        std::vector<float> logits(size_t(n * T));
        for (int64_t t = 0; t < T; ++t) {
          std::vector<int> perm(static_cast<size_t>(n));
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), rng);
          for (int64_t i = 0; i < n; ++i)
            logits[size_t(t * n + i)] = qwen ? float(perm[size_t(i)]) / 32.0f - 2.0f : float(perm[size_t(i)] % 5);
        }
        std::vector<float> scores = logits;
        if (qwen) ref::softmax(logits.data(), scores.data(), n, T);
        std::vector<int32_t> want_ids(size_t(k * T));
        ref::top_k(scores.data(), want_ids.data(), n, k, T);
        std::vector<float> want_w(want_ids.size());
        ref::moe_weights({scores.data(), want_ids.data(), want_w.data(), n, k, T, {!qwen, qwen}});
        // The same logits as a bias plus two partial products, summed in the kernel's order (bias, part 0, part
        // 1) to exactly these values (multiples of 1/32): the integer part, the fraction, a zero bias.
        std::vector<float> parts(2 * logits.size());
        for (size_t i = 0; i < logits.size(); ++i)
          parts[i] = std::floor(logits[i]), parts[logits.size() + i] = logits[i] - std::floor(logits[i]);
        const std::vector<float> zero_bias(static_cast<size_t>(n), 0.0f);
        auto dl = upload(logits), dp = upload(parts), db = upload(zero_bias);
        for (const int form : {0, 1, 2}) {  // one block per token; one block for all; two parts with a bias
          cuda::DeviceBuffer ids(want_ids.size() * 4);
          auto w = poisoned_f32(want_w.size());
          cuda::MoeRouteParams p;
          p.logits = form == 2 ? dp.as<float>() : dl.as<float>(), p.n_parts = form == 2 ? 2 : 1;
          p.bias = form == 2 ? db.as<float>() : nullptr, p.per_block = form == 1 ? T : 1;
          p.ids = ids.as<int32_t>(), p.weights = w.as<float>();
          p.n_expert = n, p.k = k, p.T = T, p.softmax_all = qwen, p.softmax_chosen = !qwen, p.normalize = qwen;
          cuda::launch_moe_route(p, nullptr);
          const std::string what = std::string(qwen ? "qwen3moe" : "gpt-oss") + " n=" + std::to_string(n) +
                                   " T=" + std::to_string(T) + " form " + std::to_string(form);
          EXPECT_EQ(download<int32_t>(ids, want_ids.size()), want_ids) << what;
          EXPECT_TRUE(close("route weights " + what, download<float>(w, want_w.size()),
                            std::vector<double>(want_w.begin(), want_w.end()), {1e-6}, 1e-5));
        }
      }
}

// The router's partial products over slices of K add up to its product (float32 sums in another order than the
// reference's double: a few ulps of sum |w x|); K not a multiple of the slice, rows not of the warp's.
TEST(ExpertMatvec, RouterPartsAddUpToTheProduct) {
  REQUIRE_GPU();
  std::mt19937 rng(74);
  for (const int64_t K : {2048, 2880, 100})
    for (const int64_t n : {128, 32, 7})
      for (const int64_t T : {1, 3, 37}) {  // 37: from cuda::kF32ColumnsMin tokens the tiles of matvec_f32_cols
        const auto w = random_floats(rng, size_t(K * n)), x = random_floats(rng, size_t(K * T));
        const int parts = cuda::router_parts_count(K);
        auto dw = upload(w), dx = upload(x);
        auto out = poisoned_f32(size_t(parts * n * T));
        cuda::RouterPartsParams p;
        p.w = dw.as<float>(), p.x = dx.as<float>(), p.parts = out.as<float>(), p.K = K, p.n_expert = n, p.T = T;
        p.n_parts = parts;
        cuda::launch_router_parts(p, nullptr);
        const auto got = download<float>(out, size_t(parts * n * T));
        std::vector<float> sum(size_t(n * T), 0.0f);
        std::vector<double> want(sum.size()), tol(sum.size());
        for (int64_t t = 0; t < T; ++t)
          for (int64_t r = 0; r < n; ++r) {
            double d = 0, mag = 0;
            for (int64_t i = 0; i < K; ++i) {
              d += double(w[size_t(r * K + i)]) * x[size_t(t * K + i)];
              mag += std::fabs(double(w[size_t(r * K + i)]) * x[size_t(t * K + i)]);
            }
            for (int q = 0; q < parts; ++q) sum[size_t(t * n + r)] += got[size_t((q * T + t) * n + r)];
            // The tiles sum each slice as one fma chain (256 terms), then the parts: the recursive sum's bound.
            const double chain = T >= cuda::kF32ColumnsMin ? double(256 + parts) * 0x1p-24 : 2e-6;
            want[size_t(t * n + r)] = d, tol[size_t(t * n + r)] = chain * mag + 1e-6;
          }
        EXPECT_TRUE(close("router parts K=" + std::to_string(K) + " n=" + std::to_string(n) + " T=" +
                              std::to_string(T),
                          sum, want, tol, 0.0));
      }
}

// The 64 x 64 tiles (RouterPartsParams::outer_tiles) sum each slice in the same chain as the 16 x 32 ones: the same
// bits, where they apply (n a multiple of 64) and where they do not (n = 32 keeps the 16 x 32 tiles); K with a
// partial last slice (2880) and a partial chunk (100); T not a multiple of the tile.
TEST(ExpertMatvec, RouterOuterTilesGiveTheSameBits) {
  REQUIRE_GPU();
  std::mt19937 rng(75);
  for (const int64_t K : {2048, 2880, 100})
    for (const int64_t n : {128, 64, 32})
      for (const int64_t T : {37, 200}) {
        const auto w = random_floats(rng, size_t(K * n)), x = random_floats(rng, size_t(K * T));
        const int parts = cuda::router_parts_count(K);
        auto dw = upload(w), dx = upload(x);
        std::vector<std::vector<float>> got;
        for (const bool outer : {false, true}) {
          auto out = poisoned_f32(size_t(parts * n * T));
          cuda::RouterPartsParams p;
          p.w = dw.as<float>(), p.x = dx.as<float>(), p.parts = out.as<float>(), p.K = K, p.n_expert = n, p.T = T;
          p.n_parts = parts, p.outer_tiles = outer;
          cuda::launch_router_parts(p, nullptr);
          got.push_back(download<float>(out, size_t(parts * n * T)));
        }
        ASSERT_EQ(got[0].size(), got[1].size());
        EXPECT_EQ(std::memcmp(got[0].data(), got[1].data(), got[0].size() * 4), 0)
            << "K=" << K << " n=" << n << " T=" << T;
      }
}

// A folded RmsNorm (RouterPartsParams::norm_w): x w written exactly, the parts of x w with each slice's sum of
// squares of x beside them; the routing's logit, (sum of the parts) / rms(x) (moe_route_block.cuh), against the
// product with the reference's normalised x.
TEST(ExpertMatvec, RouterPartsFoldTheNorm) {
  REQUIRE_GPU();
  std::mt19937 rng(78);
  constexpr float kEps = 1e-6f;
  for (const int64_t K : {2048, 2880})
    for (const int64_t T : {1, 3}) {
      const int64_t n = 128;
      const auto w = random_floats(rng, size_t(K * n)), x = random_floats(rng, size_t(K * T), -3.0f, 3.0f);
      const auto nw = random_floats(rng, size_t(K), 0.5f, 1.5f);
      const auto xn = normed(x, nw, K, kEps);
      const int parts = cuda::router_parts_count(K);
      auto dw = upload(w), dx = upload(x), dn = upload(nw);
      auto out = poisoned_f32(size_t(parts * n * T)), ss = poisoned_f32(size_t(parts * T)), xw = poisoned_f32(x.size());
      cuda::RouterPartsParams p;
      p.w = dw.as<float>(), p.x = dx.as<float>(), p.parts = out.as<float>(), p.K = K, p.n_expert = n, p.T = T;
      p.n_parts = parts, p.norm_w = dn.as<float>(), p.norm_ss = ss.as<float>(), p.xw = xw.as<float>();
      cuda::launch_router_parts(p, nullptr);
      const auto got = download<float>(out, size_t(parts * n * T));
      const auto got_ss = download<float>(ss, size_t(parts * T));
      const auto got_xw = download<float>(xw, x.size());
      for (size_t i = 0; i < x.size(); ++i)
        ASSERT_EQ(got_xw[i], x[i] * nw[i % size_t(K)]) << "x w at " << i << " K=" << K << " T=" << T;
      std::vector<float> logit(size_t(n * T));
      std::vector<double> want(logit.size()), tol(logit.size());
      for (int64_t t = 0; t < T; ++t) {
        float s2 = 0.0f;
        for (int q = 0; q < parts; ++q) s2 += got_ss[size_t(q * T + t)];
        const float scale = 1.0f / std::sqrt(s2 / float(K) + kEps);
        for (int64_t r = 0; r < n; ++r) {
          float v = 0.0f;
          for (int q = 0; q < parts; ++q) v += got[size_t((q * T + t) * n + r)];
          logit[size_t(t * n + r)] = v * scale;
          double d = 0, mag = 0;
          for (int64_t i = 0; i < K; ++i) {
            d += double(w[size_t(r * K + i)]) * xn[size_t(t * K + i)];
            mag += std::fabs(double(w[size_t(r * K + i)]) * xn[size_t(t * K + i)]);
          }
          want[size_t(t * n + r)] = d, tol[size_t(t * n + r)] = 4e-6 * mag + 1e-6;
        }
      }
      EXPECT_TRUE(close("router parts with the norm K=" + std::to_string(K) + " T=" + std::to_string(T), logit, want,
                        tol, 0.0));
    }
}

// gate/up hand h to down as int16 runs (ExpertGluParams::runs_out, ExpertDownParams::x_runs), the decode path of a
// mixture's feed-forward: against the reference's composition, with h's own error carried through the down rows.
TEST(ExpertMatvec, GluHandsRunsToDown) {
  REQUIRE_GPU();
  std::mt19937 rng(75);
  struct Case {
    Type up, down;
    int64_t n_embd, n_ff, n_expert, k, T;
    cuda::ExpertAct act;
    bool bias;
  };
  for (const Case c : {Case{Type::Q4_K, Type::Q6_K, 512, 256, 16, 8, 1, cuda::ExpertAct::SwiGlu, false},
                       Case{Type::Q8_0, Type::Q8_0, 320, 96, 8, 4, 3, cuda::ExpertAct::SwiGlu, false},
                       Case{Type::MXFP4, Type::MXFP4, 2880, 2880, 8, 4, 1, cuda::ExpertAct::SwiGluOai, true}}) {
    const std::string what = std::string("glu -> down ") + quant::type_name(c.up) + "/" + quant::type_name(c.down) +
                             " T=" + std::to_string(c.T);
    const auto wg = expert_weights(rng, c.up, c.n_embd, c.n_ff * c.n_expert);
    const auto wu = expert_weights(rng, c.up, c.n_embd, c.n_ff * c.n_expert);
    const auto wd = expert_weights(rng, c.down, c.n_ff, c.n_embd * c.n_expert);
    const auto x = random_floats(rng, size_t(c.n_embd * c.T));
    const auto bg = random_floats(rng, size_t(c.n_ff * c.n_expert));
    const auto bu = random_floats(rng, size_t(c.n_ff * c.n_expert));
    const auto bd = random_floats(rng, size_t(c.n_embd * c.n_expert));
    const auto r = random_floats(rng, size_t(c.n_embd * c.T));
    const auto rw = random_floats(rng, size_t(c.k * c.T), 0.0f, 1.0f);
    const auto ids = expert_ids(rng, c.n_expert, c.k, c.T, false);
    const Products g = products(wg, c.up, x, 1, ids, c.bias ? &bg : nullptr, c.n_embd, c.n_ff, c.n_expert, c.k, c.T);
    const Products u = products(wu, c.up, x, 1, ids, c.bias ? &bu : nullptr, c.n_embd, c.n_ff, c.n_expert, c.k, c.T);
    std::vector<float> h(g.y.size());
    std::vector<double> h_err(h.size());
    for (size_t i = 0; i < h.size(); ++i) {
      h[i] = act(c.act, g.y[i], u.y[i]);
      for (int sg : {-1, 1})
        for (int su : {-1, 1})
          h_err[i] = std::max(h_err[i], std::fabs(double(act(c.act, float(g.y[i] + sg * g.err[i]),
                                                             float(u.y[i] + su * u.err[i]))) - h[i]));
      h_err[i] += 1e-6 * std::fabs(h[i]) + 1e-6;
    }
    // The down products of the reference's h; h's error moves each by at most sum_n |w_n| h_err_n, and the int16
    // runs of the GPU's h round by the bound of the reference's h grown by that error (taken as 1% here).
    const Products d =
        products(wd, c.down, h, c.k, ids, c.bias ? &bd : nullptr, c.n_ff, c.n_embd, c.n_expert, c.k, c.T);
    std::vector<float> ws(size_t(c.n_embd * c.T));
    ref::weighted_sum(d.y.data(), rw.data(), ws.data(), c.n_embd, c.k, c.T);
    std::vector<double> want(ws.size()), tol(ws.size());
    for (int64_t t = 0; t < c.T; ++t)
      for (int64_t n = 0; n < c.n_embd; ++n) {
        const size_t i = size_t(t * c.n_embd + n);
        want[i] = double(ws[i]) + r[i];
        double e = 1e-6 * (std::fabs(want[i]) + std::fabs(r[i])) + 1e-6;
        for (int64_t j = 0; j < c.k; ++j) {
          const int32_t ex = ids[size_t(t * c.k + j)];
          const auto row = ref_row(wd, c.down, c.n_ff, ex * c.n_embd + n);
          double carried = 0;
          for (int64_t m = 0; m < c.n_ff; ++m)
            carried += std::fabs(double(row[size_t(m)])) * h_err[size_t((t * c.k + j) * c.n_ff + m)];
          const size_t o = size_t((t * c.k + j) * c.n_embd + n);
          e += std::fabs(rw[size_t(t * c.k + j)]) * (carried + 1.01 * d.err[o] + 1e-6 * std::fabs(d.y[o]));
        }
        tol[i] = e;
      }
    auto dwg = upload(wg), dwu = upload(wu), dwd = upload(wd), dx = upload(x), dbg = upload(bg), dbu = upload(bu);
    auto dbd = upload(bd), dr = upload(r), drw = upload(rw), di = upload(ids);
    cuda::DeviceBuffer runs(size_t(c.n_ff * c.k * c.T / 16) * cuda::kExpertRunBytes);
    cuda::ExpertGluParams gp;
    gp.gate = dwg.get(), gp.up = dwu.get(), gp.type = c.up, gp.x = dx.as<float>(), gp.ids = di.as<int32_t>();
    gp.gate_bias = c.bias ? dbg.as<float>() : nullptr, gp.up_bias = c.bias ? dbu.as<float>() : nullptr;
    gp.act = c.act, gp.runs_out = runs.get();
    gp.K = c.n_embd, gp.N = c.n_ff, gp.n_expert = c.n_expert, gp.k = c.k, gp.T = c.T;
    ASSERT_TRUE(cuda::expert_glu_fits(gp)) << what;
    // On a stream of its own, as the executor runs them: down then starts as a programmatic dependent of gate/up
    // and reads its ids and first weights before the wait (ids_before_wait).
    cuda::Context ctx;
    const cudaStream_t stream = ctx.compute();
    auto out = poisoned_f32(want.size());
    CUDA_CHECK(cudaDeviceSynchronize());  // the uploads and the poison, before the stream's launches
    cuda::launch_expert_glu(gp, stream);
    cuda::ExpertDownParams dp;
    dp.w = dwd.get(), dp.type = c.down, dp.bias = c.bias ? dbd.as<float>() : nullptr, dp.x_runs = runs.get();
    dp.ids = di.as<int32_t>(), dp.weights = drw.as<float>(), dp.residual = dr.as<float>(), dp.out = out.as<float>();
    dp.K = c.n_ff, dp.N = c.n_embd, dp.n_expert = c.n_expert, dp.k = c.k, dp.T = c.T;
    dp.ids_before_wait = true;
    ASSERT_TRUE(cuda::expert_down_fits(dp)) << what;
    cuda::launch_expert_down(dp, stream);
    CUDA_CHECK(cudaStreamSynchronize(stream));
    EXPECT_TRUE(close(what, download<float>(out, want.size()), want, tol, 0.0));
  }
}

}  // namespace

// Expert launches that route their tokens themselves (ExpertGluParams::route, ExpertDownParams::route) give the
// results of the same launches reading the routing launch's ids and weights, bit for bit: the same choices in the
// same order, the same weights. Both forms: qwen3moe's (softmax over all, top k, renormalised; 128 experts) and
// gpt-oss's (a bias, top k of the logits with many exact ties, softmax over the k; 32 experts).
TEST(ExpertMatvec, OwnRoutingGivesTheRoutingLaunchsResults) {
  REQUIRE_GPU();
  std::mt19937 rng(74);
  for (const bool qwen : {true, false})
    for (const int64_t T : {1, 3}) {
      const Type type = qwen ? Type::Q4_K : Type::Q8_0;
      const int64_t n_expert = qwen ? 128 : 32, k = qwen ? 8 : 4, K = 512, N = 256, n_parts = 3;
      const std::string what = std::string(qwen ? "qwen3moe" : "gpt-oss") + " T=" + std::to_string(T);
      // The router's partial products: ties in gpt-oss's logits (small integers split over the parts).
      std::vector<float> parts(size_t(n_parts * T * n_expert)), bias(static_cast<size_t>(n_expert));
      for (auto& v : parts) v = qwen ? random_floats(rng, 1, -2.0f, 2.0f)[0] : float(rng() % 3);
      for (auto& v : bias) v = qwen ? 0.0f : float(rng() % 2);
      auto dparts = upload(parts), dbias = upload(bias);
      cuda::MoeRouteParams r;
      r.logits = dparts.as<float>(), r.n_parts = int(n_parts), r.bias = qwen ? nullptr : dbias.as<float>();
      r.n_expert = n_expert, r.k = k, r.T = T, r.softmax_all = qwen, r.softmax_chosen = !qwen, r.normalize = qwen;
      cuda::DeviceBuffer ids(size_t(k * T) * 4), weights(size_t(k * T) * 4);
      r.ids = ids.as<int32_t>(), r.weights = weights.as<float>();
      cuda::launch_moe_route(r, nullptr);

      const auto wg = expert_weights(rng, type, K, N * n_expert), wu = expert_weights(rng, type, K, N * n_expert);
      const auto wd = expert_weights(rng, type, N, K * n_expert);
      const auto x = random_floats(rng, size_t(K * T)), h = random_floats(rng, size_t(N * k * T));
      auto dwg = upload(wg), dwu = upload(wu), dwd = upload(wd), dx = upload(x), dh = upload(h);
      std::vector<float> glu[2], down[2];
      for (const bool own : {false, true}) {
        auto out = poisoned_f32(size_t(N * k * T));
        cuda::ExpertGluParams g;
        g.gate = dwg.get(), g.up = dwu.get(), g.type = type, g.x = dx.as<float>(), g.out = out.as<float>();
        g.act = qwen ? cuda::ExpertAct::SwiGlu : cuda::ExpertAct::SwiGluOai;
        g.K = K, g.N = N, g.n_expert = n_expert, g.k = k, g.T = T;
        if (own) {
          g.route = r;
        } else {
          g.ids = ids.as<int32_t>();
        }
        EXPECT_TRUE(cuda::expert_glu_fits(g)) << what;
        cuda::launch_expert_glu(g, nullptr);
        glu[own] = download<float>(out, size_t(N * k * T));

        auto y = poisoned_f32(size_t(K * T));
        cuda::ExpertDownParams d;
        d.w = dwd.get(), d.type = type, d.x = dh.as<float>(), d.out = y.as<float>();
        d.K = N, d.N = K, d.n_expert = n_expert, d.k = k, d.T = T;
        if (own) {
          d.route = r;
        } else {
          d.ids = ids.as<int32_t>(), d.weights = weights.as<float>();
        }
        EXPECT_TRUE(cuda::expert_down_fits(d)) << what;
        cuda::launch_expert_down(d, nullptr);
        down[own] = download<float>(y, size_t(K * T));
      }
      EXPECT_TRUE(glu[0] == glu[1]) << "expert_glu " << what;
      EXPECT_TRUE(down[0] == down[1]) << "expert_down " << what;
      // Not vacuous: every choice is a real expert, so the products are not all zero.
      const auto got_ids = download<int32_t>(ids, size_t(k * T));
      EXPECT_TRUE(std::all_of(got_ids.begin(), got_ids.end(), [&](int32_t e) { return e >= 0 && e < n_expert; }));
      EXPECT_TRUE(std::any_of(down[1].begin(), down[1].end(), [](float v) { return v != 0.0f; })) << what;
    }
}
