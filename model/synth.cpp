// Writes synthetic GGUF models: real shapes, random valid blocks, a vocabulary copied from another file.
// Tensor data is produced one tensor at a time through the writer's streaming path, filled by all cores, so an
// 8B-parameter file takes seconds and never needs to fit in memory.
#include "model/synth.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <numbers>
#include <stdexcept>
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

const std::vector<SynthShape>& synth_shapes() {
  static const std::vector<SynthShape> shapes = {
      {"llama3-8b", "Llama-3-8B (synthetic)", 4096, 32, 32, 8, 14336, 8192, 128256, 500000.0f, 1e-5f, false, false},
      {"llama3-1b", "Llama-3.2-1B (synthetic)", 2048, 16, 32, 8, 8192, 131072, 128256, 500000.0f, 1e-5f, true, true},
      {"llama2-7b", "Llama-2-7B (synthetic)", 4096, 32, 32, 32, 11008, 4096, 32000, 10000.0f, 1e-5f, false, false},
      {"tiny", "tiny llama (synthetic, for tests)", 256, 2, 4, 2, 512, 2048, 32000, 10000.0f, 1e-5f, false, false},
      // 128-wide heads as the 7B/8B shapes have (what the attention + o launch serves), in 2 small layers.
      {"tiny-h128", "tiny llama, 128-wide heads (synthetic, for tests)", 2048, 2, 16, 4, 1024, 2048, 32000,
       10000.0f, 1e-5f, false, false},
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

// The reference quantizer's "use more bits" rule for attn_v / ffn_down under the *_M presets: the first and last
// eighth of the layers, and every third layer in between.
bool use_more_bits(int64_t layer, int64_t n_layer) {
  return layer < n_layer / 8 || layer >= 7 * n_layer / 8 || (layer - n_layer / 8) % 3 == 2;
}

uint32_t file_type_id(const std::string& preset) {
  // general.file_type values of the reference quantizer's presets.
  if (preset == "F16") return 1;
  if (preset == "Q4_0") return 2;
  if (preset == "Q8_0") return 7;
  if (preset == "Q4_K_M") return 15;
  if (preset == "Q6_K") return 18;
  throw std::invalid_argument("unknown preset '" + preset + "'");
}

}  // namespace

quant::Type synth_tensor_type(const std::string& preset, const std::string& tensor, int64_t layer, int64_t n_layer,
                              bool is_output_matrix) {
  file_type_id(preset);  // validates the name
  if (preset == "F16") return quant::Type::F16;
  if (is_output_matrix) return preset == "Q8_0" ? quant::Type::Q8_0 : quant::Type::Q6_K;
  if (preset == "Q4_0") return quant::Type::Q4_0;
  if (preset == "Q8_0") return quant::Type::Q8_0;
  if (preset == "Q6_K") return quant::Type::Q6_K;
  // Q4_K_M
  if ((tensor == "attn_v" || tensor == "ffn_down") && use_more_bits(layer, n_layer)) return quant::Type::Q6_K;
  return quant::Type::Q4_K;
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
  for (int i = 1; i < n; ++i) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
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
  const int64_t head_dim = s.n_embd / s.n_head;

  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_str("general.name", s.display_name);
  w.set_u32("general.file_type", ftype);
  w.set_u32("llama.context_length", static_cast<uint32_t>(s.n_ctx));
  w.set_u32("llama.embedding_length", static_cast<uint32_t>(s.n_embd));
  w.set_u32("llama.block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32("llama.feed_forward_length", static_cast<uint32_t>(s.n_ff));
  w.set_u32("llama.rope.dimension_count", static_cast<uint32_t>(head_dim));
  w.set_u32("llama.attention.head_count", static_cast<uint32_t>(s.n_head));
  w.set_u32("llama.attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_f32("llama.attention.layer_norm_rms_epsilon", s.rms_eps);
  w.set_f32("llama.rope.freq_base", s.rope_base);
  w.set_u32("llama.vocab_size", static_cast<uint32_t>(n_vocab));
  w.copy_metadata(vocab, "tokenizer.");

  SynthResult result;
  result.n_vocab = n_vocab;
  uint64_t total_bytes = 0;
  uint64_t tensor_index = 0;
  // Running totals for the progress callback live here, shared by the lazy fills.
  auto done = std::make_shared<uint64_t>(0);
  auto total = std::make_shared<uint64_t>(0);

  auto add_random = [&](const std::string& name, quant::Type type, std::vector<int64_t> ne) {
    const int64_t block = quant::traits(type).block_elems;
    if (ne[0] % block != 0) type = quant::Type::Q8_0;  // rows the K-quants cannot tile fall back, as the reference does
    const uint64_t n_elems = static_cast<uint64_t>(ne[0]) * static_cast<uint64_t>(ne.size() > 1 ? ne[1] : 1);
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
  auto add_f32 = [&](const std::string& name, std::vector<float> values, float jitter) {
    const int64_t n = static_cast<int64_t>(values.size());
    total_bytes += static_cast<uint64_t>(n) * 4;
    result.n_params += static_cast<uint64_t>(n);
    const uint64_t index = tensor_index++;
    w.add_tensor_lazy(name, quant::Type::F32, {n}, [values = std::move(values), jitter, index, seed = o.seed](uint8_t* dst) {
      uint64_t state = seed ^ (index * 0x9e3779b97f4a7c15ull);
      for (size_t i = 0; i < values.size(); ++i) {
        const float v = values[i] + (jitter > 0 ? uniform(state, -jitter, jitter) : 0.0f);
        std::memcpy(dst + 4 * i, &v, 4);
      }
    });
  };
  const std::vector<float> ones(static_cast<size_t>(s.n_embd), 1.0f);

  add_random("token_embd.weight", synth_tensor_type(o.preset, "token_embd", 0, s.n_layer, s.tied_output),
             {s.n_embd, n_vocab});
  if (s.llama3_rope_factors) add_f32("rope_freqs.weight", llama3_rope_factors(head_dim, s.rope_base), 0.0f);
  for (int64_t l = 0; l < s.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto type_of = [&](const char* t) { return synth_tensor_type(o.preset, t, l, s.n_layer, false); };
    add_f32(p + "attn_norm.weight", ones, 0.1f);
    add_random(p + "attn_q.weight", type_of("attn_q"), {s.n_embd, s.n_embd});
    add_random(p + "attn_k.weight", type_of("attn_k"), {s.n_embd, head_dim * s.n_head_kv});
    add_random(p + "attn_v.weight", type_of("attn_v"), {s.n_embd, head_dim * s.n_head_kv});
    add_random(p + "attn_output.weight", type_of("attn_output"), {s.n_embd, s.n_embd});
    add_f32(p + "ffn_norm.weight", ones, 0.1f);
    add_random(p + "ffn_gate.weight", type_of("ffn_gate"), {s.n_embd, s.n_ff});
    add_random(p + "ffn_up.weight", type_of("ffn_up"), {s.n_embd, s.n_ff});
    add_random(p + "ffn_down.weight", type_of("ffn_down"), {s.n_ff, s.n_embd});
  }
  add_f32("output_norm.weight", ones, 0.1f);
  if (!s.tied_output) {
    add_random("output.weight", synth_tensor_type(o.preset, "output", 0, s.n_layer, true), {s.n_embd, n_vocab});
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
