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

// The hyperparameters of a real model, as its GGUF file states them.
struct SynthShape {
  std::string name;          // "llama3-8b"
  std::string display_name;  // "Llama-3-8B (synthetic)"
  int64_t n_embd, n_layer, n_head, n_head_kv, n_ff, n_ctx;
  int64_t n_vocab;           // the shape's own vocabulary size (the vocabulary file's size wins if different)
  float rope_base, rms_eps;
  bool tied_output;          // no output.weight: token_embd doubles as the output matrix
  bool llama3_rope_factors;  // writes rope_freqs.weight as Llama 3.1/3.2 files do
};

// Names accepted by --shape, in a stable order.
const std::vector<SynthShape>& synth_shapes();
const SynthShape& synth_shape(const std::string& name);      // throws std::invalid_argument listing the names
const std::vector<std::string>& synth_presets();             // "Q4_K_M", "Q4_0", ...

// Which block type a tensor gets under a preset, following the reference quantizer's mixes (Q4_K_M: Q4_K with
// Q6_K for the output matrix and for attn_v / ffn_down in the layers its use-more-bits rule picks).
quant::Type synth_tensor_type(const std::string& preset, const std::string& tensor, int64_t layer, int64_t n_layer,
                              bool is_output_matrix);

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
// tensor dequantizes to finite numbers of realistic magnitude. Deterministic in (seed, stream).
void fill_random_blocks(quant::Type type, uint8_t* dst, uint64_t n_blocks, uint64_t seed, uint64_t stream);

}  // namespace model
