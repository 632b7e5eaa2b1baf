// `llm-run serve`: loads a model once and answers OpenAI-compatible HTTP requests (server/) until Ctrl-C or SIGTERM,
// which stop accepting, cancel what is queued and running, and exit 0.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>
#include <thread>

#include "app/cli.h"
#include "app/runtime_sinks.h"
#include "app/session_flags.h"
#include "app/template_flags.h"
#include "runtime/engine.h"
#include "server/server.h"

namespace app {
namespace {

struct ServeFlags {
  RunFlags run;
  TemplateFlags tmpl;
  std::string host = "127.0.0.1";
  int port = 8080;
  std::string api_key;
  int parallel = 4;
  int batch_tokens = 2048;
  size_t queue = 64;
  std::string alias;
  std::string reasoning_format = "auto";
  std::vector<std::string> allowed_origins;
};

int run_serve(const ServeFlags& f) {
  // SIGINT and SIGTERM wake one thread that stops the server, so that stopping runs as ordinary code and not in a
  // signal handler: the handler only writes a byte to a pipe (async-signal-safe) that the thread reads. Whatever
  // thread the kernel picks to take the signal (the CUDA driver starts threads of its own, whose signal masks are
  // not ours to set), the byte arrives; an earlier design that blocked the signals and waited in sigwait missed
  // SIGTERM on the GPU machine, where one of those threads took it. SA_RESTART keeps the interrupted thread's
  // system call going.
  static int stop_pipe[2] = {-1, -1};
  if (pipe(stop_pipe) != 0) throw std::runtime_error("serve: cannot create the stop pipe");
  struct sigaction sa {};
  sa.sa_handler = [](int) {
    const char byte = 's';
    [[maybe_unused]] const ssize_t n = write(stop_pipe[1], &byte, 1);
  };
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  RunFlags run = f.run;
  run.session.n_seq = f.parallel;  // a paged KV cache shared by that many sequences (-c: its tokens in all)
  Loaded l = load_for_run(run);
  chat::ChatTemplate tmpl = choose_template(f.tmpl, l.tok.chat_template());
  const std::string model_id =
      f.alias.empty() ? std::filesystem::path(resolve_model_path(f.run.model)).filename().string() : f.alias;
  const int32_t n_ctx = l.session->n_ctx();
  const std::string device = l.session->device_name();
  const std::optional<runtime::PagedLayout> paged = l.session->paged_layout();
  const std::string batching =
      paged ? std::to_string(paged->n_seq) + " sequences at once, KV pool of " +
                  std::to_string(paged->n_blocks * paged->block_size) + " tokens"
            : "one request at a time (this device has no batched session yet)";

  runtime::EngineOptions eo;
  eo.max_queue = f.queue;
  eo.step_tokens = f.batch_tokens;
  // An A/B switch for the step pipeline (runtime/engine.h); unset or anything but "0" keeps it on.
  if (const char* v = std::getenv("LLM_PIPELINE_STEPS")) eo.pipeline_steps = std::string_view(v) != "0";
  eo.log = stderr_log();
  runtime::Engine engine(l.model, std::move(l.tok), std::move(l.session), eo);

  server::ServerOptions so;
  so.host = f.host;
  so.port = f.port;
  so.api_key = f.api_key;
  so.model_id = model_id;
  so.engine_queue = f.queue;
  so.split_reasoning = f.reasoning_format != "none";
  so.allowed_origins = f.allowed_origins;
  so.template_variables = f.tmpl.variables;
  so.log = stderr_log();
  server::Server srv(engine, std::move(tmpl), so);
  int port = 0;
  try {
    port = srv.bind();
  } catch (const server::ServerError& e) {
    throw UsageError(e.what());
  }
  std::printf("llm-run: serving %s on http://%s:%d (device %s, context %d tokens per request, %s; Ctrl-C stops)\n",
              model_id.c_str(), f.host.c_str(), port, device.c_str(), n_ctx, batching.c_str());
  std::fflush(stdout);

  std::thread waiter([&] {
    char byte = 0;
    while (read(stop_pipe[0], &byte, 1) < 0 && errno == EINTR) {
    }
    srv.stop();
  });
  srv.run();
  // run() returns after stop(); if it returned on its own, wake the waiter so that it stops the rest and ends.
  const char byte = 'r';
  [[maybe_unused]] const ssize_t n = write(stop_pipe[1], &byte, 1);
  waiter.join();
  std::fprintf(stderr, "llm-run: stopped\n");
  return 0;
}

}  // namespace

void register_serve(CLI::App& root, Action& chosen) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = root.add_subcommand("serve", "OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions)");
  add_run_flags(*cmd, f->run);
  add_template_flags(*cmd, f->tmpl);
  cmd->add_option("--host", f->host, "Address to listen on")->default_str("127.0.0.1");
  cmd->add_option("--port", f->port, "Port to listen on (0: any free port)")
      ->default_str("8080")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--api-key", f->api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  cmd->add_option("--parallel", f->parallel,
                  "Requests generated at once, batched step by step; -c is then the KV cache's tokens for all of "
                  "them (shared blocks, prefix cache)")
      ->default_str("4")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--batch-tokens", f->batch_tokens,
                  "Tokens one batch step holds at most: running requests decode first, prompts fill the rest in "
                  "chunks")
      ->default_str("2048")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--queue", f->queue, "Requests that may wait for their turn; more are answered 429")
      ->default_str("64")
      ->check(at_least(1));
  cmd->add_option("--alias", f->alias, "Model name for /v1/models and responses (default: the file name)");
  cmd->add_option("--allow-origin", f->allowed_origins,
                  "Let web pages of this origin (https://host[:port], or * for any) call the API from a browser "
                  "(CORS); repeat for several")
      ->check([](const std::string& o) -> std::string {
        // scheme://host[:port], nothing after it: the form a browser's Origin header takes.
        const bool web = o.starts_with("http://") || o.starts_with("https://");
        const bool bare = o.find('/', 8) == std::string::npos && o.find_first_of(" \t\r\n,") == std::string::npos;
        if (o == "*" || (web && bare)) return {};
        return "expected * or an origin such as https://chat.example.org, got '" + o + "'";
      });
  cmd->add_option("--reasoning-format", f->reasoning_format,
                  "auto: a chat reply's opening <think> block (gpt-oss: its analysis channel) goes to "
                  "message.reasoning_content where the template marks it (Qwen 3, DeepSeek-R1, gpt-oss, ...); none: "
                  "the reply's text stays whole in content (deepseek, as the reference runtime spells it: auto)")
      ->check(CLI::IsMember({"auto", "deepseek", "none"}))
      ->default_str("auto");
  cmd->callback([f, &chosen] { chosen = [f] { return run_serve(*f); }; });
}

}  // namespace app
