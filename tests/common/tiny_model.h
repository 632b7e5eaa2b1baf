// Tiny random models written with gguf::Writer (in memory), and an independent double-precision forward pass over
// them, written from the architecture descriptions rather than from model/: the oracle for features the shared
// reference files do not cover (rope frequency factors, linear rope scaling, attention biases on llama, odd shapes).
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"

namespace tiny {

struct Spec {
  std::string arch = "llama";
  int n_vocab = 40, n_embd = 16, n_layer = 2, n_head = 4, n_head_kv = 2, n_ff = 24, n_ctx_train = 64;
  int key_length = 0;           // 0: key absent (head_dim = n_embd / n_head)
  float rms_eps = 1e-5f;
  float freq_base = 0;          // 0: key absent (default 10000)
  float linear_scale = 0;       // 0: no rope.scaling keys
  bool rope_freqs = false;      // rope_freqs.weight
  bool qkv_bias = false;        // attn_{q,k,v}.bias
  bool qk_norm = false;         // attn_{q,k}_norm.weight
  bool tied = false;            // no output.weight
  uint32_t seed = 7;
  int head_dim() const { return key_length ? key_length : n_embd / n_head; }
};

// Tensor data (float) by name, plus the GGUF image built from it.
struct Built {
  Spec spec;
  std::map<std::string, std::vector<int64_t>> shapes;
  std::map<std::string, std::vector<float>> data;
  std::vector<uint8_t> bytes;
  std::unique_ptr<gguf::Writer> writer;
};

inline void add(Built& b, const std::string& name, std::vector<int64_t> ne, std::mt19937& rng, float scale,
                float offset = 0) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = offset + scale * dist(rng);
  b.shapes[name] = ne;
  b.data[name] = std::move(v);
}

// skip: tensor names to leave out; reshape: names whose shape is replaced (data resized to match).
inline std::unique_ptr<Built> build(const Spec& s, const std::vector<std::string>& skip = {},
                                    const std::map<std::string, std::vector<int64_t>>& reshape = {}) {
  auto b = std::make_unique<Built>();
  b->spec = s;
  std::mt19937 rng(s.seed);
  const int64_t E = s.n_embd, hd = s.head_dim(), F = s.n_ff, V = s.n_vocab;
  const int64_t nq = s.n_head * hd, nk = s.n_head_kv * hd;
  add(*b, "token_embd.weight", {E, V}, rng, 0.5f);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(*b, p + "attn_norm.weight", {E}, rng, 0.1f, 1.0f);
    add(*b, p + "attn_q.weight", {E, nq}, rng, 0.3f);
    add(*b, p + "attn_k.weight", {E, nk}, rng, 0.3f);
    add(*b, p + "attn_v.weight", {E, nk}, rng, 0.3f);
    if (s.qkv_bias) {
      add(*b, p + "attn_q.bias", {nq}, rng, 0.2f);
      add(*b, p + "attn_k.bias", {nk}, rng, 0.2f);
      add(*b, p + "attn_v.bias", {nk}, rng, 0.2f);
    }
    if (s.qk_norm) {
      add(*b, p + "attn_q_norm.weight", {hd}, rng, 0.1f, 1.0f);
      add(*b, p + "attn_k_norm.weight", {hd}, rng, 0.1f, 1.0f);
    }
    add(*b, p + "attn_output.weight", {nq, E}, rng, 0.3f);
    add(*b, p + "ffn_norm.weight", {E}, rng, 0.1f, 1.0f);
    add(*b, p + "ffn_gate.weight", {E, F}, rng, 0.3f);
    add(*b, p + "ffn_up.weight", {E, F}, rng, 0.3f);
    add(*b, p + "ffn_down.weight", {F, E}, rng, 0.3f);
  }
  add(*b, "output_norm.weight", {E}, rng, 0.1f, 1.0f);
  if (!s.tied) add(*b, "output.weight", {E, V}, rng, 0.5f);
  if (s.rope_freqs) {
    add(*b, "rope_freqs.weight", {hd / 2}, rng, 0.0f, 1.0f);
    for (size_t i = 0; i < b->data["rope_freqs.weight"].size(); ++i)
      b->data["rope_freqs.weight"][i] = 1.0f + 0.75f * float(i);
  }
  for (const auto& [name, ne] : reshape) {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    b->shapes[name] = ne;
    b->data[name].assign(static_cast<size_t>(n), 0.25f);
  }

  b->writer = std::make_unique<gguf::Writer>();
  gguf::Writer& w = *b->writer;
  const std::string a = s.arch + ".";
  w.set_str("general.architecture", s.arch);
  w.set_u32(a + "context_length", static_cast<uint32_t>(s.n_ctx_train));
  w.set_u32(a + "embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32(a + "attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  if (s.key_length) w.set_u32(a + "attention.key_length", static_cast<uint32_t>(s.key_length));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  if (s.freq_base > 0) w.set_f32(a + "rope.freq_base", s.freq_base);
  if (s.linear_scale > 0) {
    w.set_str(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", s.linear_scale);
  }
  std::vector<std::string> tokens;
  for (int i = 0; i < s.n_vocab; ++i) {  // appended: GCC 12's -Wrestrict misfires on "t" + std::to_string(i)
    tokens.emplace_back("t");
    tokens.back() += std::to_string(i);
  }
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  for (const auto& [name, ne] : b->shapes) {
    bool skipped = false;
    for (const std::string& k : skip) skipped = skipped || k == name;
    if (!skipped) w.add_tensor(name, quant::Type::F32, ne, b->data[name].data());
  }
  b->bytes = w.to_bytes();
  return b;
}

inline std::shared_ptr<const model::Model> load(const Built& b) {
  return model::Model::from_file(gguf::File::parse(b.bytes.data(), b.bytes.size(), "tiny-" + b.spec.arch + ".gguf"));
}

// The model together with the image it was parsed from (File::parse does not copy): safe for temporaries.
inline std::shared_ptr<const model::Model> load_owned(std::unique_ptr<Built> b) {
  struct Both {
    std::unique_ptr<Built> built;
    std::shared_ptr<const model::Model> model;
  };
  auto both = std::make_shared<Both>();
  both->built = std::move(b);
  both->model = load(*both->built);
  return std::shared_ptr<const model::Model>(both, both->model.get());
}

// ---- the independent forward pass (double precision), all positions of one sequence ----

using Mat = std::vector<double>;  // row-major as the file stores it: row r of a [K, N] weight is data[r*K .. r*K+K)

inline void rms_norm(double* x, int n, const float* w, double eps) {
  double ss = 0;
  for (int i = 0; i < n; ++i) ss += x[i] * x[i];
  const double k = 1.0 / std::sqrt(ss / n + eps);
  for (int i = 0; i < n; ++i) x[i] = x[i] * k * w[i];
}

// y[N] = W[K,N]^T x[K] (+ b)
inline std::vector<double> matvec(const std::vector<float>& w, int K, int N, const std::vector<double>& x,
                                  const std::vector<float>* bias = nullptr) {
  std::vector<double> y(static_cast<size_t>(N));
  for (int n = 0; n < N; ++n) {
    double acc = 0;
    for (int k = 0; k < K; ++k) acc += double(w[size_t(n) * K + k]) * x[size_t(k)];
    y[size_t(n)] = acc + (bias ? double((*bias)[size_t(n)]) : 0.0);
  }
  return y;
}

// Rotates one head in place. neox: pairs (i, i + d/2); else (2i, 2i+1). theta_i = pos*scale*base^(-2i/d) / factor_i.
inline void rope(double* h, int d, int pos, bool neox, double base, double scale, const float* factors) {
  for (int i = 0; i < d / 2; ++i) {
    double theta = pos * scale * std::pow(base, -2.0 * i / d);
    if (factors) theta /= factors[i];
    const double c = std::cos(theta), s = std::sin(theta);
    double& a = neox ? h[i] : h[2 * i];
    double& b = neox ? h[i + d / 2] : h[2 * i + 1];
    const double x0 = a, x1 = b;
    a = x0 * c - x1 * s;
    b = x0 * s + x1 * c;
  }
}

// Logits [T][V] for tokens at positions 0..T-1. store_kv, when given, is applied to each token's K (after rope)
// and V rows, every KV head together, before attention reads them: what a KV cache that rounds its values holds.
using KvStore = std::function<void(std::vector<double>& row)>;
inline std::vector<std::vector<double>> forward(const Built& b, const std::vector<int32_t>& tokens,
                                                const KvStore& store_kv = {}) {
  const Spec& s = b.spec;
  const int E = s.n_embd, hd = s.head_dim(), F = s.n_ff, V = s.n_vocab, H = s.n_head, Hkv = s.n_head_kv;
  const bool neox = s.arch != "llama";
  const double base = s.freq_base > 0 ? s.freq_base : 10000.0, scale = s.linear_scale > 0 ? 1.0 / s.linear_scale : 1.0;
  const float* factors = s.rope_freqs ? b.data.at("rope_freqs.weight").data() : nullptr;
  auto W = [&](const std::string& n) -> const std::vector<float>& { return b.data.at(n); };
  auto opt = [&](const std::string& n) -> const std::vector<float>* {
    auto it = b.data.find(n);
    return it == b.data.end() ? nullptr : &it->second;
  };
  const int T = static_cast<int>(tokens.size());
  std::vector<std::vector<double>> x(static_cast<size_t>(T), std::vector<double>(static_cast<size_t>(E)));
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < E; ++i) x[size_t(t)][size_t(i)] = W("token_embd.weight")[size_t(tokens[size_t(t)]) * E + i];
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    std::vector<std::vector<double>> q(static_cast<size_t>(T)), k(static_cast<size_t>(T)), v(static_cast<size_t>(T));
    for (int t = 0; t < T; ++t) {
      std::vector<double> h = x[size_t(t)];
      rms_norm(h.data(), E, W(p + "attn_norm.weight").data(), s.rms_eps);
      q[size_t(t)] = matvec(W(p + "attn_q.weight"), E, H * hd, h, opt(p + "attn_q.bias"));
      k[size_t(t)] = matvec(W(p + "attn_k.weight"), E, Hkv * hd, h, opt(p + "attn_k.bias"));
      v[size_t(t)] = matvec(W(p + "attn_v.weight"), E, Hkv * hd, h, opt(p + "attn_v.bias"));
      for (int hh = 0; hh < H; ++hh) {
        if (s.qk_norm) rms_norm(&q[size_t(t)][size_t(hh * hd)], hd, W(p + "attn_q_norm.weight").data(), s.rms_eps);
        rope(&q[size_t(t)][size_t(hh * hd)], hd, t, neox, base, scale, factors);
      }
      for (int hh = 0; hh < Hkv; ++hh) {
        if (s.qk_norm) rms_norm(&k[size_t(t)][size_t(hh * hd)], hd, W(p + "attn_k_norm.weight").data(), s.rms_eps);
        rope(&k[size_t(t)][size_t(hh * hd)], hd, t, neox, base, scale, factors);
      }
      if (store_kv) {
        store_kv(k[size_t(t)]);
        store_kv(v[size_t(t)]);
      }
    }
    for (int t = 0; t < T; ++t) {
      std::vector<double> att(static_cast<size_t>(H * hd), 0.0);
      for (int hh = 0; hh < H; ++hh) {
        const int kvh = hh / (H / Hkv);
        std::vector<double> sc(static_cast<size_t>(t + 1));
        double mx = -1e300;
        for (int j = 0; j <= t; ++j) {
          double d = 0;
          for (int i = 0; i < hd; ++i) d += q[size_t(t)][size_t(hh * hd + i)] * k[size_t(j)][size_t(kvh * hd + i)];
          sc[size_t(j)] = d / std::sqrt(double(hd));
          mx = std::max(mx, sc[size_t(j)]);
        }
        double sum = 0;
        for (double& e : sc) sum += (e = std::exp(e - mx));
        for (int j = 0; j <= t; ++j)
          for (int i = 0; i < hd; ++i)
            att[size_t(hh * hd + i)] += sc[size_t(j)] / sum * v[size_t(j)][size_t(kvh * hd + i)];
      }
      const std::vector<double> o = matvec(W(p + "attn_output.weight"), H * hd, E, att, opt(p + "attn_output.bias"));
      for (int i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += o[size_t(i)];
      std::vector<double> h = x[size_t(t)];
      rms_norm(h.data(), E, W(p + "ffn_norm.weight").data(), s.rms_eps);
      const std::vector<double> g = matvec(W(p + "ffn_gate.weight"), E, F, h);
      const std::vector<double> u = matvec(W(p + "ffn_up.weight"), E, F, h);
      std::vector<double> a(static_cast<size_t>(F));
      for (int i = 0; i < F; ++i) a[size_t(i)] = g[size_t(i)] / (1.0 + std::exp(-g[size_t(i)])) * u[size_t(i)];
      const std::vector<double> d = matvec(W(p + "ffn_down.weight"), F, E, a);
      for (int i = 0; i < E; ++i) x[size_t(t)][size_t(i)] += d[size_t(i)];
    }
  }
  std::vector<std::vector<double>> logits;
  for (int t = 0; t < T; ++t) {
    std::vector<double> h = x[size_t(t)];
    rms_norm(h.data(), E, W("output_norm.weight").data(), s.rms_eps);
    logits.push_back(matvec(s.tied ? W("token_embd.weight") : W("output.weight"), E, V, h));
  }
  return logits;
}

}  // namespace tiny
