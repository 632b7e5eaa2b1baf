// The buffers a cuda::Executor allocates for one planned graph, computed without allocating anything, so a session
// can check that a graph (or a whole context) fits in free device memory before any large cudaMalloc. The executor
// sizes its buffers with this same function, so the estimate cannot drift from what is allocated.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <variant>

#include "cuda/half_weights.h"
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/batch_mm.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/prompt_gemm.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/moe_gemm.cuh"
#include "cuda/paged_batch.h"
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
  size_t device_bytes() const {
    return arena + gemm_scratch + attn_scratch + paged_tiles + moe_scratch + batch_mm_counters;
  }
};

// For graph g planned by `plan`, on a device with sm_count SMs; MulMat nodes with more than matvec_max_tokens
// tokens take the GEMM path (ExecutorOptions::matvec_max_tokens), which converts only x where the matrix is F16 or
// has a copy in `half` (ExecutorOptions::half_weights).
inline WorkBuffers work_buffers(const graph::Graph& g, const graph::Plan& plan, int sm_count,
                                int64_t matvec_max_tokens, const HalfWeights* half = nullptr) {
  WorkBuffers b;
  b.arena = plan.arena_bytes;
  for (const graph::Node& n : g.nodes()) {
    if (n.op == graph::Op::MulMat && n.inputs.size() >= 2) {
      const auto& w = g.node(n.inputs[0]).shape;
      const int64_t T = n.shape.ne[1] * n.shape.ne[2] * n.shape.ne[3];
      if (T > 1 && T <= kBatchMmMaxTokens) {
        // A few tokens may take the small-batch kernel (batch_mm.cuh): x in half at the scratch's start, then the
        // partial sums of shared tiles.
        b.gemm_scratch = ::std::max(b.gemm_scratch, batch_mm_scratch(w.ne[0], w.ne[1], T));
        b.batch_mm_counters = kBatchMmCounterBytes;
      }
      const graph::Node& wn = g.node(n.inputs[0]);
      const auto* wp = wn.op == graph::Op::Weight ? ::std::get_if<graph::WeightParams>(&wn.params) : nullptr;
      const bool half_operand = wp && (wp->type == quant::Type::F16 || (half && half->rows(*wp, w.ne[0])));
      if (T > matvec_max_tokens && half_operand) {
        b.gemm_scratch = ::std::max(b.gemm_scratch, gemm_x_scratch(w.ne[0], T));  // cuBLAS reads W as it is
      } else if (T > matvec_max_tokens) {
        // Whole-matrix conversion up to 256 MiB; bigger matrices go in slices.
        const size_t full = gemm_full_scratch(w.ne[0], w.ne[1], T);
        b.gemm_scratch = ::std::max(
            b.gemm_scratch, ::std::max(::std::min(full, size_t(256) << 20), gemm_min_scratch(w.ne[0], w.ne[1], T)));
        // Or a prompt kernel, the wgmma one or the warp-specialised one (Q4_K, Q6_K regrouped or not: the layout is
        // decided at upload): its image of x, its partial sums and the tile counters.
        for (const bool rg : {false, true}) {
          const bool wgmma = wp && prompt_wgmma_supports(wp->type, rg, w.ne[0], w.ne[1], T);
          const bool gemm = wp && prompt_gemm_supports(wp->type, rg, w.ne[0], w.ne[1], T);
          if (wgmma) b.gemm_scratch = ::std::max(b.gemm_scratch, prompt_wgmma_scratch(w.ne[0], w.ne[1], T));
          if (gemm) b.gemm_scratch = ::std::max(b.gemm_scratch, prompt_gemm_scratch(w.ne[0], w.ne[1], T));
          if (wgmma || gemm) b.batch_mm_counters = kBatchMmCounterBytes;
        }
      }
    } else if (n.op == graph::Op::Attention) {
      const auto& p = ::std::get<graph::AttentionParams>(n.params);
      const int64_t T = g.node(n.inputs[0]).shape.ne[2];
      // Splits by the positions a sequence may reach: n_ctx for one sequence, max_blocks * block_size when paged.
      const int32_t splits = attention_max_splits(g.kv.seq_capacity(), p.n_head_kv, T, sm_count);
      b.attn_scratch = ::std::max(b.attn_scratch, attention_scratch_floats(p.n_head, p.head_dim_v, T, splits) * 4);
      if (g.kv.paged()) b.paged_tiles = ::std::max(b.paged_tiles, size_t(PagedTiles::staged_ints(T)) * 4);
    } else if (n.op == graph::Op::MulMatId && n.shape.ne[2] > matvec_max_tokens) {
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
  return b;
}

}  // namespace cuda
