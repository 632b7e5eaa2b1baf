// Llama 1/2/3, Mistral, TinyLlama: pre-norm decoder, RMSNorm, RoPE on adjacent pairs (NORM ordering) with optional
// Llama-3 frequency factors, grouped-query attention, SwiGLU feed-forward, output matrix optionally tied.
#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_llama(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();  // [n_embd, T]
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{});
    x = L.add(il, "ffn_inp", x, cur);  // residual
    cur = L.norm(il, "ffn_norm", x);
    cur = L.ffn(il, cur);
    x = L.add(il, "l_out", x, cur);    // residual
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
