// Helpers of the paged-attention executor tests (test_paged.cpp): a one-layer graph whose Attention reads a paged
// (or, for comparison, a one-sequence) KV cache, built on the IR with an F32 embedding table as its only weight, run
// side by side on cuda::Executor and graph::ReferenceExecutor; and a tiny block allocator that gives sequences
// shuffled (non-identity) blocks of the pool, frees blocks a sliding window has passed, and lays out a ragged
// batch's RunInputs.
#pragma once
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/executor.h"
#include "gpu_test.h"
#include "graph/plan.h"
#include "graph/reference.h"

namespace paged_test {

using graph::KvType;
using graph::NodeId;

struct Layer {
  int nh = 8, nkv = 2, hd = 128;
  KvType kv = KvType::F16;
  int window = 0;
};

// The cache the graphs of one test share: a paged pool (block_size > 0) or one sequence of n_ctx slots.
struct CacheShape {
  int block_size = 0;  // 0: not paged
  int n_blocks = 0;    // paged: the pool
  int max_blocks = 0;  // paged: entries per block-table row
  int n_seq = 0;       // paged: block-table rows
  int n_ctx = 0;       // not paged: slots
};

constexpr int kVocab = 512;

// One layer over T tokens: embedding rows [q | k | v] -> rope(q), rope(k) -> attention -> (paged, n_out > 0) the
// output rows gathered. Outputs: `att` [hd * nh, T] and `rows` [hd * nh, n_out] (paged only).
struct OneLayer {
  graph::Graph g;
  graph::Plan plan;
  NodeId att = graph::kNoNode, rows = graph::kNoNode;

  OneLayer(const Layer& l, const CacheShape& c, int T, int n_out, const std::vector<float>& emb) {
    using Kind = graph::InputParams::Kind;
    const bool paged = c.block_size > 0;
    g.n_tokens = T;
    g.kv = graph::KvCacheSpec{1, paged ? c.n_blocks * c.block_size : c.n_ctx, l.nkv, l.hd, l.hd, l.kv};
    if (paged) g.kv.block_size = c.block_size, g.kv.max_blocks = c.max_blocks, g.kv.n_seq = c.n_seq;
    const NodeId tokens = g.input("tokens", Kind::Tokens, T);
    const NodeId positions = g.input("positions", Kind::Positions, T);
    graph::PagedKv pk;
    NodeId out_rows = graph::kNoNode;
    if (paged) {
      pk.kv_seq = g.input("kv_seq", Kind::KvSeq, T);
      pk.block_table = g.input("block_table", Kind::BlockTable, c.max_blocks, c.n_seq);
      if (n_out > 0) out_rows = g.input("output_rows", Kind::OutputRows, n_out);
    }
    const int64_t D = int64_t(l.hd) * (l.nh + 2 * l.nkv);
    graph::WeightParams wp;
    wp.tensor = "token_embd.weight", wp.type = quant::Type::F32, wp.host = emb.data();
    wp.nbytes = emb.size() * sizeof(float), wp.arena_offset = 0;
    const NodeId table = g.weight("token_embd", wp, graph::Shape{{D, kVocab, 1, 1}});
    const NodeId x = g.get_rows("x", table, tokens);  // [D, T]
    const auto head = [&](const char* name, int64_t off, int n) {
      const NodeId s = g.slice(std::string(name) + "_rows", x, off, int64_t(l.hd) * n);
      return g.reshape(name, s, graph::Shape{{l.hd, n, T, 1}});
    };
    const NodeId q = head("q", 0, l.nh);
    const NodeId k = head("k", int64_t(l.hd) * l.nh, l.nkv);
    const NodeId v = head("v", int64_t(l.hd) * (l.nh + l.nkv), l.nkv);
    graph::RopeParams rp;
    rp.n_rot = l.hd, rp.freq_base = 10000.0f;
    const NodeId qr = g.rope("q_rope", q, positions, rp);
    const NodeId kr = g.rope("k_rope", k, positions, rp);
    graph::AttentionParams ap{0, l.nh, l.nkv, l.hd, l.hd, 1.0f / std::sqrt(float(l.hd)), l.window};
    att = g.attention("attn", qr, kr, v, positions, ap, pk);
    g.mark_output(att);
    if (out_rows != graph::kNoNode) {
      rows = g.gather("rows", att, out_rows);
      g.mark_output(rows);
    }
    plan = graph::plan(g);
  }
};

// Random embedding rows in [-1, 1]: q, k and v of every token id.
inline std::vector<float> embedding(const Layer& l, uint32_t seed) {
  std::mt19937 rng(seed);
  return gpu_test::random_floats(rng, size_t(l.hd) * (l.nh + 2 * l.nkv) * kVocab);
}

// The sequences of a paged test: per block-table row its length so far and its blocks, drawn from a shuffled pool.
class Sequences {
 public:
  // ordered: blocks handed out in ascending order (a chunk's blocks consecutive: KvPaging::run_base), not shuffled.
  Sequences(const CacheShape& c, uint32_t seed, bool ordered = false) : c_(c), rng_(seed), len_(size_t(c.n_seq), 0) {
    table_.assign(size_t(c.n_seq) * c.max_blocks, -1);
    for (int b = 0; b < c.n_blocks; ++b) free_.push_back(b);
    if (ordered) std::reverse(free_.begin(), free_.end());  // taken from the back
    else std::shuffle(free_.begin(), free_.end(), rng_);
  }

  // A batch piece: n tokens of the sequence in row `row` (n = 0: `pad` padding tokens instead).
  struct Piece {
    int row = 0, n = 0, pad = 0;
  };

  // The inputs of a batch of T tokens made of these pieces in order (the rest padding), the last token of every
  // sequence piece an output row (in reverse order, so that output rows are not sorted). Blocks the new positions
  // need are allocated; with window > 0, blocks wholly before every new token's window go back to the pool first
  // and their entries become -1, as a runtime may do.
  void batch(const std::vector<Piece>& pieces, int T, int window) {
    tokens.clear(), positions.clear(), kv_seq.clear(), output_rows.clear();
    std::uniform_int_distribution<int> tok(0, kVocab - 1);
    for (const Piece& p : pieces) {
      if (p.n == 0) {
        for (int i = 0; i < p.pad; ++i) push(tok(rng_), -1, int32_t(rng_() % c_.n_seq));
        continue;
      }
      int& len = len_[size_t(p.row)];
      if (window > 0) release_before(p.row, std::max(0, len - window + 1));
      for (int i = 0; i < p.n; ++i) {
        ensure_block(p.row, len / c_.block_size);
        push(tok(rng_), len++, p.row);
      }
      output_rows.insert(output_rows.begin(), int32_t(tokens.size() - 1));
    }
    while (int(tokens.size()) < T) push(tok(rng_), -1, 0);
  }

  graph::RunInputs inputs() const { return {tokens, positions, kv_seq, table_, output_rows}; }
  std::vector<int32_t> tokens, positions, kv_seq, output_rows;

 private:
  void push(int32_t token, int32_t pos, int32_t row) {
    tokens.push_back(token), positions.push_back(pos), kv_seq.push_back(row);
  }
  void ensure_block(int row, int b) {
    int32_t& e = table_[size_t(row) * c_.max_blocks + b];
    if (e >= 0) return;
    if (free_.empty()) throw std::runtime_error("test pool exhausted");
    e = free_.back();
    free_.pop_back();
  }
  void release_before(int row, int first) {
    for (int b = 0; (b + 1) * c_.block_size <= first; ++b) {
      int32_t& e = table_[size_t(row) * c_.max_blocks + b];
      if (e >= 0) free_.insert(free_.begin(), e), e = -1;  // to the far end: reused last
    }
  }

  CacheShape c_;
  std::mt19937 rng_;
  std::vector<int> len_;
  std::vector<int32_t> table_;
  std::vector<int32_t> free_;
};

// A graph on both executors: the GPU's and the reference's outputs after each run.
struct Both {
  OneLayer l;
  std::unique_ptr<cuda::Executor> gpu;
  Both(const Layer& layer, const CacheShape& c, int T, int n_out, const std::vector<float>& emb,
       const cuda::Context& ctx, const uint8_t* weights, cuda::KvCache* kv, bool fuse, bool cuda_graph,
       bool run_bases = false, bool new_tokens = false,
       int64_t new_tokens_wide_min = cuda::ExecutorOptions{}.batch_new_tokens_wide_min)
      : l(layer, c, T, n_out, emb) {
    cuda::ExecutorOptions o;
    o.fuse = fuse, o.cuda_graph = cuda_graph, o.paged_run_bases = run_bases, o.batch_new_tokens = new_tokens;
    o.batch_new_tokens_wide_min = new_tokens_wide_min;
    gpu = std::make_unique<cuda::Executor>(ctx, l.g, l.plan, weights, kv, o);
  }
};

}  // namespace paged_test
