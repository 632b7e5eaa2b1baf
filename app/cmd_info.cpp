// `llm-run info`: what a GGUF file holds (architecture, hyperparameters, tokenizer, tensor types, parameter count),
// and on request every metadata key (--kv) and every tensor (--tensors). It reads only the header, so it is instant
// on any model size, and it is the first thing to run on a file that will not load.
#include <algorithm>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/cli.h"
#include "app/display_text.h"
#include "gguf/gguf.h"
#include "model/config.h"

namespace app {
namespace {

struct InfoOptions {
  std::string model;     // -m FILE
  std::string file;      // positional FILE, the same thing
  bool kv = false;       // --kv
  bool tensors = false;  // --tensors
};

// Array elements beyond this many are abbreviated; strings inside arrays are cut at this many bytes.
constexpr size_t kMaxArrayItems = 8;
constexpr size_t kArrayItemsShownWhenLong = 4;
constexpr size_t kMaxItemStringBytes = 48;

std::string fmt(const char* f, auto... args) {
  const int n = std::snprintf(nullptr, 0, f, args...);
  std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  std::snprintf(s.data(), s.size() + 1, f, args...);
  return s;
}

// 1234567 -> "1,234,567"
std::string grouped(uint64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

std::string human_bytes(uint64_t n) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(n);
  int u = 0;
  while (v >= 1024 && u < 4) v /= 1024, ++u;
  return u == 0 ? fmt("%" PRIu64 " B", n) : fmt("%.2f %s", v, units[u]);
}

std::string human_count(uint64_t n) {
  if (n >= 1000000000) return fmt("%.2f B", n / 1e9);
  if (n >= 1000000) return fmt("%.2f M", n / 1e6);
  if (n >= 1000) return fmt("%.2f K", n / 1e3);
  return std::to_string(n);
}

// Shortest text that reads back as the same float (or double); whole numbers in plain digits (a rope base of
// 500000 reads better than 5e+05).
template <class F> std::string shortest(F x) {
  char buf[512];
  const bool whole = std::isfinite(x) && x == std::trunc(x) && std::fabs(x) < F(1e16);
  auto r = whole ? std::to_chars(buf, buf + sizeof buf, x, std::chars_format::fixed)
                 : std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

std::string quote(const std::string& s, size_t max_bytes) {
  std::string out = "\"" + escape_for_display(s, '"', max_bytes) + "\"";
  if (max_bytes < s.size()) out += fmt("...(%zu bytes)", s.size());
  return out;
}

const char* plural_name(gguf::ValueType t) {
  switch (t) {
    case gguf::ValueType::STRING: return "strings";
    case gguf::ValueType::ARRAY: return "arrays";
    case gguf::ValueType::BOOL: return "bools";
    default: return gguf::value_type_name(t);
  }
}

std::string format_value(const gguf::Value& v, size_t max_string_bytes) {
  using gguf::ValueType;
  switch (v.type) {
    case ValueType::FLOAT32: return shortest(v.as<float>());
    case ValueType::FLOAT64: return shortest(v.as<double>());
    case ValueType::BOOL: return v.as<bool>() ? "true" : "false";
    case ValueType::STRING: return quote(std::get<std::string>(v.v), max_string_bytes);
    case ValueType::ARRAY: {
      const auto& a = std::get<gguf::Array>(v.v);
      const bool abbreviate = a.items.size() > kMaxArrayItems;
      const size_t shown = abbreviate ? kArrayItemsShownWhenLong : a.items.size();
      std::string out = "[";
      if (abbreviate) out += std::to_string(a.items.size()) + " " + plural_name(a.elem_type) + ": ";
      for (size_t i = 0; i < shown; ++i) {
        out += (i ? ", " : "") + format_value(a.items[i], kMaxItemStringBytes);
      }
      if (abbreviate) out += ", ...";
      return out + "]";
    }
    default:
      if (const auto* u = std::get_if<uint64_t>(&v.v)) return std::to_string(*u);
      if (const auto* s = std::get_if<int64_t>(&v.v)) return std::to_string(*s);
      return "?";
  }
}

// A key for display whatever its type: strings unquoted, anything else formatted; nullopt when absent.
std::optional<std::string> text(const gguf::File& f, std::string_view key) {
  const gguf::Value* v = f.find(key);
  if (v == nullptr) return std::nullopt;
  if (const auto* s = std::get_if<std::string>(&v->v)) return escape_for_display(*s, 0, 200);
  return format_value(*v, 80);
}

// llama.cpp's general.file_type numbering (the "mostly" type of a file), for display.
std::string file_type_name(const std::string& number) {
  static const std::map<std::string, const char*> kNames = {
      {"0", "F32"},     {"1", "F16"},     {"2", "Q4_0"},    {"3", "Q4_1"},    {"7", "Q8_0"},    {"8", "Q5_0"},
      {"9", "Q5_1"},    {"10", "Q2_K"},   {"11", "Q3_K_S"}, {"12", "Q3_K_M"}, {"13", "Q3_K_L"}, {"14", "Q4_K_S"},
      {"15", "Q4_K_M"}, {"16", "Q5_K_S"}, {"17", "Q5_K_M"}, {"18", "Q6_K"},   {"32", "BF16"},
      {"38", "MXFP4_MOE"}};
  auto it = kNames.find(number);
  return it == kNames.end() ? number : number + " (" + it->second + ")";
}

std::string shape_of(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (int d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
  return s + "]";
}

// A labelled line of the summary.
void line(std::string& out, const std::string& label, const std::string& value) {
  out += fmt("%-16s", (label + ":").c_str()) + value + "\n";
}

// The hyperparameters as this runtime resolves them (the layer pattern, each layer kind's rotation), or why it cannot
// run the file. Keys only: no tensor is checked here.
void print_resolved(std::string& out, const gguf::File& f) {
  try {
    const model::Config c = model::read_config(f);
    line(out, "model", model::describe(c));
    line(out, "attention", model::describe_attention(c));
    line(out, "rope", model::describe_rope(c));
    line(out, "feed-forward", model::describe_ffn(c));
  } catch (const std::exception& e) {
    line(out, "model", std::string("not runnable here: ") + e.what());
  }
}

void print_summary(std::string& out, const gguf::File& f) {
  line(out, "file", f.path() + " (" + grouped(f.file_size()) + " bytes, " + human_bytes(f.file_size()) + ")");
  line(out, "format", fmt("GGUF v%u, %zu metadata keys, %zu tensors, alignment %" PRIu64 ", data at byte %" PRIu64,
                          f.version(), f.metadata().size(), f.tensors().size(), f.alignment(), f.data_offset()));
  const auto arch = text(f, "general.architecture");
  line(out, "architecture", arch ? *arch : "(none: no general.architecture key)");
  if (auto name = text(f, "general.name")) line(out, "name", *name);
  if (auto ftype = text(f, "general.file_type")) line(out, "file type", file_type_name(*ftype));

  if (arch) {
    const std::string prefix = *arch + ".";
    std::string hp;
    for (const auto& kv : f.metadata()) {
      if (!kv.key.starts_with(prefix)) continue;
      hp += fmt("  %-34s ", escape_for_display(kv.key.substr(prefix.size()), 0, 80).c_str()) +
            format_value(kv.value, 80) + "\n";
    }
    out += "hyperparameters (" + prefix + "*):" + (hp.empty() ? " none\n" : "\n" + hp);
    print_resolved(out, f);
  }

  if (const gguf::Value* tokens = f.find("tokenizer.ggml.tokens")) {
    std::string tok = text(f, "tokenizer.ggml.model").value_or("(no tokenizer.ggml.model)");
    if (auto pre = text(f, "tokenizer.ggml.pre")) tok += " (pre: " + *pre + ")";
    if (const auto* a = std::get_if<gguf::Array>(&tokens->v)) tok += ", vocabulary " + grouped(a->items.size()) + " tokens";
    if (auto bos = text(f, "tokenizer.ggml.bos_token_id")) tok += ", bos " + *bos;
    if (auto eos = text(f, "tokenizer.ggml.eos_token_id")) tok += ", eos " + *eos;
    if (f.has("tokenizer.ggml.merges")) tok += ", with merges";
    line(out, "tokenizer", tok);
  } else {
    line(out, "tokenizer", f.has("tokenizer.ggml.model") ? "tokenizer.ggml.model without tokens" : "(none)");
  }

  // Histogram of tensor types in the table's order, with the bytes each type takes.
  struct Bucket {
    size_t count = 0;
    uint64_t bytes = 0;
  };
  std::map<uint32_t, Bucket> by_type;
  uint64_t params = 0, data_bytes = 0;
  for (const auto& t : f.tensors()) {
    auto& b = by_type[static_cast<uint32_t>(t.type)];
    b.count++;
    b.bytes += t.nbytes;
    params += static_cast<uint64_t>(t.n_elements());
    data_bytes += t.nbytes;
  }
  line(out, "tensors", std::to_string(f.tensors().size()) + (f.tensors().empty() ? " (vocabulary-only file)" : ""));
  for (const auto& [type, b] : by_type) {
    out += fmt("  %-6s %6zu %-7s  %s\n", quant::type_name(static_cast<quant::Type>(type)), b.count, b.count == 1 ? "tensor" : "tensors",
               human_bytes(b.bytes).c_str());
  }
  line(out, "parameters", grouped(params) + " (" + human_count(params) + ")");
  line(out, "tensor data", grouped(data_bytes) + " bytes (" + human_bytes(data_bytes) + ")");
}

void print_kv(std::string& out, const gguf::File& f) {
  out += "\nmetadata (" + std::to_string(f.metadata().size()) + " keys):\n";
  for (const auto& kv : f.metadata()) {
    std::string type = gguf::value_type_name(kv.value.type);
    if (const auto* a = std::get_if<gguf::Array>(&kv.value.v)) type += std::string("<") + gguf::value_type_name(a->elem_type) + ">";
    out += fmt("  %-42s %-15s ", escape_for_display(kv.key, 0, 200).c_str(), type.c_str()) +
           format_value(kv.value, SIZE_MAX) + "\n";
  }
}

void print_tensors(std::string& out, const gguf::File& f) {
  out += "\ntensors (" + std::to_string(f.tensors().size()) + "; offsets relative to the data section at byte " +
         std::to_string(f.data_offset()) + "):\n";
  out += fmt("  %5s  %-36s %-5s %-26s %12s %12s\n", "#", "name", "type", "shape", "offset", "bytes");
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const auto& t = f.tensors()[i];
    out += fmt("  %5zu  %-36s %-5s %-26s %12" PRIu64 " %12" PRIu64 "\n", i,
               escape_for_display(t.name, 0, 200).c_str(), quant::type_name(t.type),
               shape_of(t).c_str(), t.offset, t.nbytes);
  }
}

int run_info(const InfoOptions& o) {
  if (!o.model.empty() && !o.file.empty() && o.model != o.file) {
    throw UsageError("info: give the model either as -m FILE or as FILE, not both");
  }
  const std::string path = resolve_model_path(o.model.empty() ? o.file : o.model);
  const gguf::File f = gguf::File::open(path);
  std::string out;
  print_summary(out, f);
  if (o.kv) print_kv(out, f);
  if (o.tensors) print_tensors(out, f);
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

void register_info(CLI::App& root, Action& chosen) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* cmd = root.add_subcommand("info", "Show what a GGUF file holds: architecture, hyperparameters, tokenizer, tensors");
  cmd->add_option("-m,--model", opts->model, "GGUF file (default: $LLM_RUN_MODEL, else models/default.gguf)");
  cmd->add_option("file", opts->file, "GGUF file, as an alternative to -m");
  cmd->add_flag("--kv", opts->kv, "Also print every metadata key with its type and value (long arrays abbreviated)");
  cmd->add_flag("--tensors", opts->tensors, "Also print every tensor: name, type, shape, offset, bytes");
  cmd->callback([opts, &chosen] { chosen = [opts] { return run_info(*opts); }; });
}

}  // namespace app
