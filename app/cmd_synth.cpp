// `llm-run synth`: writes a model of a real model's shape with random valid weight blocks and a real vocabulary,
// for benchmarks on machines that cannot download multi-GB files.
#include <chrono>
#include <cstdio>
#include <memory>
#include <stdexcept>

#include "app/cli.h"
#include "app/progress.h"
#include "graph/thread_pool.h"
#include "model/synth.h"

namespace app {

void register_synth(CLI::App& root, Action& chosen) {
  auto opts = std::make_shared<model::SynthOptions>();
  std::string shapes, presets;
  for (const auto& s : model::synth_shapes()) shapes += (shapes.empty() ? "" : "|") + s.name;
  for (const auto& p : model::synth_presets()) presets += (presets.empty() ? "" : "|") + p;
  auto* cmd = root.add_subcommand("synth", "Write a synthetic model (real shape, random weights, real vocabulary)");
  cmd->footer("Example: llm-run synth --shape llama3-8b --type Q4_K_M --vocab ggml-vocab-llama-bpe.gguf -o l3-8b.gguf");
  cmd->add_option("--shape", opts->shape, shapes)->required();
  cmd->add_option("--type", opts->preset, presets)->required();
  cmd->add_option("--vocab", opts->vocab_path, "GGUF file whose tokenizer.* metadata is copied")->required();
  cmd->add_option("-o,--output", opts->out_path, "output file")->required();
  cmd->add_option("--seed", opts->seed, "random seed")->capture_default_str();
  cmd->add_option("-t,--threads", opts->n_threads, "threads filling tensors (0 = all cores)")
      ->check(CLI::Range(0, graph::kMaxThreads));
  cmd->callback([opts, &chosen] {
    chosen = [opts] {
      try {
        model::synth_shape(opts->shape);
        model::synth_tensor_type(opts->preset, "attn_q", 0, 1, false);
      } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
      }
      auto bar = std::make_shared<ProgressBar>("writing " + opts->out_path);
      opts->progress = [bar](uint64_t done, uint64_t total) { bar->update(done, total); };
      const auto t0 = std::chrono::steady_clock::now();
      const model::SynthResult r = model::write_synthetic_model(*opts);
      bar->finish();
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("wrote %s: shape %s, type %s, %.2f B parameters, vocabulary %lld, %.2f GiB in %.1f s\n",
                  opts->out_path.c_str(), opts->shape.c_str(), opts->preset.c_str(), r.n_params / 1e9,
                  static_cast<long long>(r.n_vocab), r.file_bytes / (1024.0 * 1024.0 * 1024.0), secs);
      return 0;
    };
  });
}

}  // namespace app
