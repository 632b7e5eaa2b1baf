// Shared run flags and loading (see session_flags.h).
#include "app/session_flags.h"

#include <chrono>
#include <cstdio>

#include "app/cli.h"
#include "app/runtime_sinks.h"
#include "graph/thread_pool.h"
#include "runtime/memory_plan.h"

namespace app {

namespace {
constexpr double kMaxHalfWeightsGib = 1 << 20;  // a bound that no device reaches, so the bytes fit in 64 bits
}  // namespace

void add_run_flags(CLI::App& cmd, RunFlags& f) {
  cmd.add_option("-m,--model", f.model, "GGUF model file (default: $LLM_RUN_MODEL, else models/default.gguf)");
  cmd.add_option("-c,--ctx-size", f.session.n_ctx,
                 "KV-cache size in tokens; 0 (default) = the model's training context: on a GPU as much of it as "
                 "fits in free memory, on the CPU at most 4096")
      ->check(at_least(0));
  cmd.add_option("--device", f.session.device, "Where to run: auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->default_str("auto");
  cmd.add_option("-t,--threads", f.session.n_threads, "CPU threads (default: all cores)")
      ->check(CLI::Range(0, graph::kMaxThreads));
  cmd.add_flag("-v,--verbose", f.session.verbose, "Describe the model, device and context on stderr");
  cmd.add_option_function<std::string>(
         "--cache-type",
         [&f](const std::string& s) {
           if (!graph::parse_kv_type(s, f.session.kv_type))
             throw CLI::ValidationError("--cache-type", "expected f16, q8_0 or q4_0, got '" + s + "'");
         },
         "KV cache element type: f16; q8_0 (half the bytes, for long contexts) or q4_0 (a bit over a quarter of the "
         "bytes, larger rounding error), both with head_dim a multiple of 32, on a GPU 64, 128 or 256")
      ->default_str("f16");
  cmd.add_flag("!--no-cuda-graph", f.session.cuda_graph, "Run the decode step with plain kernel launches");
  cmd.add_option_function<double>(
         "--half-weights",
         [&f](double gib) {
           if (!(gib >= 0 && gib <= kMaxHalfWeightsGib))
             throw CLI::ValidationError("--half-weights", "expected GiB from 0 to " +
                                                              std::to_string(int(kMaxHalfWeightsGib)));
           f.session.half_weights_bytes = uint64_t(gib * double(uint64_t{1} << 30));
         },
         "GPU memory in GiB for half-precision copies of the layers' matrices, so that prompts of more than 64 "
         "tokens skip dequantizing them (2 bytes a weight, as many whole matrices as fit; 0 = none)")
      ->default_str("0");
}

void add_warmup_flag(CLI::App& cmd, RunFlags& f, const std::string& what) {
  cmd.add_flag("!--no-warmup", f.warmup, "Skip the untimed warm-up (" + what + ")");
}

Loaded load_for_run(const RunFlags& flags) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string path = resolve_model_path(flags.model);
  std::shared_ptr<const model::Model> m = model::Model::load(path);
  tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(m->file());
  if (tok.n_vocab() != m->config().n_vocab)
    throw model::ModelError(path + ": the tokenizer has " + std::to_string(tok.n_vocab()) +
                            " tokens but the model's vocabulary size is " + std::to_string(m->config().n_vocab));
  runtime::SessionOptions options = flags.session;
  options.log = stderr_log();
  options.progress = progress_bars();
  std::unique_ptr<runtime::Session> session = runtime::make_session(m, options);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (flags.session.verbose) {
    const uint64_t copies = session->half_weights_bytes();
    const std::string copies_note = copies ? ", half weight copies of " + runtime::format_bytes(copies) : "";
    std::fprintf(stderr,
                 "llm-run: model %s\nllm-run: %s\nllm-run: device %s, context %d tokens, %s KV cache of %.1f MiB%s\n",
                 path.c_str(), model::describe(m->config()).c_str(), session->device_name().c_str(), session->n_ctx(),
                 graph::kv_type_name(flags.session.kv_type), double(session->kv_cache_bytes()) / (1 << 20),
                 copies_note.c_str());
  }
  return Loaded{std::move(m), std::move(tok), std::move(session), ms};
}

}  // namespace app
