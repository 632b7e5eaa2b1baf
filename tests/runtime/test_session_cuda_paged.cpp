// The paged CUDA session (SessionOptions::n_seq > 0) against the paged CPU session: the same ragged batches (prompt
// chunks of several sequences, decode steps, a sequence joining later, one-token steps, shuffled block tables,
// padding to the session's buckets) give the same logits within the session tests' relative RMS; and the batching engine on the
// GPU gives each of eight requests the greedy text it gets alone on the CPU (agreement reported, at least 7 of 8:
// GPU kernels are not batch-invariant, so a near-tie may go the other way); a prompt's own logprobs (echo) within the
// same relative RMS of the CPU's.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "assets.h"
#include "rel_rms.h"
#include "chat/json.h"
#include "cuda/check.h"
#include "model/model.h"
#include "runtime/json_constraint.h"
#include "runtime/logprobs.h"
#include "runtime/json_schema_grammar.h"
#include "runtime/engine.h"
#include "runtime/generate.h"
#include "runtime/sampler.h"
#include "runtime/session_cpu.h"
#include "runtime/session_cuda.h"
#include "cuda/kernels/sample_rows.cuh"
#include "synth_tiny.h"

#define REQUIRE_GPU() \
  if (!::cuda::device_available()) GTEST_SKIP() << "no CUDA device"

namespace {

constexpr double kRelRms = 1e-2;  // as tests/runtime/test_session_cuda.cpp

using testing_metrics::rel_rms;

runtime::SessionOptions paged_options() {
  runtime::SessionOptions o;
  o.n_seq = 4;
  o.kv_block_size = 16;
  return o;
}

// Sequences of the test: their tokens and the block-table rows they own.
struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> blocks;
};

// b's rows for one step: sequence s takes counts[s] tokens, token_of(s, position), at its next positions (done[s]
// on, advanced), and has one output row, its last, when it takes any.
template <class TokenOf>
void fill_step(runtime::PagedBatch& b, std::span<const int32_t> counts, std::vector<int32_t>& done,
               TokenOf&& token_of) {
  b.tokens.clear(), b.positions.clear(), b.kv_seq.clear(), b.output_rows.clear();
  for (size_t s = 0; s < counts.size(); ++s) {
    for (int32_t k = 0; k < counts[s]; ++k) {
      b.tokens.push_back(token_of(s, done[s]));
      b.positions.push_back(done[s]++);
      b.kv_seq.push_back(int32_t(s));
    }
    if (counts[s] > 0) b.output_rows.push_back(int32_t(b.tokens.size()) - 1);
  }
}

// The logits of each step in turn on gpu: step[s] random tokens (ids 1..V-1, rng seeded `seed`) for sequence s at
// its next positions, sequence s owning blocks block_of(s, 0 .. blocks - 1) of the table.
template <size_t N, class BlockOf>
std::vector<float> random_steps(runtime::CudaSession& gpu, int32_t V, const std::vector<std::array<int32_t, N>>& steps,
                                uint32_t seed, int32_t blocks, BlockOf&& block_of) {
  const runtime::PagedLayout layout = *gpu.paged_layout();
  EXPECT_GE(layout.max_blocks, blocks);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> token(1, V - 1);
  runtime::PagedBatch b;
  b.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
  for (int32_t s = 0; s < int32_t(N); ++s)
    for (int32_t i = 0; i < blocks; ++i) b.block_table[size_t(s) * layout.max_blocks + i] = block_of(s, i);
  std::vector<int32_t> done(N, 0);
  std::vector<float> logits;
  for (const auto& step : steps) {
    fill_step(b, step, done, [&](size_t, int32_t) { return token(rng); });
    const auto got = gpu.eval_paged(b);
    logits.insert(logits.end(), got.begin(), got.end());
  }
  return logits;
}

// The ragged batches of the test on model m, paged CPU against paged GPU, every output row within kRelRms.
void check_ragged_batches(const std::shared_ptr<const model::Model>& m, const std::string& label) {
  const int32_t V = m->config().n_vocab;
  const runtime::SessionOptions so = paged_options();
  const runtime::PagedLayout layout = runtime::paged_layout_for(so, 512, m->config().n_ctx_train);
  runtime::CpuSession cpu(m, layout, 0);
  runtime::CudaSessionOptions co;
  co.n_seq = so.n_seq;
  co.kv_block_size = so.kv_block_size;
  runtime::CudaSession gpu(m, 512, co);
  ASSERT_TRUE(gpu.paged_layout());
  ASSERT_EQ(gpu.paged_layout()->n_blocks, layout.n_blocks);

  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> token(1, V - 1);
  std::vector<int32_t> free_blocks(size_t(layout.n_blocks));
  std::iota(free_blocks.begin(), free_blocks.end(), 0);
  std::shuffle(free_blocks.begin(), free_blocks.end(), rng);  // no sequence's blocks are in order
  std::vector<Seq> seqs(3);
  const int32_t prompt_len[] = {21, 7, 40};
  for (size_t s = 0; s < seqs.size(); ++s) {
    for (int32_t i = 0; i < prompt_len[s] + 12; ++i) seqs[s].tokens.push_back(token(rng));
    for (int32_t b = 0; b * 16 < prompt_len[s] + 12; ++b) {
      seqs[s].blocks.push_back(free_blocks.back());
      free_blocks.pop_back();
    }
  }
  runtime::PagedBatch b;
  b.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
  for (size_t s = 0; s < seqs.size(); ++s)
    std::copy(seqs[s].blocks.begin(), seqs[s].blocks.end(), b.block_table.begin() + s * size_t(layout.max_blocks));
  // Steps: which sequences take how many tokens (0: not this step).
  const std::vector<std::array<int32_t, 3>> steps = {
      {21, 7, 0}, {1, 1, 0}, {1, 1, 16}, {1, 1, 16}, {1, 1, 8}, {1, 1, 1}, {1, 1, 1}, {1, 0, 1}, {1, 1, 1},
      {0, 0, 1}, {1, 0, 0}, {0, 1, 0}};  // one-token steps: the q/k/v launch writes K/V through the table
  int worst_step = -1;
  double worst = 0;
  std::vector<int32_t> done(seqs.size(), 0);
  for (size_t st = 0; st < steps.size(); ++st) {
    fill_step(b, steps[st], done, [&](size_t s, int32_t pos) { return seqs[s].tokens[size_t(pos)]; });
    const auto want = cpu.eval_paged(b);
    const std::vector<float> ref(want.begin(), want.end());
    const auto got = gpu.eval_paged(b);
    ASSERT_EQ(got.size(), ref.size()) << "step " << st;
    for (size_t r = 0; r < b.output_rows.size(); ++r) {
      const double e = rel_rms(got.subspan(r * V, size_t(V)), std::span<const float>(ref).subspan(r * V, size_t(V)));
      EXPECT_LT(e, kRelRms) << label << " step " << st << " output " << r;
      if (e > worst) worst = e, worst_step = int(st);
    }
  }
  std::printf("[ paged    ] %s: worst rel-RMS %.2e (step %d)\n", label.c_str(), worst, worst_step);
}

class PagedGpu : public ::testing::TestWithParam<const char*> {};

TEST_P(PagedGpu, RaggedBatchesMatchTheCpu) {
  REQUIRE_GPU();
  REQUIRE_ASSET(path, std::string("models/") + GetParam() + ".gguf");
  check_ragged_batches(model::Model::load(path), GetParam());
}

// The same ragged batches in a new paged GPU session give the same bits. A synthetic Q4_K_M model of 2048-wide rows:
// its Q4_K q/k/v, o and gate/up and its regrouped Q6_K v take, at steps of 2..8, 9..32 and 33..64 tokens, each
// small-batch kernel (fragment, wide, wgmma), launched to overlap the kernel before them (pdl.cuh), and their results
// depend on no timing. A read that raced an earlier kernel's write would show as different bits.
TEST(PagedGpu, SameBatchesGiveTheSameBits) {
  REQUIRE_GPU();
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  const auto m = test_models::synth_tiny_h128(vocab, "Q4_K_M", 13);
  const int32_t V = m->config().n_vocab;
  // Tokens each of the four sequences takes a step (0: not this step); 28, 4, 32, 63, 4, 40, 12 and 3 a step.
  const std::vector<std::array<int32_t, 4>> steps = {{21, 7, 0, 0},     {1, 1, 1, 1},     {8, 8, 8, 8},
                                                     {16, 16, 16, 15},  {1, 1, 1, 1},     {10, 10, 10, 10},
                                                     {3, 3, 3, 3},      {1, 1, 0, 1}};
  const auto run = [&] {
    runtime::CudaSessionOptions co;
    co.n_seq = 4;
    co.kv_block_size = 16;
    runtime::CudaSession gpu(m, 512, co);
    // 4 blocks (64 positions) a sequence, in reverse order
    return random_steps(gpu, V, steps, 5, 4, [](int32_t s, int32_t i) { return 15 - (4 * s + i); });
  };
  const std::vector<float> first = run(), second = run();
  ASSERT_EQ(first.size(), second.size());
  size_t differ = 0;
  for (size_t i = 0; i < first.size(); ++i) differ += std::memcmp(&first[i], &second[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0u) << "of " << first.size() << " logits";
}

// A Q4_0 model whose o projection a single-sequence session regroups by columns for the attention + o launch
// (head_dim 128, 16 heads): a paged session keeps the file's layout, which its one-token steps read by matvec (they
// failed for want of GEMM scratch when o was regrouped) and its few-token steps by the few-column kernel.
TEST(PagedGpuQ4_0, AttentionOShapeKeepsTheFileLayout) {
  REQUIRE_GPU();
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  check_ragged_batches(test_models::synth_tiny_h128(vocab, "Q4_0", 11), "tiny-h128-Q4_0");
}

// Prompt steps of more than 64 tokens run as plain launches and compute their products on the live tokens only
// (ExecutorOptions::live_tokens, Executor::set_live_tokens): the padding columns up to the bucket keep whatever an
// earlier step left there (the first step fills its bucket), and nothing may read them back. Against the same steps
// with every column computed: each output row within 1e-3 relative RMS (the products' sums may run in another order
// over fewer columns) and the same argmax, on the wgmma prompt kernel and on cuBLAS's path.
TEST(PagedGpu, PromptStepsLeaveTheirPaddingOut) {
  REQUIRE_GPU();
  REQUIRE_ASSET(vocab, "tokenizer/ggml-vocab-llama-spm.gguf");
  const auto m = test_models::synth_tiny_h128(vocab, "Q4_K_M", 17);
  const int32_t V = m->config().n_vocab;
  // Tokens each of three sequences takes a step: 256 (a full bucket), then 140 and 92 and 102 (buckets of 256 and
  // 128, prompts beside decodes), then a decode step.
  const std::vector<std::array<int32_t, 3>> steps = {{256, 0, 0}, {1, 139, 0}, {1, 1, 90}, {100, 1, 1}, {1, 1, 1}};
  const auto run = [&](bool live, bool wgmma) {
    runtime::CudaSessionOptions co;
    co.n_seq = 3;
    co.kv_block_size = 16;
    co.exec.live_tokens = live;
    co.exec.prompt_wgmma = wgmma;
    runtime::CudaSession gpu(m, 1024, co);
    return random_steps(gpu, V, steps, 9, 24, [](int32_t s, int32_t i) { return 24 * s + i; });
  };
  for (const bool wgmma : {true, false}) {
    const std::vector<float> live = run(true, wgmma), all = run(false, wgmma);
    ASSERT_EQ(live.size(), all.size());
    double worst = 0;
    for (size_t r = 0; r * size_t(V) < live.size(); ++r) {
      const auto a = std::span<const float>(live).subspan(r * V, size_t(V));
      const auto e = std::span<const float>(all).subspan(r * V, size_t(V));
      const double d = rel_rms(a, e);
      worst = std::max(worst, d);
      EXPECT_LT(d, 1e-3) << (wgmma ? "wgmma" : "cuBLAS") << " output row " << r;
      EXPECT_EQ(std::max_element(a.begin(), a.end()) - a.begin(), std::max_element(e.begin(), e.end()) - e.begin())
          << (wgmma ? "wgmma" : "cuBLAS") << " output row " << r;
    }
    std::printf("[ paged    ] live tokens on %s: worst rel-RMS %.2e against every column\n",
                wgmma ? "the wgmma prompt kernel" : "cuBLAS", worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, PagedGpu,
                         // Q8_0 and Q4_0: the few-column products of the 2- and 3-token steps (matvec_cols.cuh)
                         ::testing::Values("stories260K-f32", "synth-llama-bpe-Q4_K_M", "synth-qwen3-Q4_K_M",
                                           "synth-gemma3-Q4_K_M", "synth-phi3-Q4_K_M", "synth-llama-tok512-Q8_0",
                                           "synth-llama-tok512-Q4_0",
                                           // mixtures: routed expert launches and the prefill tiles over ragged rows
                                           "synth-qwen3moe-Q4_K_M", "synth-gpt-oss-Q8_0"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace_if(n.begin(), n.end(), [](char c) { return !std::isalnum(c); }, '_');
                           return n;
                         });

// Device draws (PagedBatch::draws) of a ragged decode batch: each row exactly the CPU sampler's token for the
// logits the same step returns, whatever its neighbours ask (greedy with penalties, defaults, hot, a row that wants
// no draw, a row past the device's limits).
TEST(PagedGpu, DrawsAreTheCpuSamplersTokens) {
  REQUIRE_GPU();
  for (const char* name : {"models/stories260K-f32.gguf", "models/synth-qwen3-Q4_K_M.gguf"}) {
    REQUIRE_ASSET(path, name);
    auto m = model::Model::load(path);
    const int32_t V = m->config().n_vocab;
    runtime::CudaSessionOptions co;
    co.n_seq = 4;
    co.kv_block_size = 16;
    runtime::CudaSession gpu(m, 512, co);
    const runtime::PagedLayout layout = *gpu.paged_layout();
    std::vector<runtime::SamplerParams> params(4);
    params[0].temp = 0, params[0].repeat_penalty = 1.5f, params[0].repeat_last_n = 8;  // greedy, penalised
    params[1].seed = 11;                                                                // the defaults
    params[2].temp = 3.0f, params[2].top_k = 500, params[2].top_p = 1.0f, params[2].min_p = 0, params[2].seed = 12;
    params[3].top_k = 0, params[3].top_p = 0.99f, params[3].seed = 13;  // every id a candidate:
    const bool row3_host = V > cuda::kSampleRowsMaxTopK;  // the host's past the device's limit
    std::mt19937 rng(3);
    std::vector<std::vector<int32_t>> hist(4);
    runtime::PagedBatch b;
    b.block_table.assign(size_t(layout.n_seq) * layout.max_blocks, 0);
    for (int32_t s = 0; s < 4; ++s)
      for (int32_t i = 0; i < 4; ++i) b.block_table[size_t(s) * layout.max_blocks + size_t(i)] = s * 4 + i;
    for (int32_t s = 0; s < 4; ++s)
      for (int32_t i = 0; i < 5; ++i) hist[size_t(s)].push_back(int32_t(rng() % uint32_t(V)));
    int device_rows = 0;
    for (int step = 0; step < 8; ++step) {
      b.tokens.clear(), b.positions.clear(), b.kv_seq.clear(), b.output_rows.clear(), b.draws.clear();
      for (int32_t s = 0; s < 4; ++s) {
        const auto& h = hist[size_t(s)];
        const int32_t from = step == 0 ? 0 : int32_t(h.size()) - 1;  // the prompt, then one token a step
        for (int32_t p = from; p < int32_t(h.size()); ++p) {
          b.tokens.push_back(h[size_t(p)]), b.positions.push_back(p), b.kv_seq.push_back(s);
        }
        b.output_rows.push_back(int32_t(b.tokens.size()) - 1);
        // Row 1 asks for no draw in odd steps (its neighbours' draws must not move).
        if (s == 1 && step % 2 == 1) b.draws.push_back({});
        else b.draws.push_back(runtime::RowDraw{&params[size_t(s)], uint64_t(step), h});
      }
      b.need_logits = true;  // the logits too, to check the draws against
      const auto logits = gpu.eval_paged(b);
      const std::vector<float> rows(logits.begin(), logits.end());
      const auto drawn = gpu.paged_draws();
      ASSERT_EQ(drawn.size(), 4u);
      for (int32_t s = 0; s < 4; ++s) {
        runtime::Sampler cpu(params[size_t(s)]);
        const int32_t want = cpu.sample(std::span<const float>(rows).subspan(size_t(s) * V, size_t(V)),
                                        hist[size_t(s)], uint64_t(step));
        if ((s == 3 && row3_host) || (s == 1 && step % 2 == 1)) {
          EXPECT_EQ(drawn[size_t(s)], -1) << name << " step " << step << " row " << s;
        } else {
          EXPECT_EQ(drawn[size_t(s)], want) << name << " step " << step << " row " << s;
          ++device_rows;
        }
        hist[size_t(s)].push_back(want);
      }
    }
    EXPECT_EQ(device_rows, 8 * (row3_host ? 3 : 4) - 4);
    // need_logits false: the logits come back only when a draw is the host's (row 3 past the limit).
    b.need_logits = false;
    for (auto& t : b.positions) ++t;
    EXPECT_EQ(gpu.eval_paged(b).size(), row3_host ? size_t(4) * V : 0u);
    b.draws[3] = {};
    for (auto& t : b.positions) ++t;
    EXPECT_TRUE(gpu.eval_paged(b).empty());
    // A row with a logit bias is the host's (the kernel has none): the logits come back for it.
    runtime::SamplerParams biased = params[1];
    biased.logit_bias = {{1, 5.0f}};
    b.draws[1].params = &biased;
    for (auto& t : b.positions) ++t;
    EXPECT_EQ(gpu.eval_paged(b).size(), size_t(4) * V);
    EXPECT_EQ(gpu.paged_draws()[1], -1);
    EXPECT_GE(gpu.paged_draws()[0], 0);
  }
}

// Sampled requests (temperature, top-k / top-p, seeds, one with penalties) through the batching engine: each alone,
// drawn on the device, is exactly the text it gets drawn on the host from the same logits (LLM_CUDA_DEVICE_DRAWS=0's
// path) — the engine's draw counters and windows are right. Batched with the seven others, the agreement with alone is
// reported, not required: a batched step's logits are not bit-identical to a lone one's, and a draw near a boundary
// of the cumulative weights may go the other way (as a greedy near-tie may).
TEST(PagedGpuEngine, SampledRequestsDrawnOnTheDeviceAsOnTheHost) {
  REQUIRE_GPU();
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  auto m = model::Model::load(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  const auto engine = [&](bool device_draws) {
    runtime::CudaSessionOptions co;
    co.n_seq = 8;
    co.kv_block_size = 16;
    co.exec.device_draws = device_draws;
    return std::make_unique<runtime::Engine>(m, tokenizer::Tokenizer::from_gguf(m->file()),
                                             std::make_unique<runtime::CudaSession>(m, 1024, co));
  };
  const auto device = engine(true), host = engine(false);
  const std::vector<std::string> prompts = {"Once upon a time", "The dog ran", "Lily wanted to play with her friend",
                                            "Tom", "One day, a little bird", "The sun was", "Mom said",
                                            "There was a big red ball that"};
  const auto request = [&](size_t i) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(tok, prompts[i]);
    r.sampling.temp = 0.6f + 0.1f * float(i);
    r.sampling.seed = 100 + i;
    if (i == 3) r.sampling.repeat_penalty = 1.2f, r.sampling.presence_penalty = 0.3f;
    r.max_tokens = 40;
    r.ignore_eos = true;
    return r;
  };
  const auto run = [&](runtime::Engine& e, const std::vector<size_t>& which) {
    std::vector<std::promise<std::string>> texts(which.size());
    std::vector<std::string> got(which.size());
    for (size_t j = 0; j < which.size(); ++j)
      EXPECT_EQ(e.submit(request(which[j]),
                         [&, j](const runtime::EngineEvent& ev) {
                           if (ev.kind == runtime::EngineEvent::Kind::Final)
                             texts[j].set_value(got[j]);
                           else
                             got[j].append(ev.text);
                           return true;
                         })
                    .status,
                runtime::SubmitStatus::Accepted);
    std::vector<std::string> out;
    for (auto& t : texts) {
      auto f = t.get_future();
      EXPECT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready);
      out.push_back(f.get());
    }
    return out;
  };
  const std::vector<std::string> batched = run(*device, {0, 1, 2, 3, 4, 5, 6, 7});
  int same = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const std::string alone = run(*device, {i})[0];
    EXPECT_EQ(alone, run(*host, {i})[0]) << prompts[i];
    if (alone == batched[i]) ++same;
  }
  std::printf("[ agreement] %d of %zu sampled texts identical (GPU batched vs GPU alone; reported, not required)\n",
              same, prompts.size());
}

// JSON mode on the GPU engine: constrained requests beside plain ones in the same batches are drawn on the host from
// their masked rows (runtime/json_constraint.h). Each constrained text is a prefix of a JSON object, and the one that
// leans (by logit bias) towards '"', '}' and the end closes a whole one and ends on its own.
TEST(PagedGpuEngine, StructuredRequestsBesidePlainRequests) {
  REQUIRE_GPU();
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  auto m = model::Model::load(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  runtime::CudaSessionOptions co;
  co.n_seq = 8;
  co.kv_block_size = 16;
  runtime::Engine engine(m, tokenizer::Tokenizer::from_gguf(m->file()),
                         std::make_unique<runtime::CudaSession>(m, 2048, co));
  const auto vocab = std::make_shared<runtime::ConstraintVocabulary>(tok);
  std::vector<std::pair<int32_t, float>> lean;
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string piece = tok.is_control(id) ? "" : tok.token_to_piece(id);
    if (piece == "\"" || piece == "}" || tok.is_eog(id)) lean.emplace_back(id, 30.0f);
  }
  // Request 3 keeps to a schema whose values are all enumerated or bounded: it must close its object and end.
  const auto schema = runtime::json_schema_grammar(chat::parse_json(R"({"type": "object", "properties": {
      "mood": {"enum": ["happy", "sad"]}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
      "required": ["mood", "n"]})"));
  constexpr int kRequests = 6;
  std::vector<std::promise<std::pair<std::string, runtime::FinishReason>>> done(kRequests);
  std::vector<std::string> texts(kRequests);
  for (int i = 0; i < kRequests; ++i) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(tok, "Once upon a time");
    r.sampling.temp = i % 2 ? 0.8f : 0.0f;
    r.sampling.seed = 7 + uint64_t(i);
    r.max_tokens = 120;
    if (i < 3) r.constraint = std::make_shared<runtime::JsonConstraint>(vocab);  // 4 and 5 stay plain
    if (i == 3) r.constraint = runtime::make_grammar_constraint(vocab, schema);
    if (i == 0) r.sampling.logit_bias = lean;
    EXPECT_EQ(engine
                  .submit(std::move(r),
                          [&, i](const runtime::EngineEvent& ev) {
                            if (ev.kind == runtime::EngineEvent::Kind::Final)
                              done[size_t(i)].set_value({texts[size_t(i)], ev.finish});
                            else
                              texts[size_t(i)].append(ev.text);
                            return true;
                          })
                  .status,
              runtime::SubmitStatus::Accepted);
  }
  for (int i = 0; i < kRequests; ++i) {
    auto f = done[size_t(i)].get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    const auto [text, finish] = f.get();
    if (i >= 4) continue;
    if (i == 3) {
      runtime::GrammarState g(*schema);
      for (const char c : text) ASSERT_TRUE(g.feed(static_cast<unsigned char>(c))) << text;
      EXPECT_TRUE(g.complete()) << text;
      EXPECT_EQ(finish, runtime::FinishReason::Stop) << text;
      continue;
    }
    runtime::JsonPrefix p;
    size_t taken = 0;
    while (taken < text.size() && p.feed(static_cast<unsigned char>(text[taken]))) ++taken;
    EXPECT_EQ(taken, text.size()) << "request " << i << ": " << text;
    if (i == 0) {
      EXPECT_EQ(finish, runtime::FinishReason::Stop) << text;
      EXPECT_TRUE(p.complete()) << text;
    }
  }
}

// The GPU engine of the tests below: 4 sequences of a 512-token context, steps of 32 tokens (prompt chunks beside
// decodes).
std::unique_ptr<runtime::Engine> small_gpu_engine(const std::shared_ptr<const model::Model>& m) {
  runtime::CudaSessionOptions co;
  co.n_seq = 4;
  co.kv_block_size = 16;
  runtime::EngineOptions eo;
  eo.step_tokens = 32;
  return std::make_unique<runtime::Engine>(m, tokenizer::Tokenizer::from_gguf(m->file()),
                                           std::make_unique<runtime::CudaSession>(m, 512, co), eo);
}

TEST(PagedGpuEngine, EightGreedyRequestsAgreeWithTheCpuAlone) {
  REQUIRE_GPU();
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  auto m = model::Model::load(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  const auto engine_ptr = small_gpu_engine(m);
  runtime::Engine& engine = *engine_ptr;
  const std::vector<std::string> prompts = {"Once upon a time", "The dog ran", "Lily wanted to play with her friend",
                                            "Tom", "One day, a little bird", "The sun was", "Mom said",
                                            "There was a big red ball that"};
  std::vector<std::promise<std::string>> texts(prompts.size());
  std::vector<std::string> got(prompts.size());
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(tok, prompts[i]);
    r.sampling.temp = 0;
    r.max_tokens = 40;
    r.ignore_eos = true;
    ASSERT_EQ(engine
                  .submit(r,
                          [&, i](const runtime::EngineEvent& e) {
                            if (e.kind == runtime::EngineEvent::Kind::Final)
                              texts[i].set_value(got[i]);
                            else
                              got[i].append(e.text);
                            return true;
                          })
                  .status,
              runtime::SubmitStatus::Accepted);
  }
  int same = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    auto f = texts[i].get_future();
    ASSERT_EQ(f.wait_for(std::chrono::seconds(120)), std::future_status::ready);
    const std::string batched = f.get();
    runtime::CpuSession alone(m, 512, 0);
    runtime::GenerateOptions o;
    o.sampling.temp = 0;
    o.n_predict = 40;
    o.ignore_eos = true;
    o.echo_prompt = false;
    std::string expected;
    runtime::generate(alone, tok, runtime::tokenize_prompt(tok, prompts[i]), o,
                      [&](std::string_view t) { expected.append(t); });
    if (batched == expected) ++same;
    else std::printf("[ differs  ] %s\n  gpu batched: %s\n  cpu alone:   %s\n", prompts[i].c_str(), batched.c_str(),
                     expected.c_str());
  }
  std::printf("[ agreement] %d of %zu greedy texts identical (GPU batched vs CPU alone)\n", same, prompts.size());
  EXPECT_GE(same, 7);
}

// The prompt's own logprobs (EngineRequest::prompt_logprobs) on the GPU engine, beside greedy requests, 4 output
// rows a step (next_pow2(n_seq)): every prompt token after the first, before any generated one, within the session
// tests' relative RMS of one unpaged CPU evaluation of the prompt.
TEST(PagedGpuEngine, PromptLogprobsAgreeWithTheCpu) {
  REQUIRE_GPU();
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  auto m = model::Model::load(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  const auto engine_ptr = small_gpu_engine(m);
  runtime::Engine& engine = *engine_ptr;
  const std::vector<std::string> prompts = {
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun", "The dog ran",
      "Tom", "Mom said"};
  std::vector<std::promise<void>> done(prompts.size());
  std::vector<std::vector<runtime::TokenLogprobs>> scored(prompts.size());
  std::vector<int> after_tokens(prompts.size(), 0);
  std::vector<bool> generated(prompts.size(), false);
  for (size_t i = 0; i < prompts.size(); ++i) {
    runtime::EngineRequest r;
    r.prompt = runtime::tokenize_prompt(tok, prompts[i]);
    r.sampling.temp = 0;
    r.max_tokens = 8;
    r.ignore_eos = true;
    if (i == 0) r.top_logprobs = 1, r.prompt_logprobs = true;
    ASSERT_EQ(engine
                  .submit(r,
                          [&, i](const runtime::EngineEvent& e) {
                            if (e.kind == runtime::EngineEvent::Kind::Final) {
                              done[i].set_value();
                              return true;
                            }
                            if (!e.prompt_logprobs.empty() && generated[i]) ++after_tokens[i];
                            scored[i].insert(scored[i].end(), e.prompt_logprobs.begin(), e.prompt_logprobs.end());
                            if (!e.tokens.empty()) generated[i] = true;
                            return true;
                          })
                  .status,
              runtime::SubmitStatus::Accepted);
  }
  for (auto& d : done) ASSERT_EQ(d.get_future().wait_for(std::chrono::seconds(120)), std::future_status::ready);
  const std::vector<int32_t> prompt = runtime::tokenize_prompt(tok, prompts[0]);
  ASSERT_EQ(scored[0].size(), prompt.size() - 1);
  EXPECT_EQ(after_tokens[0], 0) << "prompt logprobs after a generated token";
  for (size_t i = 1; i < prompts.size(); ++i) EXPECT_TRUE(scored[i].empty());
  runtime::CpuSession cpu(m, 512, 0);
  const std::span<const float> rows = cpu.eval(prompt, 0, true);
  const size_t n_vocab = size_t(cpu.n_vocab());
  std::vector<float> gpu_lp, cpu_lp;
  for (size_t i = 1; i < prompt.size(); ++i) {
    EXPECT_EQ(scored[0][i - 1].sampled.id, prompt[i]);
    gpu_lp.push_back(scored[0][i - 1].sampled.logprob);
    cpu_lp.push_back(runtime::token_logprobs(rows.subspan((i - 1) * n_vocab, n_vocab), prompt[i], 0).sampled.logprob);
  }
  EXPECT_LE(rel_rms(gpu_lp, cpu_lp), kRelRms);
}

}  // namespace
