// graph::ThreadPool: every index of a job is covered once whatever the thread count, a chunk's exception reaches
// the caller, and a thread count past kMaxThreads is refused before any thread starts.
#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "graph/thread_pool.h"

namespace {

TEST(ThreadPool, CoversEveryIndexOnce) {
  for (int threads : {0, 1, 3, 8}) {
    graph::ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads > 1 ? threads : 1);
    for (int64_t n : {int64_t(0), int64_t(1), int64_t(5), int64_t(1000)}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int64_t b, int64_t e, int t) {
        EXPECT_GE(t, 0);
        EXPECT_LT(t, pool.size());
        for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
      });
      for (const auto& h : hits) EXPECT_EQ(h.load(), 1) << threads << " threads, n " << n;
    }
  }
}

TEST(ThreadPool, ChunkExceptionsReachTheCaller) {
  graph::ThreadPool pool(4);
  EXPECT_THROW(pool.parallel_for(100, [](int64_t b, int64_t, int) {
                 if (b > 0) throw std::runtime_error("chunk failed");
               }),
               std::runtime_error);
  std::atomic<int64_t> covered{0};  // the pool still works after a failed job
  pool.parallel_for(10, [&](int64_t b, int64_t e, int) { covered += e - b; });
  EXPECT_EQ(covered.load(), 10);
}

TEST(ThreadPool, RefusesMoreThanTheBound) {
  EXPECT_THROW(graph::ThreadPool(graph::kMaxThreads + 1), std::invalid_argument);
  EXPECT_THROW(graph::ThreadPool(100000), std::invalid_argument);
}

}  // namespace
