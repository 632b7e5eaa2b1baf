// Synthetic models: GGUF files with a real model's shape, random but valid weight blocks, and a real vocabulary copied
// from another GGUF. Decode speed does not depend on weight values, so these stand in for multi-GB downloads on
// machines that cannot fetch them (the GPU benchmark machine makes its own).
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "quant/types.h"

namespace model {

// The hyperparameters of a real model, as its GGUF file states them. The first fields describe every shape; the
// rest default to a plain llama block and are set by the shapes of other architectures.
struct SynthShape {
  std::string name;          // "llama3-8b"
  std::string display_name;  // "Llama-3-8B (synthetic)"
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  int64_t n_vocab;           // the shape's own vocabulary size (the vocabulary file's size wins if different)
  float rope_base, rms_eps;
  bool tied_output;          // no output.weight: token_embd doubles as the output matrix
  bool llama3_rope_factors;  // writes rope_freqs.weight as Llama 3.1/3.2 files do
  std::string arch = "llama";       // general.architecture: llama, gemma3, phi3, qwen3moe or gpt-oss
  int64_t head_dim = 0;             // attention.key_length/value_length; 0: n_embd / n_head (and no key written)
  int64_t n_swa = 0;                // attention.sliding_window: gemma3's local layers (every sixth layer global),
                                    // gpt-oss's even layers
  float rope_base_swa = 10000.0f;   // gemma3: rope.freq_base_swa, the local layers' base
  float rope_linear_factor = 0.0f;  // rope.scaling.type linear with this factor; 0: no scaling keys
  int64_t n_ctx_orig = 0;           // rope.scaling.original_context_length (phi3, gpt-oss); phi3 > 0 also writes
                                    // LongRoPE's rope_factors_long/short and rope.scaling.attn_factor
  int64_t phi3_sliding_window = 0;  // phi3: attention.sliding_window as the converter writes it (llama.cpp ignores it)
  float rope_yarn_factor = 0.0f;    // gpt-oss: rope.scaling.type yarn with this factor over n_ctx_orig positions
  // Mixture of experts (qwen3moe, gpt-oss): every layer's feed-forward block is n_expert experts of n_ff_exp, a
  // token uses n_expert_used of them; n_ff is then only the feed_forward_length key the converter writes.
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;

  int64_t head_size() const { return head_dim > 0 ? head_dim : n_embd / n_head; }
};

// Names accepted by --shape, in a stable order.
const std::vector<SynthShape>& synth_shapes();
const SynthShape& synth_shape(const std::string& name);      // throws std::invalid_argument listing the names
const std::vector<std::string>& synth_presets();             // "Q4_K_M", "Q4_0", ...

// Which block type a tensor gets under a preset, following the reference quantizer's mixes (Q4_K_M: Q4_K with
// Q6_K for the output matrix and for attn_v / attn_qkv / ffn_down in the layers its use-more-bits rule picks;
// MXFP4_MOE: MXFP4 experts, Q8_0 for every other matrix). `tensor` is the role in the file's own words: "attn_v",
// "attn_qkv", "ffn_down", "ffn_down_exps", "output", ...; n_expert is the model's expert count (0 for a dense model:
// the quantizer has rules for exactly 8 experts).
quant::Type synth_tensor_type(const std::string& preset, const std::string& tensor, int64_t layer, int64_t n_layer,
                              bool is_output_matrix, int64_t n_expert = 0);

// One tensor of a synthetic file, in file order.
struct SynthTensor {
  enum class Fill : uint8_t {
    Random,          // random valid blocks of `type` (a weight matrix)
    Norm,            // F32 values near 1 (norm weights)
    Bias,            // F32 values near 0 (biases, attention-sink logits)
    Llama3Factors,   // F32 Llama 3.1 rope frequency divisors
    LongFactors,     // F32 LongRoPE long-context divisors, a ramp from 1 up to about 40
    ShortFactors,    // F32 LongRoPE short-context divisors, near 1
  };
  std::string name;
  quant::Type type;
  std::vector<int64_t> ne;  // innermost first
  Fill fill;
};

// Every tensor a shape's file holds under a preset, with the types synth_tensor_type gives them, after the reference
// quantizer's fallback for rows its block size does not divide. Throws std::invalid_argument for a bad preset.
std::vector<SynthTensor> synth_tensors(const SynthShape& s, const std::string& preset, int64_t n_vocab);

struct SynthOptions {
  std::string shape;
  std::string preset;
  std::string vocab_path;   // GGUF with tokenizer.* metadata (a vocabulary-only file is fine)
  std::string out_path;
  uint64_t seed = 1;
  int n_threads = 0;        // 0 = hardware concurrency
  std::function<void(uint64_t done, uint64_t total)> progress;  // bytes of tensor data written
};

struct SynthResult {
  uint64_t file_bytes = 0;
  uint64_t n_params = 0;
  int64_t n_vocab = 0;
};

// Writes the file; throws std::invalid_argument for bad options and gguf::GgufError for I/O or vocabulary problems.
SynthResult write_synthetic_model(const SynthOptions& options);

// Fills `n_blocks` blocks of `type` with random bits and overwrites every scale with a small finite value, so the
// tensor dequantizes to finite numbers of realistic magnitude. Deterministic in (seed, stream). F32/F16/BF16 count
// one element as a block.
void fill_random_blocks(quant::Type type, uint8_t* dst, uint64_t n_blocks, uint64_t seed, uint64_t stream);

}  // namespace model
