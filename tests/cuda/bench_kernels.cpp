// Kernel lab timings (run only with LLM_CUDA_BENCH=1; otherwise skipped): decode matvec bandwidth per weight type on an 8B-model-sized matrix, the GEMM path,
// decode attention (f16 and q8_0 caches), and the device's copy bandwidth for reference. Warm-up, CUDA events, median of repeats; the
// weight set rotates over several copies so L2 (50 MB) never holds the whole input. Prints a table.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/context.h"
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/matvec.cuh"

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
  // Decode attention, one layer: the 8B's shape (32 heads / 8 KV heads, head_dim 128) and the 1B's (head_dim 64).
  // The launches rotate over enough layers' caches (>= 150 MB of f16) that L2 never holds the one being read, as in
  // decode, where the 16k-slot cache of one layer (17.8 to 67 MB) would otherwise sit in the 50 MB L2 between repeats.
  for (const int64_t hd : {128, 64}) {
    const int64_t nh = 32, nkv = 8;
    std::printf("\ndecode attention, %lld heads / %lld kv heads, hd %lld (one layer), f16 and q8_0 cache\n"
                "%8s %7s %10s %8s %10s %8s\n",
                (long long)nh, (long long)nkv, (long long)hd, "ctx", "layers", "f16 us", "GB/s", "q8_0 us", "GB/s");
    for (int64_t ctxlen : {512, 4096, 16384, 32768}) {
      const size_t f16_bytes = size_t(hd * ctxlen * nkv * 2), q8_bytes = size_t(hd * ctxlen * nkv),
                   scale_bytes = size_t(hd / 32 * ctxlen * nkv * 2);
      const int layers = int(std::clamp<size_t>((size_t(150) << 20) / (2 * f16_bytes) + 1, 1, 128));
      // f16 values; q8_0 quants (int8 17) and scales 0x1111 (~6e-4): finite, as every byte pattern here
      cuda::DeviceBuffer kc(f16_bytes * layers), vc(f16_bytes * layers), kq(q8_bytes * layers),
          vq(q8_bytes * layers), ks(scale_bytes * layers), vs(scale_bytes * layers), q(hd * nh * 4), out(hd * nh * 4);
      for (const auto* b : {&kc, &vc, &kq, &vq, &ks, &vs}) CUDA_CHECK(cudaMemset(b->get(), 0x11, b->bytes()));
      CUDA_CHECK(cudaMemset(q.get(), 0, q.bytes()));
      const int32_t pos = int32_t(ctxlen - 1);
      cuda::DeviceBuffer dpos(4);
      CUDA_CHECK(cudaMemcpy(dpos.get(), &pos, 4, cudaMemcpyHostToDevice));
      const int32_t splits = cuda::attention_max_splits(ctxlen, nkv, 1, ctx.sm_count());
      cuda::DeviceBuffer part(cuda::attention_scratch_floats(nh, hd, 1, splits) * 4);
      CUDA_CHECK(cudaMemset(part.get(), 0, part.bytes()));
      cuda::AttentionKernelParams p;
      p.q = q.as<float>(), p.positions = dpos.as<int32_t>(), p.out = out.as<float>(), p.partial = part.as<float>();
      p.n_ctx = ctxlen, p.n_head = nh, p.n_head_kv = nkv, p.hd = hd, p.hd_v = hd, p.T = 1, p.scale = 0.088f;
      p.max_splits = splits;
      const float ms = median_ms(ctx, 50, [&](int i) {
        p.k_cache = kc.as<uint8_t>() + (i % layers) * f16_bytes, p.v_cache = vc.as<uint8_t>() + (i % layers) * f16_bytes;
        cuda::launch_attention(p, s);
      });
      p.kv_type = graph::KvType::Q8_0;
      const float ms_q8 = median_ms(ctx, 50, [&](int i) {
        p.k_cache = kq.as<uint8_t>() + (i % layers) * q8_bytes, p.v_cache = vq.as<uint8_t>() + (i % layers) * q8_bytes;
        p.k_scales = ks.as<uint16_t>() + (i % layers) * scale_bytes / 2;
        p.v_scales = vs.as<uint16_t>() + (i % layers) * scale_bytes / 2;
        cuda::launch_attention(p, s);
      });
      std::printf("%8lld %7d %10.1f %8.0f %10.1f %8.0f\n", (long long)ctxlen, layers, ms * 1e3,
                  2.0 * f16_bytes / ms / 1e6, ms_q8 * 1e3, 2.0 * (q8_bytes + scale_bytes) / ms_q8 / 1e6);
    }
  }
}
