// The chat-template flags of every command that renders a conversation (chat, template, serve): --chat-template NAME
// (a built-in) or --chat-template-file FILE (a Jinja file, as the popular runtimes accept), else the model's own; and
// --chat-template-kwargs JSON, variables for it.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/chat_template.h"

namespace app {

struct TemplateFlags {
  std::string name;  // --chat-template
  std::string file;  // --chat-template-file
  // --chat-template-kwargs '{"enable_thinking": false}': further template variables, as the reference runtime and
  // the server's chat_template_kwargs field take them.
  std::vector<std::pair<std::string, chat::jinja::Value>> variables;
  bool given() const { return !name.empty() || !file.empty(); }
};

void add_template_flags(CLI::App& cmd, TemplateFlags& flags);

// The template the flags choose; without either flag, the model's (model_template: its GGUF
// tokenizer.chat_template) or, when that is missing or unusable, ChatML with a warning on stderr when `warn`.
// Throws UsageError for an unknown built-in name or an unreadable file, std::runtime_error naming the file for a
// template that does not parse.
chat::ChatTemplate choose_template(const TemplateFlags& flags, std::string_view model_template, bool warn = true);

}  // namespace app
