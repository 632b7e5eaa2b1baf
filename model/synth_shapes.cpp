// The synthetic models' shapes (real models' hyperparameters) and what a file of each holds under each preset: the
// tensor list of its architecture and the block types the reference quantizer (llama.cpp's llama-quant.cpp) gives
// them.
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "model/synth.h"

namespace model {

const std::vector<SynthShape>& synth_shapes() {
  static const std::vector<SynthShape> shapes = {
      {"llama3-8b", "Llama-3-8B (synthetic)", 4096, 32, 32, 8, 14336, 8192, 128256, 500000.0f, 1e-5f, false, false},
      {"llama3-1b", "Llama-3.2-1B (synthetic)", 2048, 16, 32, 8, 8192, 131072, 128256, 500000.0f, 1e-5f, true, true},
      {"llama2-7b", "Llama-2-7B (synthetic)", 4096, 32, 32, 32, 11008, 4096, 32000, 10000.0f, 1e-5f, false, false},
      {"tiny", "tiny llama (synthetic, for tests)", 256, 2, 4, 2, 512, 2048, 32000, 10000.0f, 1e-5f, false, false},
      // 128-wide heads as the 7B/8B shapes have (what the attention + o launch serves), in 2 small layers.
      {"tiny-h128", "tiny llama, 128-wide heads (synthetic, for tests)", 2048, 2, 16, 4, 1024, 2048, 32000,
       10000.0f, 1e-5f, false, false},
      // Gemma 3 text models (HF text_config): 256-wide heads (128 for 27B) wider than n_embd / n_head, a 1024
      // window on five of every six layers, global layers at base 1e6 with linear x8, local ones at 1e4; tied.
      {.name = "gemma3-4b", .display_name = "Gemma-3-4B (synthetic)", .n_embd = 2560, .n_layer = 34, .n_head = 8,
       .n_head_kv = 4, .n_ff = 10240, .n_ctx = 131072, .n_vocab = 262144, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .llama3_rope_factors = false, .arch = "gemma3", .head_dim = 256, .n_swa = 1024,
       .rope_linear_factor = 8.0f},
      {.name = "gemma3-12b", .display_name = "Gemma-3-12B (synthetic)", .n_embd = 3840, .n_layer = 48, .n_head = 16,
       .n_head_kv = 8, .n_ff = 15360, .n_ctx = 131072, .n_vocab = 262144, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .llama3_rope_factors = false, .arch = "gemma3", .head_dim = 256, .n_swa = 1024,
       .rope_linear_factor = 8.0f},
      {.name = "gemma3-27b", .display_name = "Gemma-3-27B (synthetic)", .n_embd = 5376, .n_layer = 62, .n_head = 32,
       .n_head_kv = 16, .n_ff = 21504, .n_ctx = 131072, .n_vocab = 262144, .rope_base = 1e6f, .rms_eps = 1e-6f,
       .tied_output = true, .llama3_rope_factors = false, .arch = "gemma3", .head_dim = 128, .n_swa = 1024,
       .rope_linear_factor = 8.0f},
      // Phi-3-mini-128k (3.8B): multi-head attention of 96-wide heads, fused qkv and gate+up, LongRoPE over an
      // original 4096 context; the converter writes a 262144 sliding window that llama.cpp ignores.
      {.name = "phi3-mini", .display_name = "Phi-3-mini-128k 3.8B (synthetic)", .n_embd = 3072, .n_layer = 32,
       .n_head = 32, .n_head_kv = 32, .n_ff = 8192, .n_ctx = 131072, .n_vocab = 32064, .rope_base = 10000.0f,
       .rms_eps = 1e-5f, .tied_output = false, .llama3_rope_factors = false, .arch = "phi3", .n_ctx_orig = 4096,
       .phi3_sliding_window = 262144},
      // Phi-4 (14B): the phi3 architecture with GQA (40 query heads over 10), base 250000, no rope scaling.
      {.name = "phi4", .display_name = "Phi-4 14B (synthetic)", .n_embd = 5120, .n_layer = 40, .n_head = 40,
       .n_head_kv = 10, .n_ff = 17920, .n_ctx = 16384, .n_vocab = 100352, .rope_base = 250000.0f, .rms_eps = 1e-5f,
       .tied_output = false, .llama3_rope_factors = false, .arch = "phi3"},
      // Small shapes of the two architectures for the tests: every feature, a few MB.
      {.name = "tiny-gemma3", .display_name = "tiny gemma3 (synthetic, for tests)", .n_embd = 256, .n_layer = 8,
       .n_head = 4, .n_head_kv = 2, .n_ff = 512, .n_ctx = 4096, .n_vocab = 32000, .rope_base = 1e6f,
       .rms_eps = 1e-6f, .tied_output = true, .llama3_rope_factors = false, .arch = "gemma3", .head_dim = 128,
       .n_swa = 16, .rope_linear_factor = 8.0f},
      {.name = "tiny-phi3", .display_name = "tiny phi3 (synthetic, for tests)", .n_embd = 256, .n_layer = 2,
       .n_head = 4, .n_head_kv = 2, .n_ff = 512, .n_ctx = 4096, .n_vocab = 32000, .rope_base = 10000.0f,
       .rms_eps = 1e-5f, .tied_output = false, .llama3_rope_factors = false, .arch = "phi3", .n_ctx_orig = 256,
       .phi3_sliding_window = 262144},
  };
  return shapes;
}

const SynthShape& synth_shape(const std::string& name) {
  for (const auto& s : synth_shapes()) {
    if (s.name == name) return s;
  }
  std::string names;
  for (const auto& s : synth_shapes()) names += (names.empty() ? "" : ", ") + s.name;
  throw std::invalid_argument("unknown shape '" + name + "' (known: " + names + ")");
}

const std::vector<std::string>& synth_presets() {
  static const std::vector<std::string> presets = {"Q4_K_M", "Q4_0", "Q8_0", "Q6_K", "F16"};
  return presets;
}

namespace {

// The reference quantizer's "use more bits" rule for attn_v (and attn_qkv, which it counts with attn_v) and
// ffn_down under the *_M presets: the first and last eighth of the layers, and every third layer in between.
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

void check_preset(const std::string& preset) {
  const auto& p = synth_presets();
  if (std::find(p.begin(), p.end(), preset) == p.end()) throw std::invalid_argument("unknown preset '" + preset + "'");
}

// The reference quantizer's fallback for rows its block size does not divide: 256-element K-quants to the 32-element
// type it names, F16 when even that does not divide the row.
quant::Type fallback(quant::Type t, int64_t row) {
  if (row % quant::traits(t).block_elems == 0) return t;
  quant::Type f = t;
  switch (t) {
    case quant::Type::Q2_K: case quant::Type::Q3_K: f = quant::Type::Q4_0; break;
    case quant::Type::Q4_K: f = quant::Type::Q5_0; break;
    case quant::Type::Q5_K: f = quant::Type::Q5_1; break;
    case quant::Type::Q6_K: f = quant::Type::Q8_0; break;
    default: break;
  }
  return row % quant::traits(f).block_elems == 0 ? f : quant::Type::F16;
}


}  // namespace

quant::Type synth_tensor_type(const std::string& preset, const std::string& tensor, int64_t layer, int64_t n_layer,
                              bool is_output_matrix) {
  check_preset(preset);
  if (preset == "F16") return quant::Type::F16;
  if (is_output_matrix) return preset == "Q8_0" ? quant::Type::Q8_0 : quant::Type::Q6_K;
  if (preset == "Q4_0") return quant::Type::Q4_0;
  if (preset == "Q8_0") return quant::Type::Q8_0;
  if (preset == "Q6_K") return quant::Type::Q6_K;
  // Q4_K_M
  if ((tensor == "attn_v" || tensor == "attn_qkv" || tensor == "ffn_down") && use_more_bits(layer, n_layer))
    return quant::Type::Q6_K;
  return quant::Type::Q4_K;
}

std::vector<SynthTensor> synth_tensors(const SynthShape& s, const std::string& preset, int64_t n_vocab) {
  check_preset(preset);
  using Fill = SynthTensor::Fill;
  const int64_t E = s.n_embd, hd = s.head_size(), F = s.n_ff, L = s.n_layer;
  const int64_t nq = s.n_head * hd, nkv = s.n_head_kv * hd;
  const bool gemma = s.arch == "gemma3", phi = s.arch == "phi3";
  std::vector<SynthTensor> t;
  // A matrix [K, N]: its preset type, after the fallback for its row length K.
  const auto matrix = [&](const std::string& name, const char* role, int64_t layer, int64_t K, int64_t N,
                          bool output = false) {
    t.push_back({name, fallback(synth_tensor_type(preset, role, layer, L, output), K), {K, N}, Fill::Random});
  };
  const auto vec = [&](const std::string& name, int64_t n, Fill fill) {
    t.push_back({name, quant::Type::F32, {n}, fill});
  };
  if (phi && s.n_ctx_orig > 0) {  // the converter writes the LongRoPE factors first
    vec("rope_factors_long.weight", hd / 2, Fill::LongFactors);
    vec("rope_factors_short.weight", hd / 2, Fill::ShortFactors);
  }
  matrix("token_embd.weight", "token_embd", 0, E, n_vocab, s.tied_output);  // [n_embd, n_vocab]
  if (s.llama3_rope_factors) vec("rope_freqs.weight", hd / 2, Fill::Llama3Factors);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", E, Fill::Norm);
    if (phi) {
      matrix(p + "attn_qkv.weight", "attn_qkv", l, E, nq + 2 * nkv);  // [n_embd, q | k | v]
    } else {
      matrix(p + "attn_q.weight", "attn_q", l, E, nq);
      matrix(p + "attn_k.weight", "attn_k", l, E, nkv);
      matrix(p + "attn_v.weight", "attn_v", l, E, nkv);
    }
    if (gemma) {
      vec(p + "attn_q_norm.weight", hd, Fill::Norm);
      vec(p + "attn_k_norm.weight", hd, Fill::Norm);
    }
    matrix(p + "attn_output.weight", "attn_output", l, nq, E);
    if (gemma) vec(p + "post_attention_norm.weight", E, Fill::Norm);
    vec(p + "ffn_norm.weight", E, Fill::Norm);
    if (phi) {
      matrix(p + "ffn_up.weight", "ffn_up", l, E, 2 * F);  // [n_embd, gate | up]
    } else {
      matrix(p + "ffn_gate.weight", "ffn_gate", l, E, F);
      matrix(p + "ffn_up.weight", "ffn_up", l, E, F);
    }
    matrix(p + "ffn_down.weight", "ffn_down", l, F, E);
    if (gemma) vec(p + "post_ffw_norm.weight", E, Fill::Norm);
  }
  vec("output_norm.weight", E, Fill::Norm);
  if (!s.tied_output) matrix("output.weight", "output", 0, E, n_vocab, true);
  return t;
}

}  // namespace model
