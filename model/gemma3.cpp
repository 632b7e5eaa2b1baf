// Gemma 3: embeddings scaled by sqrt(n_embd); per layer RMSNorm, attention with per-head q/k RMSNorm (local layers
// within a sliding window with their own rope base, global layers with the file's rope scaling, both from
// Config), an RMSNorm of the attention output before the residual add, then the same around a GeGLU feed-forward
// (tanh GELU). The output matrix is usually tied; logits are softcapped when the file asks for it (Layers::output).
// Norm weights are multiplied as stored: llama.cpp's converter already folded Gemma's "1 + w" into them.
#include <cmath>

#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_gemma3(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();                                           // [n_embd, T]
  x = L.scale("inp_scaled", x, std::sqrt(static_cast<float>(c.n_embd)));  // token inputs only; tied output unscaled
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{.qk_norm = true});
    cur = L.norm(il, "post_attention_norm", cur);
    x = L.add(il, "ffn_inp", x, cur);  // residual
    cur = L.norm(il, "ffn_norm", x);   // HF's pre_feedforward_layernorm
    cur = L.ffn(il, cur, Activation::GeluTanh);
    cur = L.norm(il, "post_ffw_norm", cur);
    x = L.add(il, "l_out", x, cur);    // residual
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
