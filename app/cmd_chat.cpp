// `llm-run chat`: a conversation on a terminal or over piped stdin (one line = one user turn), using the model's own
// chat template or a built-in one (--chat-template). The KV cache is kept across turns, so each turn evaluates only
// its new tokens. /reset forgets the conversation, /exit or end of input (Ctrl-D) ends it.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "app/cli.h"
#include "app/interrupt.h"
#include "app/sampling_flags.h"
#include "app/session_flags.h"
#include "app/template_flags.h"
#include "runtime/chat_session.h"

namespace app {
namespace {

struct ChatFlags {
  RunFlags run;
  SamplingFlags sampling;
  std::string system;
  TemplateFlags tmpl;
  bool show_template = false;
};

int run_chat(ChatFlags& f) {
  finalize_sampling(f.sampling);
  // A template the flags name is read (or refused) before the model loads.
  std::optional<chat::ChatTemplate> named;
  if (f.tmpl.given()) named = choose_template(f.tmpl, {});
  Loaded l = load_for_run(f.run);
  check_logit_bias(f.sampling, l.session->n_vocab());
  chat::ChatTemplate tmpl = named ? std::move(*named) : choose_template(f.tmpl, l.tok.chat_template());
  if (f.run.session.verbose || f.show_template)
    std::fprintf(stderr, "llm-run: chat template: %s%s\n", std::string(chat::family_name(tmpl.family())).c_str(),
                 tmpl.is_fallback() ? " (fallback)" : "");
  runtime::ChatOptions options;
  options.system = f.system;
  options.template_variables = f.tmpl.variables;
  options.generation = f.sampling.gen;
  options.generation.warmup = f.run.warmup;
  runtime::ChatSession chat(*l.session, l.tok, std::move(tmpl), options);

  const bool tty = isatty(STDIN_FILENO) != 0;
  const bool out_tty = isatty(STDOUT_FILENO) != 0;
  InterruptGuard guard;  // Ctrl-C stops the reply, not the program
  if (tty) std::fprintf(stderr, "llm-run chat: /reset starts over, /exit or Ctrl-D ends, Ctrl-C stops a reply\n");
  std::string line;
  for (;;) {
    if (tty) {
      std::fputs("\n> ", stdout);
      std::fflush(stdout);
    }
    if (!std::getline(std::cin, line)) break;
    if (line == "/exit" || line == "/quit") break;
    if (line == "/reset") {
      chat.reset();
      std::fprintf(stderr, "llm-run: conversation reset\n");
      continue;
    }
    if (line.empty()) continue;
    clear_interrupt();
    // A thinking model's reasoning (chat/reply_split.h) is shown before its answer, faint on a terminal, and a
    // blank line apart from it.
    bool thinking = false;
    const auto write = [](std::string_view text) {
      std::fwrite(text.data(), 1, text.size(), stdout);
      std::fflush(stdout);
    };
    try {
      const auto end_thinking = [&] {
        if (!thinking) return;
        thinking = false;
        write(out_tty ? "\x1b[0m\n\n" : "\n\n");
      };
      const runtime::TurnResult r = chat.turn(
          line,
          [&](std::string_view text) {
            end_thinking();
            write(text);
          },
          [](const std::string& note) { std::fprintf(stderr, "\nllm-run: %s\n", note.c_str()); },
          [&](std::string_view text) {
            if (!thinking && out_tty) write("\x1b[2m");
            thinking = true;
            write(text);
          });
      if (thinking && out_tty) write("\x1b[0m");
      std::fputc('\n', stdout);
      std::fflush(stdout);
      if (f.run.session.verbose) {
        const auto& g = r.generation;
        std::fprintf(stderr, "llm-run: turn: %zu new prompt tokens (%d reused), %zu generated, %.1f tok/s (%s)\n",
                     g.prompt.size(), r.reused_tokens, g.generated.size(),
                     g.generate_ms > 0 ? g.generated.size() * 1000.0 / g.generate_ms : 0.0, runtime::stop_reason_name(g.stop));
      }
    } catch (const runtime::SessionError& e) {
      if (thinking && out_tty) write("\x1b[0m");
      std::fprintf(stderr, "llm-run: error: %s\n", e.what());
    }
  }
  return 0;
}

}  // namespace

void register_chat(CLI::App& root, Action& chosen) {
  auto f = std::make_shared<ChatFlags>();
  auto* cmd = root.add_subcommand("chat", "Hold a conversation using the model's chat template");
  cmd->footer("Example: llm-run chat -m qwen2.5-0.5b-instruct-q4_k_m.gguf --system \"You are terse.\"\n"
              "Piped: printf 'Hi\\nWhat is 2+2?\\n' | llm-run chat -m model.gguf --temp 0");
  add_run_flags(*cmd, f->run);
  add_sampling_flags(*cmd, f->sampling);
  cmd->add_option("--system", f->system, "System prompt");
  add_template_flags(*cmd, f->tmpl);
  cmd->add_flag("--show-template", f->show_template, "Say which template family is in use");
  add_warmup_flag(*cmd, f->run, "the first turn's prompt and two decode steps, evaluated once and discarded");
  cmd->callback([f, &chosen] { chosen = [f] { return run_chat(*f); }; });
}

}  // namespace app
