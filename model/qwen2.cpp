// Qwen2 / Qwen2.5: the llama block with biases on the q, k and v projections (required, see weight_specs) and
// RoPE on half-split pairs (NEOX ordering, from Config); the output matrix is usually tied to token_embd.
#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_qwen2(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();  // [n_embd, T]
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{});  // q/k/v biases are picked up from the weights
    x = L.add(il, "ffn_inp", x, cur);
    cur = L.norm(il, "ffn_norm", x);
    cur = L.ffn(il, cur);
    x = L.add(il, "l_out", x, cur);
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
