// Model hyperparameters in two steps: RawHparams holds the GGUF keys exactly as stored (absent keys stay empty);
// Config is the resolved, validated form with every default applied and every derived value computed once.
// Nothing downstream reads GGUF keys again.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "model/rope_scaling.h"

namespace gguf {
class File;
}

namespace model {

// A model file this runtime cannot run: unsupported architecture, missing or inconsistent hyperparameters, a missing
// tensor, a tensor of the wrong shape or type. The message names the file, the key or tensor, expected vs found.
class ModelError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Arch : uint8_t { Llama, Qwen2, Qwen3, Gemma3, Phi3, Qwen3Moe, GptOss };
const char* arch_name(Arch a);

// Step 1: the keys as stored, "{arch}." prefix stripped in the field names.
struct RawHparams {
  std::string file;                              // for messages
  std::string architecture;                      // general.architecture
  std::optional<uint64_t> tensor_count;          // tensors in the file (bounds block_count; absent: not checked)
  std::optional<uint64_t> vocab_size;            // {arch}.vocab_size, else length of tokenizer.ggml.tokens
  std::optional<uint64_t> context_length;        // {arch}.context_length
  std::optional<uint64_t> embedding_length;      // {arch}.embedding_length
  std::optional<uint64_t> block_count;           // {arch}.block_count
  std::optional<uint64_t> feed_forward_length;   // {arch}.feed_forward_length
  std::optional<uint64_t> head_count;            // {arch}.attention.head_count
  std::optional<uint64_t> head_count_kv;         // {arch}.attention.head_count_kv
  std::optional<uint64_t> key_length;            // {arch}.attention.key_length
  std::optional<uint64_t> value_length;          // {arch}.attention.value_length
  std::optional<uint64_t> rope_dimension_count;  // {arch}.rope.dimension_count
  std::optional<uint64_t> expert_count;          // {arch}.expert_count
  std::optional<uint64_t> expert_used_count;     // {arch}.expert_used_count
  std::optional<uint64_t> expert_feed_forward_length;  // {arch}.expert_feed_forward_length
  std::optional<float> rms_epsilon;              // {arch}.attention.layer_norm_rms_epsilon
  std::optional<float> rope_freq_base;           // {arch}.rope.freq_base
  std::optional<std::string> rope_scaling_type;  // {arch}.rope.scaling.type
  std::optional<float> rope_scaling_factor;      // {arch}.rope.scaling.factor
  std::optional<float> rope_scale_linear;        // {arch}.rope.scale_linear (older files)
  std::optional<uint64_t> rope_scaling_orig_ctx;  // {arch}.rope.scaling.original_context_length
  std::optional<float> rope_scaling_attn_factor;  // {arch}.rope.scaling.attn_factor
  std::optional<float> rope_freq_base_swa;        // {arch}.rope.freq_base_swa
  std::optional<uint64_t> sliding_window;         // {arch}.attention.sliding_window
  // {arch}.attention.sliding_window_pattern: a number n (layer il slides when il % n < n - 1) or one flag per layer
  std::optional<uint64_t> sliding_window_period;
  std::optional<std::vector<bool>> sliding_window_layers;
  std::optional<float> final_logit_softcapping;   // {arch}.final_logit_softcapping
  // The file stores attention as one fused blk.N.attn_qkv.weight (phi3 files do; llama.cpp accepts either form).
  // A fact about the tensors, read here because the tensor list depends on it.
  bool fused_qkv = false;

  // Reads the keys; a present key of the wrong type raises gguf::GgufError (naming the key).
  static RawHparams read(const gguf::File& file);
};

// Step 2: everything the graph builders and executors need.
struct Config {
  Arch arch = Arch::Llama;
  int32_t n_vocab = 0;
  int32_t n_ctx_train = 0;      // training context (default KV size)
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_ff = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t n_gqa = 0;            // n_head / n_head_kv: query heads per KV head
  int32_t head_dim = 0;         // q/k head size: key_length, else n_embd / n_head
  int32_t head_dim_v = 0;       // v head size: value_length, else head_dim
  int32_t n_rot = 0;            // rotated dims per head (== head_dim)
  float rms_eps = 1e-5f;
  float rope_freq_base = 10000.0f;
  float rope_freq_scale = 1.0f;  // position scale of the layers the file's scaling applies to (rope_scaling)
  RopeScaling rope_scaling;      // the file's kind, factor, original context, attention factor
  graph::RopeMode rope_mode = graph::RopeMode::Normal;  // by architecture: llama Normal, the others Neox
  float attn_scale = 1.0f;       // 1 / sqrt(head_dim) (gemma3's 27B: 1 / sqrt(n_embd / n_head), as llama.cpp)

  // Sliding-window attention (gemma3): the local layers attend to the last n_swa positions and rotate with their
  // own base and no scaling; the others (global) attend to everything. n_swa 0: no local layers.
  int32_t n_swa = 0;
  std::vector<bool> swa_layers;  // [n_layer] when n_swa > 0: true for a local layer
  float rope_freq_base_swa = 10000.0f;  // rope.freq_base_swa, else llama.cpp's 10000
  float rope_freq_scale_swa = 1.0f;     // llama.cpp reads no key for it
  int32_t n_swa_ignored = 0;     // phi3: attention.sliding_window as stored, which llama.cpp ignores (so do we)

  // Mixture of experts (qwen3moe, gpt-oss): every layer's feed-forward block is n_expert experts of n_ff_exp, of
  // which each token uses n_expert_used, weighted as moe_gating says. n_expert 0: dense (n_ff).
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  enum class MoeGating : uint8_t {
    SoftmaxTopKNorm,  // qwen3moe: softmax over all experts, the top k of it, renormalised to sum 1
    TopKSoftmax,      // gpt-oss: the top k router logits, softmax over those k
  } moe_gating = MoeGating::SoftmaxTopKNorm;
  bool attn_sinks = false;       // gpt-oss: per-head attention-sink logits (blk.N.attn_sinks.weight)

  float final_logit_softcap = 0.0f;  // > 0: logits = cap * tanh(logits / cap) (final_logit_softcapping)
  bool fused_qkv = false;        // attention reads one attn_qkv matrix (rows q, k, v) instead of three
  bool fused_gate_up = false;    // phi3: ffn_up holds gate (first n_ff rows) and up; there is no ffn_gate

  bool is_swa(int32_t il) const { return n_swa > 0 && swa_layers.at(static_cast<size_t>(il)); }
  // The rotation of layer il: base and scale by layer kind, the file's scaling (YaRN, attention factor) for all.
  graph::RopeParams layer_rope(int32_t il) const;
  // The frequency-factor tensor layers rotate with, for a context of n_ctx slots: "rope_freqs.weight" (llama 3.1+),
  // "rope_factors_long.weight" or "rope_factors_short.weight" (phi3, rope_scaling.use_long_factors), or "" for none.
  // Absent tensors mean no factors.
  std::string rope_factors_tensor(int32_t n_ctx) const;

  int64_t n_q() const { return int64_t(n_head) * head_dim; }       // rows of attn_q
  int64_t n_k() const { return int64_t(n_head_kv) * head_dim; }    // rows of attn_k
  int64_t n_v() const { return int64_t(n_head_kv) * head_dim_v; }  // rows of attn_v
  int64_t n_attn_out() const { return int64_t(n_head) * head_dim_v; }

  // Applies defaults and derives values; throws ModelError naming the file and the key for unsupported or
  // inconsistent values.
  static Config resolve(const RawHparams& raw);
};

// RawHparams::read + Config::resolve.
Config read_config(const gguf::File& file);

std::string describe(const Config& c);  // one line for -v and `info`
// For `info`: which layers attend within a sliding window ("sliding window 8: layers 0-4 local, 5 global", or
// "full causal attention in every layer"), and the rotation by layer kind with the scaling kind.
std::string describe_attention(const Config& c);
std::string describe_rope(const Config& c);
// For `info`: the feed-forward block ("SwiGLU, n_ff 768" or "mixture of experts: 8 experts, 2 used per token,
// expert FF 128, softmax over all, top 2, renormalised").
std::string describe_ffn(const Config& c);

}  // namespace model
