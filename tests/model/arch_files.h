// Small gemma3 / phi3 files written in memory for the config and graph tests: the metadata a test chooses, and
// (on request) every tensor the architecture reads, F32 with random values, in the shapes the loader expects.
#pragma once
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gguf/gguf.h"
#include "model/model.h"
#include "model/weights.h"

namespace arch_files {

// One image and the model parsed from it (File::parse does not copy, so the bytes live here).
struct Built {
  std::vector<uint8_t> bytes;
  std::shared_ptr<const model::Model> model;
};

// Keys every architecture needs, for a model of n_layer layers, n_embd 16, 4 heads of 4 (2 kv heads), n_ff 24,
// a 40-token vocabulary; `extra` adds or overrides keys.
inline gguf::Writer metadata(const std::string& arch, int n_layer, const std::function<void(gguf::Writer&)>& extra) {
  gguf::Writer w;
  const std::string a = arch + ".";
  w.set_str("general.architecture", arch);
  w.set_u32(a + "context_length", 4096);
  w.set_u32(a + "embedding_length", 16);
  w.set_u32(a + "block_count", static_cast<uint32_t>(n_layer));
  w.set_u32(a + "feed_forward_length", 24);
  w.set_u32(a + "attention.head_count", 4);
  w.set_u32(a + "attention.head_count_kv", 2);
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-6f);
  std::vector<std::string> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(std::string("t").append(std::to_string(i)));
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  if (extra) extra(w);
  return w;
}

// The Config of metadata alone: the file has no tensors, so its layer count is not checked against them (as
// read_config checks a model file's).
inline model::Config config_of(gguf::Writer& w, const std::string& name = "meta.gguf") {
  const std::vector<uint8_t> bytes = w.to_bytes();
  model::RawHparams raw = model::RawHparams::read(gguf::File::parse(bytes.data(), bytes.size(), name));
  raw.tensor_count.reset();
  return model::Config::resolve(raw);
}

// The file with every tensor its Config asks for (optional ones too, unless skipped), then the loaded model.
// fused_qkv: write blk.N.attn_qkv instead of q/k/v (the loader reads the layout from the file).
inline std::unique_ptr<Built> with_tensors(gguf::Writer w, bool fused_qkv = false,
                                           const std::vector<std::string>& skip = {"output.weight"},
                                           uint32_t seed = 11) {
  if (fused_qkv) {
    static const float dummy[16 * 32] = {};
    w.add_tensor("blk.0.attn_qkv.weight", quant::Type::F32, {16, 32}, dummy);  // replaced below; marks the layout
  }
  model::Config c = config_of(w);
  gguf::Writer out;
  const std::vector<uint8_t> meta = w.to_bytes();
  out.copy_metadata(gguf::File::parse(meta.data(), meta.size(), "meta"));
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto storage = std::make_shared<std::vector<std::vector<float>>>();
  for (const model::WeightSpec& s : model::weight_specs(c)) {
    bool skipped = false;
    for (const std::string& k : skip) skipped = skipped || k == s.name;
    if (skipped) continue;
    int64_t n = 1;
    for (int64_t d : s.ne) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    // Norms and factors near 1, matrices and biases small.
    const bool near_one = s.f32_only && s.name.find("bias") == std::string::npos;
    for (float& x : v) x = near_one ? 1.0f + 0.1f * dist(rng) : 0.3f * dist(rng);
    storage->push_back(std::move(v));
    out.add_tensor(s.name, quant::Type::F32, s.ne, storage->back().data());
  }
  auto b = std::make_unique<Built>();
  b->bytes = out.to_bytes();
  b->model = model::Model::from_file(gguf::File::parse(b->bytes.data(), b->bytes.size(), "arch.gguf"));
  return b;
}

}  // namespace arch_files
