// runtime::KvBlockPool: allocation and release, prefix matching through hash-chained full blocks (only the exact
// token prefix matches, only whole blocks), reference counts keep held blocks from eviction, and least-recently-used
// eviction of cached blocks when the free ones run out.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "runtime/kv_blocks.h"

namespace {

using runtime::KvBlockPool;

std::vector<int32_t> iota(int32_t n, int32_t from = 0) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), from);
  return v;
}

// Allocates blocks for `tokens` and keys every full one, as the engine does once their K/V is written.
std::vector<int32_t> fill(KvBlockPool& pool, const std::vector<int32_t>& tokens) {
  const int32_t bs = pool.block_size();
  std::vector<int32_t> blocks;
  uint64_t chain = 0;
  for (size_t i = 0; i < (tokens.size() + bs - 1) / bs; ++i) {
    blocks.push_back(pool.allocate());
    EXPECT_GE(blocks.back(), 0);
    if ((i + 1) * bs <= tokens.size())
      chain = pool.publish(chain, std::span(tokens).subspan(i * bs, size_t(bs)), blocks.back());
  }
  return blocks;
}

TEST(KvBlockPool, AllocatesEveryBlockOnceThenRefuses) {
  KvBlockPool pool(3, 4);
  EXPECT_EQ(pool.available(), 3);
  const int32_t a = pool.allocate(), b = pool.allocate(), c = pool.allocate();
  EXPECT_NE(a, b);
  EXPECT_NE(b, c);
  EXPECT_EQ(pool.allocate(), -1);
  pool.release(b);
  EXPECT_EQ(pool.allocate(), b);
  EXPECT_THROW(pool.release(7), std::out_of_range);
  pool.release(a);
  EXPECT_THROW(pool.release(a), std::logic_error);
  EXPECT_THROW(KvBlockPool(0, 4), std::invalid_argument);
}

TEST(KvBlockPool, MatchesOnlyWholeBlocksOfTheSamePrefix) {
  KvBlockPool pool(16, 4);
  const std::vector<int32_t> first = iota(10);  // blocks [0..4) [4..8) full, [8..10) partial
  const std::vector<int32_t> held = fill(pool, first);
  pool.release(held);  // finished: its two full blocks stay cached, the partial one is free
  EXPECT_EQ(pool.stats().cached, 2);

  std::vector<int32_t> same = iota(12);
  EXPECT_EQ(pool.match_prefix(same, 8), (std::vector<int32_t>{held[0], held[1]}));
  std::vector<int32_t> diverges = iota(12);
  diverges[5] = 99;  // inside the second block
  const std::vector<int32_t> one = pool.match_prefix(diverges, 8);
  EXPECT_EQ(one, (std::vector<int32_t>{held[0]}));
  std::vector<int32_t> other_start = iota(12, 1);
  EXPECT_TRUE(pool.match_prefix(other_start, 8).empty());
  EXPECT_EQ(pool.match_prefix(same, 1).size(), 1u);  // at most max_blocks
  // The same tokens in the second block after a different first block are a different prefix.
  std::vector<int32_t> shifted = {50, 51, 52, 53, 4, 5, 6, 7};
  EXPECT_TRUE(pool.match_prefix(shifted, 8).empty());
  const runtime::KvBlockStats s = pool.stats();
  EXPECT_EQ(s.prefix_lookups, 5u);
  EXPECT_EQ(s.prefix_hits, 4u);
}

// What the batching engine asks before admitting a prompt (is a running prompt computing blocks this one could
// take from the cache?): how many leading blocks the cache holds, without holding them, and how many full leading
// blocks two prompts share.
TEST(KvBlockPool, CountsCachedAndCommonBlocksWithoutHoldingThem) {
  KvBlockPool pool(16, 4);
  pool.release(fill(pool, iota(10)));  // two full blocks cached
  const runtime::KvBlockStats before = pool.stats();
  std::vector<int32_t> longer = iota(14);
  EXPECT_EQ(pool.cached_prefix(longer, 8), 2);
  EXPECT_EQ(pool.cached_prefix(longer, 1), 1);
  longer[2] = 99;
  EXPECT_EQ(pool.cached_prefix(longer, 8), 0);
  const runtime::KvBlockStats after = pool.stats();
  EXPECT_EQ(after.cached, before.cached);  // nothing held, no lookup counted
  EXPECT_EQ(after.used, before.used);
  EXPECT_EQ(after.prefix_lookups, before.prefix_lookups);

  const std::vector<int32_t> a = iota(13), b = iota(9);
  EXPECT_EQ(runtime::common_full_blocks(a, b, 4, 8), 2);  // b's third block is not full
  EXPECT_EQ(runtime::common_full_blocks(a, a, 4, 8), 3);
  EXPECT_EQ(runtime::common_full_blocks(a, a, 4, 2), 2);  // at most max_blocks
  std::vector<int32_t> c = a;
  c[7] = -1;  // the second block differs
  EXPECT_EQ(runtime::common_full_blocks(a, c, 4, 8), 1);
  EXPECT_EQ(runtime::common_full_blocks(a, std::vector<int32_t>{}, 4, 8), 0);
}

TEST(KvBlockPool, HeldBlocksAreNotEvictedAndEvictionIsLeastRecentlyUsed) {
  KvBlockPool pool(4, 2);
  const std::vector<int32_t> a = fill(pool, {1, 2});
  const std::vector<int32_t> b = fill(pool, {3, 4});
  pool.release(a);  // cached first: evicted first
  pool.release(b);
  const std::vector<int32_t> hold = pool.match_prefix(std::vector<int32_t>{3, 4, 9}, 4);  // b in use again
  ASSERT_EQ(hold, b);
  EXPECT_GE(pool.allocate(), 0);  // the two free blocks
  EXPECT_GE(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), a[0]);  // then a, the one cached block nobody holds
  EXPECT_EQ(pool.stats().evictions, 1u);
  EXPECT_EQ(pool.allocate(), -1);    // b is held
  EXPECT_TRUE(pool.match_prefix(std::vector<int32_t>{1, 2, 0}, 4).empty());  // a's key went with it
}

TEST(KvBlockPool, ADuplicatePrefixStaysUnkeyed) {
  KvBlockPool pool(4, 2);
  const std::vector<int32_t> a = fill(pool, {1, 2});
  const std::vector<int32_t> b = fill(pool, {1, 2});  // computed twice (both ran at once): one key
  pool.release(b);
  EXPECT_EQ(pool.stats().free, 3);  // b was never keyed: free, not cached
  pool.release(a);
  EXPECT_EQ(pool.stats().cached, 1);
  EXPECT_EQ(pool.match_prefix(std::vector<int32_t>{1, 2, 3}, 4), a);
}

}  // namespace
