// The split attention forming a decode step's q, k and v itself (AttentionKernelParams::new_token,
// attention_new_token.cuh) against the two launches it replaces: rope_kv with the q/k norms (tested against a
// double reference in test_norm_rope_kv.cpp), then the attention over the rotated q. Same arithmetic in the same
// order, so the outputs and the whole cache must be the same bits, at positions that put the new slot in the first
// tile, in a later tile of one split, and in the last tile of any of several splits.
#include <algorithm>
#include <cmath>
#include <tuple>

#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/paged_batch.h"
#include "gpu_test.h"

namespace {

using namespace gpu_test;
using graph::RopeMode;

struct Shape {
  int64_t nh, nkv, hd;
  int32_t n_rot;
  RopeMode mode;
  bool ff;
  int32_t window;
};

// The two paths' results: outputs a and b (b all finite), and caches a and b of n_cache halves (slots of hd, n_ctx
// slots a KV head).
struct Results {
  const cuda::DeviceBuffer &out_a, &out_b, &kc_a, &kc_b, &vc_a, &vc_b;
};
void expect_same_bits(const Results& r, size_t n_out, size_t n_cache, int64_t hd, int64_t n_ctx,
                      const std::string& what) {
  const auto ya = download<uint32_t>(r.out_a, n_out), yb = download<uint32_t>(r.out_b, n_out);
  int64_t differ = 0;
  for (size_t i = 0; i < n_out; ++i) differ += ya[i] != yb[i];
  EXPECT_EQ(differ, 0) << what << ": outputs differ in " << differ << " of " << n_out << " values";
  const auto fb = download<float>(r.out_b, n_out);
  EXPECT_TRUE(std::all_of(fb.begin(), fb.end(), [](float x) { return std::isfinite(x); })) << what;
  for (const auto& [x, y, name] : {std::tuple{&r.kc_a, &r.kc_b, "k"}, std::tuple{&r.vc_a, &r.vc_b, "v"}}) {
    const auto ca = download<uint16_t>(*x, n_cache), cb = download<uint16_t>(*y, n_cache);
    int64_t slot_diff = -1;
    for (size_t i = 0; i < n_cache && slot_diff < 0; ++i)
      if (ca[i] != cb[i]) slot_diff = int64_t(i / size_t(hd)) % n_ctx;
    EXPECT_EQ(slot_diff, -1) << what << ": " << name << " caches differ first at slot " << slot_diff;
  }
}

TEST(AttentionNewToken, SameBitsAsNormRopeKvThenAttention) {
  REQUIRE_GPU();
  std::mt19937 rng(34);
  // Qwen3-30B-A3B's groups of 8 with frequency factors, Gemma 3's head_dim 256 in pairs, a pass-through tail with
  // normal pairs and no grouping, sliding windows, the test models' head_dim 64.
  const Shape shapes[] = {{32, 4, 128, 128, RopeMode::Neox, true, 0},
                          {4, 2, 64, 64, RopeMode::Neox, false, 0},
                          {8, 4, 256, 256, RopeMode::Neox, false, 0},
                          {4, 4, 128, 64, RopeMode::Normal, false, 0},
                          {16, 4, 128, 128, RopeMode::Neox, false, 48},
                          {16, 8, 256, 256, RopeMode::Neox, false, 100}};
  const int64_t n_ctx = 1100;
  const float base = 1e6f, fscale = 0.5f, eps = 1e-6f;
  const int32_t positions[] = {0, 37, 64, 255, 256, 700, 1099};
  for (const Shape& c : shapes) {
    const int64_t hd = c.hd;
    const auto qw = random_floats(rng, size_t(hd), 0.5f, 1.5f), kw = random_floats(rng, size_t(hd), 0.5f, 1.5f);
    const auto factors = random_floats(rng, size_t(c.n_rot / 2), 1.0f, 8.0f);
    auto dqw = upload(qw), dkw = upload(kw), df = upload(factors), dpow = upload(cuda::rope_base_powers(base, c.n_rot));
    // Earlier slots: random f16 values (every slot, so a wrong slot read or written shows).
    std::vector<uint16_t> cache(size_t(hd * n_ctx * c.nkv));
    std::uniform_real_distribution<float> u(-2.0f, 2.0f);
    for (auto& h : cache) h = quant::f32_to_f16(u(rng));
    for (int32_t pos : positions) {
      const std::string what = "nh=" + std::to_string(c.nh) + " nkv=" + std::to_string(c.nkv) +
                               " hd=" + std::to_string(hd) + " window=" + std::to_string(c.window) +
                               " pos=" + std::to_string(pos);
      const auto q = random_floats(rng, size_t(hd * c.nh), -4, 4), k = random_floats(rng, size_t(hd * c.nkv), -4, 4);
      const auto v = random_floats(rng, size_t(hd * c.nkv), -2, 2);
      auto dq = upload(q), dq_raw = upload(q), dk = upload(k), dv = upload(v);
      auto dpos = upload(std::vector<int32_t>{pos});
      auto kc_a = upload(cache), vc_a = upload(cache);
      const int32_t splits = cuda::attention_max_splits(n_ctx, c.nkv, 1, 132);
      cuda::DeviceBuffer partial(cuda::attention_scratch_floats(c.nh, hd, 1, splits) * 4);
      CUDA_CHECK(cudaMemset(partial.get(), 0, partial.bytes()));
      auto out_a = poisoned_f32(size_t(hd * c.nh));

      // The two launches: q normalised and rotated in place, k and v into cache a.
      cuda::RopeKvParams r;
      r.rope.x = r.rope.out = dq.as<float>(), r.rope.positions = dpos.as<int32_t>();
      r.rope.freq_factors = c.ff ? df.as<float>() : nullptr;
      r.rope.head_dim = hd, r.rope.n_head = c.nh, r.rope.T = 1, r.rope.n_rot = c.n_rot, r.rope.mode = c.mode;
      r.rope.freq_base = base, r.rope.freq_scale = fscale;
      r.k = dk.as<float>(), r.v = dv.as<float>(), r.k_cache = kc_a.get(), r.v_cache = vc_a.get();
      r.n_head_kv = c.nkv, r.hd_v = hd, r.n_ctx = n_ctx;
      r.q_norm_w = dqw.as<float>(), r.k_norm_w = dkw.as<float>(), r.norm_eps = eps;
      cuda::launch_rope_kv(r, nullptr);
      cuda::AttentionKernelParams a;
      a.q = dq.as<float>(), a.positions = dpos.as<int32_t>(), a.k_cache = kc_a.get(), a.v_cache = vc_a.get();
      a.out = out_a.as<float>(), a.partial = partial.as<float>(), a.n_ctx = n_ctx, a.n_head = c.nh;
      a.n_head_kv = c.nkv, a.hd = hd, a.hd_v = hd, a.T = 1, a.scale = 1.0f / std::sqrt(float(hd));
      a.max_splits = splits, a.window = c.window;
      cuda::launch_attention(a, nullptr);

      // One launch from the raw q, k and v into cache b; twice, the output poisoned in between (the split counters
      // must be back at zero, and writing the slot again changes nothing). With the group's q heads in one block
      // and (AttentionNewToken::q_split_shift) spread over two and four, as far as the group divides.
      const int64_t G = c.nh / c.nkv;
      for (int32_t shift = 0; shift <= 2 && G % (int64_t(1) << shift) == 0; ++shift) {
        const std::string with = what + " q split " + std::to_string(1 << shift);
        auto kc_b = upload(cache), vc_b = upload(cache);
        auto out_b = poisoned_f32(size_t(hd * c.nh));
        cuda::AttentionKernelParams b = a;
        b.q = dq_raw.as<float>(), b.k_cache = kc_b.get(), b.v_cache = vc_b.get(), b.out = out_b.as<float>();
        b.new_token = cuda::AttentionNewToken{dk.as<float>(),
                                              dv.as<float>(),
                                              dqw.as<float>(),
                                              dkw.as<float>(),
                                              dpow.as<double>(),
                                              c.ff ? df.as<float>() : nullptr,
                                              fscale,
                                              eps,
                                              c.n_rot,
                                              c.mode};
        b.new_token.q_split_shift = shift;
        cuda::launch_attention(b, nullptr);
        CUDA_CHECK(cudaMemset(out_b.get(), 0xff, out_b.bytes()));
        cuda::launch_attention(b, nullptr);

        expect_same_bits({out_a, out_b, kc_a, kc_b, vc_a, vc_b}, size_t(hd * c.nh), cache.size(), hd, n_ctx, with);
      }
    }
  }
}

// A paged decode step (session 71): several tokens, each of its own sequence, one of them padding, through shuffled
// blocks of a pool (the block table) and through consecutive ones (run bases), with and without the q/k norms, the
// new slots in a sequence's first tile, a later tile and the last tile of several splits; against rope_kv (with or
// without the norms) and the paged attention over its rotated q: the same bits in the outputs and the whole pool.
TEST(AttentionNewToken, PagedStepSameBitsAsRopeKvThenAttention) {
  REQUIRE_GPU();
  std::mt19937 rng(71);
  // Llama 3's groups of 4 with frequency factors and normal pairs, the test models' head_dim 64, Gemma 3's 256, a
  // pass-through tail, groups of 8, a window.
  const Shape shapes[] = {{32, 8, 128, 128, RopeMode::Normal, true, 0},
                          {4, 2, 64, 64, RopeMode::Neox, false, 0},
                          {8, 4, 256, 256, RopeMode::Neox, false, 0},
                          {4, 4, 128, 64, RopeMode::Normal, false, 0},
                          {16, 2, 128, 128, RopeMode::Neox, false, 48}};
  const int bs = 16, max_blocks = 70, n_seq = 5;  // 1 120 positions a sequence
  const int64_t pool = int64_t(n_seq) * max_blocks * bs;
  const std::vector<int32_t> positions = {700, 0, -1, 37, 1119, 255};  // token 2 is padding
  const std::vector<int32_t> kv_seq = {3, 0, 3, 1, 4, 2};            // padding's row is another token's
  const int64_t T = int64_t(positions.size());
  const float base = 5e5f, fscale = 0.5f, eps = 1e-6f;
  for (const bool ordered : {false, true})
    for (const bool norms : {false, true})
      for (const Shape& c : shapes) {
        const int64_t hd = c.hd;
        const std::string what = "nh=" + std::to_string(c.nh) + " nkv=" + std::to_string(c.nkv) + " hd=" +
                                 std::to_string(hd) + " window=" + std::to_string(c.window) +
                                 (norms ? " norms" : "") + (ordered ? " run bases" : " shuffled blocks");
        std::vector<int32_t> blocks(size_t(n_seq) * max_blocks);
        for (size_t i = 0; i < blocks.size(); ++i) blocks[i] = int32_t(i);
        if (!ordered) std::shuffle(blocks.begin(), blocks.end(), rng);
        std::vector<int32_t> run_base(size_t(T), -1);
        if (ordered) {
          graph::KvCacheSpec kv;
          kv.block_size = bs, kv.max_blocks = max_blocks, kv.n_seq = n_seq;
          const std::vector<int32_t> tokens(size_t(T), 1);
          cuda::plan_run_bases(kv, graph::RunInputs{tokens, positions, kv_seq, blocks, {}}, run_base);
        }
        const auto qw = random_floats(rng, size_t(hd), 0.5f, 1.5f), kw = random_floats(rng, size_t(hd), 0.5f, 1.5f);
        const auto factors = random_floats(rng, size_t(c.n_rot / 2), 1.0f, 8.0f);
        auto dqw = upload(qw), dkw = upload(kw), df = upload(factors);
        auto dpow = upload(cuda::rope_base_powers(base, c.n_rot));
        std::vector<uint16_t> cache(size_t(hd * pool * c.nkv));
        std::uniform_real_distribution<float> u(-2.0f, 2.0f);
        for (auto& h : cache) h = quant::f32_to_f16(u(rng));
        const auto q = random_floats(rng, size_t(hd * c.nh * T), -4, 4);
        const auto k = random_floats(rng, size_t(hd * c.nkv * T), -4, 4);
        const auto v = random_floats(rng, size_t(hd * c.nkv * T), -2, 2);
        auto dq = upload(q), dq_rot = upload(q), dk = upload(k), dv = upload(v);
        auto dpos = upload(positions), dseq = upload(kv_seq), dtable = upload(blocks), dbase = upload(run_base);
        cuda::KvPaging pg;
        pg.kv_seq = dseq.as<int32_t>(), pg.block_table = dtable.as<int32_t>(), pg.max_blocks = max_blocks;
        pg.block_shift = 4, pg.run_base = ordered ? dbase.as<int32_t>() : nullptr;
        auto kc_a = upload(cache), vc_a = upload(cache);
        const int32_t splits = cuda::attention_max_splits(int64_t(max_blocks) * bs, c.nkv, T, 132);
        cuda::DeviceBuffer partial(cuda::attention_scratch_floats(c.nh, hd, T, splits) * 4);
        CUDA_CHECK(cudaMemset(partial.get(), 0, partial.bytes()));
        auto out_a = poisoned_f32(size_t(hd * c.nh * T));

        cuda::RopeKvParams r;  // the two launches: q rotated into dq_rot, k and v into pool a
        r.rope.x = dq.as<float>(), r.rope.out = dq_rot.as<float>(), r.rope.positions = dpos.as<int32_t>();
        r.rope.freq_factors = c.ff ? df.as<float>() : nullptr;
        r.rope.head_dim = hd, r.rope.n_head = c.nh, r.rope.T = T, r.rope.n_rot = c.n_rot, r.rope.mode = c.mode;
        r.rope.freq_base = base, r.rope.freq_scale = fscale;
        r.k = dk.as<float>(), r.v = dv.as<float>(), r.k_cache = kc_a.get(), r.v_cache = vc_a.get();
        r.n_head_kv = c.nkv, r.hd_v = hd, r.n_ctx = pool, r.paging = pg;
        if (norms) r.q_norm_w = dqw.as<float>(), r.k_norm_w = dkw.as<float>(), r.norm_eps = eps;
        cuda::launch_rope_kv(r, nullptr);
        cuda::AttentionKernelParams a;
        a.q = dq_rot.as<float>(), a.positions = dpos.as<int32_t>(), a.k_cache = kc_a.get(), a.v_cache = vc_a.get();
        a.out = out_a.as<float>(), a.partial = partial.as<float>(), a.n_ctx = pool, a.n_head = c.nh;
        a.n_head_kv = c.nkv, a.hd = hd, a.hd_v = hd, a.T = T, a.scale = 1.0f / std::sqrt(float(hd));
        a.max_splits = splits, a.window = c.window, a.paging = pg;
        cuda::launch_attention(a, nullptr);

        // One launch from the raw q (dq, never written), k and v into pool b; twice, the output poisoned between.
        auto kc_b = upload(cache), vc_b = upload(cache);
        auto out_b = poisoned_f32(size_t(hd * c.nh * T));
        cuda::AttentionKernelParams b = a;
        b.q = dq.as<float>(), b.k_cache = kc_b.get(), b.v_cache = vc_b.get(), b.out = out_b.as<float>();
        b.new_token = cuda::AttentionNewToken{dk.as<float>(),
                                              dv.as<float>(),
                                              norms ? dqw.as<float>() : nullptr,
                                              norms ? dkw.as<float>() : nullptr,
                                              dpow.as<double>(),
                                              c.ff ? df.as<float>() : nullptr,
                                              fscale,
                                              eps,
                                              c.n_rot,
                                              c.mode};
        cuda::launch_attention(b, nullptr);
        CUDA_CHECK(cudaMemset(out_b.get(), 0xff, out_b.bytes()));
        cuda::launch_attention(b, nullptr);

        expect_same_bits({out_a, out_b, kc_a, kc_b, vc_a, vc_b}, size_t(hd * c.nh * T), cache.size(), hd, pool, what);

        // In place: the output over the raw q, as an executor's plan may put it where the freed q was (each block
        // reads its token's q heads before it, or the last of its splits, writes their outputs).
        auto q_c = upload(q), kc_c = upload(cache), vc_c = upload(cache);
        cuda::AttentionKernelParams in_place = b;
        in_place.q = in_place.out = q_c.as<float>(), in_place.k_cache = kc_c.get(), in_place.v_cache = vc_c.get();
        cuda::launch_attention(in_place, nullptr);
        expect_same_bits({out_a, q_c, kc_a, kc_c, vc_a, vc_c}, size_t(hd * c.nh * T), cache.size(), hd, pool,
                         what + " in place");
      }
}

TEST(AttentionNewToken, RefusesWhatOnlyTheOtherPathsServe) {
  REQUIRE_GPU();
  const int64_t n_ctx = 64, hd = 128;
  cuda::DeviceBuffer q(hd * 8 * 4 * 2), kc(hd * n_ctx * 2 * 2), vc(hd * n_ctx * 2 * 2), out(hd * 8 * 4 * 2);
  cuda::DeviceBuffer pos(8), w(hd * 4), pw(hd * 8), part(cuda::attention_scratch_floats(8, hd, 2, 4) * 4);
  cuda::AttentionKernelParams p;
  p.q = q.as<float>(), p.positions = pos.as<int32_t>(), p.k_cache = kc.get(), p.v_cache = vc.get();
  p.out = out.as<float>(), p.partial = part.as<float>(), p.n_ctx = n_ctx, p.n_head = 8, p.n_head_kv = 2, p.hd = hd;
  p.hd_v = hd, p.T = 1, p.max_splits = 4;
  p.new_token = cuda::AttentionNewToken{q.as<float>(), q.as<float>(), w.as<float>(), w.as<float>(),
                                        pw.as<double>(), nullptr, 1.0f, 1e-6f, 128, RopeMode::Neox};
  cuda::AttentionKernelParams t = p;
  t.T = 2;  // two tokens of one sequence: the second reads the first's slot, which another block writes
  EXPECT_THROW(cuda::launch_attention(t, nullptr), cuda::InvalidArgument);
  t = p, t.new_token.n_rot = 130;
  EXPECT_THROW(cuda::launch_attention(t, nullptr), cuda::InvalidArgument);
  t = p, t.new_token.k_norm_w = nullptr;
  EXPECT_THROW(cuda::launch_attention(t, nullptr), cuda::InvalidArgument);
  t = p, t.hd_v = 64;
  EXPECT_THROW(cuda::launch_attention(t, nullptr), cuda::InvalidArgument);
  t = p, t.kv_type = graph::KvType::Q8_0;
  t.k_scales = t.v_scales = reinterpret_cast<const uint16_t*>(w.get());
  EXPECT_THROW(cuda::launch_attention(t, nullptr), cuda::InvalidArgument);
}

}  // namespace
