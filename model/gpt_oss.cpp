// gpt-oss (OpenAI's gpt-oss-20b / -120b; llama.cpp's openai-moe): attention with biases on q, k, v and o, q wider
// than n_embd, per-head sinks, YaRN, and every other layer within a sliding window (layer 0 local); the residual
// stream is normalised by post_attention_norm (gpt-oss's name for the pre-MoE norm) for a mixture of experts with
// router and expert biases, the clamped SwiGLU, and weights from a softmax over the top-k router logits.
#include "model/build_graph.h"
#include "model/layers.h"

namespace model {

graph::Graph build_gpt_oss(const Config& c, const Weights& w, const BatchShape& b) {
  Layers L(c, w, b);
  graph::NodeId x = L.embed();  // [n_embd, T]
  for (int il = 0; il < c.n_layer; ++il) {
    graph::NodeId cur = L.norm(il, "attn_norm", x);
    cur = L.attention(il, cur, AttentionOptions{});  // biases, sinks and window from the file and Config
    x = L.add(il, "ffn_inp", x, cur);  // residual
    cur = L.norm(il, "post_attention_norm", x);
    cur = L.moe_ffn(il, cur, ExpertActivation::SwiGluOai);
    x = L.add(il, "l_out", x, cur);    // residual
  }
  L.output(x);  // [n_vocab, T or 1]
  return L.take();
}

}  // namespace model
