// `llm-run perplexity -f TEXT -c N`: perplexity over consecutive chunks of N tokens, computed as llama.cpp's
// perplexity tool does (BOS at the start of each chunk, only the second half of each chunk scored, so every scored
// token sees at least N/2 tokens of context), with the running estimate per chunk and a standard error at the end.
// --kl-divergence-base FILE saves the logits of every scored position; adding --kl-divergence compares this run
// against such a file instead (KL(base || current), top-1 agreement); see app/kl_divergence.h.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>

#include "app/cli.h"
#include "app/session_flags.h"
#include "runtime/kl_divergence.h"
#include "runtime/warmup.h"

namespace app {
namespace {

struct PerplexityFlags {
  RunFlags run;
  std::string file;
  int32_t n_chunks = -1;  // -1 = all
  std::string kld_base;   // --kl-divergence-base FILE
  bool kld = false;      // --kl-divergence: compare against kld_base instead of writing it
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
  const std::string text = read_input_file(f.file, "text");

  if (f.kld && f.kld_base.empty()) throw UsageError("--kl-divergence needs --kl-divergence-base FILE (the base run's logits)");
  std::unique_ptr<runtime::kld::Reader> base;
  if (f.kld) {
    base = std::make_unique<runtime::kld::Reader>(f.kld_base);
    const uint32_t base_ctx = base->header().n_ctx;
    if (f.run.session.n_ctx == 0) f.run.session.n_ctx = static_cast<int32_t>(base_ctx);
    if (static_cast<uint32_t>(f.run.session.n_ctx) != base_ctx)
      throw std::runtime_error("n_ctx differs from the KL-divergence base file: base " + std::to_string(base_ctx) +
                               ", this run " + std::to_string(f.run.session.n_ctx) + " (-c)");
  }
  if (f.run.session.n_ctx == 0) f.run.session.n_ctx = 512;
  // Every evaluation is a whole chunk with all its logits: the GPU memory check at load plans for exactly that.
  f.run.session.plan_batch = f.run.session.n_ctx;
  f.run.session.plan_all_logits = true;
  Loaded l = load_for_run(f.run);
  const int32_t n_ctx = l.session->n_ctx();
  if (n_ctx < 4) throw UsageError("perplexity needs a context (-c) of at least 4 tokens");
  const std::vector<int32_t> tokens = l.tok.encode(text, /*add_special=*/true, /*parse_special=*/false);
  int64_t n_chunks = static_cast<int64_t>(tokens.size()) / n_ctx;
  if (n_chunks == 0)
    throw UsageError("the text has " + std::to_string(tokens.size()) + " tokens, fewer than one chunk of " +
                     std::to_string(n_ctx) + " (-c)");
  if (f.n_chunks > 0) n_chunks = std::min<int64_t>(n_chunks, f.n_chunks);
  const size_t V = static_cast<size_t>(l.session->n_vocab());
  std::unique_ptr<runtime::kld::Writer> writer;
  if (base) {
    // The base file decides which chunks are compared; this run's text must start with the same tokens.
    const runtime::kld::Header& h = base->header();
    if (h.n_vocab != V)
      throw std::runtime_error("n_vocab differs from the KL-divergence base file: base " + std::to_string(h.n_vocab) +
                               ", this model " + std::to_string(V));
    if (tokens.size() < h.tokens.size())
      throw std::runtime_error("token count differs from the KL-divergence base file: base scored " +
                               std::to_string(h.tokens.size()) + " tokens, this run's text has only " +
                               std::to_string(tokens.size()));
    const auto diff = std::mismatch(h.tokens.begin(), h.tokens.end(), tokens.begin());
    if (diff.first != h.tokens.end())
      throw std::runtime_error("token ids differ from the KL-divergence base file at token " +
                               std::to_string(diff.first - h.tokens.begin()) + ": base " +
                               std::to_string(*diff.first) + ", this run " + std::to_string(*diff.second) +
                               " (a different text or tokenizer)");
    n_chunks = f.n_chunks > 0 ? std::min<int64_t>(h.n_chunks(), f.n_chunks) : h.n_chunks();
  } else if (!f.kld_base.empty()) {
    writer = std::make_unique<runtime::kld::Writer>(
        f.kld_base, static_cast<uint32_t>(V), static_cast<uint32_t>(n_ctx),
        std::span<const int32_t>(tokens.data(), static_cast<size_t>(n_chunks * n_ctx)));
  }
  runtime::kld::Stats kl;
  std::fprintf(stderr, "llm-run: %zu tokens, %lld chunks of %d, scoring positions %d..%d of each\n", tokens.size(),
               static_cast<long long>(n_chunks), n_ctx, n_ctx / 2, n_ctx - 2);

  const int32_t first = n_ctx / 2;
  const int32_t bos = l.tok.bos();
  double sum = 0, sum2 = 0;
  int64_t count = 0;
  std::vector<int32_t> chunk(static_cast<size_t>(n_ctx));
  double warmup_ms = 0;
  if (f.run.warmup) {
    std::copy_n(tokens.begin(), n_ctx, chunk.begin());
    warmup_ms = runtime::warm_up_batch(*l.session, chunk, /*all_logits=*/true);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t c = 0; c < n_chunks; ++c) {
    std::copy_n(tokens.begin() + c * n_ctx, n_ctx, chunk.begin());
    // Every chunk is scored as a fresh document.
    if (l.tok.add_bos() && bos >= 0) chunk[0] = bos;
    const std::span<const float> logits = l.session->eval(chunk, 0, /*all_logits=*/true);
    for (int32_t j = first; j < n_ctx - 1; ++j) {
      const std::span<const float> row = logits.subspan(static_cast<size_t>(j) * V, V);
      const double v = nll(row, chunk[static_cast<size_t>(j) + 1]);
      if (writer) writer->add_row(row);
      if (base) kl.add(base->next_row(), row);
      sum += v;
      sum2 += v * v;
      ++count;
    }
    std::printf("[%lld]%.4f,", static_cast<long long>(c + 1), std::exp(sum / double(count)));
    std::fflush(stdout);
  }
  const double score_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const double mean = sum / double(count);
  const double ppl = std::exp(mean);
  // Standard error of the mean NLL, carried to the perplexity by the delta method (d exp(x) = exp(x) dx).
  const double var = sum2 / double(count) - mean * mean;
  const double err = count > 1 && var > 0 ? std::sqrt(var / double(count - 1)) * ppl : 0.0;
  std::printf("\nFinal estimate: PPL = %.4f +/- %.5f\n", ppl, err);
  std::fprintf(stderr,
               "llm-run: load %.2f ms, warm-up %.2f ms; %lld chunks in %.2f ms (%.2f ms per chunk, %.2f tok/s)\n",
               l.load_ms, warmup_ms, static_cast<long long>(n_chunks), score_ms, score_ms / double(n_chunks),
               score_ms > 0 ? double(n_chunks) * n_ctx * 1000.0 / score_ms : 0.0);
  if (writer) {
    writer->finish();
    std::fprintf(stderr, "llm-run: saved the logits of %lld positions to '%s'\n", static_cast<long long>(count),
                 f.kld_base.c_str());
  }
  if (base) {
    std::printf("KL divergence (base || current): mean = %.9g +/- %.9g over %lld positions\n", kl.mean(),
                kl.standard_error(), static_cast<long long>(kl.count));
    std::printf("Same top-1 token: %.4f%% (%lld of %lld)\n", kl.top1_percent(),
                static_cast<long long>(kl.same_top1), static_cast<long long>(kl.count));
  }
  return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

void register_perplexity(CLI::App& root, Action& chosen) {
  auto f = std::make_shared<PerplexityFlags>();
  CLI::App* cmd = root.add_subcommand("perplexity", "Perplexity of a model over a text file, in chunks of -c tokens (default 512)");
  add_run_flags(*cmd, f->run);
  cmd->add_option("-f,--file", f->file, "UTF-8 text file to score")->required();
  cmd->add_option("--chunks", f->n_chunks, "Score at most this many chunks (default: all)");
  cmd->add_option("--kl-divergence-base", f->kld_base,
                  "Save the logits of every scored position to FILE; with --kl-divergence, read them from FILE instead");
  add_warmup_flag(*cmd, f->run, "one chunk evaluated once and discarded, so the per-chunk time is the steady state");
  cmd->add_flag("--kl-divergence", f->kld,
                "Report KL(base || this run) and top-1 agreement against --kl-divergence-base FILE (chunk size and "
                "chunks come from the file)");
  cmd->callback([f, &chosen] { chosen = [f] { return run_perplexity(*f); }; });
}

}  // namespace app
