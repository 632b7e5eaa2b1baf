// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-235B-A22B, the Coder variants): Qwen3's attention (per-head q/k RMSNorm before
// NEOX RoPE, no biases) and, in place of the dense feed-forward block, a mixture of SwiGLU experts: softmax over
// all router logits, the top expert_used_count of them, renormalised to sum 1 (llama.cpp always renormalises here).
#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_qwen3moe(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();  // [n_embd, T]
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{.qk_norm = true});
    x = L.add(il, "ffn_inp", x, cur);  // residual
    cur = L.norm(il, "ffn_norm", x);
    cur = L.moe_ffn(il, cur, ExpertActivation::SwiGlu);
    x = L.add(il, "l_out", x, cur);    // residual
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
