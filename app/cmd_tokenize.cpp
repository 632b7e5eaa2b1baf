// `llm-run tokenize`: how a model's tokenizer splits a text. Prints one "id -> 'vocabulary text'" line per token,
// or with --ids the list "[id, id, ...]" (handy for scripts and for comparing with other tokenizers).
#include <cstdio>
#include <memory>
#include <string>

#include "app/cli.h"
#include "app/display_text.h"
#include "gguf/gguf.h"
#include "tokenizer/tokenizer.h"

namespace app {
namespace {

struct TokenizeOptions {
  std::string model;           // -m FILE
  std::string prompt;          // -p TEXT
  std::string file;            // -f FILE (read byte for byte)
  bool ids = false;            // --ids
  bool no_bos = false;         // --no-bos
  bool parse_special = false;  // --special
  bool has_prompt = false, has_file = false;  // -p "" is a valid (empty) text
};

int run_tokenize(const TokenizeOptions& o) {
  if (o.has_prompt == o.has_file) throw UsageError("give the text to tokenize with either -p TEXT or -f FILE");
  std::string text = o.prompt;
  if (o.has_file) text = read_input_file(o.file, "text");
  const std::string path = resolve_model_path(o.model);
  const gguf::File file = gguf::File::open(path);
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);

  tokenizer::EncodeOptions eo;
  eo.add_bos = tok.add_bos() && !o.no_bos;
  eo.add_eos = tok.add_eos();
  eo.parse_special = o.parse_special;
  const auto ids = tok.encode(text, eo);

  std::string out;
  if (o.ids) {
    out += '[';
    for (size_t i = 0; i < ids.size(); ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
    out += "]\n";
  } else {
    char buf[32];
    for (const int32_t id : ids) {
      std::snprintf(buf, sizeof buf, "%7d -> '", id);
      out += buf + escape_for_display(tok.token_text(id)) + "'\n";
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

void register_tokenize(CLI::App& root, Action& chosen) {
  auto opts = std::make_shared<TokenizeOptions>();
  CLI::App* cmd = root.add_subcommand("tokenize", "Show how the model's tokenizer splits a text into tokens");
  cmd->add_option("-m,--model", opts->model, "GGUF model or vocabulary file (default: $LLM_RUN_MODEL, else models/default.gguf)");
  CLI::Option* prompt = cmd->add_option("-p,--prompt", opts->prompt, "Text to tokenize");
  CLI::Option* file = cmd->add_option("-f,--file", opts->file, "Read the text from FILE, byte for byte");
  cmd->add_flag("--ids", opts->ids, "Print only the ids, as [id, id, ...]");
  cmd->add_flag("--no-bos", opts->no_bos, "Do not add the BOS token the vocabulary asks for");
  cmd->add_flag("--special", opts->parse_special, "Parse special tokens written in the text (e.g. <|im_start|>)");
  cmd->callback([opts, prompt, file, &chosen] {
    opts->has_prompt = prompt->count() > 0;
    opts->has_file = file->count() > 0;
    chosen = [opts] { return run_tokenize(*opts); };
  });
}

}  // namespace app
