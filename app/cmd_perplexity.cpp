// `llm-run perplexity -f TEXT -c N`: perplexity over consecutive chunks of N tokens, computed as llama.cpp's
// perplexity tool does (BOS at the start of each chunk, only the second half of each chunk scored, so every scored
// token sees at least N/2 tokens of context), with the running estimate per chunk and a standard error at the end.
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "app/cli.h"
#include "app/session_flags.h"

namespace app {
namespace {

struct PerplexityFlags {
  RunFlags run;
  std::string file;
  int32_t n_chunks = -1;  // -1 = all
};

// -log softmax(row)[target], in double.
double nll(std::span<const float> row, int32_t target) {
  double mx = row[0];
  for (float v : row) mx = std::max(mx, double(v));
  double sum = 0;
  for (float v : row) sum += std::exp(double(v) - mx);
  return mx + std::log(sum) - double(row[static_cast<size_t>(target)]);
}

int run_perplexity(PerplexityFlags f) {
  std::ifstream in(f.file, std::ios::binary);
  if (!in) throw UsageError("cannot read text file '" + f.file + "'");
  std::ostringstream text;
  text << in.rdbuf();

  if (f.run.session.n_ctx == 0) f.run.session.n_ctx = 512;
  Loaded l = load_for_run(f.run);
  const int32_t n_ctx = l.session->n_ctx();
  if (n_ctx < 4) throw UsageError("perplexity needs a context (-c) of at least 4 tokens");
  const std::vector<int32_t> tokens = l.tok.encode(text.str(), /*add_special=*/true, /*parse_special=*/false);
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (n_chunks == 0)
    throw UsageError("the text has " + std::to_string(tokens.size()) + " tokens, fewer than one chunk of " +
                     std::to_string(n_ctx) + " (-c)");
  if (f.n_chunks > 0) n_chunks = std::min<int64_t>(n_chunks, f.n_chunks);
  std::fprintf(stderr, "llm-run: %zu tokens, %lld chunks of %d, scoring positions %d..%d of each\n", tokens.size(),
               static_cast<long long>(n_chunks), n_ctx, n_ctx / 2, n_ctx - 2);

  const int32_t first = n_ctx / 2;
  const size_t V = static_cast<size_t>(l.session->n_vocab());
  const int32_t bos = l.tok.bos();
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::copy_n(tokens.begin() + c * n_ctx, n_ctx, chunk.begin());
    // Every chunk is scored as a fresh document.
    if (l.tok.add_bos() && bos >= 0) chunk[0] = bos;
    const std::span<const float> logits = l.session->eval(chunk, 0, /*all_logits=*/true);
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const double v = nll(logits.subspan(static_cast<size_t>(j) * V, V), chunk[static_cast<size_t>(j) + 1]);
      sum += v;
      sum2 += v * v;
      ++count;
    }
    std::printf("[%lld]%.4f,", static_cast<long long>(c + 1), std::exp(sum / double(count)));
    std::fflush(stdout);
  }
  const double mean = sum / double(count);
  const double ppl = std::exp(mean);
  // Standard error of the mean NLL, carried to the perplexity by the delta method (d exp(x) = exp(x) dx).
  const double var = sum2 / double(count) - mean * mean;
  const double err = count > 1 && var > 0 ? std::sqrt(var / double(count - 1)) * ppl : 0.0;
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

void register_perplexity(CLI::App& root, Action& chosen) {
  auto f = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = root.add_subcommand("perplexity", "Perplexity of a model over a text file, in chunks of -c tokens (default 512)");
  add_run_flags(*cmd, f->run);
  cmd->add_option("-f,--file", f->file, "UTF-8 text file to score")->required();
  cmd->add_option("--chunks", f->n_chunks, "Score at most this many chunks (default: all)");
  cmd->callback([f, &chosen] { chosen = [f] { return run_perplexity(*f); }; });
}

}  // namespace app
