// `llm-run logits`: runs a prompt as one batch and prints, for every position, the top-K logits in the format of
// ../shared/models/refs/*.public.txt, so engines and devices can be compared line by line; --out saves the last
// position's full logits as raw float32.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <string>

#include "app/cli.h"
#include "app/session_flags.h"

namespace app {
namespace {

struct LogitsFlags {
  RunFlags run;
  std::string prompt;
  int32_t top = 10;
  std::string out;
};

// "tokens 1,2,3"
std::string join_ids(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

// " id:logit" for the k largest values, largest first, ties by lower id.
std::string top_k_line(std::span<const float> row, int32_t k, std::vector<int32_t>& order) {
  order.resize(row.size());
  std::iota(order.begin(), order.end(), 0);
  const size_t n = std::min(static_cast<size_t>(k), row.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                    [&row](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  std::string s;
  char buf[64];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(buf, sizeof buf, " %d:%.9g", order[i], static_cast<double>(row[order[i]]));
    s += buf;
  }
  return s;
}

int run_logits(const LogitsFlags& f) {
  Loaded l = load_for_run(f.run);
  // As the reference files are made: BOS per the vocabulary, no special-token parsing.
  const std::vector<int32_t> ids = l.tok.encode(f.prompt, /*add_special=*/true, /*parse_special=*/false);
  if (ids.empty()) throw UsageError("the prompt is empty and the vocabulary has no BOS token");
  if (static_cast<int64_t>(ids.size()) > l.session->n_ctx())
    throw runtime::SessionError("prompt has " + std::to_string(ids.size()) + " tokens but the context holds " +
                       std::to_string(l.session->n_ctx()) + " (raise -c or shorten the prompt)");
  const std::span<const float> logits = l.session->eval(ids, 0, /*all_logits=*/true);
  const size_t V = static_cast<size_t>(l.session->n_vocab());

  std::string text = "tokens " + join_ids(ids) + "\n";
  std::vector<int32_t> order;
  for (size_t p = 0; p < ids.size(); ++p)
    text += "top" + std::to_string(f.top) + " " + std::to_string(p) +
            top_k_line(logits.subspan(p * V, V), f.top, order) + "\n";
  std::fwrite(text.data(), 1, text.size(), stdout);

  if (!f.out.empty()) {
    // Raw little-endian float32 (the only byte order this program is built for; gguf.cpp asserts it).
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(std::fopen(f.out.c_str(), "wb"), &std::fclose);
    const std::span<const float> last = logits.subspan((ids.size() - 1) * V, V);
    if (!out || std::fwrite(last.data(), sizeof(float), V, out.get()) != V || std::fflush(out.get()) != 0)
      throw std::runtime_error("cannot write '" + f.out + "'");
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

void register_logits(CLI::App& root, Action& chosen) {
  auto f = std::make_shared<LogitsFlags>();
  CLI::App* cmd = root.add_subcommand("logits", "Print the top logits at every position of a prompt (one batch)");
  add_run_flags(*cmd, f->run);
  cmd->add_option("-p,--prompt", f->prompt, "Prompt text (BOS added per the vocabulary; no special-token parsing)")
      ->required();
  cmd->add_option("--top", f->top, "Logits shown per position")->default_val(10)->check(at_least(1));
  cmd->add_option("--out", f->out, "Write the last position's logits here as raw little-endian float32");
  cmd->callback([f, &chosen] { chosen = [f] { return run_logits(*f); }; });
}

}  // namespace app
