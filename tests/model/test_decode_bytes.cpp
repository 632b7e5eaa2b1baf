// The weight bytes one decoded token reads (model/decode_bytes.h), on the small MoE files of ../shared/models: the
// routed share of every expert tensor, one row of an untied embedding, every other tensor whole. The expectation
// is worked out from the file's own tensor list (names and sizes), not from the loader's roles.
#include <gtest/gtest.h>

#include <string>

#include "assets.h"
#include "model/decode_bytes.h"
#include "model/model.h"

namespace {

struct Expected {
  uint64_t per_token = 0, expert_total = 0;
};

Expected from_tensor_list(const gguf::File& f, uint64_t n_expert, uint64_t n_used) {
  Expected e;
  const bool untied = f.find_tensor("output.weight") != nullptr;
  for (const auto& t : f.tensors()) {
    if (t.name == "token_embd.weight" && untied) {
      e.per_token += t.nbytes / static_cast<uint64_t>(t.ne[1]);
    } else if (t.name.find("_exps.") != std::string::npos) {  // ffn_{gate,up,down}_exps.{weight,bias}
      e.expert_total += t.nbytes;
      e.per_token += t.nbytes / n_expert * n_used;
    } else {
      e.per_token += t.nbytes;
    }
  }
  return e;
}

TEST(DecodeBytes, MoeFilesCountTheRoutedExpertsOnly) {
  for (const char* name : {"synth-qwen3moe-F16", "synth-qwen3moe-Q8_0", "synth-qwen3moe-Q4_K_M", "synth-gpt-oss-F16",
                           "synth-gpt-oss-Q8_0", "mxfp4/synth-gpt-oss-MXFP4_MOE"}) {
    SCOPED_TRACE(name);
    REQUIRE_ASSET(path, std::string("models/") + name + ".gguf");
    const auto m = model::Model::load(path);
    const model::Config& c = m->config();
    const model::DecodeBytes d = model::decode_bytes(c, m->weights());
    ASSERT_GT(c.n_expert, c.n_expert_used);
    const Expected e = from_tensor_list(m->file(), uint64_t(c.n_expert), uint64_t(c.n_expert_used));
    EXPECT_EQ(d.per_token, e.per_token);
    EXPECT_EQ(d.expert_total, e.expert_total);
    EXPECT_EQ(d.expert_active, e.expert_total / uint64_t(c.n_expert) * uint64_t(c.n_expert_used));
    EXPECT_EQ(d.n_expert, c.n_expert);
    EXPECT_EQ(d.n_expert_used, c.n_expert_used);
    EXPECT_TRUE(d.active_only());
    EXPECT_LT(d.per_token, m->weights().arena_bytes());
  }
}

// One file worked by hand. synth-qwen3moe-Q8_0: Q8_0 is 34 bytes per 32 weights; n_embd 256, 2 layers, 8 experts
// of 128, 2 used, 512 tokens, untied.
//   output 256*512 -> 139264, output_norm 1024, one embedding row 139264 / 512 = 272;
//   per layer: attn_q 69632 + attn_k 34816 + attn_v 34816 + attn_output 69632 + q/k norms 2*256 + attn_norm and
//   ffn_norm 2*1024 + router 256*8*4 = 8192 -> 219648, and experts 3 * 278528 = 835584, of which 2/8 = 208896.
//   2 * (219648 + 208896) + 139264 + 1024 + 272 = 997648.
TEST(DecodeBytes, Qwen3MoeQ8_0ByHand) {
  REQUIRE_ASSET(path, "models/synth-qwen3moe-Q8_0.gguf");
  const auto m = model::Model::load(path);
  const model::DecodeBytes d = model::decode_bytes(m->config(), m->weights());
  EXPECT_EQ(d.per_token, 997648u);
  EXPECT_EQ(d.expert_total, 2u * 835584u);
  EXPECT_EQ(d.expert_active, 2u * 208896u);
}

// A dense model reads every tensor but the embedding rows it does not look up; nothing is an expert.
TEST(DecodeBytes, DenseFileReadsEverything) {
  REQUIRE_ASSET(path, "models/synth-gemma3-Q4_K_M.gguf");  // tied: the embedding is read whole as the output matrix
  const auto m = model::Model::load(path);
  const model::DecodeBytes d = model::decode_bytes(m->config(), m->weights());
  const Expected e = from_tensor_list(m->file(), 1, 1);
  EXPECT_EQ(d.per_token, e.per_token);
  uint64_t all = 0;
  for (const auto& t : m->file().tensors()) all += t.nbytes;
  EXPECT_EQ(d.per_token, all);
  EXPECT_EQ(d.expert_total, 0u);
  EXPECT_FALSE(d.active_only());

  REQUIRE_ASSET(untied, "models/synth-phi3-Q4_K_M.gguf");
  const auto p = model::Model::load(untied);
  const gguf::TensorInfo* embd = p->file().find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  uint64_t sum = 0;
  for (const auto& w : p->weights().all()) sum += w.params.nbytes;
  EXPECT_EQ(model::decode_bytes(p->config(), p->weights()).per_token,
            sum - embd->nbytes + embd->nbytes / uint64_t(embd->ne[1]));
}

}  // namespace
