// Pipelined paged steps on the GPU (Session::launch_paged / take_paged): a step launched before the one before it is
// taken, its tokens gathered on the device from that step's argmax rows, gives bit for bit what the same steps give
// one by one with those tokens written by the host; and the batching engine's greedy texts are the same with the
// pipeline on and off.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "assets.h"
#include "cuda/check.h"
#include "model/model.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/session_cuda.h"
#include "submit_all.h"

#define REQUIRE_GPU() \
  if (!::cuda::device_available()) GTEST_SKIP() << "no CUDA device"

namespace {

runtime::CudaSessionOptions paged(int32_t n_seq) {
  runtime::CudaSessionOptions co;
  co.n_seq = n_seq;
  co.kv_block_size = 16;
  return co;
}

// Three sequences: a prompt step, then decode steps of each one's argmax; the pipelined session launches step k + 1
// (tokens from step k's rows) before it takes step k.
TEST(PagedGpuPipeline, TokensGatheredFromTheStepBeforeAreItsArgmax) {
  REQUIRE_GPU();
  for (const char* name : {"models/stories260K-f32.gguf", "models/synth-qwen3-Q4_K_M.gguf"}) {
    REQUIRE_ASSET(path, name);
    auto m = model::Model::load(path);
    runtime::CudaSession piped(m, 512, paged(4)), by_hand(m, 512, paged(4));
    const runtime::PagedLayout layout = *piped.paged_layout();
    runtime::PagedBatch b;
    b.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
    for (int32_t s = 0; s < 3; ++s)
      for (int32_t i = 0; i < 4; ++i) b.block_table[size_t(s) * layout.max_blocks + size_t(i)] = s * 4 + i;
    b.tokens = {1, 9, 4, 1, 30, 1, 7, 8, 2}, b.positions = {0, 1, 2, 0, 1, 0, 1, 2, 3};
    b.kv_seq = {0, 0, 0, 1, 1, 2, 2, 2, 2}, b.output_rows = {2, 4, 8};
    b.need_logits = false;
    piped.launch_paged(b);
    (void)by_hand.eval_paged(b);
    std::vector<int32_t> want(by_hand.paged_argmax().begin(), by_hand.paged_argmax().end());
    std::vector<int32_t> pos = {3, 2, 4};
    for (int step = 0; step < 6; ++step) {
      runtime::PagedBatch d = b;
      d.tokens = {0, 0, 0}, d.positions = pos, d.kv_seq = {0, 1, 2}, d.output_rows = {0, 1, 2};
      d.token_from_row = {0, 1, 2};
      d.need_logits = step == 5;  // the last one's logits too
      piped.launch_paged(d);
      const runtime::PagedResult before = piped.take_paged();
      EXPECT_EQ(std::vector<int32_t>(before.argmax.begin(), before.argmax.end()), want) << name << " step " << step;
      d.tokens = want, d.token_from_row.clear();
      const auto logits = by_hand.eval_paged(d);
      want.assign(by_hand.paged_argmax().begin(), by_hand.paged_argmax().end());
      if (step == 5) {
        const runtime::PagedResult last = piped.take_paged();
        EXPECT_EQ(std::vector<int32_t>(last.argmax.begin(), last.argmax.end()), want) << name;
        ASSERT_EQ(last.logits.size(), logits.size()) << name;
        EXPECT_TRUE(std::equal(logits.begin(), logits.end(), last.logits.begin())) << name;
      }
      for (auto& p : pos) ++p;
    }
  }
}

// Greedy requests (and one sampled, which takes its steps' results first) through the engine with and without the
// pipeline. All start in the first step and none runs a step past its last token, so both engines run the same
// batches (GPU kernels are deterministic for a batch, not invariant across batches): the same texts.
TEST(PagedGpuPipeline, EngineTextsAreThoseWithoutThePipeline) {
  REQUIRE_GPU();
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  auto m = model::Model::load(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  const std::vector<std::string> prompts = {"Once upon a time", "The dog ran", "Lily wanted to play with her friend",
                                            "Tom", "One day, a little bird", "The sun was"};
  std::vector<runtime::EngineRequest> rs;
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(tok, prompts[i]);
    r.sampling.temp = i == 3 ? 0.7f : 0.0f;
    r.sampling.seed = 5;
    r.max_tokens = 24 + int32_t(i) * 5;
    r.ignore_eos = true;
    rs.push_back(r);
  }
  const auto run = [&](bool pipeline) {
    runtime::EngineOptions eo;
    eo.step_tokens = 64;
    eo.pipeline_steps = pipeline;
    runtime::Engine engine(m, tokenizer::Tokenizer::from_gguf(m->file()),
                           std::make_unique<runtime::CudaSession>(m, 1024, paged(8)), eo);
    return test_engine::texts_of(engine, rs);
  };
  const std::vector<std::string> on = run(true), off = run(false);
  for (size_t i = 0; i < prompts.size(); ++i) EXPECT_EQ(on[i], off[i]) << prompts[i];
}

}  // namespace
