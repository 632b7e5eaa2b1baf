// Phi-3 / Phi-3.5 / Phi-4: the llama block on fused tensors, read as they are. attn_qkv is one product whose rows
// are q, k and v (an unequal split under GQA); ffn_up holds gate and up (Config::fused_gate_up). RoPE is NEOX with
// LongRoPE frequency factors and attention factor when the file has them (Config picks long or short factors by
// context size, as llama.cpp does). The file's attention.sliding_window is ignored, as llama.cpp ignores it.
#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_phi3(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();  // [n_embd, T]
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{});  // fused attn_qkv viewed as q | k | v
    x = L.add(il, "ffn_inp", x, cur);  // residual
    cur = L.norm(il, "ffn_norm", x);
    cur = L.ffn(il, cur);              // SwiGLU on the two halves of the fused ffn_up
    x = L.add(il, "l_out", x, cur);    // residual
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
