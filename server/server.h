// `llm-run serve`'s HTTP server: the OpenAI-compatible routes (/v1/chat/completions, /v1/completions, /v1/models),
// /health, /metrics and the reference runtime's /tokenize, /detokenize and /apply-template, over cpp-httplib, in
// front of a runtime::Engine. It validates, renders chat templates, streams server-sent events, checks the API key and
// counts; the engine does all generation and scheduling.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "chat/chat_template.h"
#include "runtime/engine.h"
#include "runtime/events.h"
#include "server/api_request.h"

namespace httplib {
class Server;
}

namespace server {

// The server could not start (the address is taken, the host does not resolve).
class ServerError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8080;                 // 0: the OS picks a free port (bind() returns it)
  std::string api_key;             // empty: no authentication; else every route but /health needs
                                   // "Authorization: Bearer KEY"
  std::string model_id;            // the name /v1/models reports and responses echo
  size_t max_body_bytes = kDefaultMaxBodyBytes;
  int http_threads = 0;            // connections served at once; 0: the engine's queue bound plus a margin
  size_t engine_queue = 64;        // for the default http_threads: streams hold a thread while they wait
  int retry_after_s = 1;           // the Retry-After of a 429
  // A chat reply's opening <think> block as message.reasoning_content, where the template thinks
  // (reasoning_split.h); false (--reasoning-format none): the reply's text as it is, in content.
  bool split_reasoning = true;
  // Web pages of these origins may call the API from a browser (CORS: "https://chat.example.org", or "*" for any);
  // empty: browsers keep pages of other origins from reading the answers.
  std::vector<std::string> allowed_origins;
  // Template variables every chat request renders with (--chat-template-kwargs); a request's chat_template_kwargs
  // override them.
  std::vector<std::pair<std::string, chat::jinja::Value>> template_variables;
  // How long a stream waits for text before it writes an SSE comment to see whether its client is still there
  // (a disconnected client's queued request is then cancelled and leaves the queue).
  std::chrono::milliseconds stream_probe{1000};
  // How often a non-streaming request looks at its connection while it waits, to cancel for a client that left.
  std::chrono::milliseconds connection_poll{100};
  runtime::LogSink log;            // request failures and the stop sequence
};

class Server {
 public:
  Server(runtime::Engine& engine, chat::ChatTemplate tmpl, ServerOptions options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Binds and listens on options.host:options.port; returns the port (the OS's pick for port 0). Connections
  // made after this wait in the backlog until run(). Throws ServerError.
  int bind();
  // Serves until stop(). Call after bind().
  void run();
  // Stops accepting generation requests (503), shuts the engine down (queued requests are cancelled, the running
  // one cancelled), lets open responses write their end, then stops listening, which makes run() return. Callable
  // from any thread, more than once.
  void stop();

 private:
  struct Routes;
  void install_routes();

  runtime::Engine& engine_;
  std::unique_ptr<Routes> routes_;
  std::unique_ptr<httplib::Server> http_;
  ServerOptions options_;
  std::mutex stop_mutex_;
  bool stopped_ = false;
};

}  // namespace server
