// The chat-template flags of every command that renders a conversation (chat, template): --chat-template NAME (a
// built-in) or --chat-template-file FILE (a Jinja file, as the popular runtimes accept), else the model's own.
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <string_view>

#include "chat/chat_template.h"

namespace app {

struct TemplateFlags {
  std::string name;  // --chat-template
  std::string file;  // --chat-template-file
  bool given() const { return !name.empty() || !file.empty(); }
};

void add_template_flags(CLI::App& cmd, TemplateFlags& flags);

// The template the flags choose; without either flag, the model's (model_template: its GGUF
// tokenizer.chat_template) or, when that is missing or unusable, ChatML with a warning on stderr when `warn`.
// Throws UsageError for an unknown built-in name or an unreadable file, std::runtime_error naming the file for a
// template that does not parse.
chat::ChatTemplate choose_template(const TemplateFlags& flags, std::string_view model_template, bool warn = true);

}  // namespace app
