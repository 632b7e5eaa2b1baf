// runtime::run_parallel_bench's decode loops, against a session that records the steps it is given: the
// batched-bench form (one step evaluated at a time, logits copied out) and the pipelined one (greedy tokens taken
// on the device from the step before, at most two steps queued, every queued step taken before the bench returns).
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "runtime/parallel_bench.h"
#include "runtime/session.h"

namespace {

struct Step {
  runtime::PagedBatch batch;
  bool queued = false;  // launch_paged; false: eval_paged
  int depth = 0;        // steps launched and not yet taken, this one included
};

class RecordingSession : public runtime::Session {
 public:
  std::span<const float> eval(std::span<const int32_t>, int32_t, bool) override {
    throw std::logic_error("not used by the bench");
  }
  std::optional<runtime::PagedLayout> paged_layout() const override {
    runtime::PagedLayout l;
    l.block_size = 16, l.n_blocks = 64, l.max_blocks = 8, l.n_seq = 4;
    return l;
  }
  // The checks and queue rules a real session applies (runtime/session.h), so that a bench breaking them fails here.
  std::span<const float> eval_paged(const runtime::PagedBatch& b) override {
    if (!wants_host_.empty()) throw std::logic_error("eval_paged with steps queued");
    runtime::check_paged_batch(b, *paged_layout(), n_vocab());
    steps.push_back({b, false, 0});
    last_outputs_ = int32_t(b.output_rows.size());
    logits_.assign(b.output_rows.size() * size_t(n_vocab()), 0.0f);
    return logits_;
  }
  void launch_paged(const runtime::PagedBatch& b) override {
    runtime::check_paged_batch(b, *paged_layout(), n_vocab());
    runtime::check_paged_launch(b, wants_host_.size(), !wants_host_.empty() && wants_host_.back(), last_outputs_);
    wants_host_.push_back(b.need_logits || b.asks_draws());
    last_outputs_ = int32_t(b.output_rows.size());
    steps.push_back({b, true, int(wants_host_.size())});
  }
  runtime::PagedResult take_paged() override {
    if (wants_host_.empty()) throw std::logic_error("take_paged with nothing queued");
    wants_host_.erase(wants_host_.begin());
    return {};
  }
  int32_t n_ctx() const override { return 128; }
  int32_t n_vocab() const override { return 32; }
  std::string device_name() const override { return "recording"; }
  uint64_t kv_cache_bytes() const override { return 0; }

  std::vector<Step> steps;
  size_t queued() const { return wants_host_.size(); }

 private:
  std::vector<bool> wants_host_;  // per queued step, oldest first: whether it wants logits or draws
  int32_t last_outputs_ = -1;     // output rows of the step launched last
  std::vector<float> logits_;
};

TEST(ParallelBench, BatchedBenchFormEvaluatesEachStepAndCopiesLogits) {
  RecordingSession s;
  runtime::run_parallel_bench(s, 3, 5, 4, 64, 1);
  ASSERT_EQ(s.steps.size(), 1u + 4u);  // the three prompts in one batch, then four decode steps
  for (const Step& st : s.steps) EXPECT_FALSE(st.queued);
  for (size_t i = 1; i < s.steps.size(); ++i) {
    EXPECT_TRUE(s.steps[i].batch.need_logits);
    EXPECT_TRUE(s.steps[i].batch.token_from_row.empty());
    EXPECT_EQ(s.steps[i].batch.positions, (std::vector<int32_t>{int32_t(4 + i), int32_t(4 + i), int32_t(4 + i)}));
  }
}

TEST(ParallelBench, PipelinedDecodeQueuesGreedyStepsFromTheStepBefore) {
  RecordingSession s;
  runtime::run_parallel_bench(s, 3, 5, 4, 64, 1, nullptr, /*pipeline=*/true);
  ASSERT_EQ(s.steps.size(), 1u + 4u);
  EXPECT_FALSE(s.steps[0].queued);  // the prompts: evaluated, their logits start each sequence
  for (size_t i = 1; i < s.steps.size(); ++i) {
    const runtime::PagedBatch& b = s.steps[i].batch;
    EXPECT_TRUE(s.steps[i].queued) << "decode step " << i - 1;
    EXPECT_FALSE(b.need_logits);
    EXPECT_TRUE(b.draws.empty());
    EXPECT_EQ(b.output_rows, (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(b.kv_seq, (std::vector<int32_t>{0, 1, 2}));
    // The first decode step reads the ids it was given; each later one, sequence s's argmax of the step before.
    EXPECT_EQ(b.token_from_row, i == 1 ? std::vector<int32_t>{} : (std::vector<int32_t>{0, 1, 2})) << i;
  }
  EXPECT_EQ(s.steps[1].depth, 1);
  EXPECT_EQ(s.steps[2].depth, 2);  // queued before the first decode step was taken
  int most = 0;
  for (const Step& st : s.steps) most = std::max(most, st.depth);
  EXPECT_EQ(most, 2);
  EXPECT_EQ(s.queued(), 0u);  // all taken before it returns
}

TEST(ParallelBench, PipelinedDecodeIsGreedyOnly) {
  RecordingSession s;
  runtime::SamplerParams p;
  p.temp = 0.8f;
  EXPECT_THROW(runtime::run_parallel_bench(s, 2, 4, 2, 64, 1, &p, /*pipeline=*/true), runtime::OptionsError);
  EXPECT_TRUE(s.steps.empty());
}

}  // namespace
