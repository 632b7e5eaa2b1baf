// Qwen3 (dense): no q/k/v biases; instead every q and k head is RMS-normalised (attn_q_norm / attn_k_norm, one
// [head_dim] weight shared by all heads) before NEOX RoPE. The head size comes from attention.key_length, so
// n_head * head_dim may differ from n_embd.
#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_qwen3(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();  // [n_embd, T]
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{.qk_norm = true});
    x = L.add(il, "ffn_inp", x, cur);
    cur = L.norm(il, "ffn_norm", x);
    cur = L.ffn(il, cur);
    x = L.add(il, "l_out", x, cur);
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
