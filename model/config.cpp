// Hyperparameters: GGUF keys -> RawHparams -> Config. Defaults follow llama.cpp's loader so that a file it accepts
// means the same thing here (rope.freq_base 10000, head_count_kv = head_count, key_length = n_embd / n_head).
#include "model/config.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <sstream>
#include <string_view>

#include "gguf/gguf.h"

namespace model {

namespace {

struct ArchEntry {
  const char* name;
  Arch arch;
};
// Every architecture this engine runs, by its general.architecture name.
constexpr ArchEntry kArchs[] = {{"llama", Arch::Llama},   {"qwen2", Arch::Qwen2},         {"qwen3", Arch::Qwen3},
                                {"gemma3", Arch::Gemma3}, {"phi3", Arch::Phi3},           {"qwen3moe", Arch::Qwen3Moe},
                                {"gpt-oss", Arch::GptOss}};

std::optional<Arch> arch_from_name(std::string_view name) {
  for (const ArchEntry& e : kArchs)
    if (name == e.name) return e.arch;
  return std::nullopt;
}

std::string supported_arch_names() {
  std::string out;
  for (const ArchEntry& e : kArchs) out += (out.empty() ? "" : ", ") + std::string(e.name);
  return out;
}

}  // namespace

const char* arch_name(Arch a) {
  for (const ArchEntry& e : kArchs)
    if (e.arch == a) return e.name;
  return "?";
}

RawHparams RawHparams::read(const gguf::File& f) {
  RawHparams r;
  r.file = f.path();
  r.architecture = f.get_or<std::string>("general.architecture", "");
  r.tensor_count = f.tensors().size();
  // Another architecture's keys may have other types (Gemma 4 gives head_count_kv per layer); such a file is
  // refused by its name in Config::resolve, not by a key's type.
  if (!arch_from_name(r.architecture)) return r;
  const std::string a = r.architecture + ".";
  auto u = [&](const char* key) { return f.get_opt<uint64_t>(a + key); };
  auto fl = [&](const char* key) { return f.get_opt<float>(a + key); };

  r.vocab_size = u("vocab_size");
  if (!r.vocab_size) {
    if (const gguf::Value* tokens = f.find("tokenizer.ggml.tokens"); tokens && tokens->type == gguf::ValueType::ARRAY)
      r.vocab_size = std::get<gguf::Array>(tokens->v).items.size();
  }
  r.context_length = u("context_length");
  r.embedding_length = u("embedding_length");
  r.block_count = u("block_count");
  r.feed_forward_length = u("feed_forward_length");
  r.head_count = u("attention.head_count");
  r.head_count_kv = u("attention.head_count_kv");
  r.key_length = u("attention.key_length");
  r.value_length = u("attention.value_length");
  r.rope_dimension_count = u("rope.dimension_count");
  r.expert_count = u("expert_count");
  r.expert_used_count = u("expert_used_count");
  r.expert_feed_forward_length = u("expert_feed_forward_length");
  r.rms_epsilon = fl("attention.layer_norm_rms_epsilon");
  r.rope_freq_base = fl("rope.freq_base");
  r.rope_scaling_type = f.get_opt<std::string>(a + "rope.scaling.type");
  r.rope_scaling_factor = fl("rope.scaling.factor");
  r.rope_scale_linear = fl("rope.scale_linear");
  r.rope_scaling_orig_ctx = u("rope.scaling.original_context_length");
  r.rope_scaling_attn_factor = fl("rope.scaling.attn_factor");
  r.rope_freq_base_swa = fl("rope.freq_base_swa");
  r.sliding_window = u("attention.sliding_window");
  if (const gguf::Value* v = f.find(a + "attention.sliding_window_pattern")) {
    if (v->type == gguf::ValueType::ARRAY) {
      // One flag per layer, as bools or integers (llama.cpp reads either; nonzero = sliding).
      const auto& items = std::get<gguf::Array>(v->v).items;
      std::vector<bool> layers;
      for (size_t i = 0; i < items.size(); ++i) {
        const std::string what =
            f.path() + ": key " + a + "attention.sliding_window_pattern[" + std::to_string(i) + "]";
        layers.push_back(items[i].type == gguf::ValueType::BOOL ? items[i].as<bool>(what)
                                                                 : items[i].as<int64_t>(what) != 0);
      }
      r.sliding_window_layers = std::move(layers);
    } else {
      r.sliding_window_period = u("attention.sliding_window_pattern");
    }
  }
  r.final_logit_softcapping = fl("final_logit_softcapping");
  r.fused_qkv = f.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  return r;
}

namespace {

// Errors name the file and the full key.
struct Resolver {
  const RawHparams& raw;

  [[noreturn]] void fail(const std::string& what) const { throw ModelError(raw.file + ": " + what); }
  std::string key(const char* k) const { return raw.architecture + "." + k; }

  int32_t positive(const std::optional<uint64_t>& v, const char* k) const {
    if (!v) fail("missing required key " + key(k));
    if (*v == 0 || *v > uint64_t(std::numeric_limits<int32_t>::max()))
      fail("key " + key(k) + " = " + std::to_string(*v) + " is out of range (expected 1.." +
           std::to_string(std::numeric_limits<int32_t>::max()) + ")");
    return static_cast<int32_t>(*v);
  }
  int32_t positive_or(const std::optional<uint64_t>& v, const char* k, int32_t fallback) const {
    return v ? positive(v, k) : fallback;
  }
  float finite_positive(float v, const char* k) const {
    if (!(std::isfinite(v) && v > 0)) fail("key " + key(k) + " = " + std::to_string(v) + " must be a positive number");
    return v;
  }
};

}  // namespace

namespace {

// rope.scaling.* as llama.cpp reads them for every architecture: the kind (absent: linear), the factor (0 or absent:
// 1; the older rope.scale_linear key when rope.scaling.factor is absent), the original context (absent: the
// training context) and the attention factor (absent: 1).
RopeScaling resolve_rope_scaling(const Resolver& r, int32_t n_ctx_train) {
  const RawHparams& raw = r.raw;
  RopeScaling s;
  const std::string type = raw.rope_scaling_type.value_or("linear");
  if (!parse_rope_scaling_kind(type, s.kind))
    r.fail("unsupported " + r.key("rope.scaling.type") + " '" + type + "' (supported: none, linear, yarn, longrope)");
  const float factor = raw.rope_scaling_factor ? *raw.rope_scaling_factor : raw.rope_scale_linear.value_or(0.0f);
  s.factor = factor == 0.0f ? 1.0f : factor;  // llama.cpp reads a factor of 0 as "no scaling"
  if (s.kind != RopeScalingKind::None) {      // kind none ignores the factor
    r.finite_positive(s.factor, raw.rope_scaling_factor ? "rope.scaling.factor" : "rope.scale_linear");
    if (!std::isfinite(s.freq_scale()) || s.freq_scale() <= 0.0f)
      r.fail("rope scaling factor " + std::to_string(s.factor) + " gives no usable position scale");
  }
  // 0 means absent to llama.cpp as well.
  const bool orig = raw.rope_scaling_orig_ctx && *raw.rope_scaling_orig_ctx > 0;
  s.n_ctx_orig = orig ? r.positive(raw.rope_scaling_orig_ctx, "rope.scaling.original_context_length") : n_ctx_train;
  s.attn_factor = r.finite_positive(raw.rope_scaling_attn_factor.value_or(1.0f), "rope.scaling.attn_factor");
  return s;
}

// The sliding-window layers, as llama.cpp's loaders read them: the window, then the layer pattern (flags per layer,
// or a period n: layer il is local when il % n < n - 1, the architecture's default period when the key is absent).
void resolve_swa_layers(const Resolver& r, Config& c, uint64_t default_period) {
  const RawHparams& raw = r.raw;
  c.n_swa = r.positive(raw.sliding_window, "attention.sliding_window");
  if (raw.sliding_window_layers) {
    if (raw.sliding_window_layers->size() != size_t(c.n_layer))
      r.fail("key " + r.key("attention.sliding_window_pattern") + " has " +
             std::to_string(raw.sliding_window_layers->size()) + " entries for " + std::to_string(c.n_layer) +
             " layers");
    c.swa_layers = *raw.sliding_window_layers;
  } else {
    const uint64_t n = raw.sliding_window_period.value_or(default_period);
    for (int32_t il = 0; il < c.n_layer; ++il) c.swa_layers.push_back(n == 0 || uint64_t(il) % n < n - 1);
  }
}

// Gemma 3 (llama.cpp's gemma3 loader): sliding-window layers only when attention.sliding_window is present and
// nonzero, with the default period 6, and the local layers' own rope base.
void resolve_gemma3(const Resolver& r, Config& c) {
  const RawHparams& raw = r.raw;
  if (raw.sliding_window && *raw.sliding_window > 0) {
    resolve_swa_layers(r, c, 6);
    c.rope_freq_base_swa = r.finite_positive(raw.rope_freq_base_swa.value_or(10000.0f), "rope.freq_base_swa");
  }
  if (raw.final_logit_softcapping) {
    const float cap = *raw.final_logit_softcapping;
    if (!(std::isfinite(cap) && cap >= 0.0f))
      r.fail("key " + r.key("final_logit_softcapping") + " = " + std::to_string(cap) + " must be >= 0");
    c.final_logit_softcap = cap;
  }
  // The 62-layer 27B scales queries by 1/sqrt(n_embd / n_head) (its query_pre_attn_scalar); llama.cpp keys this on
  // the layer count, and so do we.
  constexpr int32_t kGemma3_27bLayers = 62;
  if (c.n_layer == kGemma3_27bLayers) {
    if (c.n_embd < c.n_head)
      r.fail("embedding_length " + std::to_string(c.n_embd) + " is smaller than attention.head_count " +
             std::to_string(c.n_head));
    c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.n_embd / c.n_head));
  }
}

// The experts (llama.cpp's generic expert_count / expert_used_count, then the architecture's expert FF).
// Qwen3-MoE: expert_feed_forward_length, else feed_forward_length / expert_used_count, as llama.cpp falls back.
// gpt-oss: expert_feed_forward_length is required.
void resolve_experts(const Resolver& r, Config& c) {
  const RawHparams& raw = r.raw;
  c.n_expert = r.positive(raw.expert_count, "expert_count");
  c.n_expert_used = r.positive(raw.expert_used_count, "expert_used_count");
  if (c.n_expert_used > c.n_expert)
    r.fail("key " + r.key("expert_used_count") + " = " + std::to_string(c.n_expert_used) + " exceeds " +
           r.key("expert_count") + " = " + std::to_string(c.n_expert));
  if (raw.expert_feed_forward_length || c.arch == Arch::GptOss) {
    c.n_ff_exp = r.positive(raw.expert_feed_forward_length, "expert_feed_forward_length");
  } else {
    if (!raw.feed_forward_length)
      r.fail("missing key " + r.key("expert_feed_forward_length") + " (and " + r.key("feed_forward_length") +
             " to derive it from)");
    c.n_ff_exp = r.positive(raw.feed_forward_length, "feed_forward_length") / c.n_expert_used;
    if (c.n_ff_exp == 0) r.fail("feed_forward_length / expert_used_count is 0: no expert FF size");
  }
  // llama.cpp hard-codes the weighting per architecture (no key controls it for these two).
  c.moe_gating = c.arch == Arch::GptOss ? Config::MoeGating::TopKSoftmax : Config::MoeGating::SoftmaxTopKNorm;
}

// gpt-oss (llama.cpp's openai-moe loader): every other layer slides (period 2: layer 0 local) over
// attention.sliding_window positions; both layer kinds rotate with the same base (rope.freq_base_swa when present)
// and the file's YaRN scaling; attention has per-head sinks.
void resolve_gpt_oss(const Resolver& r, Config& c) {
  resolve_swa_layers(r, c, 2);
  c.rope_freq_base_swa =
      r.finite_positive(r.raw.rope_freq_base_swa.value_or(c.rope_freq_base), "rope.freq_base_swa");
  c.rope_freq_scale_swa = c.rope_freq_scale;
  c.attn_sinks = true;
}

}  // namespace

Config Config::resolve(const RawHparams& raw) {
  Resolver r{raw};
  Config c;
  if (const std::optional<Arch> arch = arch_from_name(raw.architecture)) {
    c.arch = *arch;
  } else {
    r.fail(raw.architecture.empty() ? std::string("missing key general.architecture")
                                    : "unsupported architecture '" + raw.architecture + "' (supported: " +
                                          supported_arch_names() + ")");
  }
  // Rope style is implied by the architecture, as in llama.cpp: llama rotates adjacent pairs, the others halves.
  c.rope_mode = c.arch == Arch::Llama ? graph::RopeMode::Normal : graph::RopeMode::Neox;
  const bool moe = c.arch == Arch::Qwen3Moe || c.arch == Arch::GptOss;
  if (!moe && raw.expert_count && *raw.expert_count > 0)
    r.fail("mixture-of-experts " + raw.architecture + " models are not supported (" + r.key("expert_count") +
           " = " + std::to_string(*raw.expert_count) + "; supported: qwen3moe, gpt-oss)");

  if (!raw.vocab_size) r.fail("cannot determine the vocabulary size: neither " + r.key("vocab_size") +
                              " nor tokenizer.ggml.tokens is present");
  c.n_vocab = r.positive(raw.vocab_size, "vocab_size");
  c.n_ctx_train = r.positive(raw.context_length, "context_length");
  c.n_embd = r.positive(raw.embedding_length, "embedding_length");
  c.n_layer = r.positive(raw.block_count, "block_count");
  // MoE files may omit the dense FF size (llama.cpp reads it as optional); only the experts' size is used.
  c.n_ff = moe && !raw.feed_forward_length ? 0 : r.positive(raw.feed_forward_length, "feed_forward_length");
  c.n_head = r.positive(raw.head_count, "attention.head_count");
  c.n_head_kv = r.positive_or(raw.head_count_kv, "attention.head_count_kv", c.n_head);
  if (c.n_head % c.n_head_kv != 0)
    r.fail("attention.head_count " + std::to_string(c.n_head) + " is not a multiple of attention.head_count_kv " +
           std::to_string(c.n_head_kv));
  c.n_gqa = c.n_head / c.n_head_kv;

  if (!raw.key_length && c.n_embd % c.n_head != 0)
    r.fail("embedding_length " + std::to_string(c.n_embd) + " is not a multiple of attention.head_count " +
           std::to_string(c.n_head) + " and " + r.key("attention.key_length") + " is absent");
  c.head_dim = r.positive_or(raw.key_length, "attention.key_length", c.n_embd / c.n_head);
  c.head_dim_v = r.positive_or(raw.value_length, "attention.value_length", c.head_dim);
  if (c.head_dim % 2 != 0) r.fail("head size " + std::to_string(c.head_dim) + " is odd; RoPE needs pairs");

  // Partial rotary embeddings (n_rot < head_dim) belong to other architectures; these rotate whole heads.
  c.n_rot = r.positive_or(raw.rope_dimension_count, "rope.dimension_count", c.head_dim);
  if (c.n_rot != c.head_dim)
    r.fail("key " + r.key("rope.dimension_count") + " = " + std::to_string(c.n_rot) +
           " differs from the head size " + std::to_string(c.head_dim) + " (partial RoPE is not supported for " +
           raw.architecture + ")");

  if (!raw.rms_epsilon) r.fail("missing required key " + r.key("attention.layer_norm_rms_epsilon"));
  c.rms_eps = r.finite_positive(*raw.rms_epsilon, "attention.layer_norm_rms_epsilon");
  c.rope_freq_base = r.finite_positive(raw.rope_freq_base.value_or(10000.0f), "rope.freq_base");
  c.rope_scaling = resolve_rope_scaling(r, c.n_ctx_train);
  c.rope_freq_scale = c.rope_scaling.freq_scale();
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // as llama.cpp computes it, in float

  // Every layer needs at least six tensors (phi3's fused layout: attn_norm, attn_qkv, attn_output, ffn_norm, ffn_up,
  // ffn_down): an absurd block_count is refused before anything is sized by it (the sliding-window layer flags below,
  // the list of weights Weights::load checks; a fuzzed gemma3 file asked for the flags of 50 M layers). After the
  // keys, so that a file with a key missing is told about that key first (`info` shows the first problem).
  constexpr uint64_t kMinTensorsPerLayer = 6;
  if (raw.tensor_count && uint64_t(c.n_layer) * kMinTensorsPerLayer > *raw.tensor_count)
    r.fail("block_count " + std::to_string(c.n_layer) + " needs at least " +
           std::to_string(uint64_t(c.n_layer) * kMinTensorsPerLayer) + " tensors, the file holds " +
           std::to_string(*raw.tensor_count));
  if (moe) resolve_experts(r, c);
  switch (c.arch) {
    case Arch::Gemma3: resolve_gemma3(r, c); break;
    case Arch::GptOss: resolve_gpt_oss(r, c); break;
    case Arch::Qwen3Moe: break;
    case Arch::Phi3:
      // llama.cpp disables phi3's sliding window (the converters write one it does not trust) and warns.
      if (raw.sliding_window)
        c.n_swa_ignored = static_cast<int32_t>(std::min<uint64_t>(*raw.sliding_window, INT32_MAX));
      c.fused_qkv = raw.fused_qkv;
      c.fused_gate_up = true;
      break;
    case Arch::Llama:
    case Arch::Qwen2:
    case Arch::Qwen3: break;
  }
  return c;
}

graph::RopeParams Config::layer_rope(int32_t il) const {
  const bool local = is_swa(il);
  return rope_scaling.params(rope_mode, n_rot, local ? rope_freq_base_swa : rope_freq_base,
                             local ? rope_freq_scale_swa : rope_freq_scale);
}

std::string Config::rope_factors_tensor(int32_t n_ctx) const {
  switch (arch) {
    case Arch::Llama: return "rope_freqs.weight";
    case Arch::Phi3:
      return rope_scaling.use_long_factors(n_ctx) ? "rope_factors_long.weight" : "rope_factors_short.weight";
    case Arch::Qwen2:
    case Arch::Qwen3:
    case Arch::Gemma3:
    case Arch::Qwen3Moe:
    case Arch::GptOss: return "";
  }
  return "";
}

Config read_config(const gguf::File& file) { return Config::resolve(RawHparams::read(file)); }

std::string describe(const Config& c) {
  std::ostringstream s;
  s << arch_name(c.arch) << ": n_vocab " << c.n_vocab << ", n_ctx_train " << c.n_ctx_train << ", n_embd "
    << c.n_embd << ", n_layer " << c.n_layer << ", n_ff " << c.n_ff << ", n_head " << c.n_head << "/"
    << c.n_head_kv << ", head_dim " << c.head_dim;
  if (c.head_dim_v != c.head_dim) s << "/" << c.head_dim_v;
  s << ", rope " << (c.rope_mode == graph::RopeMode::Neox ? "neox" : "normal") << " base " << c.rope_freq_base;
  if (c.rope_freq_scale != 1.0f) s << " scale " << c.rope_freq_scale;
  s << ", rms_eps " << c.rms_eps;
  if (c.n_expert > 0) s << ", experts " << c.n_expert << " (" << c.n_expert_used << " used, FF " << c.n_ff_exp << ")";
  if (c.n_swa > 0) s << ", sliding window " << c.n_swa;
  if (c.final_logit_softcap > 0.0f) s << ", logit softcap " << c.final_logit_softcap;
  return s.str();
}

namespace {

// "0-4, 6, 8-9" for the layers where want == flag.
std::string layer_ranges(const std::vector<bool>& flags, bool want) {
  std::ostringstream out;
  bool any = false;
  for (size_t i = 0; i < flags.size();) {
    if (flags[i] != want) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j + 1 < flags.size() && flags[j + 1] == want) ++j;
    out << (any ? ", " : "") << i;
    if (j > i) out << "-" << j;
    any = true;
    i = j + 1;
  }
  return any ? out.str() : "none";
}

std::string rope_of(const graph::RopeParams& p) {
  std::ostringstream s;
  s << "base " << p.freq_base;
  if (p.freq_scale != 1.0f) s << ", positions x" << p.freq_scale;
  if (p.ext_factor != 0.0f) s << ", yarn ramp over pairs " << p.corr_low << "-" << p.corr_high;
  if (p.attn_factor != 1.0f) s << ", cos/sin x" << p.attn_factor;
  return s.str();
}

}  // namespace

std::string describe_attention(const Config& c) {
  std::ostringstream s;
  if (c.n_swa > 0) {
    const auto local = static_cast<size_t>(std::count(c.swa_layers.begin(), c.swa_layers.end(), true));
    s << "sliding window " << c.n_swa << " on local layers " << layer_ranges(c.swa_layers, true) << " (" << local
      << " of " << c.n_layer << "); global layers " << layer_ranges(c.swa_layers, false);
  } else {
    s << "full causal attention in every layer";
    if (c.n_swa_ignored > 0) s << " (attention.sliding_window " << c.n_swa_ignored << " ignored, as llama.cpp does)";
  }
  s << "; " << c.n_head << " query heads, " << c.n_head_kv << " kv heads of " << c.head_dim << ", scale "
    << c.attn_scale;
  if (c.fused_qkv) s << "; fused attn_qkv";
  if (c.attn_sinks) s << "; per-head attention sinks";
  return s.str();
}

std::string describe_ffn(const Config& c) {
  std::ostringstream s;
  if (c.n_expert == 0) {
    s << (c.arch == Arch::Gemma3 ? "GeGLU" : "SwiGLU") << ", n_ff " << c.n_ff;
    if (c.fused_gate_up) s << " (fused gate|up)";
    return s.str();
  }
  s << "mixture of experts: " << c.n_expert << " experts, " << c.n_expert_used << " used per token, expert FF "
    << c.n_ff_exp << "; ";
  switch (c.moe_gating) {
    case Config::MoeGating::SoftmaxTopKNorm:
      s << "softmax over all " << c.n_expert << ", top " << c.n_expert_used << ", renormalised";
      break;
    case Config::MoeGating::TopKSoftmax: s << "top " << c.n_expert_used << " router logits, softmax over them"; break;
  }
  s << (c.arch == Arch::GptOss ? "; clamped SwiGLU (limit 7, alpha 1.702), expert biases" : "; SwiGLU");
  return s.str();
}

std::string describe_rope(const Config& c) {
  const RopeScaling& r = c.rope_scaling;
  std::ostringstream s;
  s << (c.rope_mode == graph::RopeMode::Neox ? "neox" : "normal") << ", scaling ";
  if (r.kind == RopeScalingKind::Linear && r.factor == 1.0f)
    s << "none";  // what a file without rope.scaling keys means (llama.cpp reads it as linear x1)
  else
    s << rope_scaling_name(r.kind);
  if (r.kind != RopeScalingKind::None && r.factor != 1.0f) s << " x" << r.factor;
  if (r.n_ctx_orig != c.n_ctx_train) s << ", original context " << r.n_ctx_orig;
  if (c.n_swa > 0) {
    // One layer of each kind speaks for all of its kind.
    for (const bool local : {false, true}) {
      const auto it = std::find(c.swa_layers.begin(), c.swa_layers.end(), local);
      if (it != c.swa_layers.end())
        s << "; " << (local ? "local" : "global") << " layers: "
          << rope_of(c.layer_rope(static_cast<int32_t>(it - c.swa_layers.begin())));
    }
  } else {
    s << "; " << rope_of(c.layer_rope(0));
  }
  if (c.arch == Arch::Phi3)
    s << "; LongRoPE factors rope_factors_long when the context rounded up to 256 exceeds " << r.n_ctx_orig
      << ", else rope_factors_short (when present)";
  return s.str();
}

}  // namespace model
