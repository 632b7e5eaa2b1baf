// GPU memory planning (app/memory_plan.h): the need for a context, the largest context that fits, the default
// context on a GPU and the one-line message when it does not fit, all against made-up free-memory numbers so they
// run without a GPU. The CUDA footprint (app/cuda_footprint.h) is checked on stories260K without a device, and,
// where a GPU is present, against what a CUDA session really allocates.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "assets.h"
#include "model/model.h"
#include "runtime/memory_plan.h"

#ifdef LLM_HAVE_CUDA_SESSION
#include "cuda/check.h"
#include "cuda/device_info.h"
#include "runtime/cuda_footprint.h"
#include "runtime/generate.h"
#include "runtime/session_cuda.h"
#include "tokenizer/tokenizer.h"
#endif

namespace {

constexpr uint64_t MiB = uint64_t{1} << 20;

// An 8B-class model at Q4: 4,700 MiB of weights, 128 KiB of f16 KV cache per token, 460 MiB of work buffers.
runtime::Footprint eight_b() {
  runtime::Footprint fp;
  fp.weights_bytes = 4700 * MiB;
  fp.kv_bytes_per_token = 128 * 1024;
  fp.work_bytes = [](int32_t) { return 460 * MiB; };
  return fp;
}

TEST(MemoryPlan, NeedAddsWeightsKvWorkAndHeadroom) {
  const runtime::MemoryNeed n = eight_b().need(32768);
  EXPECT_EQ(n.weights, 4700 * MiB);
  EXPECT_EQ(n.kv_cache, 4096 * MiB);
  EXPECT_EQ(n.work, 460 * MiB);
  EXPECT_EQ(n.headroom, runtime::kMemoryHeadroom);
  EXPECT_EQ(n.total(), (4700 + 4096 + 460) * MiB + runtime::kMemoryHeadroom);
}

TEST(MemoryPlan, LargestFittingContextIsExact) {
  const runtime::Footprint fp = eight_b();
  const uint64_t free_bytes = 7987 * MiB;  // 7.8 GiB
  // (7987 - 4700 - 460 - 256) MiB of room at 8 tokens per MiB.
  const int32_t n = runtime::largest_fitting_ctx(fp, free_bytes, 131072);
  EXPECT_EQ(n, 2571 * 8);
  EXPECT_LE(fp.need(n).total(), free_bytes);
  EXPECT_GT(fp.need(n + 1).total(), free_bytes);
  EXPECT_EQ(runtime::largest_fitting_ctx(fp, free_bytes, 1000), 1000);  // everything up to max_ctx fits
  EXPECT_EQ(runtime::largest_fitting_ctx(fp, 4000 * MiB, 131072), 0);  // not even the weights
}

TEST(MemoryPlan, RequestedContextThatDoesNotFitSaysWhatAndHowMuch) {
  try {
    runtime::require_fits(eight_b(), 7987 * MiB, 32768);
    FAIL() << "32768 tokens of KV cache do not fit in 7.8 GiB next to 4.6 GiB of weights";
  } catch (const runtime::DeviceMemoryError& e) {
    EXPECT_EQ(std::string(e.what()),
              "needs 9.3 GiB of GPU memory (weights 4.6 GiB, KV cache 4.0 GiB for -c 32768, work buffers 460 MiB, "
              "headroom 256 MiB) but 7.8 GiB is free; lower -c (at most 20480 fits)");
  }
  EXPECT_NO_THROW(runtime::require_fits(eight_b(), 7987 * MiB, 20568));
  EXPECT_THROW(runtime::require_fits(eight_b(), 7987 * MiB, 20569), runtime::DeviceMemoryError);
  try {
    runtime::require_fits(eight_b(), 3 * 1024 * MiB, 4096);
    FAIL();
  } catch (const runtime::DeviceMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("but 3.0 GiB is free; not even a small context fits"), std::string::npos)
        << e.what();
  }
}

TEST(MemoryPlan, DefaultContextIsTheTrainingContextCappedToWhatFits) {
  const runtime::Footprint fp = eight_b();
  EXPECT_EQ(runtime::default_ctx_that_fits(fp, 80 * 1024 * MiB, 131072), 131072);  // an H100 holds all of it
  EXPECT_EQ(runtime::default_ctx_that_fits(fp, 7987 * MiB, 131072), 20480);         // 20568 fit, rounded to 256s
  EXPECT_EQ(runtime::default_ctx_that_fits(fp, 7987 * MiB, 8192), 8192);
  EXPECT_THROW(runtime::default_ctx_that_fits(fp, 4000 * MiB, 131072), runtime::DeviceMemoryError);
  // Fewer than 256 slots is no useful default: an error that names the most that fits.
  try {
    runtime::default_ctx_that_fits(fp, (4700 + 460 + 256 + 10) * MiB, 131072);
    FAIL();
  } catch (const runtime::DeviceMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("lower -c (at most 80 fits)"), std::string::npos) << e.what();
  }
}

// The hints that name a smaller KV cache: with q8_0 (68 KiB a token) 32768 tokens fit in 7.8 GiB where f16's
// 128 KiB do not; the first option that fits is named, none when none does; a capped default context names the
// option that fits more (all of 131072 with q4_0's 36 KiB: 4.5 GiB of cache beside 4.6 GiB of weights, in 10 GiB).
TEST(MemoryPlan, SmallerCacheHintsNameTheFirstOptionThatFits) {
  runtime::Footprint q8 = eight_b(), q4 = eight_b();
  q8.kv_bytes_per_token = 68 * 1024, q4.kv_bytes_per_token = 36 * 1024;
  const std::vector<runtime::CacheOption> options = {{"q8_0", q8}, {"q4_0", q4}};
  EXPECT_EQ(runtime::smaller_cache_hint(options, 7987 * MiB, 32768),
            "; or keep -c 32768 with --cache-type q8_0 (KV cache 2.1 GiB)");
  EXPECT_EQ(runtime::smaller_cache_hint(options, 7987 * MiB, 65536),
            "; or keep -c 65536 with --cache-type q4_0 (KV cache 2.2 GiB)");
  EXPECT_EQ(runtime::smaller_cache_hint(options, 7987 * MiB, 131072), "");  // neither fits
  EXPECT_EQ(runtime::smaller_cache_hint({}, 7987 * MiB, 32768), "");
  EXPECT_EQ(runtime::larger_context_hint(options, 7987 * MiB, 20480, 131072), ", or --cache-type q8_0 for up to 38656");
  EXPECT_EQ(runtime::larger_context_hint({{"q4_0", q4}}, 10240 * MiB, 20480, 131072),
            ", or --cache-type q4_0 for up to 131072");
  EXPECT_EQ(runtime::larger_context_hint(options, 7987 * MiB, 131072, 131072), "");  // nothing larger to offer
}

TEST(MemoryPlan, WorkThatGrowsWithTheContextIsCounted) {
  runtime::Footprint fp = eight_b();
  fp.work_bytes = [](int32_t n_ctx) { return 460 * MiB + uint64_t(n_ctx) * 4 * 1024; };  // + 4 KiB per slot
  const uint64_t free_bytes = 7987 * MiB;
  const int32_t n = runtime::largest_fitting_ctx(fp, free_bytes, 131072);
  EXPECT_EQ(n, int32_t(2571 * MiB / (128 * 1024 + 4 * 1024)));
  EXPECT_LE(fp.need(n).total(), free_bytes);
  EXPECT_GT(fp.need(n + 1).total(), free_bytes);
}

TEST(MemoryPlan, FormatBytes) {
  EXPECT_EQ(runtime::format_bytes(0), "0 MiB");
  EXPECT_EQ(runtime::format_bytes(1), "1 MiB");
  EXPECT_EQ(runtime::format_bytes(460 * MiB), "460 MiB");
  EXPECT_EQ(runtime::format_bytes(1024 * MiB), "1.0 GiB");
  EXPECT_EQ(runtime::format_bytes(uint64_t{80} << 30), "80.0 GiB");
}

#ifdef LLM_HAVE_CUDA_SESSION

// Without a device: the footprint of a real model covers its KV layout and, for perplexity, every logit.
TEST(CudaFootprint, CoversTheKvCacheAndThePlannedBatch) {
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto m = model::Model::load(path);
  const model::Config& c = m->config();
  const runtime::CudaDeviceFacts h100{132, 6 * MiB};
  const runtime::Footprint fp = runtime::cuda_session_footprint(*m, h100);
  EXPECT_EQ(fp.weights_bytes, m->weights().arena_bytes());
  EXPECT_EQ(fp.kv_bytes_per_token, uint64_t(c.n_layer) * c.n_head_kv * (c.head_dim + c.head_dim_v) * 2);
  const uint64_t prompt = fp.work_bytes(512);
  EXPECT_GT(prompt, fp.work_bytes(1));
  // The sampler's history window grows with the context.
  EXPECT_GT(fp.work_bytes(4096), fp.work_bytes(512));
  // Perplexity's chunks return every token's logits: at least n_ctx rows of n_vocab floats.
  const runtime::Footprint ppl = runtime::cuda_session_footprint(*m, h100, {512, true});
  EXPECT_GE(ppl.work_bytes(512), uint64_t(512) * c.n_vocab * 4);
}

// A q8_0 cache: 34 bytes per 32 values instead of 64; the allocation itself (cuda::KvCache::bytes_for) is that plus
// per-layer alignment padding. stories260K's head_dim 8 cannot hold q8_0 blocks, so a 64-dim shape of its size.
TEST(CudaFootprint, Q8KvCacheBytes) {
  const graph::KvCacheSpec f16{4, 1000, 2, 64, 64, graph::KvType::F16}, q8{4, 1000, 2, 64, 64, graph::KvType::Q8_0};
  EXPECT_EQ(cuda::KvCache::bytes_per_slot(f16), 4.0 * 2 * 128 * 2);
  EXPECT_EQ(cuda::KvCache::bytes_per_slot(q8), 4.0 * 2 * 128 * 34 / 32);
  const size_t exact = size_t(4) * 1000 * 2 * 128 * 34 / 32;
  EXPECT_GE(cuda::KvCache::bytes_for(q8), exact);
  EXPECT_LE(cuda::KvCache::bytes_for(q8), exact + 4 * 4 * 256);  // four arrays per layer, each padded to 256 bytes
  EXPECT_EQ(cuda::KvCache::bytes_for(f16), size_t(4) * 1000 * 2 * 128 * 2);
  const graph::KvCacheSpec bad{4, 1000, 2, 48, 48, graph::KvType::Q8_0};
  EXPECT_THROW(cuda::KvCache::bytes_for(bad), std::exception);
}

// A q4_0 cache: 18 bytes per 32 values (16 of nibbles, a 2-byte scale) instead of 64, in the same four arrays.
TEST(CudaFootprint, Q4KvCacheBytes) {
  const graph::KvCacheSpec q4{4, 1000, 2, 64, 64, graph::KvType::Q4_0};
  EXPECT_EQ(cuda::KvCache::bytes_per_slot(q4), 4.0 * 2 * 128 * 18 / 32);
  const size_t exact = size_t(4) * 1000 * 2 * 128 * 18 / 32;
  EXPECT_GE(cuda::KvCache::bytes_for(q4), exact);
  EXPECT_LE(cuda::KvCache::bytes_for(q4), exact + 4 * 4 * 256);
  // Per layer: K and V quants of 2000 slots * 32 bytes (64000, padded to 64000 = 250 * 256) and their scales of
  // 2000 * 2 * 2 bytes (8000, padded to 8192): the layout the kernels index, not only its total.
  EXPECT_EQ(cuda::KvCache::bytes_for(q4), size_t(4) * (2 * 64000 + 2 * 8192));
  const graph::KvCacheSpec bad{4, 1000, 2, 48, 48, graph::KvType::Q4_0};
  EXPECT_THROW(cuda::KvCache::bytes_for(bad), std::exception);
}

// With a device: what a session allocates, a prompt and decoding included, stays within the plan (the headroom
// covers the CUDA context's own buffers, kernel modules and allocation rounding); a context of a million slots makes
// the KV cache the bulk of it, so the measurement means something even for this tiny model.
TEST(CudaFootprint, SessionAllocatesNoMoreThanPlanned) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto m = model::Model::load(path);
  const auto tok = tokenizer::Tokenizer::from_gguf(m->file());
  const int32_t n_ctx = 1'000'000;
  const cuda::Context ctx(0);
  const runtime::CudaDeviceFacts facts = runtime::cuda_device_facts(ctx, m->config().n_vocab);
  const runtime::MemoryNeed need = runtime::cuda_session_footprint(*m, facts).need(n_ctx);
  const uint64_t free_before = cuda::device_memory_free();
  runtime::CudaSession s(m, n_ctx, {});
  runtime::GenerateOptions g;
  g.n_predict = 16, g.sampling.temp = 0, g.warmup = true;
  const std::vector<int32_t> prompt = runtime::tokenize_prompt(tok, "Once upon a time");
  runtime::generate(s, tok, prompt, g, [](std::string_view) {});
  s.eval(std::span<const int32_t>(prompt.data(), 1), 0, false);  // the plain decode graph as well
  CUDA_CHECK(cudaDeviceSynchronize());
  const uint64_t used = free_before - cuda::device_memory_free();
  EXPECT_GE(used, need.kv_cache);
  EXPECT_LE(used, need.total()) << "used " << used << " bytes; planned weights " << need.weights << ", KV "
                                << need.kv_cache << ", work " << need.work << ", headroom " << need.headroom;
}

TEST(CudaFootprint, ImpossibleContextIsRefusedBeforeAllocating) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  REQUIRE_ASSET(path, "models/stories260K-f32.gguf");
  const auto m = model::Model::load(path);
  try {
    runtime::CudaSession s(m, 2'000'000'000, {});
    FAIL() << "a context of 2e9 tokens cannot fit";
  } catch (const runtime::DeviceMemoryError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("needs ", 0), 0u) << what;
    EXPECT_NE(what.find("for -c 2000000000"), std::string::npos) << what;
    EXPECT_NE(what.find("lower -c (at most "), std::string::npos) << what;
  }
}

// A context whose f16 cache would take 1.2x the free memory but whose q8_0 cache fits: the refusal names q8_0 and
// what its cache would take (a model whose heads hold whole blocks of 32).
TEST(CudaFootprint, ContextThatFitsOnlyWithASmallerCacheNamesIt) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  REQUIRE_ASSET(path, "models/synth-llama-tok512-Q4_K_M.gguf");
  const auto m = model::Model::load(path);
  int32_t n_ctx = 0;
  {
    const cuda::Context ctx(0);
    const runtime::Footprint f16 = runtime::cuda_session_footprint(*m, runtime::cuda_device_facts(ctx, m->config().n_vocab));
    const double slots = 1.2 * double(cuda::device_memory_free()) / double(f16.kv_bytes_per_token);
    ASSERT_LT(slots, 2e9) << "this model's cache is too small per token for the test";
    n_ctx = int32_t(slots);
  }
  try {
    runtime::CudaSession s(m, n_ctx, {});
    FAIL() << "a f16 cache of 1.2x the free memory cannot fit";
  } catch (const runtime::DeviceMemoryError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("; or keep -c " + std::to_string(n_ctx) + " with --cache-type q8_0 (KV cache "),
              std::string::npos) << what;
  }
}

#endif  // LLM_HAVE_CUDA_SESSION

}  // namespace
