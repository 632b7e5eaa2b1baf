// What the CUDA path says it can run (cuda/capabilities.h), asked before a session allocates anything: no device is
// needed, so these run in CI too. Every supported architecture's graph must lower (or a supported model would be sent
// to the CPU), and the shapes the kernels do not serve are refused by name.
#include <gtest/gtest.h>

#include "assets.h"
#include "cuda/capabilities.h"
#include "model/build_graph.h"
#include "model/model.h"
#include "tiny_model.h"

namespace {

TEST(CudaCapabilities, EverySupportedArchitectureLowers) {
  for (const char* arch : {"llama", "qwen2", "qwen3"}) {
    tiny::Spec s;
    s.arch = arch;
    s.qkv_bias = std::string(arch) == "qwen2";
    s.qk_norm = std::string(arch) == "qwen3";
    const auto m = tiny::load_owned(tiny::build(s));
    for (const int n_tokens : {1, 7})
      EXPECT_EQ(cuda::graph_refusal(model::build_graph(m->config(), m->weights(), n_tokens, false, 64)), "") << arch;
  }
}

// A paged batch's graph (kv_seq and block-table inputs, the output rows' Gather) lowers at the block sizes the kernels
// serve, and is refused by name at others.
TEST(CudaCapabilities, PagedGraphsLower) {
  tiny::Spec s;
  s.arch = "llama";
  const auto m = tiny::load_owned(tiny::build(s));
  model::BatchShape b{.n_tokens = 9, .all_logits = false, .n_ctx = 256, .block_size = 64, .max_blocks = 4, .n_seq = 3,
                      .n_outputs = 3};
  EXPECT_EQ(cuda::graph_refusal(model::build_graph(m->config(), m->weights(), b)), "");
  b.block_size = 8, b.max_blocks = 32;
  const std::string why = cuda::graph_refusal(model::build_graph(m->config(), m->weights(), b));
  EXPECT_NE(why.find("paged KV cache block size 8"), std::string::npos) << why;
}

// gemma3 (sliding-window layers of head_dim 64 here, 256 in the real models; GeGLU, scale, softcap) and phi3 (Slice
// nodes of its fused products, LongRoPE's attention factor) lower; a sliding window of a head shape only the
// per-head kernels serve is refused by name.
TEST(CudaCapabilities, NewArchitecturesLowerAndOtherWindowsAreRefused) {
  REQUIRE_ASSET(gemma, "models/synth-gemma3-Q8_0.gguf");
  REQUIRE_ASSET(phi, "models/synth-phi3-Q8_0.gguf");
  const auto refusal = [](const std::string& path) {
    const auto m = model::Model::load(path);
    return cuda::graph_refusal(model::build_graph(m->config(), m->weights(), 1, false, 64));
  };
  EXPECT_EQ(refusal(gemma), "");
  EXPECT_EQ(refusal(phi), "");
  // One attention of 6 heads of 32 over 2 KV heads (groups of 3: no tensor-core kernel) with a window of 8.
  graph::Graph g;
  const graph::NodeId pos = g.input("pos", graph::InputParams::Kind::Positions, 1);
  graph::WeightParams wp;
  wp.type = quant::Type::F32;
  const graph::NodeId q = g.weight("q", wp, graph::Shape{{32, 6, 1, 1}});
  const graph::NodeId k = g.weight("k", wp, graph::Shape{{32, 2, 1, 1}});
  const graph::NodeId v = g.weight("v", wp, graph::Shape{{32, 2, 1, 1}});
  graph::AttentionParams ap;
  ap.n_head = 6, ap.n_head_kv = 2, ap.head_dim = ap.head_dim_v = 32, ap.scale = 0.125f, ap.window = 8;
  g.attention("blk.0.attn", q, k, v, pos, ap);
  EXPECT_EQ(cuda::graph_refusal(g), "sliding-window attention of this head shape (node 'blk.0.attn')");
  ap.window = 0;
  graph::Graph plain;
  plain.attention("blk.0.attn", plain.weight("q", wp, graph::Shape{{32, 6, 1, 1}}),
                  plain.weight("k", wp, graph::Shape{{32, 2, 1, 1}}), plain.weight("v", wp, graph::Shape{{32, 2, 1, 1}}),
                  plain.input("pos", graph::InputParams::Kind::Positions, 1), ap);
  EXPECT_EQ(cuda::graph_refusal(plain), "");  // the per-head kernels serve it without a window
  // Gemma 3's real shape (12B: 16 heads of 256 over 8 KV heads): the tensor-core kernels mask its window.
  graph::Graph g256;
  graph::AttentionParams g12;
  g12.n_head = 16, g12.n_head_kv = 8, g12.head_dim = g12.head_dim_v = 256, g12.scale = 0.0625f, g12.window = 1024;
  g256.attention("blk.0.attn", g256.weight("q", wp, graph::Shape{{256, 16, 1, 1}}),
                 g256.weight("k", wp, graph::Shape{{256, 8, 1, 1}}), g256.weight("v", wp, graph::Shape{{256, 8, 1, 1}}),
                 g256.input("pos", graph::InputParams::Kind::Positions, 1), g12);
  EXPECT_EQ(cuda::graph_refusal(g256), "");
}

// The mixtures of experts lower (decode and prefill graphs, paged too), MXFP4 weights included; attention sinks of a
// head shape the tensor-core kernels do not serve are refused by name.
TEST(CudaCapabilities, MixturesOfExpertsLower) {
  REQUIRE_ASSET(qwen, "models/synth-qwen3moe-Q8_0.gguf");
  REQUIRE_ASSET(oss, "models/synth-gpt-oss-Q8_0.gguf");
  REQUIRE_ASSET(mx, "models/mxfp4/synth-gpt-oss-MXFP4_MOE.gguf");
  for (const std::string& path : {qwen, oss, mx}) {
    const auto m = model::Model::load(path);
    for (const int n_tokens : {1, 7})
      EXPECT_EQ(cuda::graph_refusal(model::build_graph(m->config(), m->weights(), n_tokens, false, 64)), "") << path;
    model::BatchShape b{.n_tokens = 9, .all_logits = false, .n_ctx = 256, .block_size = 64, .max_blocks = 4,
                        .n_seq = 3, .n_outputs = 3};
    EXPECT_EQ(cuda::graph_refusal(model::build_graph(m->config(), m->weights(), b)), "") << path << " paged";
  }
  // Sinks over groups of 3 query heads (no tensor-core kernel).
  graph::Graph g;
  graph::WeightParams wp;
  wp.type = quant::Type::F32;
  graph::AttentionParams ap;
  ap.n_head = 6, ap.n_head_kv = 2, ap.head_dim = ap.head_dim_v = 64, ap.scale = 0.125f;
  g.attention("blk.0.attn", g.weight("q", wp, graph::Shape{{64, 6, 1, 1}}), g.weight("k", wp, graph::Shape{{64, 2, 1, 1}}),
              g.weight("v", wp, graph::Shape{{64, 2, 1, 1}}), g.input("pos", graph::InputParams::Kind::Positions, 1), ap,
              {}, g.weight("sinks", wp, graph::Shape{{6, 1, 1, 1}}));
  EXPECT_NE(cuda::graph_refusal(g).find("attention sinks of this head shape"), std::string::npos);
}

TEST(CudaCapabilities, QuantizedCachesNeedTheTensorCoreHeadShapes) {
  using graph::KvType;
  const cuda::AttentionShape llama8b{32, 8, 128, 128}, gemma3_12b{16, 8, 256, 256}, tiny{4, 2, 8, 8},
      odd_group{12, 4, 128, 128};
  for (const KvType t : {KvType::F16, KvType::Q8_0, KvType::Q4_0}) {
    for (const cuda::AttentionShape& s : {llama8b, gemma3_12b}) {
      EXPECT_TRUE(cuda::kv_cache_supported(t, s)) << graph::kv_type_name(t) << " head_dim " << s.head_dim;
      EXPECT_EQ(cuda::kv_cache_refusal(t, s), "");
    }
  }
  EXPECT_TRUE(cuda::kv_cache_supported(KvType::F16, tiny));  // the f16 cache serves every shape
  for (const KvType t : {KvType::Q8_0, KvType::Q4_0}) {
    EXPECT_FALSE(cuda::kv_cache_supported(t, tiny)) << graph::kv_type_name(t);
    EXPECT_NE(cuda::kv_cache_refusal(t, tiny), "") << graph::kv_type_name(t);
    EXPECT_FALSE(cuda::kv_cache_supported(t, odd_group)) << "3 query heads per KV head";
  }
}

}  // namespace
