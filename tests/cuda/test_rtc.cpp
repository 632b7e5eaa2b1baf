// NVRTC cache: compiles without a GPU, a second request loads from disk, a corrupt entry is rejected and rebuilt;
// on a GPU the generated element-wise kernels match the ahead-of-time ones and a double-precision reference.
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/fused_elementwise.cuh"
#include "cuda/rtc.h"
#include "gpu_test.h"

namespace {

using namespace gpu_test;
namespace fs = std::filesystem;

fs::path fresh_dir(const char* name) {
  const fs::path d = fs::temp_directory_path() / (std::string("llm-run-rtc-test-") + name + "-" +
                                                   std::to_string(::getpid()));
  fs::remove_all(d);
  return d;
}

TEST(RtcCache, CompilesCachesAndRejectsCorruptEntries) {
  const fs::path dir = fresh_dir("cache");
  const cuda::FusedShape shape{cuda::FusedKind::SwiGlu, 1000, 1000};
  const std::string src = cuda::fused_elementwise_source(shape);
  std::vector<char> first;
  {
    cuda::RtcCache cache(dir);
    first = cache.cubin("fused_swiglu", src, 90);
    EXPECT_EQ(cache.stats().compiled, 1);
    EXPECT_FALSE(first.empty());
    EXPECT_TRUE(fs::exists(cache.entry_path("fused_swiglu", src, 90)));
  }
  {
    cuda::RtcCache cache(dir);  // a second run
    EXPECT_EQ(cache.cubin("fused_swiglu", src, 90), first);
    EXPECT_EQ(cache.stats().loaded, 1);
    EXPECT_EQ(cache.stats().compiled, 0);
    // Another architecture or source is another entry.
    EXPECT_NE(cache.entry_path("fused_swiglu", src, 89), cache.entry_path("fused_swiglu", src, 90));
    EXPECT_NE(cache.entry_path("fused_swiglu", src + " ", 90), cache.entry_path("fused_swiglu", src, 90));
  }
  // Flip one payload byte: the checksum fails, the entry is recompiled and rewritten, never returned as is.
  cuda::RtcCache probe(dir);
  const fs::path entry = probe.entry_path("fused_swiglu", src, 90);
  {
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(100);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x5a);
    f.seekp(100);
    f.write(&c, 1);
  }
  {
    cuda::RtcCache cache(dir);
    EXPECT_EQ(cache.cubin("fused_swiglu", src, 90), first);
    EXPECT_EQ(cache.stats().rejected, 1);
    EXPECT_EQ(cache.stats().compiled, 1);
  }
  // Truncated entry: rejected too.
  fs::resize_file(entry, 40);
  {
    cuda::RtcCache cache(dir);
    EXPECT_EQ(cache.cubin("fused_swiglu", src, 90), first);
    EXPECT_EQ(cache.stats().rejected, 1);
  }
  fs::remove_all(dir);
}

TEST(RtcCache, CompileErrorCarriesTheLog) {
  try {
    cuda::RtcCache::compile("broken", "extern \"C\" __global__ void k() { undefined_name; }", 90);
    FAIL() << "expected a compile error";
  } catch (const cuda::Error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_name"), std::string::npos) << e.what();
  }
}

TEST(FusedElementwise, MatchesAheadOfTimeKernels) {
  REQUIRE_GPU();
  const fs::path dir = fresh_dir("fused");
  cuda::RtcCache cache(dir);
  int dev = 0, major = 0, minor = 0;
  CUDA_CHECK(cudaGetDevice(&dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
  CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
  std::mt19937 rng(8);
  for (auto kind : {cuda::FusedKind::Add, cuda::FusedKind::Mul, cuda::FusedKind::SwiGlu})
    for (int64_t ne0 : {1, 7, 256, 1001})
      for (int64_t rows : {1, 4})
        for (bool bcast : {false, true}) {
          if (bcast && kind == cuda::FusedKind::SwiGlu) continue;
          const int64_t n = ne0 * rows, nb = bcast ? ne0 : n;
          const auto a = random_floats(rng, n, -6, 6), b = random_floats(rng, nb, -3, 3);
          auto da = upload(a), db = upload(b);
          auto got = poisoned_f32(n), aot = poisoned_f32(n);
          cuda::FusedElementwise f(cache, major * 10 + minor, {kind, n, nb});
          f.launch(da.as<float>(), db.as<float>(), got.as<float>(), nullptr);
          if (kind == cuda::FusedKind::SwiGlu)
            cuda::launch_swiglu({da.as<float>(), db.as<float>(), aot.as<float>(), n}, nullptr);
          else
            cuda::launch_binary({kind == cuda::FusedKind::Add ? cuda::BinaryOp::Add : cuda::BinaryOp::Mul,
                                 da.as<float>(), db.as<float>(), aot.as<float>(), n, nb},
                                nullptr);
          std::vector<double> ref(n), aot_d(n);
          const auto aot_h = download<float>(aot, n);
          for (int64_t i = 0; i < n; ++i) {
            const double x = a[i], y = b[bcast ? i % ne0 : i];
            ref[i] = kind == cuda::FusedKind::Add ? x + y : kind == cuda::FusedKind::Mul ? x * y : x / (1 + std::exp(-x)) * y;
            aot_d[i] = aot_h[i];
          }
          const std::string what = std::string("fused kind ") + std::to_string(int(kind)) + " n=" + std::to_string(n) +
                                   " nb=" + std::to_string(nb);
          const auto g = download<float>(got, n);
          EXPECT_TRUE(close(what + " vs reference", g, ref, {1e-7}, 1e-6));
          EXPECT_TRUE(close(what + " vs ahead-of-time", g, aot_d, {0}, 2.5e-7));
        }
  fs::remove_all(dir);
}

}  // namespace
