// The run's first kernel reading its inputs from page-locked host memory (cuda/kernels/host_inputs.cuh): fixed and
// windowed copies, the window's length read at run time and clamped to [0, n], the alternative source chosen at run
// time, and a captured graph that sees the values written on the host before each replay.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/kernels/host_inputs.cuh"
#include "cuda/raii.h"
#include "gpu_test.h"

namespace {

using namespace gpu_test;

constexpr int32_t kUnwritten = -7;

cuda::DeviceBuffer filled(int32_t n) { return upload(std::vector<int32_t>(size_t(n), kUnwritten)); }

// Expected device contents: the first `copied` of the source, the rest unwritten.
std::vector<int32_t> expected(const int32_t* src, int32_t n, int32_t copied) {
  std::vector<int32_t> v(size_t(n), kUnwritten);
  for (int32_t i = 0; i < copied; ++i) v[size_t(i)] = src[i];
  return v;
}

TEST(HostInputs, FixedAndWindowedCopies) {
  REQUIRE_GPU();
  constexpr int32_t kN = 600;  // more values than the block's threads
  cuda::PinnedBuffer host(size_t(kN + 1) * 4);
  int32_t* h = host.as<int32_t>();
  for (int32_t i = 0; i <= kN; ++i) h[i] = 1000 + i;
  const auto* d = static_cast<const int32_t*>(cuda::device_address_of_pinned(h));
  // h[0] is the window length for the windowed copies, values from h + 1.
  for (int32_t window : {0, 7, kN, kN + 50, -3}) {
    h[0] = window;
    auto fixed = filled(kN), win = filled(kN), none = filled(kN);
    cuda::HostCopies c;
    c.c[0] = {d + 1, fixed.as<int32_t>(), kN, nullptr};
    c.c[1] = {d + 1, win.as<int32_t>(), kN, d};
    c.c[2] = {d + 1, none.as<int32_t>(), 0, nullptr};
    c.n = 3;
    cuda::launch_copy_from_host(c, nullptr);
    const int32_t copied = window < 0 ? 0 : (window > kN ? kN : window);
    EXPECT_EQ(download<int32_t>(fixed, kN), expected(h + 1, kN, kN)) << "window " << window;
    EXPECT_EQ(download<int32_t>(win, kN), expected(h + 1, kN, copied)) << "window " << window;
    EXPECT_EQ(download<int32_t>(none, kN), expected(h + 1, kN, 0)) << "window " << window;
  }
}

// A copy over several blocks (a paged step's block table) between one-block copies: every value once, the window
// read at run time as for one block, and the copies after it still find their own blocks.
TEST(HostInputs, CopiesOverSeveralBlocks) {
  REQUIRE_GPU();
  constexpr int32_t kN = 5000;  // over three blocks of 256 threads: each thread several values
  cuda::PinnedBuffer host(size_t(kN + 1) * 4);
  int32_t* h = host.as<int32_t>();
  for (int32_t i = 0; i <= kN; ++i) h[i] = 3 * i - 11;
  const auto* d = static_cast<const int32_t*>(cuda::device_address_of_pinned(h));
  for (int32_t window : {1, 255, 256, 257, 769, kN, kN + 9}) {
    h[0] = window;
    auto before = filled(kN), wide = filled(kN), after = filled(kN);
    cuda::HostCopies c;
    c.c[0] = {d + 1, before.as<int32_t>(), 300, nullptr};
    c.c[1] = {d + 1, wide.as<int32_t>(), kN, d};
    c.c[1].blocks = 3;
    c.c[2] = {d + 1, after.as<int32_t>(), kN, nullptr};
    c.c[2].blocks = 2;
    c.n = 3;
    cuda::launch_copy_from_host(c, nullptr);
    const int32_t copied = window > kN ? kN : window;
    EXPECT_EQ(download<int32_t>(before, kN), expected(h + 1, kN, 300)) << "window " << window;
    EXPECT_EQ(download<int32_t>(wide, kN), expected(h + 1, kN, copied)) << "window " << window;
    EXPECT_EQ(download<int32_t>(after, kN), expected(h + 1, kN, kN)) << "window " << window;
  }
}

TEST(HostInputs, CapturedGraphReadsTheHostValuesOfEachReplay) {
  REQUIRE_GPU();
  cuda::PinnedBuffer host(8);
  int32_t* h = host.as<int32_t>();
  auto dst = filled(2);
  cuda::HostCopies c;
  c.c[0] = {static_cast<const int32_t*>(cuda::device_address_of_pinned(h)), dst.as<int32_t>(), 2, nullptr};
  c.n = 1;
  cudaStream_t s = nullptr;
  CUDA_CHECK(cudaStreamCreate(&s));
  cudaGraph_t g = nullptr;
  cudaGraphExec_t ge = nullptr;
  CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  cuda::launch_copy_from_host(c, s);
  CUDA_CHECK(cudaStreamEndCapture(s, &g));
  CUDA_CHECK(cudaGraphInstantiate(&ge, g, 0));
  for (int32_t step = 0; step < 3; ++step) {
    h[0] = 10 * step, h[1] = 10 * step + 1;
    CUDA_CHECK(cudaGraphLaunch(ge, s));
    CUDA_CHECK(cudaStreamSynchronize(s));
    EXPECT_EQ(download<int32_t>(dst, 2), (std::vector<int32_t>{10 * step, 10 * step + 1})) << "replay " << step;
  }
  CUDA_CHECK(cudaGraphExecDestroy(ge));
  CUDA_CHECK(cudaGraphDestroy(g));
  CUDA_CHECK(cudaStreamDestroy(s));
}

// The alternative source (the decode session's token taken from the previous step's sample), chosen at run time.
TEST(HostInputs, AlternativeSourceWhenFlagged) {
  REQUIRE_GPU();
  cuda::PinnedBuffer host(16);
  int32_t* h = host.as<int32_t>();  // h[0] value, h[1] flag
  const auto* d = static_cast<const int32_t*>(cuda::device_address_of_pinned(h));
  auto alt = upload(std::vector<int32_t>{42});
  auto dst = filled(1);
  cuda::HostCopies c;
  c.c[0] = {d, dst.as<int32_t>(), 1, nullptr, alt.as<int32_t>(), d + 1};
  c.n = 1;
  for (int32_t flag : {0, 1, 0}) {
    h[0] = 5, h[1] = flag;
    cuda::launch_copy_from_host(c, nullptr);
    EXPECT_EQ(download<int32_t>(dst, 1), std::vector<int32_t>{flag ? 42 : 5}) << "flag " << flag;
  }
  c.c[0].alt_src = nullptr;  // a flag without an alternative is refused
  EXPECT_THROW(cuda::launch_copy_from_host(c, nullptr), cuda::InvalidArgument);
}

TEST(HostInputs, RefusesBadCopies) {
  REQUIRE_GPU();
  cuda::HostCopies c;
  c.n = cuda::HostCopies::kMax + 1;
  EXPECT_THROW(cuda::launch_copy_from_host(c, nullptr), cuda::InvalidArgument);
  c.n = 1;  // c.c[0] has null pointers
  EXPECT_THROW(cuda::launch_copy_from_host(c, nullptr), cuda::InvalidArgument);
}

}  // namespace
