// The paged CPU session on every architecture llm-run runs: ragged batches of three sequences (prompt chunks beside
// decodes, a sequence joining later, block tables in no order) give each sequence's output rows exactly the logits
// a contiguous CPU session gives that sequence alone, fed the same chunks. This is the property the batching engine
// and the server promise ("a request's tokens do not depend on its neighbours"), and the paged GPU tests compare
// against this session, so a paging bug here (a sliding window, attention sinks, a layer's own cache) would pass
// there unnoticed. The sequences run past gemma3's window of 8 and gpt-oss's 16.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "assets.h"
#include "model/model.h"
#include "runtime/session_cpu.h"

namespace {

constexpr int32_t kBlockSize = 16;
constexpr int32_t kSeqs = 3;
constexpr int32_t kCtx = 128;  // the contiguous sessions' context and the pool's tokens a sequence

// Tokens each sequence takes a step (0: not this step). Sequence 2 joins at step 2; the one-token steps decode.
const std::vector<std::array<int32_t, kSeqs>> kSteps = {
    {21, 7, 0}, {1, 1, 0}, {1, 1, 16}, {1, 1, 16}, {3, 1, 8}, {1, 9, 1}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1},
    {0, 0, 1}, {1, 0, 0}, {0, 1, 0}, {1, 1, 1}};

class PagedArchs : public ::testing::TestWithParam<const char*> {};

TEST_P(PagedArchs, RaggedBatchesGiveEachSequenceItsLogitsAlone) {
  REQUIRE_ASSET(path, std::string("models/") + GetParam() + ".gguf");
  const std::shared_ptr<const model::Model> m = model::Model::load(path);
  const int32_t V = m->config().n_vocab;

  runtime::SessionOptions so;
  so.n_seq = 4;
  so.kv_block_size = kBlockSize;
  const runtime::PagedLayout layout = runtime::paged_layout_for(so, so.n_seq * kCtx, kCtx);
  runtime::CpuSession paged(m, layout, 1);
  std::vector<std::unique_ptr<runtime::CpuSession>> alone;
  for (int32_t s = 0; s < kSeqs; ++s) alone.push_back(std::make_unique<runtime::CpuSession>(m, kCtx, 1));

  // Each sequence's tokens and blocks; the pool's blocks handed out shuffled, so no block table is in order.
  std::mt19937 rng(11);
  std::uniform_int_distribution<int32_t> token(1, V - 1);
  std::vector<int32_t> free_blocks(size_t(layout.n_blocks));
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);
  std::array<int32_t, kSeqs> total{};
  for (const auto& step : kSteps)
    for (int32_t s = 0; s < kSeqs; ++s) total[size_t(s)] += step[size_t(s)];
  std::vector<std::vector<int32_t>> tokens(kSeqs);
  runtime::PagedBatch b;
  b.block_table.assign(size_t(layout.n_seq) * size_t(layout.max_blocks), 0);
  for (int32_t s = 0; s < kSeqs; ++s) {
    ASSERT_LE(total[size_t(s)], kCtx);
    for (int32_t i = 0; i < total[size_t(s)]; ++i) tokens[size_t(s)].push_back(token(rng));
    for (int32_t k = 0; k * kBlockSize < total[size_t(s)]; ++k) {
      b.block_table[size_t(s) * size_t(layout.max_blocks) + size_t(k)] = free_blocks.back();
      free_blocks.pop_back();
    }
  }
  ASSERT_GT(total[2], 16) << "the sequences must run past the sliding windows";

  std::array<int32_t, kSeqs> done{};
  size_t compared = 0;
  for (size_t st = 0; st < kSteps.size(); ++st) {
    b.tokens.clear(), b.positions.clear(), b.kv_seq.clear(), b.output_rows.clear();
    for (int32_t s = 0; s < kSeqs; ++s) {
      const int32_t n = kSteps[st][size_t(s)];
      for (int32_t k = 0; k < n; ++k) {
        b.tokens.push_back(tokens[size_t(s)][size_t(done[size_t(s)] + k)]);
        b.positions.push_back(done[size_t(s)] + k);
        b.kv_seq.push_back(s);
      }
      if (n > 0) b.output_rows.push_back(static_cast<int32_t>(b.tokens.size()) - 1);
    }
    const std::span<const float> got_span = paged.eval_paged(b);
    const std::vector<float> got(got_span.begin(), got_span.end());
    ASSERT_EQ(got.size(), b.output_rows.size() * size_t(V)) << "step " << st;
    size_t row = 0;
    for (int32_t s = 0; s < kSeqs; ++s) {
      const int32_t n = kSteps[st][size_t(s)];
      if (n == 0) continue;
      const std::span<const int32_t> chunk(tokens[size_t(s)].data() + done[size_t(s)], size_t(n));
      const std::span<const float> want = alone[size_t(s)]->eval(chunk, done[size_t(s)], false);
      ASSERT_EQ(want.size(), size_t(V));
      size_t differ = 0;
      for (size_t v = 0; v < size_t(V); ++v)
        differ += std::memcmp(&want[v], &got[row * size_t(V) + v], sizeof(float)) != 0;
      EXPECT_EQ(differ, 0u) << GetParam() << ": step " << st << ", sequence " << s << " (positions "
                            << done[size_t(s)] << ".." << done[size_t(s)] + n - 1 << "), of " << V << " logits";
      done[size_t(s)] += n;
      ++row, ++compared;
    }
  }
  size_t rows = 0;  // every step's sequences with tokens
  for (const auto& step : kSteps) rows += size_t(std::count_if(step.begin(), step.end(), [](int32_t n) { return n > 0; }));
  EXPECT_EQ(compared, rows);
}

INSTANTIATE_TEST_SUITE_P(Models, PagedArchs,
                         ::testing::Values("stories260K-f32", "synth-qwen2-Q4_K_M", "synth-qwen3-Q4_K_M",
                                           "synth-gemma3-F16", "synth-phi3-F16", "synth-qwen3moe-Q8_0",
                                           "synth-gpt-oss-F16", "mxfp4/synth-gpt-oss-MXFP4_MOE"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });

}  // namespace
