// Kernel lab timings (run only with LLM_CUDA_BENCH=1; otherwise skipped): decode matvec bandwidth per weight type on
// an 8B-model-sized matrix, the GEMM path and the device's copy bandwidth for reference (KernelLab.Timings); the
// decode matvec on wide rows (KernelLab.WideMatvec); decode attention per cache type and split count
// (KernelLab.Attention); Gemma 3's head_dim-256 attention, decode and prefill (KernelLab.AttentionHd256); decode
// batches (KernelLab.BatchMm). Warm-up, CUDA events, median of repeats; the inputs rotate over several copies so L2
// (50 MB) never holds the one being read. Prints tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/executor.h"
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_i8.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/batch_mm_wide.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/matvec_cols.cuh"
#include "cuda/kernels/q6_kx8.cuh"
#include "lab_timing.h"

namespace {

template <class F>
float median_ms(const cuda::Context& ctx, int reps, F&& f) {
  auto a = cuda::Event::create(true), b = cuda::Event::create(true);
  for (int i = 0; i < 3; ++i) f(i);
  std::vector<float> t;
  for (int i = 0; i < reps; ++i) {
    a.record(ctx.compute());
    f(i);
    b.record(ctx.compute());
    b.synchronize();
    t.push_back(b.since(a));
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The attention lab's context lengths: LLM_LAB_CTXS="256,1024,..." or 4096 and 16384.
std::vector<int64_t> lab_contexts() { return gpu_test::lab_counts("LLM_LAB_CTXS", {4096, 16384}); }

}  // namespace

TEST(KernelLab, Timings) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  if (const char* e = std::getenv("LLM_CUDA_BENCH"); !e || std::string(e) != "1")
    GTEST_SKIP() << "timings run only with LLM_CUDA_BENCH=1";
  cuda::Context ctx;
  std::printf("device: %s, %d SMs\n", ctx.name().c_str(), ctx.sm_count());
  const cudaStream_t s = ctx.compute();
  {
    const size_t bytes = size_t(1) << 30;
    cuda::DeviceBuffer a(bytes), b(bytes);
    CUDA_CHECK(cudaMemset(a.get(), 1, bytes));
    const float ms = median_ms(ctx, 10, [&](int) {
      CUDA_CHECK(cudaMemcpyAsync(b.get(), a.get(), bytes, cudaMemcpyDeviceToDevice, s));
    });
    std::printf("copy D2D 1 GiB: %.3f ms, %.0f GB/s (read + write)\n", ms, 2.0 * bytes / ms / 1e6);
  }
  const int64_t K = 4096, N = 14336;  // an 8B model's ffn_up
  std::mt19937 rng(1);
  std::vector<float> x(K * 512);
  for (auto& v : x) v = float(rng() % 2001) / 1000.0f - 1.0f;
  cuda::DeviceBuffer dx(x.size() * 4), dy(N * 512 * 4);
  CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  std::printf("\nmatvec K=%lld N=%lld (T=1), weights rotated over 4 copies\n", (long long)K, (long long)N);
  std::printf("%-6s %10s %10s %8s\n", "type", "MiB", "us", "GB/s");
  using quant::Type;
  for (Type t : {Type::F32, Type::F16, Type::BF16, Type::Q8_0, Type::Q4_0, Type::Q4_1, Type::Q5_0, Type::Q5_1,
                 Type::Q2_K, Type::Q3_K, Type::Q4_K, Type::Q5_K, Type::Q6_K}) {
    const size_t wb = quant::row_bytes(t, K) * N;
    std::vector<uint8_t> host(wb);
    for (auto& b : host) b = uint8_t(rng() & 0x3f);  // small values: no inf/nan scales
    std::vector<cuda::DeviceBuffer> w;
    for (int i = 0; i < 4; ++i) {
      w.emplace_back(wb);
      CUDA_CHECK(cudaMemcpy(w.back().get(), host.data(), wb, cudaMemcpyHostToDevice));
    }
    const float ms = median_ms(ctx, 50, [&](int i) {
      cuda::launch_matvec({w[i % 4].get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1}, s);
    });
    std::printf("%-6s %10.1f %10.1f %8.0f\n", quant::type_name(t), wb / 1048576.0, ms * 1e3, wb / ms / 1e6);
  }
  std::printf("\nprefill GEMM (dequant->f16 + cuBLAS) K=%lld N=%lld\n", (long long)K, (long long)N);
  std::printf("%-6s %5s %10s %8s\n", "type", "T", "us", "TFLOP/s");
  for (Type t : {Type::F16, Type::Q8_0, Type::Q4_K, Type::Q6_K})
    for (int64_t T : {16, 64, 512}) {
      const size_t wb = quant::row_bytes(t, K) * N;
      std::vector<uint8_t> host(wb);
      for (auto& b : host) b = uint8_t(rng() & 0x3f);
      cuda::DeviceBuffer w(wb);
      CUDA_CHECK(cudaMemcpy(w.get(), host.data(), wb, cudaMemcpyHostToDevice));
      const size_t sb = std::min(cuda::gemm_full_scratch(K, N, T), size_t(256) << 20);
      cuda::DeviceBuffer scratch(sb);
      const float ms = median_ms(ctx, 20, [&](int) {
        cuda::launch_gemm({w.get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, scratch.get(), sb},
                          ctx.blas(), s);
      });
      std::printf("%-6s %5lld %10.1f %8.2f\n", quant::type_name(t), (long long)T, ms * 1e3, 2.0 * K * N * T / ms / 1e9);
      if (T == 512 && t != Type::F16) {  // the dequantization alone: bytes read + f16 bytes written
        const float dq = median_ms(ctx, 20, [&](int) {
          cuda::launch_dequant_f16({w.get(), t, K, 0, N, static_cast<uint16_t*>(scratch.get())}, s);
        });
        std::printf("%-6s dequant %8.1f us %8.0f GB/s\n", quant::type_name(t), dq * 1e3, (wb + 2.0 * K * N) / dq / 1e6);
      }
    }
}

// Decode matvecs of wide rows (K > 16384: the int16 kernel's passes, matvec_i16.cu): the down projections of Phi-4
// (K = 17920, N = 5120), Gemma 3 27B (21504 x 5376), Llama 3 70B (28672 x 8192) and Mistral Small (32768 x 5120), per
// type: the float unit kernel (which served them before the passes), the int16 kernel at the launcher's choice, and
// at 2 to 6 passes (MatvecParams::passes); Q6_Kx8 (Q6_K regrouped at upload, as sessions do where K % 2048 == 0) had
// no kernel before: its launch threw. Each sample a batch of back-to-back launches over weight copies (> 200 MB:
// never in L2), as in the decode graph; median of 20; us (GB/s of weights).
TEST(KernelLab, WideMatvec) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  if (const char* e = std::getenv("LLM_CUDA_BENCH"); !e || std::string(e) != "1")
    GTEST_SKIP() << "timings run only with LLM_CUDA_BENCH=1";
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  const int64_t shapes[][2] = {{17920, 5120}, {21504, 5376}, {28672, 8192}, {32768, 5120}};
  std::mt19937 rng(3);
  std::vector<float> x(32768);
  for (auto& v : x) v = float(rng() % 2001) / 1000.0f - 1.0f;
  cuda::DeviceBuffer dx(x.size() * 4), dy(8192 * 4);
  CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  std::printf("device: %s, %d SMs\nwide-row matvec T=1: us (GB/s of weights), median of 20 batches\n%-6s %6s %5s %13s "
              "%13s",
              ctx.name().c_str(), ctx.sm_count(), "type", "K", "N", "unit f32", "i16 auto");
  for (int passes = 2; passes <= 6; ++passes) std::printf(" %13s", ("passes " + std::to_string(passes)).c_str());
  std::printf("\n");
  using quant::Type;
  const struct {
    Type t;
    bool x8;
  } kinds[] = {{Type::Q4_K, false}, {Type::Q6_K, false}, {Type::Q6_K, true}, {Type::Q4_0, false}, {Type::Q8_0, false}};
  for (const auto& [t, x8] : kinds)
    for (const auto& sh : shapes) {
      const int64_t K = sh[0], N = sh[1];
      if (x8 && K % 2048 != 0) continue;
      const size_t wb = quant::row_bytes(t, K) * N;
      std::vector<uint32_t> host((wb + 3) / 4);
      for (auto& v : host) v = rng() & 0x3f3f3f3fu;  // small values: no inf/nan scales
      const int copies = int(std::max<size_t>(3, (size_t(200) << 20) / wb + 1));
      std::vector<cuda::DeviceBuffer> w;
      for (int i = 0; i < copies; ++i) {
        w.emplace_back(wb);
        CUDA_CHECK(cudaMemcpy(w.back().get(), host.data(), wb, cudaMemcpyHostToDevice));
      }
      const auto time = [&](cuda::MatvecPath path, int passes) {
        return median_ms(ctx, 20, [&](int) {
          for (int i = 0; i < copies; ++i) {
            cuda::MatvecParams p{w[i].get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, 1};
            p.path = path, p.passes = int16_t(passes), p.q6_kx8 = x8;
            cuda::launch_matvec(p, s);
          }
        }) / copies;
      };
      const auto col = [&](float ms) {
        char b[32];
        std::snprintf(b, sizeof b, "%5.1f (%4.0f)", ms * 1e3, wb / ms / 1e6);
        return std::string(b);
      };
      std::printf("%-6s %6lld %5lld %13s %13s", x8 ? "Q6_Kx8" : quant::type_name(t), (long long)K, (long long)N,
                  x8 ? "-" : col(time(cuda::MatvecPath::Unit, 0)).c_str(),
                  col(time(cuda::MatvecPath::Auto, 0)).c_str());
      for (int passes = 2; passes <= 6; ++passes)
        std::printf(" %13s", col(time(cuda::MatvecPath::Auto, passes)).c_str());
      std::printf("\n");
    }
}

// KernelLab.BatchMm's token counts: LLM_LAB_TOKENS="16,64" keeps those (an Nsight run of one launch), else all.
std::vector<int64_t> lab_token_counts() {
  auto ts = gpu_test::lab_counts("LLM_LAB_TOKENS", {1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 40, 48, 64});
  for (auto& t : ts) t = std::clamp<int64_t>(t, 1, 64);
  return ts;
}

// One shape of KernelLab.BatchMm: every type and token count, a line each.
void bench_batch_mm_shape(const cuda::Context& ctx, cudaStream_t s, int64_t K, int64_t N) {
  std::mt19937 rng(2);
  std::vector<float> x(K * 64);
  for (auto& v : x) v = float(rng() % 2001) / 1000.0f - 1.0f;
  cuda::DeviceBuffer dx(x.size() * 4), dy(N * 64 * 4);
  CUDA_CHECK(cudaMemcpy(dx.get(), x.data(), x.size() * 4, cudaMemcpyHostToDevice));
  std::printf("device: %s\nsmall batch K=%lld N=%lld: us (GB/s of W)\n%-6s %4s %16s %16s %16s %16s %16s %16s "
              "%16s %16s\n",
              ctx.name().c_str(), (long long)K, (long long)N, "type", "T", "batch_mm", "wgmma", "wide", "frag", "i8",
              "cols", "matvec", "gemm");
  using quant::Type;
  for (const auto& [t, x8] : {std::pair{Type::Q4_K, false}, std::pair{Type::Q6_K, false}, std::pair{Type::Q6_K, true},
                              std::pair{Type::Q8_0, false}, std::pair{Type::Q4_0, false}}) {
    const size_t wb = quant::row_bytes(t, K) * N;
    std::vector<uint8_t> host(wb);
    for (auto& b : host) b = uint8_t(rng() & 0x3f);
    std::vector<cuda::DeviceBuffer> w;
    for (int i = 0; i < 4; ++i) {
      w.emplace_back(wb);
      CUDA_CHECK(cudaMemcpy(w.back().get(), host.data(), wb, cudaMemcpyHostToDevice));
      if (x8) cuda::launch_q6_kx8_regroup(w.back().get(), K, N, s);
    }
    const size_t sb = std::max(std::min(cuda::gemm_full_scratch(K, N, 64), size_t(256) << 20),
                               cuda::batch_mm_scratch(K, N, 64));
    cuda::DeviceBuffer scratch(sb), counters(cuda::kBatchMmCounterBytes);
    CUDA_CHECK(cudaMemset(counters.get(), 0, cuda::kBatchMmCounterBytes));
    for (int64_t T : lab_token_counts()) {
      auto batch = [&](bool wide, const cuda::WgmmaRoute& route, bool i8 = false) {
        cuda::BatchMmChoices choices = cuda::ExecutorOptions::from_env().batch_mm;  // LLM_CUDA_* lab switches
        choices.wide = wide, choices.wgmma = route, choices.i8 = i8;
        if (i8) choices.i8_max_tokens = cuda::kBatchMmI8MaxTokens;  // its column at every T it serves
        return median_ms(ctx, 30, [&](int i) {
          cuda::BatchMmParams p{w[i % 4].get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, scratch.get(), sb};
          p.regrouped = x8;
          p.tile_counters = counters.as<uint32_t>();
          cuda::launch_batch_mm(p, s, {}, nullptr, choices);
        });
      };
      constexpr cuda::WgmmaRoute kNoWgmma{cuda::kBatchMmMaxTokens + 1, cuda::kBatchMmMaxTokens + 1,
                                          cuda::kBatchMmMaxTokens + 1};
      const bool wgmma = cuda::batch_mm_wgmma_supports(t, x8, T);
      const float bm = batch(true, {});
      const float wg = wgmma ? batch(true, {0, 0, 0}) : 0.0f;
      const float wd = cuda::batch_mm_wide_serves(t, x8, T) ? batch(true, kNoWgmma) : 0.0f;
      const float fr = wgmma ? batch(false, kNoWgmma) : 0.0f;
      // Q6_Kx8 on the i8 kernel where LLM_CUDA_I8_Q6X8 asks (its default: on).
      const bool i8_q6x8 = cuda::ExecutorOptions::from_env().batch_mm.i8_q6x8;
      const float i8 = cuda::batch_mm_i8_serves(t, x8, T, i8_q6x8) ? batch(true, kNoWgmma, true) : 0.0f;
      const float mc = !cuda::matvec_cols_supports(t, x8, K, N, T) ? 0.0f : median_ms(ctx, 30, [&](int i) {
        cuda::launch_matvec_cols({w[i % 4].get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, x8}, s);
      });
      // The matvec and the GEMM read the file's layout only; the matvec of one column (T = 1) is the int16 kernel's.
      const float mv = x8 || T > 8 ? 0.0f : median_ms(ctx, 10, [&](int i) {
        cuda::launch_matvec({w[i % 4].get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, T}, s);
      });
      const float gm = x8 ? 0.0f : median_ms(ctx, 10, [&](int i) {
        cuda::launch_gemm({w[i % 4].get(), t, dx.as<float>(), nullptr, dy.as<float>(), K, N, T, scratch.get(), sb},
                          ctx.blas(), s);
      });
      auto col = [&](float ms) {
        if (ms == 0.0f) return std::string("-");
        return std::to_string(int(ms * 1e3 + 0.5)) + " (" + std::to_string(int(wb / ms / 1e6)) + ")";
      };
      std::printf("%-6s %4lld %16s %16s %16s %16s %16s %16s %16s %16s\n", x8 ? "Q6_Kx8" : quant::type_name(t),
                  (long long)T, col(bm).c_str(), col(wg).c_str(), col(wd).c_str(), col(fr).c_str(), col(i8).c_str(),
                  col(mc).c_str(), col(mv).c_str(), col(gm).c_str());
    }
  }
}

// Decode batches of T tokens, K = 4096, N = 14336 (an 8B ffn_up; LLM_LAB_BATCH_SHAPES="KxN,..." sets others): the
// small-batch kernel against the matvec (one pass over W per token) and the dequantize + cuBLAS GEMM; for Q4_K above
// 8 tokens also each of its kernels alone: wgmma (batch_mm_wgmma.cuh), wide (9..48 tokens) and the fragment kernel
// ("frag"). Weights rotated over 4 copies (past L2), x converted each time.
TEST(KernelLab, BatchMm) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  if (const char* e = std::getenv("LLM_CUDA_BENCH"); !e || std::string(e) != "1")
    GTEST_SKIP() << "timings run only with LLM_CUDA_BENCH=1";
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  std::vector<std::pair<int64_t, int64_t>> shapes = {{4096, 14336}};
  if (const char* e = std::getenv("LLM_LAB_BATCH_SHAPES"); e && *e) {
    shapes.clear();
    std::stringstream ss(e);
    for (std::string item; std::getline(ss, item, ',');) {
      long long k = 0, n = 0;
      ASSERT_EQ(std::sscanf(item.c_str(), "%lldx%lld", &k, &n), 2) << "LLM_LAB_BATCH_SHAPES item " << item;
      ASSERT_TRUE(k > 0 && k % 2048 == 0 && n > 0) << "K a multiple of 2048: " << item;
      shapes.emplace_back(k, n);
    }
  }
  for (const auto& [K, N] : shapes) bench_batch_mm_shape(ctx, s, K, N);
}

// Decode attention, one layer, alone: the 8B's shape (32 heads / 8 KV heads, head_dim 128) and the 1B's (head_dim
// 64), each cache type, at several splits per (KV head) — the executor's choice (attention_max_splits, marked *) and
// 1-4 blocks per SM (LLM_LAB_CASE=hd/ctx/cache, e.g. 128/16384/q4_0, keeps one case; LLM_LAB_CTXS=256,1024 sets
// the contexts). Each sample is a batch of 16 back-to-back launches (as in the decode graph, launch overhead
// overlapped), rotating over enough layers' caches (>= 150 MB) that L2 never holds the one being read, as in decode,
// where the 16k-slot cache of one layer (9 to 67 MB) would otherwise sit in the 50 MB L2 between repeats.
TEST(KernelLab, Attention) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  if (const char* e = std::getenv("LLM_CUDA_BENCH"); !e || std::string(e) != "1")
    GTEST_SKIP() << "timings run only with LLM_CUDA_BENCH=1";
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  constexpr int kBatch = 16;
  std::printf("device: %s, %d SMs\ndecode attention, one layer, 32 heads / 8 KV heads; us per launch (median of 30 "
              "batches of %d), GB/s of cache read\n%4s %6s %6s %7s %9s %8s\n",
              ctx.name().c_str(), ctx.sm_count(), kBatch, "hd", "ctx", "cache", "splits", "us", "GB/s");
  for (const int64_t hd : {128, 64})
    for (const int64_t ctxlen : lab_contexts())
      for (const graph::KvType kv : {graph::KvType::F16, graph::KvType::Q8_0, graph::KvType::Q4_0}) {
        const std::string name = std::to_string(hd) + "/" + std::to_string(ctxlen) + "/" + graph::kv_type_name(kv);
        if (const char* only = std::getenv("LLM_LAB_CASE"); only && name != only) continue;
        const int64_t nh = 32, nkv = 8;
        const bool quant = graph::kv_quantized(kv);
        // Per layer and matrix (K or V): the values (f16, int8 or nibbles) and, quantized, one binary16 per 32.
        const size_t val_bytes = size_t(hd * ctxlen * nkv) * (kv == graph::KvType::F16 ? 2 : 1) /
                                 (kv == graph::KvType::Q4_0 ? 2 : 1);
        const size_t scale_bytes = quant ? size_t(hd / 32 * ctxlen * nkv * 2) : 0;
        const size_t layer_bytes = 2 * (val_bytes + scale_bytes);
        const int layers = int(std::clamp<size_t>((size_t(150) << 20) / layer_bytes + 1, 2, 256));
        // Every byte 0x11: f16 values and scales 0x1111 (~6e-4), int8 quants 17, nibbles 1: finite everywhere.
        cuda::DeviceBuffer kc(val_bytes * layers), vc(val_bytes * layers), ks(std::max<size_t>(scale_bytes, 4) * layers),
            vs(std::max<size_t>(scale_bytes, 4) * layers), q(hd * nh * 4), out(hd * nh * 4), dpos(4);
        for (const auto* b : {&kc, &vc, &ks, &vs}) CUDA_CHECK(cudaMemset(b->get(), 0x11, b->bytes()));
        CUDA_CHECK(cudaMemset(q.get(), 0, q.bytes()));
        const int32_t pos = int32_t(ctxlen - 1);
        CUDA_CHECK(cudaMemcpy(dpos.get(), &pos, 4, cudaMemcpyHostToDevice));
        const int32_t chosen = cuda::attention_max_splits(ctxlen, nkv, 1, ctx.sm_count());
        std::vector<int32_t> splits{chosen};
        // A few long splits (what a short context's merge may prefer), then 1-4 blocks a SM, rounded up (a second
        // partial wave) and down (one wave).
        for (const int32_t n : {2, 3, 4, 6, 8})
          if (n != chosen) splits.push_back(n);
        for (int per_sm = 1; per_sm <= 4; ++per_sm)
          for (const int64_t up : {nkv - 1, int64_t(0)}) {
            const int32_t n = int32_t(std::min<int64_t>((per_sm * ctx.sm_count() + up) / nkv, 256));
            if (std::find(splits.begin(), splits.end(), n) == splits.end()) splits.push_back(n);
          }
        for (const int32_t n : splits) {
          cuda::DeviceBuffer part(cuda::attention_scratch_floats(nh, hd, 1, n) * 4);
          CUDA_CHECK(cudaMemset(part.get(), 0, part.bytes()));
          cuda::AttentionKernelParams p;
          p.q = q.as<float>(), p.positions = dpos.as<int32_t>(), p.out = out.as<float>(), p.partial = part.as<float>();
          p.n_ctx = ctxlen, p.n_head = nh, p.n_head_kv = nkv, p.hd = hd, p.hd_v = hd, p.T = 1, p.scale = 0.088f;
          p.max_splits = n, p.kv_type = kv;
          const float ms = median_ms(ctx, 30, [&](int r) {
            for (int b = 0; b < kBatch; ++b) {
              const size_t i = size_t(r * kBatch + b) % layers;
              p.k_cache = kc.as<uint8_t>() + i * val_bytes, p.v_cache = vc.as<uint8_t>() + i * val_bytes;
              if (quant) {
                p.k_scales = ks.as<uint16_t>() + i * scale_bytes / 2;
                p.v_scales = vs.as<uint16_t>() + i * scale_bytes / 2;
              }
              cuda::launch_attention(p, s);
            }
          }) / kBatch;
          std::printf("%4lld %6lld %6s %6d%s %9.2f %8.0f\n", (long long)hd, (long long)ctxlen, graph::kv_type_name(kv),
                      n, n == chosen ? "*" : " ", ms * 1e3, layer_bytes / ms / 1e6);
        }
      }
}

// Gemma-3-12B's attention (16 heads of 256 over 8 KV heads), one layer, alone, each cache type: decode (T = 1) at
// 1k and 16k context, at 16k in a local layer (window 1024: five layers of six), and a 512-token prefill from an empty
// cache, causal and with the local window; the executor's split count. As KernelLab.Attention: batches of 16
// launches rotating over >= 150 MB of caches, us per launch (median of 30 batches), GB/s of the slots read (for a
// prefill, each KV head's 512 slots once).
TEST(KernelLab, AttentionHd256) {
  if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";
  if (const char* e = std::getenv("LLM_CUDA_BENCH"); !e || std::string(e) != "1")
    GTEST_SKIP() << "timings run only with LLM_CUDA_BENCH=1";
  cuda::Context ctx;
  const cudaStream_t s = ctx.compute();
  constexpr int kBatch = 16;
  constexpr int64_t nh = 16, nkv = 8, hd = 256;
  std::printf("device: %s, %d SMs\nhead_dim-256 attention (Gemma-3-12B), one layer, 16 heads / 8 KV heads; us per "
              "launch (median of 30 batches of %d), GB/s of the slots read\n%-8s %6s %6s %6s %6s %9s %8s\n",
              ctx.name().c_str(), ctx.sm_count(), kBatch, "kind", "ctx", "window", "cache", "splits", "us", "GB/s");
  struct Shape {
    const char* kind;
    int64_t ctx, T;
    int32_t window;
  };
  for (const Shape sh : {Shape{"decode", 1024, 1, 0}, Shape{"decode", 16384, 1, 0}, Shape{"decode", 16384, 1, 1024},
                         Shape{"prefill", 512, 512, 0}, Shape{"prefill", 512, 512, 1024}})
    for (const graph::KvType kv : {graph::KvType::F16, graph::KvType::Q8_0, graph::KvType::Q4_0}) {
      const bool quant = graph::kv_quantized(kv);
      if (quant && !cuda::kv_quant_supported(nh, nkv, hd, hd)) {
        std::printf("%-8s %6lld %6d %6s  refused\n", sh.kind, (long long)sh.ctx, sh.window, graph::kv_type_name(kv));
        continue;
      }
      const size_t val_bytes = size_t(hd * sh.ctx * nkv) * (kv == graph::KvType::F16 ? 2 : 1) /
                               (kv == graph::KvType::Q4_0 ? 2 : 1);
      const size_t scale_bytes = quant ? size_t(hd / 32 * sh.ctx * nkv * 2) : 0;
      const size_t layer_bytes = 2 * (val_bytes + scale_bytes);
      const int layers = int(std::clamp<size_t>((size_t(150) << 20) / layer_bytes + 1, 2, 256));
      cuda::DeviceBuffer kc(val_bytes * layers), vc(val_bytes * layers), ks(std::max<size_t>(scale_bytes, 4) * layers),
          vs(std::max<size_t>(scale_bytes, 4) * layers), q(hd * nh * sh.T * 4), out(hd * nh * sh.T * 4),
          dpos(sh.T * 4);
      for (const auto* b : {&kc, &vc, &ks, &vs}) CUDA_CHECK(cudaMemset(b->get(), 0x11, b->bytes()));
      CUDA_CHECK(cudaMemset(q.get(), 0, q.bytes()));
      std::vector<int32_t> pos(size_t(sh.T));
      for (int64_t t = 0; t < sh.T; ++t) pos[size_t(t)] = int32_t(sh.ctx - sh.T + t);  // decode: the last slot
      CUDA_CHECK(cudaMemcpy(dpos.get(), pos.data(), pos.size() * 4, cudaMemcpyHostToDevice));
      const int32_t splits = cuda::attention_max_splits(sh.ctx, nkv, sh.T, ctx.sm_count());
      cuda::DeviceBuffer part(cuda::attention_scratch_floats(nh, hd, sh.T, splits) * 4);
      CUDA_CHECK(cudaMemset(part.get(), 0, part.bytes()));
      cuda::AttentionKernelParams p;
      p.q = q.as<float>(), p.positions = dpos.as<int32_t>(), p.out = out.as<float>(), p.partial = part.as<float>();
      p.n_ctx = sh.ctx, p.n_head = nh, p.n_head_kv = nkv, p.hd = hd, p.hd_v = hd, p.T = sh.T, p.scale = 0.0625f;
      p.max_splits = splits, p.kv_type = kv, p.window = sh.window;
      const float ms = median_ms(ctx, 30, [&](int r) {
        for (int b = 0; b < kBatch; ++b) {
          const size_t i = size_t(r * kBatch + b) % layers;
          p.k_cache = kc.as<uint8_t>() + i * val_bytes, p.v_cache = vc.as<uint8_t>() + i * val_bytes;
          if (quant) {
            p.k_scales = ks.as<uint16_t>() + i * scale_bytes / 2;
            p.v_scales = vs.as<uint16_t>() + i * scale_bytes / 2;
          }
          cuda::launch_attention(p, s);
        }
      }) / kBatch;
      // A decode token of a local layer reads its window's slots only.
      const int64_t read = sh.T == 1 && sh.window > 0 ? std::min<int64_t>(sh.window, sh.ctx) : sh.ctx;
      std::printf("%-8s %6lld %6d %6s %6d %9.2f %8.0f\n", sh.kind, (long long)sh.ctx, sh.window,
                  graph::kv_type_name(kv), splits, ms * 1e3, double(layer_bytes) * read / sh.ctx / ms / 1e6);
    }
}
