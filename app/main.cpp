// llm-run entry point: parses the command line with CLI11, runs the chosen subcommand, and turns every error into
// one line "llm-run: error: ..." with exit code 1 (runtime) or 2 (usage).
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "app/argv_spelling.h"
#include "app/cli.h"
#include "app/version.h"
#include "runtime/session.h"

int main(int argc, char** argv) {
  CLI::App root{"llm-run: run GGUF language models on NVIDIA GPUs (and on the CPU reference)", "llm-run"};
  root.set_version_flag("--version", app::version_string());
  root.require_subcommand(0, 1);

  app::Action chosen;
  app::register_info(root, chosen);
  app::register_generate(root, chosen);
  app::register_logits(root, chosen);
  app::register_perplexity(root, chosen);
  app::register_synth(root, chosen);
  app::register_bench(root, chosen);
  app::register_chat(root, chosen);
  app::register_tokenize(root, chosen);
  app::register_template(root, chosen);
  app::register_serve(root, chosen);

  // Nothing at all asked for: the help, as a usage error (the shipped default model would otherwise tell a story
  // nobody asked for).
  if (argc <= 1) {
    std::fputs(root.help().c_str(), stderr);
    return 2;
  }

  // `bench -pg 512,128` as the popular *-bench tool spells it (see argv_spelling.h).
  std::vector<std::string> args = app::respell_bench_pg({argv, argv + argc});
  std::vector<char*> arg_ptrs;
  for (std::string& a : args) arg_ptrs.push_back(a.data());
  try {
    root.parse(static_cast<int>(arg_ptrs.size()), arg_ptrs.data());
  } catch (const CLI::CallForHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return root.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return root.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "llm-run: error: %s\n  (run 'llm-run --help' for usage)\n", e.what());
    return 2;
  }
  if (!chosen) {
    std::fputs(root.help().c_str(), stderr);
    return 2;
  }
  try {
    return chosen();
  } catch (const app::UsageError& e) {
    std::fprintf(stderr, "llm-run: error: %s\n", e.what());
    return 2;
  } catch (const runtime::OptionsError& e) {  // options no model could take: a usage error too
    std::fprintf(stderr, "llm-run: error: %s\n", e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    // What a host allocation that fails says by itself ("std::bad_alloc") names neither the cause nor the remedy.
    std::fputs("llm-run: error: out of host memory: the KV cache (-c), the parallel sequences or the batch asked "
               "for more than this machine can allocate\n", stderr);
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llm-run: error: %s\n", e.what());
    return 1;
  }
}
