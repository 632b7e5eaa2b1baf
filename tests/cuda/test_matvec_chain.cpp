// Chain launches (launch_matvec_chain): a layer's decode matvecs of one kernel choice — o with its residual,
// gate/up with the folded norm and the SwiGLU epilogue, down with its residual, the next q/k/v with its norm — in
// one launch with grid barriers between them must write exactly what the same launches one by one write (same
// kernel body, same sums in the same order), every time the launch is replayed, and leave the barrier counter's
// low bits as they were.
#include "cuda/device_info.h"
#include "cuda/kernels/matvec.cuh"
#include "gpu_test.h"

namespace {

using quant::Type;
using namespace gpu_test;

// The 8B shape's widths: hidden 4096 (4 row slices of 128 threads), feed-forward 11008 (one slice of 352), so that
// every stage takes the 4-rows-a-group kernel and the chain's 512-thread blocks keep each stage's threads per SM.
constexpr int64_t kHidden = 4096, kFf = 11008, kKv = 1024;

struct Layer {
  std::vector<cuda::DeviceBuffer> w;  // o, gate, up, down, q, k, v
  cuda::DeviceBuffer x, attn, norm_ffn, norm_attn;
  // outputs: the residual stream after o and after down, the SwiGLU product, q, k, v
  cuda::DeviceBuffer h1, glu, h2, q, k, v, unused;
};

Layer make_layer(Type type, std::mt19937& rng) {
  Layer l;
  const int64_t shapes[7][2] = {{kHidden, kHidden}, {kHidden, kFf}, {kHidden, kFf}, {kFf, kHidden},
                                {kHidden, kHidden}, {kHidden, kKv}, {kHidden, kKv}};
  for (const auto& s : shapes) l.w.push_back(upload(random_weights(rng, type, s[0], s[1])));
  l.x = upload(random_floats(rng, kHidden)), l.attn = upload(random_floats(rng, kHidden));
  l.norm_ffn = upload(random_floats(rng, kHidden, 0.5f, 1.5f));
  l.norm_attn = upload(random_floats(rng, kHidden, 0.5f, 1.5f));
  return l;
}

void poison_outputs(Layer& l) {
  l.h1 = poisoned_f32(kHidden), l.glu = poisoned_f32(kFf), l.h2 = poisoned_f32(kHidden);
  l.q = poisoned_f32(kHidden), l.k = poisoned_f32(kKv), l.v = poisoned_f32(kKv), l.unused = poisoned_f32(kFf);
}

// The four launches as the executor builds them for one layer (cuda/executor_fusion.cpp).
std::vector<cuda::MatvecParams> layer_launches(Type type, Layer& l) {
  std::vector<cuda::MatvecParams> ps(4);
  cuda::MatvecParams& o = ps[0];  // h1 = Wo attn + x
  o = {l.w[0].get(), type, l.attn.as<float>(), nullptr, l.h1.as<float>(), kHidden, kHidden, 1};
  o.residual = l.x.as<float>();
  cuda::MatvecParams& gu = ps[1];  // glu = silu(Wg n(h1)) * Wu n(h1)
  gu = {l.w[1].get(), type, l.h1.as<float>(), nullptr, l.unused.as<float>(), kHidden, kFf, 1};
  gu.norm_w = l.norm_ffn.as<float>(), gu.norm_eps = 1e-5f;
  gu.siblings[0] = {l.w[2].get(), nullptr, l.unused.as<float>(), kFf, type}, gu.n_siblings = 1;
  gu.swiglu_out = l.glu.as<float>();
  cuda::MatvecParams& down = ps[2];  // h2 = Wd glu + h1
  down = {l.w[3].get(), type, l.glu.as<float>(), nullptr, l.h2.as<float>(), kFf, kHidden, 1};
  down.residual = l.h1.as<float>();
  cuda::MatvecParams& qkv = ps[3];  // the next layer's q, k, v of n(h2)
  qkv = {l.w[4].get(), type, l.h2.as<float>(), nullptr, l.q.as<float>(), kHidden, kHidden, 1};
  qkv.norm_w = l.norm_attn.as<float>(), qkv.norm_eps = 1e-5f;
  qkv.siblings[0] = {l.w[5].get(), nullptr, l.k.as<float>(), kKv, type};
  qkv.siblings[1] = {l.w[6].get(), nullptr, l.v.as<float>(), kKv, type}, qkv.n_siblings = 2;
  return ps;
}

std::vector<std::vector<float>> outputs(const Layer& l) {
  return {download<float>(l.h1, kHidden), download<float>(l.glu, kFf), download<float>(l.h2, kHidden),
          download<float>(l.q, kHidden),  download<float>(l.k, kKv),   download<float>(l.v, kKv)};
}

TEST(MatvecChain, LayerInOneLaunchMatchesLaunchesOneByOne) {
  REQUIRE_GPU();
  if (cuda::current_device_sm_count() < 8) GTEST_SKIP() << "too few SMs for the 4-rows-a-group kernel";
  std::mt19937 rng(2026);
  for (const Type type : {Type::Q4_0, Type::Q4_K}) {
    SCOPED_TRACE(quant::type_name(type));
    Layer l = make_layer(type, rng);
    poison_outputs(l);
    std::vector<cuda::MatvecParams> ps = layer_launches(type, l);
    for (const auto& p : ps) cuda::launch_matvec(p, nullptr);
    const auto want = outputs(l);
    for (const auto& y : want)
      for (float v : y) ASSERT_TRUE(std::isfinite(v)) << "a lone launch left an output unwritten";

    ASSERT_EQ(cuda::matvec_chain_stages(ps.data(), 4), 4);
    cuda::DeviceBuffer barrier(4);
    CUDA_CHECK(cudaMemset(barrier.get(), 0, 4));
    for (int replay = 0; replay < 3; ++replay) {
      poison_outputs(l);
      ps = layer_launches(type, l);
      cuda::launch_matvec_chain(ps.data(), 4, barrier.as<uint32_t>(), nullptr);
      const auto got = outputs(l);
      for (size_t i = 0; i < want.size(); ++i)
        for (size_t j = 0; j < want[i].size(); ++j)
          ASSERT_EQ(got[i][j], want[i][j]) << "output " << i << " element " << j << " replay " << replay;
      const uint32_t counter = download<uint32_t>(barrier, 1)[0];
      EXPECT_EQ(counter & 0x7fffffffu, 0u) << "the barrier's low bits must come back to zero";
      EXPECT_EQ(counter >> 31, uint32_t(3 * (replay + 1)) & 1u) << "three barriers a launch flip the top bit";
    }
    // A shorter chain: the first two launches only.
    poison_outputs(l);
    ps = layer_launches(type, l);
    ASSERT_EQ(cuda::matvec_chain_stages(ps.data(), 2), 2);
    cuda::launch_matvec_chain(ps.data(), 2, barrier.as<uint32_t>(), nullptr);
    const auto got = outputs(l);
    EXPECT_EQ(got[0], want[0]);
    EXPECT_EQ(got[1], want[1]);
  }
}

// Launches of different kernel choices do not chain; nor does a matvec the int16 kernel does not serve; a chain
// launch of launches that do not chain is refused.
TEST(MatvecChain, RefusesWhatDoesNotChain) {
  REQUIRE_GPU();
  std::mt19937 rng(7);
  Layer a = make_layer(Type::Q4_0, rng);
  poison_outputs(a);
  std::vector<cuda::MatvecParams> ps = layer_launches(Type::Q4_0, a);
  const auto w_q4_k = upload(random_weights(rng, Type::Q4_K, kHidden, kFf));
  ps[1].w = w_q4_k.get(), ps[1].type = Type::Q4_K, ps[1].n_siblings = 0, ps[1].swiglu_out = nullptr;
  EXPECT_EQ(cuda::matvec_chain_stages(ps.data(), 4), 1);
  EXPECT_EQ(cuda::matvec_chain_stages(ps.data() + 1, 3), 1);
  cuda::DeviceBuffer barrier(4);
  EXPECT_THROW(cuda::launch_matvec_chain(ps.data(), 2, barrier.as<uint32_t>(), nullptr), cuda::InvalidArgument);
  const auto w_f16 = upload(random_weights(rng, Type::F16, kHidden, kHidden));
  ps = layer_launches(Type::Q4_0, a);
  ps[0].w = w_f16.get(), ps[0].type = Type::F16;
  EXPECT_EQ(cuda::matvec_chain_stages(ps.data(), 4), 1);
  EXPECT_EQ(cuda::matvec_chain_stages(ps.data() + 1, 3), 3);
}

}  // namespace
