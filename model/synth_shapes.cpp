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
      // Qwen3-30B-A3B (HF config): 128 experts of 768, 8 used, Qwen3 attention (q/k norms, 128-wide heads, q wider
      // than n_embd), untied; feed_forward_length is HF's intermediate_size 6144, which no layer uses.
      {.name = "qwen3-30b-a3b", .display_name = "Qwen3-30B-A3B (synthetic)", .n_embd = 2048, .n_layer = 48,
       .n_head = 32, .n_head_kv = 4, .n_ff = 6144, .n_ctx = 40960, .n_vocab = 151936, .rope_base = 1e6f,
       .rms_eps = 1e-6f, .tied_output = false, .llama3_rope_factors = false, .arch = "qwen3moe", .head_dim = 128,
       .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
      // gpt-oss-20b (OpenAI's config): 32 experts of 2880, 4 used, 64-wide heads (q 4096 wider than n_embd), a
      // 128-token window on the even layers, sinks, biases, YaRN x32 over an original 4096 context; untied.
      {.name = "gpt-oss-20b", .display_name = "gpt-oss-20b (synthetic)", .n_embd = 2880, .n_layer = 24, .n_head = 64,
       .n_head_kv = 8, .n_ff = 2880, .n_ctx = 131072, .n_vocab = 201088, .rope_base = 150000.0f, .rms_eps = 1e-5f,
       .tied_output = false, .llama3_rope_factors = false, .arch = "gpt-oss", .head_dim = 64, .n_swa = 128,
       .n_ctx_orig = 4096, .rope_yarn_factor = 32.0f, .n_expert = 32, .n_expert_used = 4, .n_ff_exp = 2880},
      // The two MoE architectures at the size of ../shared/models' synth-qwen3moe-* and synth-gpt-oss-* (8 experts,
      // which switches on the quantizer's 8-expert rules): the tests hold their tensor lists against those files.
      {.name = "tiny-qwen3moe", .display_name = "tiny qwen3moe (synthetic, for tests)", .n_embd = 256, .n_layer = 2,
       .n_head = 4, .n_head_kv = 2, .n_ff = 768, .n_ctx = 4096, .n_vocab = 32000, .rope_base = 1e6f,
       .rms_eps = 1e-6f, .tied_output = false, .llama3_rope_factors = false, .arch = "qwen3moe", .head_dim = 64,
       .n_expert = 8, .n_expert_used = 2, .n_ff_exp = 128},
      {.name = "tiny-gpt-oss", .display_name = "tiny gpt-oss (synthetic, for tests)", .n_embd = 256, .n_layer = 2,
       .n_head = 8, .n_head_kv = 2, .n_ff = 64, .n_ctx = 131072, .n_vocab = 32000, .rope_base = 150000.0f,
       .rms_eps = 1e-5f, .tied_output = false, .llama3_rope_factors = false, .arch = "gpt-oss", .head_dim = 64,
       .n_swa = 16, .n_ctx_orig = 4096, .rope_yarn_factor = 32.0f, .n_expert = 8, .n_expert_used = 4,
       .n_ff_exp = 64},
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
  static const std::vector<std::string> presets = {"Q4_K_M", "Q4_0", "Q8_0", "Q6_K", "F16", "MXFP4_MOE"};
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
                              bool is_output_matrix, int64_t n_expert) {
  check_preset(preset);
  if (preset == "F16") return quant::Type::F16;  // not a quantized type: the quantizer's mixes do not apply
  if (is_output_matrix) return preset == "Q8_0" || preset == "MXFP4_MOE" ? quant::Type::Q8_0 : quant::Type::Q6_K;
  // MXFP4_MOE: the experts (the only 3-D matrices) in MXFP4 as OpenAI distributes them, every other matrix Q8_0,
  // the untied token embedding included.
  const bool experts = tensor.ends_with("_exps");
  if (preset == "MXFP4_MOE") return experts ? quant::Type::MXFP4 : quant::Type::Q8_0;
  const quant::Type base = preset == "Q4_0" ? quant::Type::Q4_0
                           : preset == "Q8_0" ? quant::Type::Q8_0
                           : preset == "Q6_K" ? quant::Type::Q6_K
                                              : quant::Type::Q4_K;
  const bool q4_k_m = preset == "Q4_K_M";
  // The quantizer spends about 128 MB more on attention for models of exactly 8 experts (Mixtral's count).
  const bool eight_experts = n_expert == 8;
  if (tensor == "attn_v" || tensor == "attn_qkv") {
    if (eight_experts) return quant::Type::Q8_0;
    return q4_k_m && use_more_bits(layer, n_layer) ? quant::Type::Q6_K : base;
  }
  if (tensor == "attn_k") return eight_experts ? quant::Type::Q8_0 : base;
  if (tensor == "attn_output") return eight_experts && q4_k_m ? quant::Type::Q5_K : base;
  // ffn_down and ffn_down_exps alike: the quantizer reads an expert tensor's layer from its name.
  if ((tensor == "ffn_down" || tensor == "ffn_down_exps") && q4_k_m && use_more_bits(layer, n_layer))
    return quant::Type::Q6_K;
  return base;
}

std::vector<SynthTensor> synth_tensors(const SynthShape& s, const std::string& preset, int64_t n_vocab) {
  check_preset(preset);
  using Fill = SynthTensor::Fill;
  const int64_t E = s.n_embd, hd = s.head_size(), F = s.n_ff, L = s.n_layer;
  const int64_t nq = s.n_head * hd, nkv = s.n_head_kv * hd;
  const bool gemma = s.arch == "gemma3", phi = s.arch == "phi3", oss = s.arch == "gpt-oss";
  const bool qk_norm = gemma || s.arch == "qwen3moe";
  std::vector<SynthTensor> t;
  // A matrix [K, N] or a stack of expert matrices [K, N, n_expert]: its preset type, after the fallback for its row
  // length K.
  const auto matrix = [&](const std::string& name, const char* role, int64_t layer, std::vector<int64_t> ne,
                          bool output = false) {
    const quant::Type type = fallback(synth_tensor_type(preset, role, layer, L, output, s.n_expert), ne[0]);
    t.push_back({name, type, std::move(ne), Fill::Random});
  };
  const auto f32 = [&](const std::string& name, std::vector<int64_t> ne, Fill fill) {
    t.push_back({name, quant::Type::F32, std::move(ne), fill});
  };
  const auto vec = [&](const std::string& name, int64_t n, Fill fill) { f32(name, {n}, fill); };
  if (phi && s.n_ctx_orig > 0) {  // the converter writes the LongRoPE factors first
    vec("rope_factors_long.weight", hd / 2, Fill::LongFactors);
    vec("rope_factors_short.weight", hd / 2, Fill::ShortFactors);
  }
  matrix("token_embd.weight", "token_embd", 0, {E, n_vocab}, s.tied_output);  // [n_embd, n_vocab]
  if (s.llama3_rope_factors) vec("rope_freqs.weight", hd / 2, Fill::Llama3Factors);
  for (int64_t l = 0; l < L; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    vec(p + "attn_norm.weight", E, Fill::Norm);
    if (phi) {
      matrix(p + "attn_qkv.weight", "attn_qkv", l, {E, nq + 2 * nkv});  // [n_embd, q | k | v]
    } else {
      matrix(p + "attn_q.weight", "attn_q", l, {E, nq});
      if (oss) vec(p + "attn_q.bias", nq, Fill::Bias);
      matrix(p + "attn_k.weight", "attn_k", l, {E, nkv});
      if (oss) vec(p + "attn_k.bias", nkv, Fill::Bias);
      matrix(p + "attn_v.weight", "attn_v", l, {E, nkv});
      if (oss) vec(p + "attn_v.bias", nkv, Fill::Bias);
    }
    if (qk_norm) {
      vec(p + "attn_q_norm.weight", hd, Fill::Norm);
      vec(p + "attn_k_norm.weight", hd, Fill::Norm);
    }
    matrix(p + "attn_output.weight", "attn_output", l, {nq, E});
    if (oss) {
      vec(p + "attn_output.bias", E, Fill::Bias);
      vec(p + "attn_sinks.weight", s.n_head, Fill::Bias);  // one logit per query head
    }
    if (gemma) vec(p + "post_attention_norm.weight", E, Fill::Norm);
    // gpt-oss's pre-MoE norm is called post_attention_norm; every other architecture's is ffn_norm.
    vec(p + (oss ? "post_attention_norm.weight" : "ffn_norm.weight"), E, Fill::Norm);
    if (s.n_expert > 0) {
      const int64_t X = s.n_expert, Fe = s.n_ff_exp;
      // The router is F32 under every preset: the converter writes it so and the quantizer never touches it.
      f32(p + "ffn_gate_inp.weight", {E, X}, Fill::Random);  // [n_embd, n_expert]
      if (oss) vec(p + "ffn_gate_inp.bias", X, Fill::Bias);
      matrix(p + "ffn_gate_exps.weight", "ffn_gate_exps", l, {E, Fe, X});  // [n_embd, n_ff_exp, n_expert]
      if (oss) f32(p + "ffn_gate_exps.bias", {Fe, X}, Fill::Bias);
      matrix(p + "ffn_up_exps.weight", "ffn_up_exps", l, {E, Fe, X});      // [n_embd, n_ff_exp, n_expert]
      if (oss) f32(p + "ffn_up_exps.bias", {Fe, X}, Fill::Bias);
      matrix(p + "ffn_down_exps.weight", "ffn_down_exps", l, {Fe, E, X});  // [n_ff_exp, n_embd, n_expert]
      if (oss) f32(p + "ffn_down_exps.bias", {E, X}, Fill::Bias);
      continue;
    }
    if (phi) {
      matrix(p + "ffn_up.weight", "ffn_up", l, {E, 2 * F});  // [n_embd, gate | up]
    } else {
      matrix(p + "ffn_gate.weight", "ffn_gate", l, {E, F});
      matrix(p + "ffn_up.weight", "ffn_up", l, {E, F});
    }
    matrix(p + "ffn_down.weight", "ffn_down", l, {F, E});
    if (gemma) vec(p + "post_ffw_norm.weight", E, Fill::Norm);
  }
  vec("output_norm.weight", E, Fill::Norm);
  if (!s.tied_output) matrix("output.weight", "output", 0, {E, n_vocab}, true);
  return t;
}

}  // namespace model
