// Writes synthetic GGUF models: real shapes (synth_shapes.cpp), random valid blocks, a vocabulary copied from another
// file. Tensor data is produced one tensor at a time through the writer's streaming path, filled by all cores, so an
// 8B-parameter file takes seconds and never needs to fit in memory.
#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numbers>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "gguf/gguf.h"
#include "quant/blocks.h"
#include "quant/half.h"

namespace model {
namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [lo, hi).
float uniform(uint64_t& state, float lo, float hi) {
  return lo + (hi - lo) * static_cast<float>(splitmix64(state) >> 40) * (1.0f / 16777216.0f);
}

void put_half(uint8_t* block, size_t offset, float value) {
  const uint16_t h = quant::f32_to_f16(value);
  std::memcpy(block + offset, &h, sizeof h);
}

// Where the half-precision scales sit in each block, and the magnitude that gives weights of about 0.02 std.
struct ScaleLayout {
  size_t d_offset;
  float d_magnitude;
  int64_t min_offset;  // -1 when the format has no minimum
};

ScaleLayout scale_layout(quant::Type t) {
  using namespace quant;
  switch (t) {
    case Type::Q4_0: return {offsetof(BlockQ4_0, d), 4e-3f, -1};
    case Type::Q4_1: return {offsetof(BlockQ4_1, d), 4e-3f, offsetof(BlockQ4_1, m)};
    case Type::Q5_0: return {offsetof(BlockQ5_0, d), 2e-3f, -1};
    case Type::Q5_1: return {offsetof(BlockQ5_1, d), 2e-3f, offsetof(BlockQ5_1, m)};
    case Type::Q8_0: return {offsetof(BlockQ8_0, d), 2.7e-4f, -1};
    case Type::Q2_K: return {offsetof(BlockQ2_K, d), 2e-3f, offsetof(BlockQ2_K, dmin)};
    case Type::Q3_K: return {offsetof(BlockQ3_K, d), 5e-4f, -1};
    case Type::Q4_K: return {offsetof(BlockQ4_K, d), 1.4e-4f, offsetof(BlockQ4_K, dmin)};
    case Type::Q5_K: return {offsetof(BlockQ5_K, d), 7e-5f, offsetof(BlockQ5_K, dmin)};
    case Type::Q6_K: return {offsetof(BlockQ6_K, d), 2e-5f, -1};
    default: throw std::invalid_argument(std::string("synth: no random block generator for type ") + type_name(t));
  }
}

}  // namespace

void fill_random_blocks(quant::Type type, uint8_t* dst, uint64_t n_blocks, uint64_t seed, uint64_t stream) {
  uint64_t state = seed * 0x9e3779b97f4a7c15ull ^ (stream + 1) * 0xd1b54a32d192ed03ull;
  const auto& tr = quant::traits(type);
  switch (type) {
    case quant::Type::F32:
      for (uint64_t i = 0; i < n_blocks; ++i) {
        const float v = uniform(state, -0.035f, 0.035f);
        std::memcpy(dst + 4 * i, &v, 4);
      }
      return;
    case quant::Type::F16:
    case quant::Type::BF16:
      for (uint64_t i = 0; i < n_blocks; ++i) {
        const float v = uniform(state, -0.035f, 0.035f);
        const uint16_t h = type == quant::Type::F16 ? quant::f32_to_f16(v) : quant::f32_to_bf16(v);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      return;
    case quant::Type::MXFP4:
      // Random E2M1 nibbles (doubled magnitudes 0..12, rms about 5.9) under a power-of-two scale of 2^-9 or 2^-8.
      for (uint64_t b = 0; b < n_blocks; ++b) {
        quant::BlockMXFP4 block;
        for (size_t i = 0; i < sizeof block.qs; i += 8) {
          const uint64_t r = splitmix64(state);
          std::memcpy(block.qs + i, &r, std::min<size_t>(8, sizeof block.qs - i));
        }
        constexpr uint8_t kScaleTwoToMinus9 = 119;  // E8M0 119 scales the doubled values by 2^(119 - 128)
        block.e = static_cast<uint8_t>(kScaleTwoToMinus9 + (splitmix64(state) & 1));
        std::memcpy(dst + b * sizeof block, &block, sizeof block);
      }
      return;
    default: break;
  }
  const ScaleLayout layout = scale_layout(type);
  const size_t bytes = tr.block_bytes;
  for (uint64_t b = 0; b < n_blocks; ++b) {
    uint8_t* block = dst + b * bytes;
    for (size_t i = 0; i < bytes; i += 8) {
      const uint64_t r = splitmix64(state);
      std::memcpy(block + i, &r, std::min<size_t>(8, bytes - i));
    }
    put_half(block, layout.d_offset, layout.d_magnitude * uniform(state, 0.5f, 1.5f));
    if (layout.min_offset >= 0) {
      put_half(block, static_cast<size_t>(layout.min_offset), layout.d_magnitude * uniform(state, 0.5f, 1.5f));
    }
  }
}

namespace {

// Llama 3.1/3.2 long-context rope: per-frequency divisors (factor 32, low 1, high 4, original context 8192).
std::vector<float> llama3_rope_factors(int64_t head_dim, float base) {
  const double factor = 32.0, low_freq_factor = 1.0, high_freq_factor = 4.0, old_ctx = 8192.0;
  const double low_wavelen = old_ctx / low_freq_factor, high_wavelen = old_ctx / high_freq_factor;
  std::vector<float> out(static_cast<size_t>(head_dim / 2));
  for (int64_t i = 0; i < head_dim / 2; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
    const double wavelen = 2.0 * std::numbers::pi / freq;
    double f = 1.0;
    if (wavelen > low_wavelen) {
      f = factor;
    } else if (wavelen >= high_wavelen) {
      const double smooth = (old_ctx / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor);
      f = 1.0 / ((1.0 - smooth) / factor + smooth);
    }
    out[static_cast<size_t>(i)] = static_cast<float>(f);
  }
  return out;
}

// Fills one tensor with all cores; chunks are seeded by (tensor, chunk) so the bytes do not depend on thread count.
void parallel_fill(quant::Type type, uint8_t* dst, uint64_t n_blocks, uint64_t seed, uint64_t tensor_index,
                   int n_threads) {
  constexpr uint64_t kChunkBlocks = 1 << 14;
  const uint64_t n_chunks = (n_blocks + kChunkBlocks - 1) / kChunkBlocks;
  const size_t bytes = quant::traits(type).block_bytes;
  std::atomic<uint64_t> next{0};
  auto work = [&] {
    for (uint64_t c = next++; c < n_chunks; c = next++) {
      const uint64_t first = c * kChunkBlocks;
      const uint64_t count = std::min(kChunkBlocks, n_blocks - first);
      fill_random_blocks(type, dst + first * bytes, count, seed, (tensor_index << 32) | c);
    }
  };
  const int n = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(std::max(1, n_threads)), n_chunks));
  std::vector<std::thread> pool;
  try {
    for (int i = 1; i < n; ++i) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // The system refused a thread: the chunks are shared out as they come, so fewer threads fill the same bytes.
  }
  work();
  for (auto& t : pool) t.join();
}

uint32_t file_type_id(const std::string& preset) {
  // general.file_type values of the reference quantizer's presets.
  if (preset == "F16") return 1;
  if (preset == "Q4_0") return 2;
  if (preset == "Q8_0") return 7;
  if (preset == "Q4_K_M") return 15;
  if (preset == "Q6_K") return 18;
  if (preset == "MXFP4_MOE") return 38;
  throw std::invalid_argument("unknown preset '" + preset + "'");
}

// LongRoPE's per-pair divisors, deterministic stand-ins of the real ones' form: the long factors rise from 1 to
// about 40 over the pairs, the short ones stay near 1.
std::vector<float> longrope_factors(int64_t n, bool long_factors) {
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = n > 1 ? static_cast<double>(i) / static_cast<double>(n - 1) : 0.0;
    out[static_cast<size_t>(i)] = static_cast<float>(long_factors ? std::exp(std::log(40.0) * std::pow(x, 1.5))
                                                                  : 1.0 + 0.5 * x * x);
  }
  return out;
}

// The architecture's hyperparameter keys, as its converter writes them.
void write_keys(gguf::Writer& w, const SynthShape& s, int64_t n_vocab) {
  const std::string a = s.arch + ".";
  const auto u32 = [&](const char* key, int64_t v) { w.set_u32(a + key, static_cast<uint32_t>(v)); };
  u32("context_length", s.n_ctx);
  u32("embedding_length", s.n_embd);
  u32("block_count", s.n_layer);
  u32("feed_forward_length", s.n_ff);
  // gemma3's, qwen3moe's and gpt-oss's converters write none (the loader takes the head size).
  if (s.arch == "llama" || s.arch == "phi3") u32("rope.dimension_count", s.head_size());
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  if (s.head_dim > 0) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
  }
  w.set_f32(a + "attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32(a + "rope.freq_base", s.rope_base);
  if (s.n_expert > 0) {
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_expert_used);
    u32("expert_feed_forward_length", s.n_ff_exp);
  }
  if (s.n_swa > 0) {
    u32("attention.sliding_window", s.n_swa);
    if (s.arch == "gemma3") w.set_f32(a + "rope.freq_base_swa", s.rope_base_swa);  // gpt-oss: one base for both
  }
  if (s.phi3_sliding_window > 0) u32("attention.sliding_window", s.phi3_sliding_window);
  if (s.rope_linear_factor > 0.0f) {
    w.set_str(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", s.rope_linear_factor);
  }
  if (s.rope_yarn_factor > 0.0f) {
    // gpt-oss's converter writes YaRN's betas too (at the defaults llama.cpp assumes when they are absent).
    w.set_str(a + "rope.scaling.type", "yarn");
    w.set_f32(a + "rope.scaling.factor", s.rope_yarn_factor);
    u32("rope.scaling.original_context_length", s.n_ctx_orig);
    w.set_f32(a + "rope.scaling.yarn_beta_fast", 32.0f);
    w.set_f32(a + "rope.scaling.yarn_beta_slow", 1.0f);
  } else if (s.n_ctx_orig > 0) {
    // phi3's converter: the original context and LongRoPE's attention factor sqrt(1 + ln(ctx / orig) / ln(orig)).
    u32("rope.scaling.original_context_length", s.n_ctx_orig);
    const double scale = static_cast<double>(s.n_ctx) / static_cast<double>(s.n_ctx_orig);
    w.set_f32(a + "rope.scaling.attn_factor",
              static_cast<float>(std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.n_ctx_orig)))));
  }
  u32("vocab_size", n_vocab);
}

}  // namespace

SynthResult write_synthetic_model(const SynthOptions& o) {
  const SynthShape& s = synth_shape(o.shape);
  const uint32_t ftype = file_type_id(o.preset);
  if (o.out_path.empty()) throw std::invalid_argument("synth: no output file given (-o FILE)");
  const gguf::File vocab = gguf::File::open(o.vocab_path);
  const auto tokens = vocab.get_array<std::string>("tokenizer.ggml.tokens");
  const int64_t n_vocab = static_cast<int64_t>(tokens.size());
  const int n_threads = o.n_threads > 0 ? o.n_threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  gguf::Writer w;
  w.set_str("general.architecture", s.arch);
  w.set_str("general.name", s.display_name);
  w.set_u32("general.file_type", ftype);
  write_keys(w, s, n_vocab);
  w.copy_metadata(vocab, "tokenizer.");

  SynthResult result;
  result.n_vocab = n_vocab;
  uint64_t total_bytes = 0;
  uint64_t tensor_index = 0;
  // Running totals for the progress callback live here, shared by the lazy fills.
  auto done = std::make_shared<uint64_t>(0);
  auto total = std::make_shared<uint64_t>(0);

  const auto elements = [](const std::vector<int64_t>& ne) {
    uint64_t n = 1;
    for (int64_t d : ne) n *= static_cast<uint64_t>(d);
    return n;
  };
  auto add_random = [&](const std::string& name, quant::Type type, std::vector<int64_t> ne) {
    const uint64_t n_elems = elements(ne);
    const uint64_t n_blocks = n_elems / static_cast<uint64_t>(quant::traits(type).block_elems);
    const uint64_t nbytes = n_blocks * quant::traits(type).block_bytes;
    total_bytes += nbytes;
    result.n_params += n_elems;
    const uint64_t index = tensor_index++;
    w.add_tensor_lazy(name, type, std::move(ne), [=, seed = o.seed, progress = o.progress](uint8_t* dst) {
      parallel_fill(type, dst, n_blocks, seed, index, n_threads);
      *done += nbytes;
      if (progress) progress(*done, *total);
    });
  };
  // An F32 tensor of ne (1-D when empty): `values` plus a uniform jitter of up to +-jitter.
  auto add_f32 = [&](const std::string& name, std::vector<float> values, float jitter, std::vector<int64_t> ne = {}) {
    if (ne.empty()) ne = {static_cast<int64_t>(values.size())};
    total_bytes += values.size() * 4;
    result.n_params += values.size();
    const uint64_t index = tensor_index++;
    const auto fill = [values = std::move(values), jitter, index, seed = o.seed](uint8_t* dst) {
      uint64_t state = seed ^ (index * 0x9e3779b97f4a7c15ull);
      for (size_t i = 0; i < values.size(); ++i) {
        const float v = values[i] + (jitter > 0 ? uniform(state, -jitter, jitter) : 0.0f);
        std::memcpy(dst + 4 * i, &v, 4);
      }
    };
    w.add_tensor_lazy(name, quant::Type::F32, std::move(ne), fill);
  };

  for (const SynthTensor& t : synth_tensors(s, o.preset, n_vocab)) {
    const int64_t n = t.ne[0];
    const size_t all = static_cast<size_t>(elements(t.ne));
    switch (t.fill) {
      case SynthTensor::Fill::Random: add_random(t.name, t.type, t.ne); break;
      case SynthTensor::Fill::Norm: add_f32(t.name, std::vector<float>(all, 1.0f), 0.1f, t.ne); break;
      case SynthTensor::Fill::Bias: add_f32(t.name, std::vector<float>(all, 0.0f), 0.05f, t.ne); break;
      case SynthTensor::Fill::Llama3Factors: add_f32(t.name, llama3_rope_factors(2 * n, s.rope_base), 0.0f); break;
      case SynthTensor::Fill::LongFactors: add_f32(t.name, longrope_factors(n, true), 0.0f); break;
      case SynthTensor::Fill::ShortFactors: add_f32(t.name, longrope_factors(n, false), 0.0f); break;
    }
  }
  *total = total_bytes;
  w.write(o.out_path);
  result.file_bytes = 0;
  {
    const gguf::File check = gguf::File::open(o.out_path);  // proves the file reads back
    result.file_bytes = check.file_size();
  }
  return result;
}

}  // namespace model
