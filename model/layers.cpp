// The transformer blocks shared by the llama-family graph builders (see layers.h).
#include "model/layers.h"

namespace model {

using graph::NodeId;
using graph::kNoNode;

Layers::Layers(const Config& c, const Weights& w, int n_tokens, int n_ctx) : c_(c), w_(w), n_tokens_(n_tokens) {
  if (n_tokens <= 0) throw std::invalid_argument("build_graph: n_tokens must be positive, got " + std::to_string(n_tokens));
  if (n_ctx <= 0) throw std::invalid_argument("build_graph: n_ctx must be positive, got " + std::to_string(n_ctx));
  g_.n_tokens = n_tokens;
  g_.kv = graph::KvCacheSpec{c.n_layer, n_ctx, c.n_head_kv, c.head_dim, c.head_dim_v};
  tokens_ = g_.input("tokens", graph::InputParams::Kind::Tokens, n_tokens);        // I32 [T]
  positions_ = g_.input("positions", graph::InputParams::Kind::Positions, n_tokens);  // I32 [T]
}

NodeId Layers::weight_opt(std::string_view tensor) {
  const std::string key(tensor);
  if (auto it = weights_.find(key); it != weights_.end()) return it->second;
  const WeightInfo* info = w_.find(tensor);
  if (!info) return kNoNode;
  const NodeId id = g_.weight(key, info->params, info->shape);
  weights_.emplace(key, id);
  return id;
}

NodeId Layers::weight(std::string_view tensor) {
  const NodeId id = weight_opt(tensor);
  if (id == kNoNode) w_.get(tensor);  // throws ModelError naming the tensor
  return id;
}

NodeId Layers::embed() {
  return g_.get_rows("inp_embd", weight("token_embd.weight"), tokens_);  // [n_embd, T]
}

NodeId Layers::norm(int il, const char* what, NodeId x) {
  return g_.rms_norm(name(il, what), x, weight(name(il, what) + ".weight"), c_.rms_eps);
}

NodeId Layers::add(int il, const char* what, NodeId a, NodeId b) { return g_.add(name(il, what), a, b); }

NodeId Layers::attention(int il, NodeId x, const AttentionOptions& o) {
  const int64_t T = n_tokens_;
  auto proj = [&](const char* what) {
    return g_.mul_mat(name(il, what), weight(name(il, what) + ".weight"), x, weight_opt(name(il, what) + ".bias"));
  };
  NodeId q = proj("attn_q");  // [n_head * head_dim, T]
  NodeId k = proj("attn_k");  // [n_head_kv * head_dim, T]
  NodeId v = proj("attn_v");  // [n_head_kv * head_dim_v, T]
  q = g_.reshape(name(il, "attn_q_heads"), q, graph::Shape{{c_.head_dim, c_.n_head, T, 1}});
  k = g_.reshape(name(il, "attn_k_heads"), k, graph::Shape{{c_.head_dim, c_.n_head_kv, T, 1}});
  v = g_.reshape(name(il, "attn_v_heads"), v, graph::Shape{{c_.head_dim_v, c_.n_head_kv, T, 1}});
  if (o.qk_norm) {
    // RMSNorm over each head's head_dim values, one shared weight [head_dim] for all heads.
    q = norm(il, "attn_q_norm", q);
    k = norm(il, "attn_k_norm", k);
  }
  const graph::RopeParams rope{c_.rope_mode, c_.n_rot, c_.rope_freq_base, c_.rope_freq_scale};
  const NodeId freq_factors = weight_opt("rope_freqs.weight");  // [n_rot / 2], Llama 3.1+ only
  q = g_.rope(name(il, "attn_q_rope"), q, positions_, rope, freq_factors);
  k = g_.rope(name(il, "attn_k_rope"), k, positions_, rope, freq_factors);

  const graph::AttentionParams ap{il, c_.n_head, c_.n_head_kv, c_.head_dim, c_.head_dim_v, c_.attn_scale};
  const NodeId kqv = g_.attention(name(il, "attn_kqv"), q, k, v, positions_, ap);  // [n_head * head_dim_v, T]
  return g_.mul_mat(name(il, "attn_output"), weight(name(il, "attn_output.weight")), kqv,
                    weight_opt(name(il, "attn_output.bias")));  // [n_embd, T]
}

NodeId Layers::ffn(int il, NodeId x) {
  const NodeId gate = g_.mul_mat(name(il, "ffn_gate"), weight(name(il, "ffn_gate.weight")), x);  // [n_ff, T]
  const NodeId up = g_.mul_mat(name(il, "ffn_up"), weight(name(il, "ffn_up.weight")), x);        // [n_ff, T]
  const NodeId act = g_.swiglu(name(il, "ffn_swiglu"), gate, up);                                // [n_ff, T]
  return g_.mul_mat(name(il, "ffn_down"), weight(name(il, "ffn_down.weight")), act);             // [n_embd, T]
}

NodeId Layers::output(NodeId x, bool all_logits) {
  // Generation needs only the last position: dropping the others before the norm skips most of the vocab matmul.
  // A one-token batch is its own last token (no copy; the decode step's final norm can then fold into the matvec).
  if (!all_logits && g_.node(x).shape.ne[1] > 1) x = g_.last_token("result_last", x);  // [n_embd, 1]
  x = g_.rms_norm("result_norm", x, weight("output_norm.weight"), c_.rms_eps);
  NodeId out = weight_opt("output.weight");  // [n_embd, n_vocab]
  if (out == kNoNode) out = weight("token_embd.weight");  // tied embeddings
  const NodeId logits = g_.mul_mat("result_output", out, x);  // [n_vocab, T or 1]
  g_.mark_output(logits);
  return logits;
}

}  // namespace model
