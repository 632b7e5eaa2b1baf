// Which tensors each architecture needs, with their shapes, and the single weight arena they are laid out in.
// All checks happen here, once, so that graph builders and executors can trust every shape they are given.
#include "model/weights.h"

#include <algorithm>

#include "gguf/gguf.h"

namespace model {

bool is_supported_weight_type(quant::Type t) {
  switch (t) {
    case quant::Type::F32: case quant::Type::F16: case quant::Type::BF16:
    case quant::Type::Q4_0: case quant::Type::Q4_1: case quant::Type::Q5_0: case quant::Type::Q5_1:
    case quant::Type::Q8_0:
    case quant::Type::Q2_K: case quant::Type::Q3_K: case quant::Type::Q4_K: case quant::Type::Q5_K:
    case quant::Type::Q6_K:
    case quant::Type::MXFP4:  // gpt-oss's experts as distributed (the CPU reference only: the CUDA path refuses it)
      return true;
    case quant::Type::Q8_1: case quant::Type::Q8_K:  // activation formats, never stored as weights
      return false;
  }
  return false;
}

std::vector<WeightSpec> weight_specs(const Config& c) {
  using R = graph::WeightRole;
  const int64_t E = c.n_embd, V = c.n_vocab, F = c.n_ff;
  const bool gemma = c.arch == Arch::Gemma3;
  std::vector<WeightSpec> s;
  // add(role, layer, name, dims, required, f32_only)
  const auto add = [&s](R role, int32_t layer, std::string name, std::vector<int64_t> ne, bool required = true,
                        bool f32_only = false) {
    s.push_back({std::move(name), std::move(ne), required, f32_only, role, layer});
  };
  add(R::TokenEmbedding, -1, "token_embd.weight", {E, V});  // [n_embd, n_vocab]
  if (c.arch == Arch::Phi3) {
    // LongRoPE factors, shared by every layer; which one is used depends on the context size (Config).
    add(R::RopeFactorsLong, -1, "rope_factors_long.weight", {c.n_rot / 2}, false, true);    // [n_rot / 2]
    add(R::RopeFactorsShort, -1, "rope_factors_short.weight", {c.n_rot / 2}, false, true);  // [n_rot / 2]
  }
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    add(R::AttnNorm, il, b + "attn_norm.weight", {E}, true, true);       // [n_embd]
    if (c.fused_qkv) {
      const int64_t qkv = c.n_q() + c.n_k() + c.n_v();
      add(R::AttnQkv, il, b + "attn_qkv.weight", {E, qkv});              // [n_embd, n_q + n_k + n_v]
      add(R::AttnQkvBias, il, b + "attn_qkv.bias", {qkv}, false, true);  // [n_q + n_k + n_v]
    } else {
      add(R::AttnQ, il, b + "attn_q.weight", {E, c.n_q()});              // [n_embd, n_head * head_dim]
      add(R::AttnK, il, b + "attn_k.weight", {E, c.n_k()});              // [n_embd, n_head_kv * head_dim]
      add(R::AttnV, il, b + "attn_v.weight", {E, c.n_v()});              // [n_embd, n_head_kv * head_dim_v]
    }
    add(R::AttnOutput, il, b + "attn_output.weight", {c.n_attn_out(), E});  // [n_head * head_dim_v, n_embd]
    // qwen2 always has q/k/v biases; some llama-architecture files (e.g. converted from other families) do too.
    if (c.arch == Arch::Llama || c.arch == Arch::Qwen2) {
      const bool bias_required = c.arch == Arch::Qwen2;
      add(R::AttnQBias, il, b + "attn_q.bias", {c.n_q()}, bias_required, true);  // [n_head * head_dim]
      add(R::AttnKBias, il, b + "attn_k.bias", {c.n_k()}, bias_required, true);  // [n_head_kv * head_dim]
      add(R::AttnVBias, il, b + "attn_v.bias", {c.n_v()}, bias_required, true);  // [n_head_kv * head_dim_v]
    }
    if (c.arch == Arch::Llama) add(R::AttnOutputBias, il, b + "attn_output.bias", {E}, false, true);  // [n_embd]
    if (c.arch == Arch::GptOss) {
      add(R::AttnQBias, il, b + "attn_q.bias", {c.n_q()}, true, true);        // [n_head * head_dim]
      add(R::AttnKBias, il, b + "attn_k.bias", {c.n_k()}, true, true);        // [n_head_kv * head_dim]
      add(R::AttnVBias, il, b + "attn_v.bias", {c.n_v()}, true, true);        // [n_head_kv * head_dim_v]
      add(R::AttnOutputBias, il, b + "attn_output.bias", {E}, true, true);    // [n_embd]
    }
    if (c.attn_sinks) add(R::AttnSinks, il, b + "attn_sinks.weight", {c.n_head}, true, true);  // [n_head]
    if (c.arch == Arch::Qwen3 || c.arch == Arch::Qwen3Moe || gemma) {
      add(R::AttnQNorm, il, b + "attn_q_norm.weight", {c.head_dim}, true, true);  // [head_dim]
      add(R::AttnKNorm, il, b + "attn_k_norm.weight", {c.head_dim}, true, true);  // [head_dim]
    }
    if (gemma) add(R::AttnPostNorm, il, b + "post_attention_norm.weight", {E}, true, true);  // [n_embd]
    // gpt-oss names its pre-MoE norm post_attention_norm: it normalises the residual stream for the feed-forward
    // block, the job of every other architecture's ffn_norm (and its role).
    if (c.arch == Arch::GptOss)
      add(R::FfnNorm, il, b + "post_attention_norm.weight", {E}, true, true);  // [n_embd]
    else
      add(R::FfnNorm, il, b + "ffn_norm.weight", {E}, true, true);  // [n_embd]
    if (c.n_expert > 0) {
      const int64_t X = c.n_expert, Fe = c.n_ff_exp;
      const bool biases = c.arch == Arch::GptOss;
      add(R::FfnRouter, il, b + "ffn_gate_inp.weight", {E, X});             // [n_embd, n_expert]
      add(R::FfnGateExps, il, b + "ffn_gate_exps.weight", {E, Fe, X});      // [n_embd, n_ff_exp, n_expert]
      add(R::FfnUpExps, il, b + "ffn_up_exps.weight", {E, Fe, X});          // [n_embd, n_ff_exp, n_expert]
      add(R::FfnDownExps, il, b + "ffn_down_exps.weight", {Fe, E, X});      // [n_ff_exp, n_embd, n_expert]
      if (biases) {
        add(R::FfnRouterBias, il, b + "ffn_gate_inp.bias", {X}, true, true);           // [n_expert]
        add(R::FfnGateExpsBias, il, b + "ffn_gate_exps.bias", {Fe, X}, true, true);    // [n_ff_exp, n_expert]
        add(R::FfnUpExpsBias, il, b + "ffn_up_exps.bias", {Fe, X}, true, true);        // [n_ff_exp, n_expert]
        add(R::FfnDownExpsBias, il, b + "ffn_down_exps.bias", {E, X}, true, true);     // [n_embd, n_expert]
      }
      continue;  // no dense feed-forward tensors
    }
    if (c.fused_gate_up) {
      add(R::FfnGateUp, il, b + "ffn_up.weight", {E, 2 * F});     // [n_embd, 2 n_ff]: gate rows, then up rows
    } else {
      add(R::FfnGate, il, b + "ffn_gate.weight", {E, F});         // [n_embd, n_ff]
      add(R::FfnUp, il, b + "ffn_up.weight", {E, F});             // [n_embd, n_ff]
    }
    add(R::FfnDown, il, b + "ffn_down.weight", {F, E});           // [n_ff, n_embd]
    if (gemma) add(R::FfnPostNorm, il, b + "post_ffw_norm.weight", {E}, true, true);  // [n_embd]
  }
  add(R::OutputNorm, -1, "output_norm.weight", {E}, true, true);  // [n_embd]
  add(R::Output, -1, "output.weight", {E, V}, false);             // [n_embd, n_vocab]; absent = tied to token_embd
  // Llama 3.1+ long-context frequency factors: theta_i is divided by factor i.
  if (c.arch == Arch::Llama) add(R::RopeFreqs, -1, "rope_freqs.weight", {c.n_rot / 2}, false, true);  // [n_rot / 2]
  return s;
}

namespace {

std::string shape_str(const int64_t* ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::to_string(ne[i]);
  return s + "]";
}

}  // namespace

Weights Weights::load(const gguf::File& file, const Config& c) {
  Weights w;
  w.file_ = file.path();
  auto fail = [&](const std::string& msg) -> void { throw ModelError(file.path() + ": " + msg); };

  // An absurd block_count was refused by read_config (Config::resolve), before the list below is sized by it.
  struct Found {
    const gguf::TensorInfo* info;
    const WeightSpec* spec;
  };
  const std::vector<WeightSpec> specs = weight_specs(c);
  std::vector<Found> found;
  found.reserve(specs.size());
  for (const WeightSpec& sp : specs) {
    const gguf::TensorInfo* t = file.find_tensor(sp.name);
    if (!t) {
      if (sp.required)
        fail("missing tensor " + sp.name + " (required by architecture " + arch_name(c.arch) + ", expected shape " +
             shape_str(sp.ne.data(), int(sp.ne.size())) + ")");
      continue;
    }
    int64_t want[4] = {1, 1, 1, 1};
    std::copy(sp.ne.begin(), sp.ne.end(), want);
    bool same = true;
    for (int d = 0; d < 4; ++d) same = same && t->ne[d] == want[d];
    if (!same)
      fail("tensor " + sp.name + " has shape " + shape_str(t->ne, std::max(t->n_dims, 1)) + ", expected " +
           shape_str(sp.ne.data(), int(sp.ne.size())));
    if (sp.f32_only ? t->type != quant::Type::F32 : !is_supported_weight_type(t->type))
      fail("tensor " + sp.name + " has type " + quant::type_name(t->type) + ", which is not supported here" +
           (sp.f32_only ? " (expected F32)" : ""));
    found.push_back({t, &sp});
  }

  // Arena order = file order, so an upload streams through the mapping front to back.
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) { return a.info->offset < b.info->offset; });
  uint64_t offset = 0;
  for (const Found& f : found) {
    WeightInfo e;
    e.params.tensor = f.spec->name;
    e.params.role = f.spec->role;
    e.params.layer = f.spec->layer;
    e.params.type = f.info->type;
    e.params.host = f.info->data;
    e.params.nbytes = f.info->nbytes;
    e.params.arena_offset = offset;
    for (int d = 0; d < 4; ++d) e.shape.ne[static_cast<size_t>(d)] = f.info->ne[d];
    offset += (f.info->nbytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
    w.index_.emplace(e.params.tensor, w.entries_.size());
    w.entries_.push_back(std::move(e));
  }
  w.arena_bytes_ = offset;
  return w;
}

const WeightInfo* Weights::find(std::string_view name) const {
  auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &entries_[it->second];
}

const WeightInfo& Weights::get(std::string_view name) const {
  if (const WeightInfo* w = find(name)) return *w;
  throw ModelError(file_ + ": missing tensor " + std::string(name));
}

}  // namespace model
