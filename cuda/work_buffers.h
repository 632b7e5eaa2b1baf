// The buffers a cuda::Executor allocates for one planned graph, computed without allocating anything, so a session
// can check that a graph (or a whole context) fits in free device memory before any large cudaMalloc. The executor
// sizes its buffers with this same function, so the estimate cannot drift from what is allocated.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>
#include <variant>

#include "cuda/dequant_ahead.h"
#include "cuda/executor_options.h"
#include "cuda/half_weights.h"
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/moe_gemm.cuh"
#include "cuda/paged_batch.h"
#include "cuda/product_route.h"
#include "graph/ir.h"
#include "graph/plan.h"

namespace cuda {

struct WorkBuffers {
  size_t arena = 0;         // device: the activation arena (graph::Plan::arena_bytes)
  size_t gemm_scratch = 0;  // device: the largest need of any GEMM node (dequantized weight slices, X in half)
  size_t attn_scratch = 0;  // device: the largest need of any attention node (split-K partial results)
  size_t staging = 0;       // pinned host memory for the per-run inputs (token ids, positions, paged batches' tables)
  size_t paged_tiles = 0;   // device: a paged graph's prefill tiles and run bases (PagedTiles), also staged
  size_t moe_scratch = 0;   // device: the expert grouping and half x of the largest prefill MulMatId (moe_gemm.cuh)
  size_t batch_mm_counters = 0;  // device: the small-batch products' tile counters, when any product may take them
  size_t dequant_ring = 0;  // device: DequantAhead's slots, each the largest copy a product may take there
  size_t device_bytes() const {
    return arena + gemm_scratch + attn_scratch + paged_tiles + moe_scratch + batch_mm_counters + dequant_ring;
  }
};

// The scratch one product needs on its route (product_route.h): none for the matvec and few-column kernels.
inline size_t product_scratch(ProductRoute route, int64_t K, int64_t N, int64_t T, int64_t matvec_max_tokens) {
  switch (route) {
    case ProductRoute::SmallBatch: return batch_mm_scratch(K, N, T);  // x in half, then shared tiles' partial sums
    case ProductRoute::PromptWgmma: return prompt_wgmma_scratch(K, N, T);  // the image of x, partial sums
    case ProductRoute::GemmHalf: return gemm_x_scratch(K, T);  // cuBLAS reads W as it is
    case ProductRoute::GemmDequant:
      // A few tokens: an o projection regrouped by columns outside the attention + o launch (which takes it at one
      // token where it can): the smallest scratch, W in slices, not a whole copy.
      if (T <= matvec_max_tokens) return gemm_min_scratch(K, N, T);
      // The whole matrix converted up to 256 MiB; bigger matrices go in slices.
      return ::std::max(::std::min(gemm_full_scratch(K, N, T), size_t(256) << 20), gemm_min_scratch(K, N, T));
    default: return 0;
  }
}

// For graph g planned by `plan`, on a device with sm_count SMs, each product on the route `opt` gives it. Where
// the session has not regrouped its weights yet (no regrouped_offsets: a load-time estimate), a Q6_K or Q4_0 matrix
// may take either layout, and the larger need counts.
inline WorkBuffers work_buffers(const graph::Graph& g, const graph::Plan& plan, int sm_count,
                                const ExecutorOptions& opt) {
  WorkBuffers b;
  b.arena = plan.arena_bytes;
  // Products of weights by (x, K, N): where two read one x in one shape, a pair may take them (pair_gemm_siblings).
  ::std::map<::std::tuple<graph::NodeId, int64_t, int64_t>, int> same_shape;
  size_t ahead_ring = 0;  // DequantAhead's slots, where the graph has a prompt's expert launches to run beside
  // Whether it has: the ring is reserved only then (dequant_ring, below), and the executor's is what that reserves.
  bool prompt_experts = false;
  for (const graph::Node& n : g.nodes()) {
    if (n.op == graph::Op::MulMat && n.inputs.size() >= 2 && g.node(n.inputs[0]).op == graph::Op::Weight)
      ++same_shape[{n.inputs[1], g.node(n.inputs[0]).shape.ne[0], g.node(n.inputs[0]).shape.ne[1]}];
    if (n.op == graph::Op::MulMatId && n.shape.ne[2] > opt.matvec_max_tokens) prompt_experts = true;
  }
  for (const graph::Node& n : g.nodes()) {
    if (n.op == graph::Op::MulMat && n.inputs.size() >= 2 && g.node(n.inputs[0]).op == graph::Op::Weight) {
      const graph::Node& w = g.node(n.inputs[0]);
      const auto& wp = ::std::get<graph::WeightParams>(w.params);
      ProductFacts f{wp.type, wp.role, false, opt.half_weights && opt.half_weights->rows(wp, w.shape.ne[0]),
                     w.shape.ne[0], w.shape.ne[1], n.shape.rows()};
      // The layouts the matrix may have: the upload's where it ran, else both for the types it regroups.
      const auto may_be = [&](bool rg) {
        if (opt.regrouped_offsets) return rg == regrouped_at_upload(opt, wp);
        return !rg || wp.type == quant::Type::Q6_K || wp.type == quant::Type::Q4_0;
      };
      for (const bool rg : {false, true}) {
        if (!may_be(rg)) continue;
        f.regrouped = rg;
        const ProductRoute r = product_route(opt, f);
        const size_t half = gemm_half_bytes(f.K, f.N);
        // Whether the ring's copies feed the product, one matrix (m = 1) or a pair's two (m = 2): they do wherever
        // they fit a slot, and the ring's slots are sized below to hold every such product's, so DequantAhead::take
        // finds room; its W then comes made (GemmParams::w_half) and its scratch holds x alone.
        const auto fed = [&](int m) { return prompt_experts && dequant_ahead_takes(opt, r, f.T, m * half); };
        b.gemm_scratch = ::std::max(b.gemm_scratch, fed(1) ? gemm_x_scratch(f.K, f.T)
                                                           : product_scratch(r, f.K, f.N, f.T, opt.matvec_max_tokens));
        const bool pair = gemm_pair_candidate(opt, f, r) && same_shape[{n.inputs[1], f.K, f.N}] > 1;
        if (pair)  // a pair's two matrices
          b.gemm_scratch =
              ::std::max(b.gemm_scratch, fed(2) ? gemm_x_scratch(f.K, f.T) : gemm_pair_scratch(f.K, f.N, f.T));
        for (const int m : {1, pair ? 2 : 1})  // the copies made ahead: one matrix, or a pair's two
          if (dequant_ahead_takes(opt, r, f.T, m * half))
            ahead_ring = ::std::max(ahead_ring, kDequantAheadSlots * m * half);
        if (r == ProductRoute::SmallBatch || r == ProductRoute::PromptWgmma)
          b.batch_mm_counters = kBatchMmCounterBytes;  // their tile counters
      }
    } else if (n.op == graph::Op::Attention) {
      const auto& p = ::std::get<graph::AttentionParams>(n.params);
      const int64_t T = g.node(n.inputs[0]).shape.ne[2];
      // Splits by the positions a sequence may reach: n_ctx for one sequence, max_blocks * block_size when paged.
      const int32_t splits = attention_max_splits(g.kv.seq_capacity(), p.n_head_kv, T, sm_count);
      b.attn_scratch = ::std::max(b.attn_scratch, attention_scratch_floats(p.n_head, p.head_dim_v, T, splits) * 4);
      if (g.kv.paged()) b.paged_tiles = ::std::max(b.paged_tiles, size_t(PagedTiles::staged_ints(T)) * 4);
    } else if (n.op == graph::Op::MulMatId && n.shape.ne[2] > opt.matvec_max_tokens) {
      const int64_t n_expert = g.node(n.inputs[0]).shape.ne[2];
      const auto& x = g.node(n.inputs[1]).shape;  // [K, x_slots, T]
      b.moe_scratch = ::std::max(b.moe_scratch, moe_gemm_scratch_bytes(n_expert, n.shape.ne[1], n.shape.ne[2],
                                                                        x.ne[0], x.ne[1]));
      // A gate/up pair's activation as half for its down product (MoeGluOut), past what the pair's launches use.
      const graph::Node& act = g.node(n.inputs[1]);
      if ((act.op == graph::Op::SwiGlu || act.op == graph::Op::SwiGluOai) && !act.inputs.empty() &&
          g.node(act.inputs[0]).op == graph::Op::MulMatId) {
        const graph::Node& gate = g.node(act.inputs[0]);
        const auto& gx = g.node(gate.inputs[1]).shape;
        b.moe_scratch = ::std::max(b.moe_scratch,
                                   moe_glu_scratch_bytes(g.node(gate.inputs[0]).shape.ne[2], gate.shape.ne[1],
                                                         gate.shape.ne[2], gx.ne[0], gx.ne[1], gate.shape.ne[0]));
      }
    } else if (n.op == graph::Op::Input) {
      b.staging += size_t(n.shape.elements()) * 4;
    }
  }
  b.staging += b.paged_tiles;  // written by the host per run, copied by the run's first step
  if (prompt_experts) b.dequant_ring = ahead_ring;
  return b;
}

}  // namespace cuda
