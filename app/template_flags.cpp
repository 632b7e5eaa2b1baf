// Choosing the chat template from the flags (see template_flags.h).
#include "app/template_flags.h"

#include <cstdio>
#include <stdexcept>

#include "app/cli.h"
#include "chat/json.h"

namespace app {

void add_template_flags(CLI::App& cmd, TemplateFlags& f) {
  std::string names;
  for (const auto& n : chat::ChatTemplate::builtin_names()) names += (names.empty() ? "" : ", ") + n;
  auto* name = cmd.add_option("--chat-template", f.name, "Use a built-in template instead of the model's: " + names);
  cmd.add_option("--chat-template-file", f.file, "Use the Jinja chat template in FILE instead of the model's")
      ->excludes(name);
  cmd.add_option_function<std::string>(
      "--chat-template-kwargs",
      [&f](const std::string& text) {
        chat::jinja::Value v;
        try {
          v = chat::parse_json(text);
        } catch (const chat::JsonError& e) {
          throw CLI::ValidationError("--chat-template-kwargs", "not JSON: " + e.message());
        }
        try {
          f.variables = chat::template_variables_from(v);
        } catch (const std::invalid_argument& e) {
          throw CLI::ValidationError("--chat-template-kwargs", e.what());
        }
      },
      "Further variables for the chat template, as a JSON object (Qwen 3: '{\"enable_thinking\": false}')");
}

chat::ChatTemplate choose_template(const TemplateFlags& f, std::string_view model_template, bool warn) {
  if (!f.name.empty()) {
    try {
      return chat::ChatTemplate::builtin(f.name);
    } catch (const std::invalid_argument& e) {
      throw UsageError(e.what());
    }
  }
  if (!f.file.empty()) {
    const std::string text = read_input_file(f.file, "the chat template");
    try {
      return chat::ChatTemplate::parse(text);
    } catch (const chat::TemplateError& e) {
      throw std::runtime_error(f.file + ": " + e.what());
    }
  }
  chat::ChatTemplate t = chat::ChatTemplate::from_text(model_template);
  if (warn && t.is_fallback()) std::fprintf(stderr, "llm-run: warning: %s\n", t.warning().c_str());
  return t;
}

}  // namespace app
