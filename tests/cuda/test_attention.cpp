// KV write + attention (the tensor-core prefill and split kernels, the split kernels for head_dim 256 and odd groups)
// against a double-precision causal softmax over the f16-rounded cache.
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/attention_prefill.cuh"
#include "cuda/kernels/attention_split_tc.cuh"
#include "gpu_test.h"

namespace {

using namespace gpu_test;

struct Case {
  int64_t nh, nkv, hd, n_ctx, prefix, T;
  int32_t max_splits;  // 0: attention_max_splits's choice
};

double h16(float f) { return quant::f16_to_f32(quant::f32_to_f16(f)); }

void run_case(const Case& c, std::mt19937& rng) {
  const int64_t hd = c.hd, hdv = c.hd;
  const std::string what = "attention nh=" + std::to_string(c.nh) + " nkv=" + std::to_string(c.nkv) +
                           " hd=" + std::to_string(hd) + " ctx=" + std::to_string(c.n_ctx) +
                           " prefix=" + std::to_string(c.prefix) + " T=" + std::to_string(c.T) +
                           " max_splits=" + std::to_string(c.max_splits);
  const int64_t total = c.prefix + c.T;  // tokens in the cache after both writes
  const auto k = random_floats(rng, hd * c.nkv * total, -2, 2);
  const auto v = random_floats(rng, hdv * c.nkv * total);
  const auto q = random_floats(rng, hd * c.nh * c.T);
  std::vector<int32_t> pos(total);
  for (int64_t i = 0; i < total; ++i) pos[i] = int32_t(i);

  cuda::DeviceBuffer kc(hd * c.n_ctx * c.nkv * 2), vc(hdv * c.n_ctx * c.nkv * 2);
  // Zeroed, as the session's cache is: the test downloads whole caches, slots past the written prefix included.
  CUDA_CHECK(cudaMemset(kc.get(), 0, kc.bytes()));
  CUDA_CHECK(cudaMemset(vc.get(), 0, vc.bytes()));
  auto dk = upload(k), dv = upload(v), dq = upload(q), dp = upload(pos);
  // Prefix as one batch, then the queried batch, as a prefill followed by decode steps would.
  auto write = [&](int64_t t0, int64_t n) {
    cuda::launch_kv_write({dk.as<float>() + t0 * hd * c.nkv, dv.as<float>() + t0 * hdv * c.nkv, dp.as<int32_t>() + t0,
                           kc.as<uint16_t>(), vc.as<uint16_t>(), c.n_ctx, c.nkv, hd, hdv, n},
                          nullptr);
  };
  if (c.prefix) write(0, c.prefix);
  write(c.prefix, c.T);

  const int32_t splits = c.max_splits ? c.max_splits : cuda::attention_max_splits(c.n_ctx, c.nkv, c.T, 132);
  cuda::DeviceBuffer partial(cuda::attention_scratch_floats(c.nh, hdv, c.T, splits) * 4);
  CUDA_CHECK(cudaMemset(partial.get(), 0, partial.bytes()));
  auto out = poisoned_f32(hdv * c.nh * c.T);
  const float scale = 1.0f / std::sqrt(float(hd));
  cuda::AttentionKernelParams p;
  p.q = dq.as<float>(), p.positions = dp.as<int32_t>() + c.prefix, p.k_cache = kc.as<uint16_t>();
  p.v_cache = vc.as<uint16_t>(), p.out = out.as<float>(), p.partial = partial.as<float>();
  p.n_ctx = c.n_ctx, p.n_head = c.nh, p.n_head_kv = c.nkv, p.hd = hd, p.hd_v = hdv, p.T = c.T, p.scale = scale;
  p.max_splits = splits;
  // Twice, the output poisoned in between: the second launch must find the split counters back at zero.
  cuda::launch_attention(p, nullptr);
  CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));
  cuda::launch_attention(p, nullptr);

  // The tensor-core kernels take Q x scale rounded to f16 (the reference does the same) and round the softmax
  // weights P to f16 for P V: |error| <= 2^-11 max|v| (weights sum to one) on top of f32 accumulation.
  const bool tensor_cores = cuda::attention_prefill_applies(p) || cuda::attention_split_tc_applies(p);
  double v_max = 0;
  for (float x : v) v_max = std::max(v_max, double(std::fabs(x)));
  const double abs_tol = tensor_cores ? v_max / 2048 + 2e-5 : 2e-6;
  const double rel_tol = tensor_cores ? 0.0 : 1e-5;
  std::vector<double> ref(hdv * c.nh * c.T);
  const int64_t group = c.nh / c.nkv;
  for (int64_t t = 0; t < c.T; ++t)
    for (int64_t h = 0; h < c.nh; ++h) {
      const int64_t kvh = h / group, last = c.prefix + t;
      std::vector<double> s(last + 1);
      double mx = -1e300, sum = 0;
      for (int64_t j = 0; j <= last; ++j) {
        double d = 0;
        for (int64_t e = 0; e < hd; ++e) {
          const float qe = q[(t * c.nh + h) * hd + e];
          const double kj = h16(k[(j * c.nkv + kvh) * hd + e]);
          d += tensor_cores ? h16(qe * scale) * kj : double(qe) * kj * scale;
        }
        s[j] = d, mx = std::max(mx, s[j]);
      }
      for (auto& x : s) x = std::exp(x - mx), sum += x;
      for (int64_t e = 0; e < hdv; ++e) {
        double a = 0;
        for (int64_t j = 0; j <= last; ++j) a += s[j] * h16(v[(j * c.nkv + kvh) * hdv + e]);
        ref[(t * c.nh + h) * hdv + e] = a / sum;
      }
    }
  EXPECT_TRUE(close(what + (tensor_cores ? " (tensor cores)" : ""), download<float>(out, ref.size()), ref, {abs_tol},
                    rel_tol));

  // The cache holds the f16 rounding of what was written, in the documented layout.
  const auto kh = download<uint16_t>(kc, hd * c.n_ctx * c.nkv);
  const int64_t j = total - 1, kvh = c.nkv - 1;
  for (int64_t e = 0; e < hd; ++e)
    ASSERT_EQ(kh[(kvh * c.n_ctx + j) * hd + e], quant::f32_to_f16(k[(j * c.nkv + kvh) * hd + e])) << what;
}

TEST(AttentionKernels, MatchesReference) {
  REQUIRE_GPU();
  std::mt19937 rng(11);
  const Case cases[] = {
      // per-head kernel (head_dim not 64/128/256, or a group of 3 or 6), GQA kernel (head_dim 256) and the
      // tensor-core split kernel (head_dim 64/128, groups 1, 2, 4, 8)
      {4, 4, 8, 16, 0, 5, 0},        // tiny heads (stories260K-like), prefill only
      {8, 4, 8, 64, 10, 1, 0},       // decode after a prefix
      {8, 2, 64, 300, 37, 7, 64},    // GQA 4:1, several splits
      {6, 1, 128, 1000, 700, 1, 0},  // MQA decode, long context, computed split
      {4, 2, 128, 1000, 900, 3, 100},
      {2, 2, 256, 130, 0, 129, 0},   // largest head, long prefill
      {32, 8, 128, 4096, 4000, 1, 0},
      {8, 1, 128, 2000, 1500, 1, 0},   // group of 8
      {16, 8, 64, 700, 650, 2, 0},     // group of 2, head_dim 64
      {6, 2, 128, 500, 400, 1, 0},     // group of 3: per-head kernel
      {4, 1, 256, 3000, 2900, 1, 3},   // 3 splits of ~967 slots
      {32, 8, 128, 5000, 30, 1, 0},    // short position in a long cache: one split holds every slot
      // tensor-core kernel (T >= 16, head_dim 64/128): partial query tiles, a prefix, groups 1 to 8
      {8, 2, 128, 600, 0, 200, 0},     // prefill from empty, 200 = 3 tiles + 8 rows
      {4, 4, 64, 300, 37, 16, 0},      // smallest batch after an unaligned prefix
      {8, 1, 128, 1100, 900, 70, 0},   // group of 8, many cache tiles, a tile edge inside the batch
      {6, 2, 64, 256, 0, 256, 0},      // group of 3, the whole cache
      {2, 2, 256, 300, 0, 40, 0},      // head_dim 256: the split kernel still serves batches
      {16, 4, 128, 300, 100, 5, 0},    // tensor-core split kernel, a short batch of 5 tokens
      {8, 8, 64, 20000, 16400, 1, 0},  // 16k context, groups of 1, tiles of 64 slots per split
  };
  for (const auto& c : cases) run_case(c, rng);
}

TEST(AttentionKernels, RejectsBadParams) {
  cuda::AttentionKernelParams p;
  EXPECT_THROW(cuda::launch_attention(p, nullptr), cuda::InvalidArgument);
}

}  // namespace
