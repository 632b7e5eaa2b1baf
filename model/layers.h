// Shared building blocks of the decoder-only transformer graphs: embedding lookup, RMSNorm, self-attention with
// RoPE and GQA (separate or fused q/k/v, sliding windows, sinks), the gated feed-forward block (SwiGLU or GeGLU,
// separate or fused gate/up), its mixture-of-experts form and the output head. Architecture functions
// (model/llama.cpp, ...) compose them top to bottom; every node gets the model's own name ("blk.3.ffn_gate"). What
// follows from the Config (fused tensors, the rope and window of a layer, softcapping, expert routing) is decided
// here, so the architecture functions only say what differs.
#pragma once
#include <string>
#include <string_view>
#include <unordered_map>

#include "graph/ir.h"
#include "model/build_graph.h"
#include "model/config.h"
#include "model/weights.h"

namespace model {

// What varies between architectures inside the attention block. (Biases are used when the file has them;
// sinks when the Config says the architecture has them.)
struct AttentionOptions {
  bool qk_norm = false;  // qwen3, gemma3: RMSNorm over each q and k head (attn_{q,k}_norm) before RoPE
};

// What varies between architectures inside the mixture-of-experts block: the experts' activation. The routing
// weights follow Config::moe_gating; router and expert biases are used when the file has them.
enum class ExpertActivation : uint8_t {
  SwiGlu,     // silu(gate) * up (qwen3moe)
  SwiGluOai,  // gpt-oss: gate clamped above at 7, up to [-7, 7], gate * sigmoid(1.702 gate) * (up + 1)
};

// The gate's activation in the feed-forward block: down(act(gate(x)) * up(x)).
enum class Activation : uint8_t {
  Silu,      // SwiGLU (llama, qwen, phi3)
  GeluTanh,  // GeGLU with the tanh-approximated GELU (gemma)
};

// One graph under construction, with the inputs every architecture shares.
class Layers {
 public:
  // Adds the Input nodes "tokens" and "positions" ([n_tokens] each), for a paged batch also "kv_seq",
  // "block_table" and "output_rows", and sets g.kv for the batch's cache. Throws std::invalid_argument for a shape
  // build_graph refuses.
  Layers(const Config& c, const Weights& w, const BatchShape& b);

  // The weight node of a tensor (created once, reused: a tied output matrix is the same node as token_embd).
  graph::NodeId weight(std::string_view tensor);
  graph::NodeId weight_opt(std::string_view tensor);  // kNoNode when the file lacks this optional tensor
  // Rows [row0, row0 + n) of a file tensor (elements of a 1-D one) as a weight node of their own, with the given
  // role: the same bytes, read as the unfused tensor would be. kNoNode when the file lacks the tensor.
  graph::NodeId weight_rows(std::string_view tensor, int64_t row0, int64_t n, graph::WeightRole role);

  graph::NodeId embed();                                                   // "inp_embd" [n_embd, T]
  graph::NodeId scale(const char* name, graph::NodeId x, float s);         // x * s, a model-wide node
  graph::NodeId norm(int il, const char* what, graph::NodeId x);           // "blk.N.<what>" times <what>.weight
  // q/k/v (three row ranges of one tensor when the file fuses them), optional per-head norms, the layer's
  // rope, attention within the layer's window, the o projection.
  graph::NodeId attention(int il, graph::NodeId x, const AttentionOptions& o);  // "blk.N.attn_output" [n_embd, T]
  // down(act(gate) * up); gate and up are the two row halves of one tensor when the file fuses them (phi3).
  graph::NodeId ffn(int il, graph::NodeId x, Activation act = Activation::Silu);  // "blk.N.ffn_down" [n_embd, T]
  // The router (ffn_gate_inp) picks Config::n_expert_used experts per token and weighs them; each chosen expert is
  // down(act(gate x, up x)) over the 3-D ffn_{gate,up,down}_exps; the outputs are summed with those weights.
  graph::NodeId moe_ffn(int il, graph::NodeId x, ExpertActivation act);  // "blk.N.ffn_moe_out" [n_embd, T]
  graph::NodeId add(int il, const char* what, graph::NodeId a, graph::NodeId b);
  // The tokens whose logits are wanted (all, the last, or a paged batch's output rows), output_norm, then
  // output.weight (or token_embd when the file ties them), then the final softcap when the Config has one.
  graph::NodeId output(graph::NodeId x);                                   // "result_output" [n_vocab, T, 1 or n]

  graph::Graph take() { return std::move(g_); }

  static std::string name(int il, std::string_view what) { return "blk." + std::to_string(il) + "." + std::string(what); }

 private:
  const Config& c_;
  const Weights& w_;
  graph::Graph g_;
  BatchShape b_;
  graph::NodeId tokens_ = graph::kNoNode;     // I32 [T]
  graph::NodeId positions_ = graph::kNoNode;  // I32 [T]
  graph::PagedKv paged_;                      // paged batches: kv_seq I32 [T], block_table I32 [max_blocks, n_seq]
  graph::NodeId output_rows_ = graph::kNoNode;  // paged batches without all_logits: I32 [n_outputs]
  std::unordered_map<std::string, graph::NodeId> weights_;

  struct Qkv {
    graph::NodeId q, k, v;  // [head_dim, n_head, T], [head_dim, n_head_kv, T], [head_dim_v, n_head_kv, T]
  };
  Qkv qkv(int il, graph::NodeId x);
};

}  // namespace model
