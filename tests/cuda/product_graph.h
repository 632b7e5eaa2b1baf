// A graph of one prompt product for host-side tests of what the executor reserves (work_buffers.h): x [K, T] ->
// [N, T] through matrix W of `type` at arena offset 0 in the given role, x gathered from a float table.
#pragma once
#include <cstdint>
#include <string>

#include "graph/ir.h"
#include "quant/types.h"

namespace gpu_test {

// siblings: that many more products of the same x and shape (a layer's k beside its v), their matrices after W.
// experts: a mixture's expert product of x after them too (8 Q4_K experts of N rows, top 2 by a float32 router).
inline graph::Graph one_product(quant::Type type, int64_t K, int64_t N, int64_t T,
                                graph::WeightRole role = graph::WeightRole::FfnDown, int siblings = 0,
                                bool experts = false) {
  graph::Graph g;
  graph::WeightParams table{.tensor = "token_embd.weight", .role = graph::WeightRole::TokenEmbedding,
                            .type = quant::Type::F32, .arena_offset = uint64_t(1) << 30,
                            .nbytes = uint64_t(K) * 16 * 4};
  graph::WeightParams w{.tensor = "blk.0.ffn_down.weight", .role = role, .layer = 0, .type = type,
                        .arena_offset = 0, .nbytes = quant::row_bytes(type, K) * uint64_t(N)};
  const auto ids = g.input("tokens", graph::InputParams::Kind::Tokens, T);
  const auto x = g.get_rows("x", g.weight("token_embd", table, graph::Shape{{K, 16, 1, 1}}), ids);
  g.mark_output(g.mul_mat("y", g.weight("w", w, graph::Shape{{K, N, 1, 1}}), x));
  for (int i = 1; i <= siblings; ++i) {
    graph::WeightParams s = w;
    s.tensor = "blk.0.sibling" + ::std::to_string(i) + ".weight", s.arena_offset = w.nbytes * uint64_t(i);
    const ::std::string n = ::std::to_string(i);
    g.mark_output(g.mul_mat("y" + n, g.weight("w" + n, s, graph::Shape{{K, N, 1, 1}}), x));
  }
  if (experts) {
    const int64_t n_expert = 8;
    graph::WeightParams r{.tensor = "blk.0.ffn_gate_inp.weight", .role = graph::WeightRole::FfnRouter, .layer = 0,
                          .type = quant::Type::F32, .arena_offset = uint64_t(2) << 30,
                          .nbytes = uint64_t(K) * n_expert * 4};
    graph::WeightParams e{.tensor = "blk.0.ffn_up_exps.weight", .role = graph::WeightRole::FfnUpExps, .layer = 0,
                          .type = quant::Type::Q4_K, .arena_offset = uint64_t(3) << 30,
                          .nbytes = quant::row_bytes(quant::Type::Q4_K, K) * uint64_t(N * n_expert)};
    const auto ids = g.top_k("ids", g.mul_mat("scores", g.weight("router", r, graph::Shape{{K, n_expert, 1, 1}}), x), 2);
    const auto xe = g.reshape("xe", x, graph::Shape{{K, 1, T, 1}});
    g.mark_output(g.mul_mat_id("ye", g.weight("experts", e, graph::Shape{{K, N, n_expert, 1}}), xe, ids));
  }
  return g;
}

}  // namespace gpu_test
