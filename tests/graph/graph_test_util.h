// Shared helpers of the graph tests: F32 weights with stable addresses, random fills, and a small llama-like model
// (embedding, per layer norm/q/k/v/rope/attention/o/residual/SwiGLU FFN, output head) built directly on the IR.
#pragma once
#include <cmath>
#include <cstdint>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace graph_test {

// Owns weight data for Weight nodes; deque so earlier tensors never move when more are added.
class WeightStore {
 public:
  graph::NodeId add(graph::Graph& g, const std::string& name, std::vector<float> data, graph::Shape shape) {
    data_.push_back(std::move(data));
    const auto& d = data_.back();
    graph::WeightParams p;
    p.tensor = name + ".weight";
    p.type = quant::Type::F32;
    p.host = d.data();
    p.nbytes = d.size() * sizeof(float);
    return g.weight(name, p, shape);
  }
  // Raw bytes (e.g. a quantized tensor); the caller gives the type and shape.
  graph::NodeId add_raw(graph::Graph& g, const std::string& name, std::vector<uint8_t> bytes, quant::Type type,
                        graph::Shape shape) {
    raw_.push_back(std::move(bytes));
    graph::WeightParams p;
    p.tensor = name + ".weight";
    p.type = type;
    p.host = raw_.back().data();
    p.nbytes = raw_.back().size();
    return g.weight(name, p, shape);
  }

 private:
  std::deque<std::vector<float>> data_;
  std::deque<std::vector<uint8_t>> raw_;
};

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

struct TinyConfig {
  int n_embd = 24;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 6;
  int n_ff = 37;
  int n_layer = 2;
  int n_vocab = 41;
  int n_ctx = 16;
  graph::RopeMode rope_mode = graph::RopeMode::Normal;
  bool qkv_bias = false;
  float eps = 1e-5f;
  float rope_base = 10000.0f;
};

// Weight values of a tiny model, in the layouts the graph uses ([K, N] = N rows of K).
struct TinyWeights {
  std::vector<float> tok_embd;                          // [n_embd, n_vocab]
  std::vector<std::vector<float>> attn_norm, wq, wk, wv, wo, bq, bk, bv, ffn_norm, gate, up, down;
  std::vector<float> out_norm;                          // [n_embd]
  std::vector<float> output;                            // [n_embd, n_vocab]

  TinyWeights(const TinyConfig& c, uint32_t seed) {
    uint32_t s = seed;
    const auto e = static_cast<size_t>(c.n_embd);
    const auto q_dim = static_cast<size_t>(c.n_head * c.head_dim), kv_dim = static_cast<size_t>(c.n_head_kv * c.head_dim);
    const auto ff = static_cast<size_t>(c.n_ff), vocab = static_cast<size_t>(c.n_vocab);
    tok_embd = random_vec(e * vocab, ++s);
    for (int l = 0; l < c.n_layer; ++l) {
      attn_norm.push_back(random_vec(e, ++s, 0.5f, 1.5f));
      wq.push_back(random_vec(e * q_dim, ++s, -0.3f, 0.3f));
      wk.push_back(random_vec(e * kv_dim, ++s, -0.3f, 0.3f));
      wv.push_back(random_vec(e * kv_dim, ++s, -0.3f, 0.3f));
      bq.push_back(random_vec(q_dim, ++s, -0.1f, 0.1f));
      bk.push_back(random_vec(kv_dim, ++s, -0.1f, 0.1f));
      bv.push_back(random_vec(kv_dim, ++s, -0.1f, 0.1f));
      wo.push_back(random_vec(q_dim * e, ++s, -0.3f, 0.3f));
      ffn_norm.push_back(random_vec(e, ++s, 0.5f, 1.5f));
      gate.push_back(random_vec(e * ff, ++s, -0.3f, 0.3f));
      up.push_back(random_vec(e * ff, ++s, -0.3f, 0.3f));
      down.push_back(random_vec(ff * e, ++s, -0.3f, 0.3f));
    }
    out_norm = random_vec(e, ++s, 0.5f, 1.5f);
    output = random_vec(e * vocab, ++s, -0.5f, 0.5f);
  }
};

struct TinyGraph {
  graph::Graph g;
  WeightStore store;
  graph::NodeId logits = graph::kNoNode;       // [n_vocab, T]
  graph::NodeId last_logits = graph::kNoNode;  // [n_vocab, 1]
  graph::NodeId next_token = graph::kNoNode;   // I32 [1]
};

// Builds the forward pass for a batch of n_tokens (the weights are copied into the graph's store).
inline void build_tiny(TinyGraph& tg, const TinyConfig& c, const TinyWeights& w, int n_tokens) {
  using graph::Shape;
  graph::Graph& g = tg.g;
  WeightStore& ws = tg.store;
  const int64_t e = c.n_embd, t = n_tokens, hd = c.head_dim;
  g.n_tokens = n_tokens;
  g.kv = graph::KvCacheSpec{c.n_layer, c.n_ctx, c.n_head_kv, c.head_dim, c.head_dim};
  const auto tokens = g.input("tokens", graph::InputParams::Kind::Tokens, t);
  const auto pos = g.input("positions", graph::InputParams::Kind::Positions, t);
  const auto embd = ws.add(g, "token_embd", w.tok_embd, Shape{{e, c.n_vocab, 1, 1}});
  auto x = g.get_rows("inp_embd", embd, tokens);  // [n_embd, T]
  graph::RopeParams rp;
  rp.mode = c.rope_mode;
  rp.n_rot = c.head_dim;
  rp.freq_base = c.rope_base;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    const auto lu = static_cast<size_t>(l);
    const int64_t q_dim = c.n_head * hd, kv_dim = c.n_head_kv * hd;
    auto h = g.rms_norm(b + "attn_norm", x, ws.add(g, b + "attn_norm", w.attn_norm[lu], Shape{{e, 1, 1, 1}}), c.eps);
    auto bias = [&](const char* n, const std::vector<float>& v, int64_t len) {
      return c.qkv_bias ? ws.add(g, b + n, v, Shape{{len, 1, 1, 1}}) : graph::kNoNode;
    };
    auto q = g.mul_mat(b + "attn_q", ws.add(g, b + "attn_q", w.wq[lu], Shape{{e, q_dim, 1, 1}}), h,
                       bias("attn_q.bias", w.bq[lu], q_dim));  // [q_dim, T]
    auto k = g.mul_mat(b + "attn_k", ws.add(g, b + "attn_k", w.wk[lu], Shape{{e, kv_dim, 1, 1}}), h,
                       bias("attn_k.bias", w.bk[lu], kv_dim));
    auto v = g.mul_mat(b + "attn_v", ws.add(g, b + "attn_v", w.wv[lu], Shape{{e, kv_dim, 1, 1}}), h,
                       bias("attn_v.bias", w.bv[lu], kv_dim));
    q = g.reshape(b + "q_heads", q, Shape{{hd, c.n_head, t, 1}});
    k = g.reshape(b + "k_heads", k, Shape{{hd, c.n_head_kv, t, 1}});
    v = g.reshape(b + "v_heads", v, Shape{{hd, c.n_head_kv, t, 1}});
    q = g.rope(b + "q_rope", q, pos, rp);
    k = g.rope(b + "k_rope", k, pos, rp);
    graph::AttentionParams ap{l, c.n_head, c.n_head_kv, c.head_dim, c.head_dim, 1.0f / std::sqrt(float(hd))};
    auto att = g.attention(b + "attn", q, k, v, pos, ap);  // [q_dim, T]
    auto o = g.mul_mat(b + "attn_out", ws.add(g, b + "attn_output", w.wo[lu], Shape{{q_dim, e, 1, 1}}), att);
    x = g.add(b + "attn_residual", x, o);
    h = g.rms_norm(b + "ffn_norm", x, ws.add(g, b + "ffn_norm", w.ffn_norm[lu], Shape{{e, 1, 1, 1}}), c.eps);
    auto gt = g.mul_mat(b + "ffn_gate", ws.add(g, b + "ffn_gate", w.gate[lu], Shape{{e, c.n_ff, 1, 1}}), h);
    auto up = g.mul_mat(b + "ffn_up", ws.add(g, b + "ffn_up", w.up[lu], Shape{{e, c.n_ff, 1, 1}}), h);
    auto act = g.swiglu(b + "ffn_swiglu", gt, up);
    auto dn = g.mul_mat(b + "ffn_down", ws.add(g, b + "ffn_down", w.down[lu], Shape{{c.n_ff, e, 1, 1}}), act);
    x = g.add(b + "ffn_residual", x, dn);
  }
  x = g.rms_norm("result_norm", x, ws.add(g, "output_norm", w.out_norm, Shape{{e, 1, 1, 1}}), c.eps);
  tg.logits = g.mul_mat("result_output", ws.add(g, "output", w.output, Shape{{e, c.n_vocab, 1, 1}}), x);
  tg.last_logits = g.last_token("result_last", tg.logits);
  tg.next_token = g.argmax("result_argmax", tg.last_logits);
  g.mark_output(tg.logits);
  g.mark_output(tg.last_logits);
  g.mark_output(tg.next_token);
}

}  // namespace graph_test
