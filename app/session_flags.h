// The flags every model-running command shares (-m, -c, --device, -t, -v) and loading a model, its tokenizer and a
// session in one step, so generate, logits and perplexity parse and report them identically.
#pragma once
#include <CLI/CLI.hpp>

#include <memory>
#include <string>

#include "model/model.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace app {

struct RunFlags {
  std::string model;        // -m FILE
  runtime::SessionOptions session;   // -c, --device, -t, -v, --cache-type, --half-weights
  bool warmup = true;       // false with --no-warmup (only on commands that add_warmup_flag)
};

// Adds -m/--model, -c/--ctx-size, --device, -t/--threads, -v/--verbose, --cache-type, --no-cuda-graph and
// --half-weights to cmd (the root app or a subcommand).
void add_run_flags(CLI::App& cmd, RunFlags& flags);

// Adds --no-warmup, which clears flags.warmup; `what` is the command's warm-up in a few words, for --help.
void add_warmup_flag(CLI::App& cmd, RunFlags& flags, const std::string& what);

struct Loaded {
  std::shared_ptr<const model::Model> model;
  tokenizer::Tokenizer tok;
  std::unique_ptr<runtime::Session> session;
  double load_ms = 0;       // file mapping + checks + tokenizer + session (graphs are built lazily)
};

// resolve_model_path, Model::load, Tokenizer::from_gguf, make_session; with -v, describes the model and device.
Loaded load_for_run(const RunFlags& flags);

}  // namespace app
