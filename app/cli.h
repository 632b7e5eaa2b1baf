// Shared pieces of the command line: how a subcommand registers itself, the error types that map to exit codes,
// and where the model path comes from when -m is not given.
#pragma once
#include <CLI/CLI.hpp>

#include <functional>
#include <stdexcept>
#include <string>

namespace app {

// A usage error (bad flag value, missing model): "llm-run: error: ..." and exit code 2.
class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The action of the chosen subcommand; it returns the process exit code.
using Action = std::function<int()>;

// Each subcommand file provides one register function; it adds its CLI11 subcommand to `root` and, when that
// subcommand is selected, stores its action in `chosen`.
void register_info(CLI::App& root, Action& chosen);
// The root command (text generation): flags on `root` itself, chosen when no subcommand is given.
void register_generate(CLI::App& root, Action& chosen);
void register_logits(CLI::App& root, Action& chosen);
void register_perplexity(CLI::App& root, Action& chosen);
void register_synth(CLI::App& root, Action& chosen);
void register_bench(CLI::App& root, Action& chosen);
void register_chat(CLI::App& root, Action& chosen);
void register_tokenize(CLI::App& root, Action& chosen);
void register_template(CLI::App& root, Action& chosen);
void register_serve(CLI::App& root, Action& chosen);

// -m FILE if given, else $LLM_RUN_MODEL, else models/default.gguf, else the shipped models/stories260K.gguf (both
// looked for in the working directory, then in the source checkout; a note on stderr names the shipped one); throws
// UsageError with a hint on how to get a model when none of them exists.
std::string resolve_model_path(const std::string& flag_value);

// The whole file, byte for byte; UsageError "cannot read <what> file '<path>'" when it cannot be opened or read (a
// directory, a read error).
std::string read_input_file(const std::string& path, const std::string& what);

// A number's lower bound, said plainly ("--top: must be at least 1, got 0"); CLI11's NonNegativeNumber and
// PositiveNumber name the upper end of double's range in full. `above`: the bound itself is refused too.
CLI::Validator at_least(double least, bool above = false);

}  // namespace app
