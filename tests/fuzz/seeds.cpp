// The seed corpora (see seeds.h). Everything is deterministic, so a corpus folder can always be regenerated.
#include "seeds.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <fstream>
#include <random>
#include <sstream>

#include "../gguf/raw_gguf.h"
#include "chat/chat_template.h"
#include "gguf/gguf.h"
#include "quant/types.h"

namespace fuzz {
namespace {

using gguf::Value;
using gguf::ValueType;

Seed seed(std::string name, std::vector<uint8_t> bytes) { return Seed{std::move(name) + ".bin", std::move(bytes)}; }

Seed text_seed(std::string name, std::string_view text) {
  return seed(std::move(name), std::vector<uint8_t>(text.begin(), text.end()));
}

// Random floats quantized row by row into `type`.
std::vector<uint8_t> tensor_bytes(quant::Type type, int64_t ne0, int64_t rows, std::mt19937& rng, float scale,
                                  float offset = 0) {
  std::normal_distribution<float> dist(0.0f, 1.0f);
  const size_t row = quant::row_bytes(type, ne0);
  std::vector<uint8_t> out(row * static_cast<size_t>(rows));
  std::vector<float> src(static_cast<size_t>(ne0));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& x : src) x = offset + scale * dist(rng);
    quant::quantize_row(type, src.data(), out.data() + row * static_cast<size_t>(r), ne0);
  }
  return out;
}

// One file holding every metadata value type, arrays (empty, nested, of strings) and a tensor of every type.
std::vector<uint8_t> rich_file(uint64_t alignment) {
  gguf::Writer w(alignment);
  w.set_str("general.architecture", "llama");
  w.set_str("general.name", "fuzz seed \xe2\x9c\x85");
  w.set("u8", Value{ValueType::UINT8, uint64_t{200}});
  w.set("i8", Value{ValueType::INT8, int64_t{-100}});
  w.set("u16", Value{ValueType::UINT16, uint64_t{60000}});
  w.set("i16", Value{ValueType::INT16, int64_t{-30000}});
  w.set_u32("u32", 4000000000u);
  w.set_i32("i32", -2000000000);
  w.set("u64", Value{ValueType::UINT64, uint64_t{1} << 63});
  w.set("i64", Value{ValueType::INT64, int64_t{-1} << 62});
  w.set_f32("f32", 1.5f);
  w.set("f64", Value{ValueType::FLOAT64, 1e300});
  w.set_bool("bool", true);
  w.set_str("empty", "");
  w.set("strings", gguf::make_string_array({"a", "", "\xc3\xa4pfel", "<s>"}));
  w.set("floats", gguf::make_f32_array({0.5f, -2.0f, 1e-30f}));
  w.set("ints", gguf::make_i32_array({1, -1, 7}));
  w.set("empty_array", Value{ValueType::ARRAY, gguf::Array{ValueType::UINT32, {}}});
  gguf::Array inner{ValueType::UINT8, {Value{ValueType::UINT8, uint64_t{1}}, Value{ValueType::UINT8, uint64_t{2}}}};
  gguf::Array outer{ValueType::ARRAY, {Value{ValueType::ARRAY, inner}, Value{ValueType::ARRAY, inner}}};
  w.set("nested", Value{ValueType::ARRAY, outer});
  std::vector<std::vector<uint8_t>> data;  // must outlive to_bytes()
  std::mt19937 rng(1);
  const std::pair<quant::Type, std::vector<int64_t>> tensors[] = {
      {quant::Type::F32, {4}},          {quant::Type::F16, {8, 2}},       {quant::Type::BF16, {8, 1, 2}},
      {quant::Type::Q4_0, {32, 2}},     {quant::Type::Q4_1, {32}},        {quant::Type::Q5_0, {32, 1, 1, 2}},
      {quant::Type::Q5_1, {64}},        {quant::Type::Q8_0, {32, 3}},     {quant::Type::Q2_K, {256}},
      {quant::Type::Q3_K, {256}},       {quant::Type::Q4_K, {256}},       {quant::Type::Q5_K, {256}},
      {quant::Type::Q6_K, {256}},       {quant::Type::Q8_K, {256}},       {quant::Type::Q8_1, {32}},
  };
  data.reserve(std::size(tensors));
  for (const auto& [type, ne] : tensors) {
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    try {
      data.push_back(tensor_bytes(type, ne[0], rows, rng, 1.0f));
    } catch (const std::exception&) {  // a type without a quantizer: arbitrary bytes
      data.emplace_back(quant::row_bytes(type, ne[0]) * static_cast<size_t>(rows), uint8_t{0x3c});
    }
    w.add_tensor(std::string("t.") + quant::type_name(type), type, ne, data.back().data());
  }
  return w.to_bytes();
}

std::vector<uint8_t> vocab_only_file() {
  gguf::Writer w;
  w.set_str("general.architecture", "llama");
  w.set_str("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", gguf::make_string_array({"<unk>", "<s>", "</s>", "\xe2\x96\x81hi", "a"}));
  w.set("tokenizer.ggml.scores", gguf::make_f32_array({0, 0, 0, -1, -2}));
  w.set("tokenizer.ggml.token_type", gguf::make_i32_array({2, 3, 3, 1, 1}));
  w.set_u32("tokenizer.ggml.bos_token_id", 1);
  w.set_str("tokenizer.chat_template", "{% for m in messages %}{{ m.content }}{% endfor %}");
  return w.to_bytes();
}

rawgguf::Tensor tensor(std::string name, std::vector<uint64_t> ne, uint32_t type = 0,
                       std::optional<uint64_t> offset = std::nullopt) {
  return rawgguf::Tensor{std::move(name), std::move(ne), type, offset};
}

// Vocabularies the tokenizer must refuse with TokenizerError or load and use safely.
std::vector<Seed> vocabulary_seeds() {
  auto vocab = [](const std::string& model, const std::vector<std::string>& tokens,
                  const std::function<void(gguf::Writer&)>& extra = nullptr) {
    gguf::Writer w;
    w.set_str("tokenizer.ggml.model", model);
    w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
    if (extra) extra(w);
    return w.to_bytes();
  };
  auto merges = [](std::vector<std::string> m) {
    return [m](gguf::Writer& w) { w.set("tokenizer.ggml.merges", gguf::make_string_array(m)); };
  };
  std::vector<Seed> out;
  out.push_back(seed("vocab-spm-empty-tokens", vocab("llama", {"", "", "<s>"})));
  out.push_back(seed("vocab-spm-duplicates", vocab("llama", {"a", "a", "\xe2\x96\x81" "a", "\xe2\x96\x81" "a"})));
  out.push_back(seed("vocab-spm-nan-scores", vocab("llama", {"<unk>", "a", "b"}, [](gguf::Writer& w) {
    w.set("tokenizer.ggml.scores", gguf::make_f32_array({NAN, INFINITY, -INFINITY}));
  })));
  const std::vector<std::string> bad_bytes = {"<0xZZ>", "<0x>", "<0x0A", "<0x100>"};
  out.push_back(seed("vocab-spm-bad-byte-tokens", vocab("llama", bad_bytes, [](gguf::Writer& w) {
    w.set("tokenizer.ggml.token_type", gguf::make_i32_array({6, 6, 6, 6}));
  })));
  out.push_back(seed("vocab-spm-ids-out-of-range", vocab("llama", {"a", "b"}, [](gguf::Writer& w) {
    w.set_u32("tokenizer.ggml.bos_token_id", 5);
    w.set_i32("tokenizer.ggml.eos_token_id", -5);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0xffffffffu);
  })));
  out.push_back(seed("vocab-spm-invalid-utf8", vocab("llama", {"\xff\xfe", "a\xc3", std::string("a\0b", 3)})));
  const std::vector<std::string> prefixes = {"<unk>", "<", "<<", "<<<", "a"};
  out.push_back(seed("vocab-spm-user-defined-prefixes", vocab("llama", prefixes, [](gguf::Writer& w) {
    w.set("tokenizer.ggml.token_type", gguf::make_i32_array({2, 4, 4, 4, 1}));
  })));
  out.push_back(seed("vocab-bpe-bad-merges",
                     vocab("gpt2", {"a", "b", "ab"}, merges({"ab", "a  b", " ", "", "x y", "a b c"}))));
  out.push_back(seed("vocab-bpe-merge-of-unknown", vocab("gpt2", {"a", "b"}, merges({"a b", "ab ab", "b a"}))));
  out.push_back(seed("vocab-bpe-empty-control", vocab("gpt2", {"", "a", "b"}, [&](gguf::Writer& w) {
    merges({"a b"})(w);
    w.set("tokenizer.ggml.token_type", gguf::make_i32_array({3, 3, 4}));
  })));
  out.push_back(seed("vocab-bpe-no-byte-tokens", vocab("gpt2", {"x"}, merges({"x x"}))));
  return out;
}

std::vector<Seed> malformed_seeds() {
  using namespace rawgguf;
  std::vector<Seed> out;
  auto add = [&](const char* name, const std::function<void(Spec&)>& edit,
                 const std::function<void(Raw&)>& post = nullptr) {
    Spec s;
    edit(s);
    Raw r = build(s);
    if (post) post(r);
    out.push_back(seed(std::string("malformed-") + name, std::move(r.b)));
  };
  auto nest = [](int levels) {
    return [levels](Raw& r) {
      r.u32(ARR);
      for (int i = 0; i < levels; ++i) r.u32(i + 1 < levels ? ARR : U8).u64(i + 1 < levels ? 1 : 0);
    };
  };
  add("base", [](Spec& s) {
    s.kvs = {kv_u32("general.alignment", 64), kv_str("general.name", "x")};
    s.alignment = 64;
  });
  add("bad-magic", [](Spec& s) { s.magic = "GGML"; });
  add("version-1", [](Spec& s) { s.version = 1; });
  add("version-2", [](Spec& s) { s.version = 2; });
  add("big-endian", [](Spec& s) { s.version = 0x03000000; });
  add("huge-kv-count", [](Spec& s) { s.n_kv = uint64_t{1} << 40; });
  add("huge-tensor-count", [](Spec& s) { s.n_tensors = UINT64_MAX; });
  add("huge-string", [](Spec& s) { s.kvs = {kv_raw("a", [](Raw& r) { r.u32(STR).u64(uint64_t{1} << 60); })}; });
  add("huge-array", [](Spec& s) { s.kvs = {kv_raw("a", [](Raw& r) { r.u32(ARR).u32(U32).u64(uint64_t{1} << 40); })}; });
  add("nest-16", [&](Spec& s) { s.kvs = {kv_raw("n", nest(16))}; });
  add("nest-17", [&](Spec& s) { s.kvs = {kv_raw("n", nest(17))}; });
  add("unknown-value-type", [](Spec& s) { s.kvs = {kv_raw("k", [](Raw& r) { r.u32(13).u32(0); })}; });
  add("bool-2", [](Spec& s) { s.kvs = {kv_raw("b", [](Raw& r) { r.u32(BOOL).u8(2); })}; });
  add("duplicate-key", [](Spec& s) { s.kvs = {kv_u32("a", 1), kv_u32("a", 2)}; });
  add("alignment-48", [](Spec& s) { s.kvs = {kv_u32("general.alignment", 48)}; });
  add("alignment-string", [](Spec& s) { s.kvs = {kv_str("general.alignment", "32")}; });
  add("empty-tensor-name", [](Spec& s) { s.tensors = {tensor("", {32})}; });
  add("duplicate-tensor", [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("a", {32})}; });
  add("n-dims-5", [](Spec& s) { s.tensors = {tensor("t", {32, 1, 1, 1, 1})}; });
  add("dimension-0", [](Spec& s) { s.tensors = {tensor("t", {32, 0})}; });
  add("element-overflow", [](Spec& s) { s.tensors = {tensor("t", {uint64_t{1} << 32, uint64_t{1} << 32, 4})}; });
  add("unknown-tensor-type", [](Spec& s) { s.tensors = {tensor("t", {32}, 42)}; });
  add("partial-block", [](Spec& s) { s.tensors = {tensor("t", {33, 2}, 2)}; });
  add("misaligned-offset", [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}, 0, 16)}; });
  add("overlapping-tensors", [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}, 0, 0)}; });
  add("offset-near-2^64", [](Spec& s) { s.tensors = {tensor("a", {32}), tensor("b", {32}, 0, UINT64_MAX - 31)}; });
  add("data-cut-short", [](Spec&) {}, [](Raw& r) { r.b.pop_back(); });
  add("no-data-section", [](Spec& s) { s.write_data = false; });
  add("no-tensors-no-padding", [](Spec& s) { s.tensors.clear(); s.kvs = {kv_u32("general.alignment", 1u << 20)}; });
  add("tensor-count-beyond-infos", [](Spec& s) { s.n_tensors = 2; });
  return out;
}

// ---- tiny models ----

struct TinySpec {
  std::string name;
  std::string arch = "llama";
  quant::Type wtype = quant::Type::F32;  // matrices; norms, biases and rope factors stay F32
  int n_layer = 1;
  int n_head_kv = 1;
  bool tied = false;
  bool rope_freqs = false;
  bool linear_scale = false;
  bool bias = false;       // attn_{q,k,v}.bias (always for qwen2)
  std::string tok = "llama";
};

std::vector<uint8_t> tiny_model(const TinySpec& s) {
  const int64_t E = 32, n_head = 2, hd = 16, F = 32, V = 16, nq = n_head * hd, nk = s.n_head_kv * hd;
  std::mt19937 rng(42);
  gguf::Writer w;
  const std::string a = s.arch + ".";
  w.set_str("general.architecture", s.arch);
  w.set_str("general.name", s.name);
  w.set_u32(a + "context_length", 64);
  w.set_u32(a + "embedding_length", E);
  w.set_u32(a + "block_count", static_cast<uint32_t>(s.n_layer));
  w.set_u32(a + "feed_forward_length", F);
  w.set_u32(a + "attention.head_count", n_head);
  w.set_u32(a + "attention.head_count_kv", static_cast<uint32_t>(s.n_head_kv));
  w.set_f32(a + "attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_f32(a + "rope.freq_base", 10000.0f);
  if (s.linear_scale) {
    w.set_str(a + "rope.scaling.type", "linear");
    w.set_f32(a + "rope.scaling.factor", 2.0f);
  }
  const bool gemma = s.arch == "gemma3", phi = s.arch == "phi3";
  if (gemma) {  // window 2 on layer 0 (pattern 2: il % 2 < 1), softcap
    w.set_u32(a + "attention.sliding_window", 2);
    w.set_u32(a + "attention.sliding_window_pattern", 2);
    w.set_f32(a + "rope.freq_base_swa", 100.0f);
    w.set_f32(a + "final_logit_softcapping", 5.0f);
  }
  if (phi) {  // LongRoPE over an original context of 16, the window llama.cpp ignores
    w.set_u32(a + "rope.scaling.original_context_length", 16);
    w.set_f32(a + "rope.scaling.attn_factor", 1.2f);
    w.set_u32(a + "attention.sliding_window", 32);
  }
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  if (s.tok == "gpt2") {
    tokens = {"<|endoftext|>", "a", "b", "c", "\xc4\xa0", "\xc4\xa0" "a", "ab", "abc", "d", "e", "!", "1", "2",
              "\xc4\x8a",
              "<|im_start|>", "<|im_end|>"};
    types.assign(tokens.size(), 1);
    types[0] = types[14] = types[15] = 3;
    w.set_str("tokenizer.ggml.model", "gpt2");
    w.set_str("tokenizer.ggml.pre", "qwen2");
    w.set("tokenizer.ggml.merges", gguf::make_string_array({"\xc4\xa0 a", "a b", "ab c"}));
    w.set_u32("tokenizer.ggml.eos_token_id", 0);
  } else {
    tokens = {"<unk>", "<s>", "</s>", "<0x0A>", "\xe2\x96\x81", "\xe2\x96\x81" "a", "a", "b", "ab", "\xe2\x96\x81" "ab",
              "c", "d", "!", "<0x41>", "<0xE2>", "<|user|>"};
    types = {2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 4};
    for (size_t i = 0; i < tokens.size(); ++i) scores.push_back(-static_cast<float>(i));
    w.set_str("tokenizer.ggml.model", "llama");
    w.set("tokenizer.ggml.scores", gguf::make_f32_array(scores));
    w.set_u32("tokenizer.ggml.bos_token_id", 1);
    w.set_u32("tokenizer.ggml.eos_token_id", 2);
    w.set_u32("tokenizer.ggml.unknown_token_id", 0);
  }
  w.set("tokenizer.ggml.tokens", gguf::make_string_array(tokens));
  w.set("tokenizer.ggml.token_type", gguf::make_i32_array(types));

  std::vector<std::vector<uint8_t>> data;  // must outlive to_bytes()
  data.reserve(64);
  auto add = [&](const std::string& name, std::vector<int64_t> ne, bool matrix, float scale = 0.3f, float off = 0) {
    const quant::Type t = matrix ? s.wtype : quant::Type::F32;
    int64_t rows = 1;
    for (size_t d = 1; d < ne.size(); ++d) rows *= ne[d];
    data.push_back(tensor_bytes(t, ne[0], rows, rng, scale, off));
    w.add_tensor(name, t, ne, data.back().data());
  };
  add("token_embd.weight", {E, V}, true, 0.5f);
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string p = "blk." + std::to_string(il) + ".";
    add(p + "attn_norm.weight", {E}, false, 0.1f, 1.0f);
    if (phi) {
      add(p + "attn_qkv.weight", {E, nq + 2 * nk}, true);
    } else {
      add(p + "attn_q.weight", {E, nq}, true);
      add(p + "attn_k.weight", {E, nk}, true);
      add(p + "attn_v.weight", {E, nk}, true);
    }
    if (s.bias || s.arch == "qwen2") {
      add(p + "attn_q.bias", {nq}, false, 0.2f);
      add(p + "attn_k.bias", {nk}, false, 0.2f);
      add(p + "attn_v.bias", {nk}, false, 0.2f);
    }
    if (s.arch == "qwen3" || gemma) {
      add(p + "attn_q_norm.weight", {hd}, false, 0.1f, 1.0f);
      add(p + "attn_k_norm.weight", {hd}, false, 0.1f, 1.0f);
    }
    add(p + "attn_output.weight", {nq, E}, true);
    if (gemma) add(p + "post_attention_norm.weight", {E}, false, 0.1f, 1.0f);
    add(p + "ffn_norm.weight", {E}, false, 0.1f, 1.0f);
    if (phi) {
      add(p + "ffn_up.weight", {E, 2 * F}, true);  // gate | up
    } else {
      add(p + "ffn_gate.weight", {E, F}, true);
      add(p + "ffn_up.weight", {E, F}, true);
    }
    add(p + "ffn_down.weight", {F, E}, true);
    if (gemma) add(p + "post_ffw_norm.weight", {E}, false, 0.1f, 1.0f);
  }
  if (phi) {
    add("rope_factors_long.weight", {hd / 2}, false, 0.5f, 2.0f);
    add("rope_factors_short.weight", {hd / 2}, false, 0.1f, 1.0f);
  }
  add("output_norm.weight", {E}, false, 0.1f, 1.0f);
  if (!s.tied) add("output.weight", {E, V}, true, 0.5f);
  if (s.rope_freqs) add("rope_freqs.weight", {hd / 2}, false, 0.0f, 1.5f);
  return w.to_bytes();
}

std::vector<std::string> split_vectors(const std::string& text) {
  std::vector<std::string> out;
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t at = 0;
  while (at <= text.size()) {
    const size_t next = text.find(sep, at);
    out.push_back(text.substr(at, next == std::string::npos ? std::string::npos : next - at));
    if (next == std::string::npos) break;
    at = next + sep.size();
  }
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

std::vector<Seed> gguf_seeds() {
  std::vector<Seed> out;
  out.push_back(seed("rich-align32", rich_file(32)));
  out.push_back(seed("rich-align64", rich_file(64)));
  std::vector<uint8_t> v2 = rich_file(32);
  v2[4] = 2;  // GGUF v2 has the same layout as v3
  out.push_back(seed("rich-v2", std::move(v2)));
  out.push_back(seed("vocab-only", vocab_only_file()));
  out.push_back(seed("empty-v3", gguf::Writer().to_bytes()));
  for (Seed& s : malformed_seeds()) out.push_back(std::move(s));
  for (Seed& s : vocabulary_seeds()) out.push_back(std::move(s));
  return out;
}

std::vector<Seed> model_seeds() {
  const TinySpec specs[] = {
      {.name = "llama-f32", .tied = true},
      {.name = "llama-q8_0-2layers", .wtype = quant::Type::Q8_0, .n_layer = 2, .n_head_kv = 2},
      {.name = "llama-q4_0-ropefreqs", .wtype = quant::Type::Q4_0, .rope_freqs = true, .linear_scale = true},
      {.name = "llama-q5_1-bias", .wtype = quant::Type::Q5_1, .bias = true},
      {.name = "llama-f16", .wtype = quant::Type::F16, .tied = true},
      {.name = "qwen2-q4_1", .arch = "qwen2", .wtype = quant::Type::Q4_1, .tok = "gpt2"},
      {.name = "qwen3-q5_0", .arch = "qwen3", .wtype = quant::Type::Q5_0, .tok = "gpt2"},
      {.name = "qwen3-bf16", .arch = "qwen3", .wtype = quant::Type::BF16, .n_head_kv = 2},
      {.name = "gemma3-q8_0", .arch = "gemma3", .wtype = quant::Type::Q8_0, .n_layer = 2, .tied = true,
       .linear_scale = true},
      {.name = "phi3-f16", .arch = "phi3", .wtype = quant::Type::F16, .n_head_kv = 2},
  };
  std::vector<Seed> out;
  for (const TinySpec& s : specs) out.push_back(seed(s.name, tiny_model(s)));
  for (Seed& s : vocabulary_seeds()) out.push_back(std::move(s));
  return out;
}

std::vector<Seed> tokenizer_seeds(const std::optional<std::string>& assets) {
  // Byte 0: vocabulary (low bits; exercise_tokenizer takes it modulo the number loaded) and mode (bits 4-5).
  std::vector<std::string> texts = {
      "Hello world",
      " Hello  World!\n\n\tTabs and\r\nCRLF",
      "<s>[INST] hi [/INST]</s><|begin_of_text|><|start_header_id|>user<|end_header_id|><|im_start|><|eot_id|>",
      "\xe2\x9c\x85 \xf0\x9f\xa6\x99 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 "
      "\xd0\x9f\xd1\x80\xd0\xb8\xd0\xb2\xd0\xb5\xd1\x82",
      "3.14159 1234567890 don't I'm you'LL",
      "\xff\xfe invalid \xc3 utf8 \xed\xa0\x80 \xf4\x90\x80\x80",
      std::string(64, ' ') + std::string(32, '\n'),
  };
  if (assets) {
    const std::filesystem::path inp = std::filesystem::path(*assets) / "tokenizer" / "ggml-vocab-llama-bpe.gguf.inp";
    if (std::filesystem::exists(inp))
      for (std::string& t : split_vectors(read_file(inp))) texts.push_back(std::move(t));
  }
  std::vector<Seed> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    for (uint8_t mode : {0x00, 0x10}) {
      for (uint8_t vocab = 0; vocab < 3; ++vocab) {
        std::string b(1, static_cast<char>(mode | vocab));
        out.push_back(text_seed("text-" + std::to_string(i) + "-m" + std::to_string(mode >> 4) + "-v" +
                                    std::to_string(vocab),
                                b + texts[i]));
      }
    }
  }
  // Id streams: 3 bytes per id. Low ids are byte tokens in SentencePiece vocabularies (<0xE2> <0x9C> <0x85>).
  const std::vector<std::vector<uint32_t>> streams = {
      {1, 15043, 3186, 2},
      {0xE2 + 3, 0x9C + 3, 0x85 + 3, 29871},
      {0xE2 + 3, 0x9C + 3},
      {128000, 9906, 1917, 128009},
      {151644, 872, 198, 151645},
      {0, 1, 2, 3, 4, 5, 6, 7, 8},
  };
  for (size_t i = 0; i < streams.size(); ++i) {
    for (uint8_t mode : {0x20, 0x30, 0xF0, 0xE0}) {
      for (uint8_t vocab = 0; vocab < 3; ++vocab) {
        std::vector<uint8_t> b{static_cast<uint8_t>(mode | vocab)};
        for (uint32_t id : streams[i]) {
          const uint32_t x = mode & 0x10 ? id : id + 2;  // decode mode reads ids shifted by -2
          b.push_back(uint8_t(x)), b.push_back(uint8_t(x >> 8)), b.push_back(uint8_t(x >> 16));
        }
        out.push_back(seed("ids-" + std::to_string(i) + "-m" + std::to_string(mode >> 4) + "-v" +
                               std::to_string(vocab),
                           std::move(b)));
      }
    }
  }
  return out;
}

std::vector<Seed> chat_template_seeds(const std::optional<std::string>& assets) {
  std::vector<Seed> out;
  for (const std::string& name : chat::ChatTemplate::builtin_names())
    out.push_back(text_seed("builtin-" + name, chat::ChatTemplate::builtin(name).source()));
  const std::pair<const char*, const char*> snippets[] = {
      {"loop-filters",
       "{%- for m in messages -%}{{ loop.index0 }}:{{ m['role'] | upper }}={{ m.content | trim | tojson }}"
       "{%- if not loop.last %},{% endif -%}{%- endfor -%}{{ messages | length }}{{ tools | tojson(indent=2) }}"},
      {"macro-namespace",
       "{% macro say(x, y='!') %}{{ x ~ y }}{% endmacro %}{% set ns = namespace(n=0) %}"
       "{% for m in messages if m.role != 'system' %}{% set ns.n = ns.n + 1 %}{{ say(m.role) }}{% endfor %}"
       "{{ ns.n }}{{ range(3) | list }}{{ [1, 2, 3] | join('-') }}{{ {'a': 1}.items() | list }}"},
      {"raise", "{% if messages[0].role != 'user' %}{{ raise_exception('first must be user') }}{% endif %}"},
      {"strings",
       "{{ 'abc'[::-1] }}{{ '%s-%d' % ('x', 3) }}{{ 'a,b'.split(',') }}{{ ' x '.strip() }}{{ 'x' * 3 }}"
       "{{ messages[-1].content[0].text.startswith('Thanks') }}{{ strftime_now('%Y-%m-%d') }}"},
      {"whitespace-control",
       "{%- if add_generation_prompt -%}\n  {{- bos_token -}}\n{%- else -%}{{ eos_token }}{%- endif %}"},
      {"tool-calls",
       "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}{{ c.function.name }}"
       "({{ c.function.arguments | tojson }}){% endfor %}{% elif m.role == 'tool' %}[{{ m.tool_call_id }}]"
       "{% endif %}{% endfor %}{% if enable_thinking is defined and not enable_thinking %}/no_think{% endif %}"},
      {"recursion", "{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ f(50) }}"},
      {"comments-raw", "{# comment #}{% raw %}{{ not rendered }}{% endraw %}{% set x %}captured{% endset %}{{ x }}"},
  };
  for (const auto& [name, text] : snippets) out.push_back(text_seed(std::string("snippet-") + name, text));
  // Hostile templates: each must stop at a nesting, size or work limit (TemplateError), not crash or run away.
  auto repeat = [](std::string_view s, int n) {
    std::string r;
    for (int i = 0; i < n; ++i) r += s;
    return r;
  };
  const int n = 3000;
  const std::pair<std::string, std::string> hostile[] = {
      {"parens", "{{ " + repeat("(", n) + "1" + repeat(")", n) + " }}"},
      {"lists", "{{ " + repeat("[", n) + repeat("]", n) + " }}"},
      {"dicts", "{{ " + repeat("{'a': ", n) + "1" + repeat("}", n) + " }}"},
      {"ifs", repeat("{% if true %}", n) + "x" + repeat("{% endif %}", n)},
      {"fors", repeat("{% for a in [1] %}", n) + "x" + repeat("{% endfor %}", n)},
      {"nots", "{{ " + repeat("not ", n) + "1 }}"},
      {"unary-minus", "{{ " + repeat("-", n) + "1 }}"},
      {"filters", "{{ 1" + repeat("|string", n) + " }}"},
      {"attributes", "{{ x" + repeat(".a", n) + " }}"},
      {"calls", "{{ f" + repeat("()", n) + " }}"},
      {"ternaries", "{{ " + repeat("1 if 1 else ", n) + "1 }}"},
      {"macro-recursion", "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"},
      {"tojson-bomb",
       "{% set ns = namespace(x=[1]) %}{% for i in range(30) %}{% set ns.x = [ns.x, ns.x] %}{% endfor %}"
       "{{ ns.x | tojson }}"},
      {"string-bomb", "{{ 'x' * 100000000 }}"},
      {"list-bomb", "{{ range(100000000) | list | length }}"},
  };
  for (const auto& [name, text] : hostile) out.push_back(text_seed("hostile-" + name, text));
  if (assets) {
    for (const char* vocab : {"ggml-vocab-qwen2.gguf", "ggml-vocab-phi-3.gguf"}) {
      const std::filesystem::path p = std::filesystem::path(*assets) / "tokenizer" / vocab;
      if (!std::filesystem::exists(p)) continue;
      const gguf::File f = gguf::File::open(p.string());
      if (auto t = f.get_opt<std::string>("tokenizer.chat_template")) out.push_back(text_seed(vocab, *t));
    }
  }
  return out;
}

std::vector<Seed> api_request_seeds() {
  const std::pair<const char*, const char*> bodies[] = {
      {"chat-full",
       R"({"model": "m", "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
           "max_tokens": 16, "temperature": 0.7, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "seed": 7, "stop": ["\n"],
           "presence_penalty": 0.1, "frequency_penalty": 0.2, "stream": true,
           "stream_options": {"include_usage": true}, "ignore_eos": false})"},
      {"chat-tools",
       R"({"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "tool_calls": [{"id": "c1",
           "type": "function", "function": {"name": "get", "arguments": "{\"city\": \"Paris\"}"}}]},
           {"role": "tool", "tool_call_id": "c1", "content": "21"}],
           "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]})"},
      {"chat-parts", R"({"messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}]})"},
      {"completion-text", R"({"prompt": "Once upon a time", "max_tokens": 8, "stop": "END"})"},
      {"completion-ids", R"({"prompt": [1, 2, 3], "max_completion_tokens": 4, "temperature": 0})"},
      {"completion-nulls", R"({"prompt": ["x"], "max_tokens": null, "seed": -1, "stop": null, "logprobs": false})"},
      {"tokenize", R"({"content": "Hello <s>", "add_special": true, "parse_special": false, "with_pieces": true})"},
      {"detokenize", R"({"tokens": [1, 15043, 3186]})"},
      {"completion-choices", R"({"prompt": ["a", "b"], "n": 3, "logit_bias": {"1": -100, "15043": 5.5}})"},
      {"completion-id-prompts", R"({"prompt": [[1, 2], [3]], "n": 2, "seed": 7, "stream": true})"},
      {"chat-choices", R"({"messages": [{"role": "user", "content": "Hi"}], "n": 16, "logit_bias": {"2": 100}})"},
      {"bad-logit-bias", R"({"prompt": "x", "logit_bias": {"abc": 1, "-5": 200, "7": true, "7": 1}})"},
      {"too-many-choices", R"({"prompt": ["a", "b", "c", "d", "e"], "n": 4})"},
      {"bad-types", R"({"prompt": 5, "temperature": "hot", "top_k": 1.5, "stream": "yes", "n": 2})"},
      {"bad-ranges", R"({"prompt": "x", "top_p": 2, "min_p": -1, "max_tokens": -7, "seed": -3, "frequency_penalty": 9})"},
      {"not-json", R"({"messages": [{"role": "user", "content": "unterminated)"},
      {"deep", "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"},
      {"chat-tool-choice",
       R"({"messages": [{"role": "user", "content": "Weather?"}], "tool_choice": "none",
           "tools": [{"type": "function", "function": {"name": "get", "parameters": {"type": "object"}}}]})"},
      {"bad-tool-choice", R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": 3})"},
      {"chat-json-mode-kwargs",
       R"({"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"},
           "chat_template_kwargs": {"enable_thinking": false}, "reasoning_effort": "low"})"},
      {"schema", R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"schema": {}}}})"},
  };
  std::vector<Seed> out;
  for (const auto& [name, body] : bodies) out.push_back(text_seed(name, body));
  return out;
}

std::vector<Seed> tool_calls_seeds() {
  // Byte 0: 1 Llama 3, 2 Hermes / Qwen, 3 Mistral, 4 Granite; 5 think blocks, 6 think blocks the prompt opened,
  // 7 harmony channels (exercise_tool_calls.cpp's order).
  const std::pair<const char*, std::string> replies[] = {
      {"llama3", "\x01{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}"},
      {"llama3-python-tag", "\x01<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}; "
                            "{\"name\": \"g\", \"parameters\": {\"x\": [1, 2.5, null]}}"},
      {"llama3-prose", "\x01The weather in Paris is {sunny}."},
      {"hermes-two", "\x02<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"caf\xc3\xa9\"}}\n</tool_call>\n"
                     "<tool_call>\n{\"arguments\": \"{\\\"n\\\": 1}\", \"name\": \"b\"}\n</tool_call>"},
      {"hermes-think", "\x02<think>\nweather\n</think>\n\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}"},
      {"hermes-xml", "\x02<tool_call>\n<function=get>\n<parameter=city>\nParis\n</parameter>\n<parameter=n>\n3\n"
                     "</parameter>\n</function>\n</tool_call>"},
      {"hermes-cut", "\x02<tool_call>\n{\"name\": \"get\", \"arguments\": {\"city\": \"Par"},
      {"mistral-json", "\x03[TOOL_CALLS] [{\"name\": \"a\", \"arguments\": {\"x\": 1}, \"id\": \"a1b2c3d4e\"}]"},
      {"mistral-args", "\x03Sure.[TOOL_CALLS]a[ARGS]{\"x\": 1}[TOOL_CALLS]b[CALL_ID]abc123XYZ[ARGS]{}"},
      {"granite", "\x04<|tool_call|>[{\"name\": \"a\", \"arguments\": {\"x\": \"}{][\"}}]"},
      {"huge-number", "\x02<tool_call>{\"name\": \"a\", \"arguments\": {\"n\": 1e999}}</tool_call>"},
      {"think", "\x05\n<think>\nThe user greets.\n</think>\n\nHello <think>again</think>"},
      {"think-opened", "\x06Let me see.</thi\n</think>\n\n42"},
      {"harmony", "\x07<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary "
                  "to=functions.get <|constrain|>json<|message|>{\"city\": \"Paris\"}"},
      {"harmony-final", "\x07 to=functions.x<|channel|>commentary json<|message|>[1]<|end|><|start|>assistant"
                        "<|channel|>final<|message|>Done.<|end|>trailing"},
  };
  std::vector<Seed> out;
  for (const auto& [name, reply] : replies) out.push_back(text_seed(name, reply));
  return out;
}

std::vector<Seed> json_schema_seeds() {
  // A schema, a NUL byte, then text for its grammar.
  const std::pair<const char*, std::string> inputs[] = {
      {"object", R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 5}, "age": )"
                 R"({"type": "integer", "minimum": 0, "maximum": 120}}, "required": ["name"]})" +
                     std::string(1, '\0') + R"({"name": "Ann", "age": 42})"},
      {"array", R"({"type": "array", "prefixItems": [{"const": 1}], "items": {"enum": ["a", null]}, "maxItems": 3})" +
                    std::string(1, '\0') + R"([1, "a", null])"},
      {"recursive", R"({"$defs": {"t": {"type": "object", "properties": {"k": {"type": "array", "items": )"
                    R"({"$ref": "#/$defs/t"}}}}}, "anyOf": [{"$ref": "#/$defs/t"}, {"type": "number"}]})" +
                        std::string(1, '\0') + R"({"k": [{"k": []}, {}]})"},
      {"strings", R"({"type": ["string", "null"], "minLength": 2})" + std::string(1, '\0') +
                      "\"a\\u00e9\\n\xc3\xa9\""},
      {"any", std::string("true") + std::string(1, '\0') + R"({"a": [1.5e3, -0, "x", {"b": false}]})"},
      {"pattern", R"({"type": "string", "pattern": "^[A-Z][a-z]+( \\w+){0,3}$"})" + std::string(1, '\0') +
                      R"("Anna lee-x")"},
      {"refused", R"({"type": "string", "not": {"const": "a"}})"},
      {"gbnf", "root ::= item (\",\" item)*\nitem ::= [a-z]+ | \"(\" root \")\" # nested\n" + std::string(1, '\0') +
                   "ab,(c,d),e"},
  };
  std::vector<Seed> out;
  for (const auto& [name, input] : inputs) out.push_back(text_seed(name, input));
  return out;
}

}  // namespace fuzz
