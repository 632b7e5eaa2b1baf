// The paged KV cache's bookkeeping on the host: which blocks of the pool are free, which sequences hold which, and
// the prefix cache. A full block is keyed by every token from the start of its sequence up to its end (a hash
// chain, checked token by token on a hit, so a collision can never hand out wrong K/V), and is kept when its last
// holder finishes, so a later sequence whose prompt starts with the same tokens (a chat's next turn, a shared
// system prompt, an agent resending its conversation) reuses its K/V instead of computing it again. Blocks held by
// nobody and keyed are evicted least-recently-used first, when a sequence needs a block and none is free.
//
// The cache's contents are the device's business; this class only hands out block ids. A block that is shared
// (held by more than one sequence, or keyed) is never written again: sequences write only past their matched
// prefix, into blocks they allocated themselves.
#pragma once
#include <cstdint>
#include <list>
#include <span>
#include <unordered_map>
#include <vector>

namespace runtime {

struct KvBlockStats {
  int32_t n_blocks = 0;
  int32_t free = 0;        // held by nobody and keyed by nothing
  int32_t cached = 0;      // held by nobody, kept for their prefix (evictable)
  int32_t used = 0;        // held by at least one sequence
  uint64_t prefix_hits = 0;        // blocks reused by lookups
  uint64_t prefix_lookups = 0;     // lookups (one per admitted sequence)
  uint64_t evictions = 0;
};

class KvBlockPool {
 public:
  KvBlockPool(int32_t n_blocks, int32_t block_size);

  int32_t block_size() const { return block_size_; }
  int32_t n_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  // Blocks allocate() can hand out now: free ones and evictable cached ones.
  int32_t available() const;

  // A block for the caller alone (reference count 1): a free one, else the least recently used cached one, whose
  // key is dropped. -1 when every block is held.
  int32_t allocate();
  // Drops one reference. A block nobody holds any more stays cached when keyed (most recently used), else is free.
  void release(int32_t block);
  void release(std::span<const int32_t> blocks);

  // The longest run of cached full blocks that holds tokens[0, n * block_size) for some n, each acquired for the
  // caller (reference count +1), at most max_blocks of them. Counts a lookup and its hits.
  std::vector<int32_t> match_prefix(std::span<const int32_t> tokens, int32_t max_blocks);
  // How many blocks match_prefix would hand out now, without acquiring them or counting a lookup.
  int32_t cached_prefix(std::span<const int32_t> tokens, int32_t max_blocks) const;

  // Keys a full block of a sequence so later sequences can reuse it: parent is the key of the sequence's previous
  // block (0 for its first), block_tokens the block_size tokens it holds. Returns this block's key, the parent of
  // the next. When another block already holds the same prefix, this one stays unkeyed (the caller keeps it as its
  // own) and the key is still returned.
  uint64_t publish(uint64_t parent, std::span<const int32_t> block_tokens, int32_t block);

  KvBlockStats stats() const;

  // The key of a block holding block_tokens after the block keyed `parent` (0: the sequence's first block).
  static uint64_t chain_key(uint64_t parent, std::span<const int32_t> block_tokens);

 private:
  struct Block {
    int32_t refs = 0;
    bool keyed = false;
    uint64_t key = 0;                        // hash of the prefix through this block
    uint64_t parent = 0;                     // key of the block before it (0 for the first)
    std::vector<int32_t> tokens;             // this block's tokens, to confirm a hash match
    std::list<int32_t>::iterator lru;        // position in lru_ while cached and unheld
  };
  void unkey(int32_t block);
  std::vector<int32_t> cached_blocks(std::span<const int32_t> tokens, int32_t max_blocks) const;

  int32_t block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> free_;                     // unheld, unkeyed
  std::list<int32_t> lru_;                        // unheld, keyed: front = least recently used
  std::unordered_map<uint64_t, int32_t> by_key_;  // prefix hash -> block
  uint64_t prefix_hits_ = 0, prefix_lookups_ = 0, evictions_ = 0;
};

// Full blocks of block_size tokens (at most max_blocks) that a and b begin with alike.
int32_t common_full_blocks(std::span<const int32_t> a, std::span<const int32_t> b, int32_t block_size,
                           int32_t max_blocks);

}  // namespace runtime
