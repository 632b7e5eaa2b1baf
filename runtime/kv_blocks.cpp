// The paged KV cache's block pool and prefix cache (see kv_blocks.h).
#include "runtime/kv_blocks.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace runtime {

KvBlockPool::KvBlockPool(int32_t n_blocks, int32_t block_size) : block_size_(block_size) {
  if (n_blocks <= 0 || block_size <= 0)
    throw std::invalid_argument("KV block pool: " + std::to_string(n_blocks) + " blocks of " +
                                std::to_string(block_size) + " tokens: both must be positive");
  blocks_.resize(static_cast<size_t>(n_blocks));
  free_.reserve(blocks_.size());
  for (int32_t b = n_blocks - 1; b >= 0; --b) free_.push_back(b);  // hand out low ids first
}

int32_t KvBlockPool::available() const { return static_cast<int32_t>(free_.size() + lru_.size()); }

uint64_t KvBlockPool::chain_key(uint64_t parent, std::span<const int32_t> block_tokens) {
  // FNV-1a over the parent key and the ids, then a final mix; 0 is reserved for "no parent".
  uint64_t h = 1469598103934665603ull ^ parent;
  for (int32_t t : block_tokens) {
    h ^= static_cast<uint32_t>(t);
    h *= 1099511628211ull;
  }
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h == 0 ? 1 : h;
}

void KvBlockPool::unkey(int32_t block) {
  Block& b = blocks_[static_cast<size_t>(block)];
  if (!b.keyed) return;
  by_key_.erase(b.key);
  b.keyed = false;
  b.tokens.clear();
}

int32_t KvBlockPool::allocate() {
  int32_t block = -1;
  if (!free_.empty()) {
    block = free_.back();
    free_.pop_back();
  } else if (!lru_.empty()) {
    block = lru_.front();
    lru_.pop_front();
    unkey(block);
    ++evictions_;
  } else {
    return -1;
  }
  blocks_[static_cast<size_t>(block)].refs = 1;
  return block;
}

void KvBlockPool::release(int32_t block) {
  if (block < 0 || block >= n_blocks()) throw std::out_of_range("KV block pool: no block " + std::to_string(block));
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.refs <= 0) throw std::logic_error("KV block pool: block " + std::to_string(block) + " released twice");
  if (--b.refs > 0) return;
  if (b.keyed) {
    lru_.push_back(block);
    b.lru = std::prev(lru_.end());
  } else {
    free_.push_back(block);
  }
}

void KvBlockPool::release(std::span<const int32_t> blocks) {
  for (int32_t b : blocks) release(b);
}

// The keyed blocks holding tokens' leading full blocks, in order (at most max_blocks).
std::vector<int32_t> KvBlockPool::cached_blocks(std::span<const int32_t> tokens, int32_t max_blocks) const {
  std::vector<int32_t> out;
  uint64_t parent = 0;
  const size_t bs = static_cast<size_t>(block_size_);
  for (size_t i = 0; (i + 1) * bs <= tokens.size() && static_cast<int32_t>(out.size()) < max_blocks; ++i) {
    const auto part = tokens.subspan(i * bs, bs);
    const uint64_t key = chain_key(parent, part);
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) break;
    const Block& b = blocks_[static_cast<size_t>(it->second)];
    if (b.parent != parent || !std::equal(part.begin(), part.end(), b.tokens.begin(), b.tokens.end())) break;
    out.push_back(it->second);
    parent = key;
  }
  return out;
}

std::vector<int32_t> KvBlockPool::match_prefix(std::span<const int32_t> tokens, int32_t max_blocks) {
  ++prefix_lookups_;
  std::vector<int32_t> out = cached_blocks(tokens, max_blocks);
  for (int32_t id : out) {
    Block& b = blocks_[static_cast<size_t>(id)];
    if (b.refs++ == 0) lru_.erase(b.lru);  // held again: not evictable
  }
  prefix_hits_ += out.size();
  return out;
}

int32_t KvBlockPool::cached_prefix(std::span<const int32_t> tokens, int32_t max_blocks) const {
  return static_cast<int32_t>(cached_blocks(tokens, max_blocks).size());
}

int32_t common_full_blocks(std::span<const int32_t> a, std::span<const int32_t> b, int32_t block_size,
                           int32_t max_blocks) {
  const size_t bs = static_cast<size_t>(block_size);
  int32_t n = 0;
  while (n < max_blocks && (static_cast<size_t>(n) + 1) * bs <= std::min(a.size(), b.size()) &&
         std::equal(a.begin() + n * bs, a.begin() + (n + 1) * bs, b.begin() + n * bs))
    ++n;
  return n;
}

uint64_t KvBlockPool::publish(uint64_t parent, std::span<const int32_t> block_tokens, int32_t block) {
  if (static_cast<int32_t>(block_tokens.size()) != block_size_)
    throw std::invalid_argument("KV block pool: a published block holds " + std::to_string(block_size_) +
                                " tokens, not " + std::to_string(block_tokens.size()));
  if (block < 0 || block >= n_blocks()) throw std::out_of_range("KV block pool: no block " + std::to_string(block));
  const uint64_t key = chain_key(parent, block_tokens);
  Block& b = blocks_[static_cast<size_t>(block)];
  if (b.keyed || by_key_.count(key)) return key;
  b.keyed = true;
  b.key = key;
  b.parent = parent;
  b.tokens.assign(block_tokens.begin(), block_tokens.end());
  by_key_.emplace(key, block);
  return key;
}

KvBlockStats KvBlockPool::stats() const {
  KvBlockStats s;
  s.n_blocks = n_blocks();
  s.free = static_cast<int32_t>(free_.size());
  s.cached = static_cast<int32_t>(lru_.size());
  s.used = s.n_blocks - s.free - s.cached;
  s.prefix_hits = prefix_hits_;
  s.prefix_lookups = prefix_lookups_;
  s.evictions = evictions_;
  return s;
}

}  // namespace runtime
