// The root command, `llm-run -m FILE -p TEXT -n N`: text generation. Its flags live on the root CLI11 app and act
// when no subcommand is chosen; the loop itself is app/generate.h, shared with chat and bench.
#include <cstdio>
#include <memory>

#include "app/cli.h"
#include "app/interrupt.h"
#include "app/sampling_flags.h"
#include "app/session_flags.h"
#include "chat/json.h"
#include "runtime/gbnf_grammar.h"
#include "runtime/generate.h"
#include "runtime/json_constraint.h"
#include "runtime/json_schema_grammar.h"

namespace app {
namespace {

struct GenerateFlags {
  RunFlags run;
  std::string prompt;         // -p
  std::string prompt_file;    // -f
  SamplingFlags sampling;     // -n, -s, --temp, ... (shared with chat)
  bool no_display_prompt = false;
  bool json = false;             // --json: the continuation is one JSON object
  std::string json_schema;       // --json-schema TEXT
  std::string json_schema_file;  // --json-schema-file FILE
  std::string grammar;           // --grammar TEXT (GBNF)
  std::string grammar_file;      // --grammar-file FILE
};

// A flag's text: the file's when FILE was given, else TEXT (empty: neither).
std::string text_or_file(const std::string& text, const std::string& file, const char* what) {
  return file.empty() ? text : read_input_file(file, what);
}

// The grammar of --json-schema(-file) or --grammar(-file), read before the model loads; null without them.
// UsageError for text that is not JSON, a schema the grammar cannot hold, or a GBNF grammar with an error.
std::shared_ptr<const runtime::ByteGrammar> grammar_flag(const GenerateFlags& f) {
  if (!f.grammar.empty() || !f.grammar_file.empty()) {
    try {
      return runtime::gbnf_grammar(text_or_file(f.grammar, f.grammar_file, "grammar"));
    } catch (const runtime::GbnfError& e) {
      throw UsageError(e.what());
    }
  }
  if (f.json_schema.empty() && f.json_schema_file.empty()) return nullptr;
  const std::string text = text_or_file(f.json_schema, f.json_schema_file, "JSON schema");
  try {
    return runtime::json_schema_grammar(chat::parse_json(text));
  } catch (const chat::JsonError& e) {
    throw UsageError(std::string("the JSON schema is not JSON: ") + e.what());
  } catch (const runtime::JsonSchemaError& e) {
    throw UsageError(e.what());
  }
}

// The constraint that holds the continuation to JSON or a grammar (runtime/json_constraint.h); null without --json,
// a schema or a grammar.
std::shared_ptr<runtime::TokenConstraint> output_constraint(bool json,
                                                            std::shared_ptr<const runtime::ByteGrammar> grammar,
                                                            const tokenizer::Tokenizer& tok) {
  if (!json && !grammar) return nullptr;
  auto vocab = std::make_shared<const runtime::ConstraintVocabulary>(tok);
  if (grammar) return runtime::make_grammar_constraint(std::move(vocab), std::move(grammar));
  return std::make_shared<runtime::JsonConstraint>(std::move(vocab));
}

void print_timings(const Loaded& l, const runtime::GenerateResult& r) {
  auto rate = [](double n, double ms) { return ms > 0 ? n * 1000.0 / ms : 0.0; };
  std::fprintf(stderr, "\nllm-run: load       %10.2f ms\n", l.load_ms);
  if (r.warmup_ms > 0) std::fprintf(stderr, "llm-run: warm-up    %10.2f ms (not counted below)\n", r.warmup_ms);
  std::fprintf(stderr,
               "llm-run: prompt     %10.2f ms / %6zu tokens (%9.2f tok/s)\n"
               "llm-run: generation %10.2f ms / %6zu tokens (%9.2f tok/s)\n"
               "llm-run: stopped at %s; device %s\n",
               r.prompt_ms, r.prompt.size(), rate(double(r.prompt.size()), r.prompt_ms), r.generate_ms,
               r.generated.size(), rate(double(r.generated.size()), r.generate_ms), runtime::stop_reason_name(r.stop),
               l.session->device_name().c_str());
}

int run_generate(GenerateFlags f) {
  if (!f.prompt_file.empty()) f.prompt = read_input_file(f.prompt_file, "prompt");
  finalize_sampling(f.sampling);
  runtime::GenerateOptions& gen = f.sampling.gen;
  gen.echo_prompt = !f.no_display_prompt;
  gen.warmup = f.run.warmup;
  std::shared_ptr<const runtime::ByteGrammar> grammar = grammar_flag(f);

  Loaded l = load_for_run(f.run);
  check_logit_bias(f.sampling, l.session->n_vocab());
  const std::shared_ptr<runtime::TokenConstraint> constraint = output_constraint(f.json, std::move(grammar), l.tok);
  gen.constraint = constraint.get();
  const std::vector<int32_t> prompt = runtime::tokenize_prompt(l.tok, f.prompt);
  if (f.run.session.verbose)
    std::fprintf(stderr, "llm-run: seed %llu, prompt %zu tokens\n",
                 static_cast<unsigned long long>(gen.sampling.seed), prompt.size());
  InterruptGuard guard;  // Ctrl-C ends generation early; the timings below still print
  const runtime::GenerateResult r = runtime::generate(*l.session, l.tok, prompt, gen, [](std::string_view text) {
    if (text.empty()) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  std::fputc('\n', stdout);
  if (std::fflush(stdout) != 0) return 1;
  print_timings(l, r);
  return 0;
}

}  // namespace

void register_generate(CLI::App& root, Action& chosen) {
  auto f = std::make_shared<GenerateFlags>();
  add_run_flags(root, f->run);
  root.add_option("-p,--prompt", f->prompt, "Prompt text (special tokens such as <|im_start|> are recognised)");
  root.add_option("-f,--file", f->prompt_file, "Read the prompt from this file")->excludes("--prompt");
  add_sampling_flags(root, f->sampling);
  root.add_flag("--no-display-prompt", f->no_display_prompt, "Print only the continuation");
  auto* json = root.add_flag("--json", f->json, "Hold the continuation to one JSON object (JSON mode)");
  auto* schema = root.add_option("--json-schema", f->json_schema,
                                 "Hold the continuation to this JSON schema (docs/server.md lists what it may say)")
                     ->excludes(json);
  auto* schema_file = root.add_option("--json-schema-file", f->json_schema_file, "Read the JSON schema from this file")
                          ->excludes(json)
                          ->excludes(schema);
  auto* grammar = root.add_option("--grammar", f->grammar, "Hold the continuation to this GBNF grammar (llama.cpp's)")
                      ->excludes(json)
                      ->excludes(schema)
                      ->excludes(schema_file);
  root.add_option("--grammar-file", f->grammar_file, "Read the GBNF grammar from this file")
      ->excludes(json)
      ->excludes(schema)
      ->excludes(schema_file)
      ->excludes(grammar);
  add_warmup_flag(root, f->run, "the prompt and two decode steps, evaluated once and discarded");
  // The root callback runs after any subcommand's; it claims the run only when no subcommand did and the command
  // line was not empty (a bare `llm-run` prints the help).
  root.callback([f, &chosen, &root] {
    if (chosen || root.count_all() == 0) return;
    chosen = [f] { return run_generate(*f); };
  });
}

}  // namespace app
