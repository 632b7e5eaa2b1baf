// `llm-run template`: prints exactly the prompt text a chat template renders for an OpenAI-style messages array, with
// the model's BOS/EOS texts bound as templates expect: for people debugging a template, and for tests. Only the
// model's vocabulary is read (no weights). Nothing but the rendered text goes to stdout.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>

#include "app/cli.h"
#include "app/template_flags.h"
#include "chat/messages_json.h"
#include "gguf/gguf.h"
#include "runtime/chat_session.h"
#include "tokenizer/tokenizer.h"

namespace app {
namespace {

struct TemplateOptions {
  std::string model;
  TemplateFlags tmpl;
  std::string messages;  // FILE.json, or - for standard input
  std::string tools;     // FILE.json; empty: no tools (the template sees tools = none)
  bool no_generation_prompt = false;
};

std::string read_input(const std::string& path, const char* flag) {
  if (path == "-") return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  return read_input_file(path, flag);
}

int run_template(const TemplateOptions& o) {
  if (o.messages == "-" && o.tools == "-") throw UsageError("only one of --messages and --tools can read stdin");
  // The inputs first: a bad file is reported before the model is opened.
  std::optional<chat::ChatTemplate> named;
  if (o.tmpl.given()) named = choose_template(o.tmpl, {});
  const std::string messages_text = read_input(o.messages, "--messages");
  const std::string tools_text = o.tools.empty() ? "" : read_input(o.tools, "--tools");
  std::vector<chat::ChatMessage> messages;
  chat::ChatRenderOptions render;
  render.reasoning_as_thinking = true;  // as serve's /apply-template renders them
  try {
    messages = chat::messages_from_json(messages_text);
    if (!o.tools.empty()) render.tools = chat::tools_from_json(tools_text);
  } catch (const chat::InputError& e) {
    const std::string file = e.where().starts_with("tools") ? o.tools : o.messages;
    throw std::runtime_error((file == "-" ? std::string("stdin") : file) + ": " + e.what());
  }

  const gguf::File file = gguf::File::open(resolve_model_path(o.model));
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::from_gguf(file);
  const chat::ChatTemplate tmpl = named ? std::move(*named) : choose_template(o.tmpl, tok.chat_template());
  const runtime::TemplateTokens bound = runtime::template_tokens(tok);
  render.add_generation_prompt = !o.no_generation_prompt;
  render.bos_token = bound.bos, render.eos_token = bound.eos;
  render.variables = o.tmpl.variables;
  std::string text;
  try {
    text = tmpl.render(messages, render);
  } catch (const chat::TemplateError& e) {
    // raise_exception's message is the template's own words; anything else names the template's line and column.
    throw std::runtime_error(e.kind() == chat::TemplateError::Kind::Raised ? "the template refused: " + e.message()
                                                                           : std::string("template: ") + e.what());
  }
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace

void register_template(CLI::App& root, Action& chosen) {
  auto o = std::make_shared<TemplateOptions>();
  auto* cmd = root.add_subcommand("template", "Print the prompt a chat template renders for a messages array");
  cmd->footer("Example: llm-run template -m model.gguf --messages chat.json --tools tools.json\n"
              "  chat.json: [{\"role\": \"system\", \"content\": \"Be terse.\"}, {\"role\": \"user\", \"content\": "
              "\"Hi\"}]\n"
              "Prints the rendered text and nothing else (no newline added).");
  cmd->add_option("-m,--model", o->model, "GGUF model file (default: $LLM_RUN_MODEL, else models/default.gguf)");
  add_template_flags(*cmd, o->tmpl);
  cmd->add_option("--messages", o->messages, "OpenAI-style messages array (JSON file; - for stdin)")->required();
  cmd->add_option("--tools", o->tools, "OpenAI-style tools array (JSON file; - for stdin)");
  cmd->add_flag("--no-generation-prompt", o->no_generation_prompt,
                "Leave out the header that opens the assistant's reply");
  cmd->callback([o, &chosen] { chosen = [o] { return run_template(*o); }; });
}

}  // namespace app
