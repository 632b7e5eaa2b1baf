// The transformer blocks shared by the llama-family graph builders (see layers.h).
#include "model/layers.h"

#include <stdexcept>

#include "quant/types.h"

namespace model {

using graph::NodeId;
using graph::kNoNode;

namespace {

void check_shape(const BatchShape& b) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("build_graph: " + what); };
  if (b.n_tokens <= 0) fail("n_tokens must be positive, got " + std::to_string(b.n_tokens));
  if (b.n_ctx <= 0) fail("n_ctx must be positive, got " + std::to_string(b.n_ctx));
  if (b.block_size < 0) fail("block_size must not be negative, got " + std::to_string(b.block_size));
  if (b.block_size == 0) return;
  if ((b.block_size & (b.block_size - 1)) != 0 || b.n_ctx % b.block_size != 0)
    fail("block_size " + std::to_string(b.block_size) + " must be a power of two dividing n_ctx " +
         std::to_string(b.n_ctx));
  if (b.max_blocks <= 0 || b.n_seq <= 0)
    fail("a paged batch needs max_blocks and n_seq positive, got " + std::to_string(b.max_blocks) + " and " +
         std::to_string(b.n_seq));
  if (!b.all_logits && b.n_outputs <= 0)
    fail("a paged batch needs n_outputs positive, got " + std::to_string(b.n_outputs));
}

}  // namespace

Layers::Layers(const Config& c, const Weights& w, const BatchShape& b) : c_(c), w_(w), b_(b) {
  check_shape(b);
  using Kind = graph::InputParams::Kind;
  g_.n_tokens = b.n_tokens;
  g_.kv = graph::KvCacheSpec{c.n_layer, b.n_ctx, c.n_head_kv, c.head_dim, c.head_dim_v};
  g_.kv.block_size = b.block_size;
  g_.kv.max_blocks = b.max_blocks;
  g_.kv.n_seq = b.n_seq;
  tokens_ = g_.input("tokens", Kind::Tokens, b.n_tokens);           // I32 [T]
  positions_ = g_.input("positions", Kind::Positions, b.n_tokens);  // I32 [T]
  if (g_.kv.paged()) {
    paged_.kv_seq = g_.input("kv_seq", Kind::KvSeq, b.n_tokens);                             // I32 [T]
    paged_.block_table = g_.input("block_table", Kind::BlockTable, b.max_blocks, b.n_seq);  // I32 [max_blocks, n_seq]
    if (!b.all_logits) output_rows_ = g_.input("output_rows", Kind::OutputRows, b.n_outputs);  // I32 [n_outputs]
  }
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

NodeId Layers::weight_rows(std::string_view tensor, int64_t row0, int64_t n, graph::WeightRole role) {
  const std::string key = std::string(tensor) + "[" + std::to_string(row0) + ":" + std::to_string(row0 + n) + "]";
  if (auto it = weights_.find(key); it != weights_.end()) return it->second;
  const WeightInfo* info = w_.find(tensor);
  if (!info) return kNoNode;
  graph::WeightParams p = info->params;
  graph::Shape shape = info->shape;
  const bool vec = shape.ne[1] == 1 && shape.ne[2] == 1;  // a bias: its elements
  const int64_t rows = vec ? shape.ne[0] : shape.ne[1];
  if (row0 < 0 || n <= 0 || row0 + n > rows || shape.ne[2] != 1 || shape.ne[3] != 1)
    throw std::invalid_argument("weight '" + key + "': rows outside the tensor " + graph::to_string(shape));
  const uint64_t row = vec ? quant::row_bytes(p.type, 1) : quant::row_bytes(p.type, shape.ne[0]);
  if (vec && quant::traits(p.type).block_elems != 1)
    throw std::invalid_argument("weight '" + key + "': a quantized vector has no element ranges");
  const uint64_t skip = uint64_t(row0) * row;
  p.tensor = key, p.role = role;
  p.host = static_cast<const uint8_t*>(p.host) + skip;
  p.arena_offset += skip, p.tensor_offset += skip, p.nbytes = uint64_t(n) * row;
  (vec ? shape.ne[0] : shape.ne[1]) = n;
  const NodeId id = g_.weight(key, p, shape);
  weights_.emplace(key, id);
  return id;
}

NodeId Layers::embed() {
  return g_.get_rows("inp_embd", weight("token_embd.weight"), tokens_);  // [n_embd, T]
}

NodeId Layers::scale(const char* name, NodeId x, float s) { return g_.scale(name, x, s); }

NodeId Layers::norm(int il, const char* what, NodeId x) {
  return g_.rms_norm(name(il, what), x, weight(name(il, what) + ".weight"), c_.rms_eps);
}

NodeId Layers::add(int il, const char* what, NodeId a, NodeId b) { return g_.add(name(il, what), a, b); }

Layers::Qkv Layers::qkv(int il, NodeId x) {
  const int64_t T = b_.n_tokens;
  auto proj = [&](const char* what) {
    return g_.mul_mat(name(il, what), weight(name(il, what) + ".weight"), x, weight_opt(name(il, what) + ".bias"));
  };
  NodeId q, k, v;
  if (c_.fused_qkv) {
    // The fused tensor's three row ranges as the three products they are: every executor then reads them as it
    // reads separate q/k/v (one launch for the three, the rope epilogue, three GEMMs without copies of parts).
    const std::string w = name(il, "attn_qkv.weight"), b = name(il, "attn_qkv.bias");
    w_.get(w);  // throws ModelError naming the tensor when the file lacks it
    const int64_t nq = c_.n_q(), nk = c_.n_k(), nv = c_.n_v();
    using R = graph::WeightRole;
    q = g_.mul_mat(name(il, "attn_q"), weight_rows(w, 0, nq, R::AttnQ), x, weight_rows(b, 0, nq, R::AttnQBias));
    k = g_.mul_mat(name(il, "attn_k"), weight_rows(w, nq, nk, R::AttnK), x, weight_rows(b, nq, nk, R::AttnKBias));
    v = g_.mul_mat(name(il, "attn_v"), weight_rows(w, nq + nk, nv, R::AttnV), x,
                   weight_rows(b, nq + nk, nv, R::AttnVBias));
  } else {
    q = proj("attn_q");  // [n_head * head_dim, T]
    k = proj("attn_k");  // [n_head_kv * head_dim, T]
    v = proj("attn_v");  // [n_head_kv * head_dim_v, T]
  }
  return {g_.reshape(name(il, "attn_q_heads"), q, graph::Shape{{c_.head_dim, c_.n_head, T, 1}}),
          g_.reshape(name(il, "attn_k_heads"), k, graph::Shape{{c_.head_dim, c_.n_head_kv, T, 1}}),
          g_.reshape(name(il, "attn_v_heads"), v, graph::Shape{{c_.head_dim_v, c_.n_head_kv, T, 1}})};
}

NodeId Layers::attention(int il, NodeId x, const AttentionOptions& o) {
  auto [q, k, v] = qkv(il, x);
  if (o.qk_norm) {
    // RMSNorm over each head's head_dim values, one shared weight [head_dim] for all heads.
    q = norm(il, "attn_q_norm", q);
    k = norm(il, "attn_k_norm", k);
  }
  const graph::RopeParams rope = c_.layer_rope(il);  // base and scale by layer kind, the file's scaling
  // LongRoPE picks its factors by the context one sequence may reach.
  const std::string factors = c_.rope_factors_tensor(g_.kv.seq_capacity());
  const NodeId freq_factors = factors.empty() ? kNoNode : weight_opt(factors);  // [n_rot / 2], when the file has them
  q = g_.rope(name(il, "attn_q_rope"), q, positions_, rope, freq_factors);
  k = g_.rope(name(il, "attn_k_rope"), k, positions_, rope, freq_factors);

  graph::AttentionParams ap{il, c_.n_head, c_.n_head_kv, c_.head_dim, c_.head_dim_v, c_.attn_scale};
  if (c_.is_swa(il)) ap.window = c_.n_swa;
  const NodeId sinks = c_.attn_sinks ? weight(name(il, "attn_sinks.weight")) : kNoNode;  // [n_head]
  const NodeId kqv =
      g_.attention(name(il, "attn_kqv"), q, k, v, positions_, ap, paged_, sinks);  // [n_head * head_dim_v, T]
  return g_.mul_mat(name(il, "attn_output"), weight(name(il, "attn_output.weight")), kqv,
                    weight_opt(name(il, "attn_output.bias")));  // [n_embd, T]
}

NodeId Layers::ffn(int il, NodeId x, Activation act) {
  NodeId gate, up;
  if (c_.fused_gate_up) {
    // phi3's ffn_up holds gate (first n_ff rows) and up: its two row halves as the two products they are.
    const std::string w = name(il, "ffn_up.weight");
    w_.get(w);  // throws ModelError naming the tensor when the file lacks it
    gate = g_.mul_mat(name(il, "ffn_gate"), weight_rows(w, 0, c_.n_ff, graph::WeightRole::FfnGate), x);
    up = g_.mul_mat(name(il, "ffn_up"), weight_rows(w, c_.n_ff, c_.n_ff, graph::WeightRole::FfnUp), x);
  } else {
    gate = g_.mul_mat(name(il, "ffn_gate"), weight(name(il, "ffn_gate.weight")), x);  // [n_ff, T]
    up = g_.mul_mat(name(il, "ffn_up"), weight(name(il, "ffn_up.weight")), x);        // [n_ff, T]
  }
  const NodeId a = act == Activation::Silu ? g_.swiglu(name(il, "ffn_swiglu"), gate, up)
                                           : g_.geglu(name(il, "ffn_geglu"), gate, up);  // [n_ff, T]
  return g_.mul_mat(name(il, "ffn_down"), weight(name(il, "ffn_down.weight")), a);       // [n_embd, T]
}

NodeId Layers::moe_ffn(int il, NodeId x, ExpertActivation act) {
  const int64_t T = b_.n_tokens;
  const int32_t k = c_.n_expert_used;
  auto w = [&](const char* what) { return weight(name(il, what) + ".weight"); };
  auto b = [&](const char* what) { return weight_opt(name(il, what) + ".bias"); };
  const NodeId logits =
      g_.mul_mat(name(il, "ffn_moe_logits"), w("ffn_gate_inp"), x, b("ffn_gate_inp"));  // [n_expert, T]
  NodeId ids = kNoNode, weights = kNoNode;  // I32 [k, T], [k, T]
  switch (c_.moe_gating) {
    case Config::MoeGating::SoftmaxTopKNorm: {
      // Selected by probability (the same order as by logit, except where rounding makes two probabilities equal:
      // then index order, as llama.cpp sees it).
      const NodeId probs = g_.softmax(name(il, "ffn_moe_probs"), logits);  // [n_expert, T]
      ids = g_.top_k(name(il, "ffn_moe_topk"), probs, k);
      weights = g_.moe_weights(name(il, "ffn_moe_weights"), probs, ids, {.softmax = false, .normalize = true});
      break;
    }
    case Config::MoeGating::TopKSoftmax:
      ids = g_.top_k(name(il, "ffn_moe_topk"), logits, k);
      weights = g_.moe_weights(name(il, "ffn_moe_weights"), logits, ids, {.softmax = true, .normalize = false});
      break;
  }
  // Every chosen expert of a token reads the same input: one slot, shared by the k.
  const NodeId xe = g_.reshape(name(il, "ffn_moe_inp"), x, graph::Shape{{c_.n_embd, 1, T, 1}});  // [n_embd, 1, T]
  const NodeId up =
      g_.mul_mat_id(name(il, "ffn_moe_up"), w("ffn_up_exps"), xe, ids, b("ffn_up_exps"));  // [n_ff_exp, k, T]
  const NodeId gate =
      g_.mul_mat_id(name(il, "ffn_moe_gate"), w("ffn_gate_exps"), xe, ids, b("ffn_gate_exps"));  // [n_ff_exp, k, T]
  const NodeId h = act == ExpertActivation::SwiGlu  // [n_ff_exp, k, T]
                       ? g_.swiglu(name(il, "ffn_moe_swiglu"), gate, up)
                       : g_.swiglu_oai(name(il, "ffn_moe_swiglu_oai"), gate, up, graph::SwiGluOaiParams{});
  const NodeId down =
      g_.mul_mat_id(name(il, "ffn_moe_down"), w("ffn_down_exps"), h, ids, b("ffn_down_exps"));  // [n_embd, k, T]
  return g_.weighted_sum(name(il, "ffn_moe_out"), down, weights);  // [n_embd, T]
}

NodeId Layers::output(NodeId x) {
  // Generation needs only some positions: dropping the others before the norm skips most of the vocab matmul.
  // A one-token batch is its own last token (no copy; the decode step's final norm can then fold into the matvec).
  // So is a one-token paged batch: its one output row can only be row 0 (check_paged_batch), and leaving the gather
  // out lets a served stream's step end as the unpaged decode step does.
  if (output_rows_ != kNoNode && !(b_.n_tokens == 1 && b_.n_outputs == 1)) {
    x = g_.gather("result_rows", x, output_rows_);  // [n_embd, n_outputs]
  } else if (!b_.all_logits && g_.node(x).shape.ne[1] > 1) {
    x = g_.last_token("result_last", x);  // [n_embd, 1]
  }
  x = g_.rms_norm("result_norm", x, weight("output_norm.weight"), c_.rms_eps);
  NodeId out = weight_opt("output.weight");  // [n_embd, n_vocab]
  if (out == kNoNode) out = weight("token_embd.weight");  // tied embeddings
  NodeId logits;
  if (c_.final_logit_softcap > 0.0f) {
    logits = g_.mul_mat("result_output_uncapped", out, x);                           // [n_vocab, T or 1]
    logits = g_.softcap("result_output", logits, c_.final_logit_softcap);            // [n_vocab, T or 1]
  } else {
    logits = g_.mul_mat("result_output", out, x);                                    // [n_vocab, T or 1]
  }
  g_.mark_output(logits);
  // A paged batch's greedy sequences need only this: ids leave the device instead of whole logits rows.
  if (output_rows_ != kNoNode) g_.mark_output(g_.argmax("result_argmax", logits));  // I32 [n_outputs]
  return logits;
}

}  // namespace model
