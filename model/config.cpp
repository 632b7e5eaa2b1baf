// Hyperparameters: GGUF keys -> RawHparams -> Config. Defaults follow llama.cpp's loader so that a file it accepts
// means the same thing here (rope.freq_base 10000, head_count_kv = head_count, key_length = n_embd / n_head).
#include "model/config.h"

#include <cmath>
#include <limits>
#include <sstream>

#include "gguf/gguf.h"

namespace model {

const char* arch_name(Arch a) {
  switch (a) {
    case Arch::Llama: return "llama";
    case Arch::Qwen2: return "qwen2";
    case Arch::Qwen3: return "qwen3";
  }
  return "?";
}

RawHparams RawHparams::read(const gguf::File& f) {
  RawHparams r;
  r.file = f.path();
  r.architecture = f.get_or<std::string>("general.architecture", "");
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
  r.rms_epsilon = fl("attention.layer_norm_rms_epsilon");
  r.rope_freq_base = fl("rope.freq_base");
  r.rope_scaling_type = f.get_opt<std::string>(a + "rope.scaling.type");
  r.rope_scaling_factor = fl("rope.scaling.factor");
  r.rope_scale_linear = fl("rope.scale_linear");
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

Config Config::resolve(const RawHparams& raw) {
  Resolver r{raw};
  Config c;
  if (raw.architecture == "llama") {
    c.arch = Arch::Llama;
    c.rope_mode = graph::RopeMode::Normal;
  } else if (raw.architecture == "qwen2") {
    c.arch = Arch::Qwen2;
    c.rope_mode = graph::RopeMode::Neox;
  } else if (raw.architecture == "qwen3") {
    c.arch = Arch::Qwen3;
    c.rope_mode = graph::RopeMode::Neox;
  } else {
    r.fail(raw.architecture.empty() ? std::string("missing key general.architecture")
                                    : "unsupported architecture '" + raw.architecture +
                                          "' (supported: llama, qwen2, qwen3)");
  }
  if (raw.expert_count && *raw.expert_count > 0)
    r.fail("mixture-of-experts models are not supported (" + r.key("expert_count") + " = " +
           std::to_string(*raw.expert_count) + ")");

  if (!raw.vocab_size) r.fail("cannot determine the vocabulary size: neither " + r.key("vocab_size") +
                              " nor tokenizer.ggml.tokens is present");
  c.n_vocab = r.positive(raw.vocab_size, "vocab_size");
  c.n_ctx_train = r.positive(raw.context_length, "context_length");
  c.n_embd = r.positive(raw.embedding_length, "embedding_length");
  c.n_layer = r.positive(raw.block_count, "block_count");
  c.n_ff = r.positive(raw.feed_forward_length, "feed_forward_length");
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

  // Linear scaling: positions are multiplied by 1/factor. "none" or an absent type means no scaling.
  float factor = 1.0f;
  const std::string type = raw.rope_scaling_type.value_or(raw.rope_scale_linear ? "linear" : "none");
  if (type == "linear") {
    factor = raw.rope_scaling_factor ? *raw.rope_scaling_factor : raw.rope_scale_linear.value_or(1.0f);
    // llama.cpp treats a factor of 0 as "no scaling".
    if (factor == 0.0f) factor = 1.0f;
    r.finite_positive(factor, raw.rope_scaling_factor ? "rope.scaling.factor" : "rope.scale_linear");
  } else if (type != "none") {
    r.fail("unsupported " + r.key("rope.scaling.type") + " '" + type + "' (supported: none, linear)");
  }
  c.rope_freq_scale = 1.0f / factor;
  if (!std::isfinite(c.rope_freq_scale) || c.rope_freq_scale <= 0.0f)
    r.fail("rope scaling factor " + std::to_string(factor) + " gives no usable position scale");
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));  // as llama.cpp computes it, in float
  return c;
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
  return s.str();
}

}  // namespace model
