// A graph of one prompt product for host-side tests of what the executor reserves (work_buffers.h): x [K, T] ->
// [N, T] through matrix W of `type` at arena offset 0 in the given role, x gathered from a float table.
#pragma once
#include <cstdint>
#include <string>

#include "graph/ir.h"
#include "quant/types.h"

namespace gpu_test {

// siblings: that many more products of the same x and shape (a layer's k beside its v), their matrices after W.
inline graph::Graph one_product(quant::Type type, int64_t K, int64_t N, int64_t T,
                                graph::WeightRole role = graph::WeightRole::FfnDown, int siblings = 0) {
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
  return g;
}

}  // namespace gpu_test
