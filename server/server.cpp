// The server's life cycle and routing table (see server.h): authentication, error bodies for every failure,
// counters, and the stop sequence. The route handlers live in completions.cpp and token_routes.cpp.
#include "server/server.h"

#include <algorithm>
#include <charconv>
#include <csignal>
#include <functional>

#include "server/routes.h"

namespace server {

struct Server::Routes : RouteContext {
  using RouteContext::RouteContext;
  std::mutex run_mutex;
  std::condition_variable run_changed;
  bool in_run = false;  // run() is inside listen_after_bind
};

void RouteContext::open_response() {
  std::lock_guard lock(open_mutex);
  ++open_responses;
}

void RouteContext::close_response() {
  std::lock_guard lock(open_mutex);
  --open_responses;
  open_changed.notify_all();
}

uint64_t RouteContext::random_seed() {
  std::lock_guard lock(seed_mutex);
  return seed_rng();
}

std::shared_ptr<const runtime::ConstraintVocabulary> RouteContext::json_vocabulary() {
  std::call_once(json_once,
                 [this] { json_vocab = std::make_shared<runtime::ConstraintVocabulary>(engine.tokenizer()); });
  return json_vocab;
}

void send_json(httplib::Response& res, const std::string& body) { res.set_content(body, "application/json"); }

void send_error(const RouteContext& ctx, httplib::Response& res, const ApiError& e) {
  res.status = e.status();
  if (e.status() == 429) res.set_header("Retry-After", std::to_string(ctx.options.retry_after_s));
  send_json(res, error_body(e));
}

namespace {

using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;

// OpenAI clients send "Authorization: Bearer KEY".
bool authorized(const httplib::Request& req, const std::string& key) {
  if (key.empty()) return true;
  const std::string auth = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  return auth.size() == prefix.size() + key.size() && auth.compare(0, prefix.size(), prefix) == 0 &&
         auth.compare(prefix.size(), std::string::npos, key) == 0;
}

// The Access-Control-Allow-Origin a response to this request carries: "*" when any origin may call, the request's
// Origin when it is one of the allowed, else none (empty).
std::string cors_origin(const ServerOptions& o, const httplib::Request& req) {
  if (o.allowed_origins.empty()) return {};
  if (std::find(o.allowed_origins.begin(), o.allowed_origins.end(), "*") != o.allowed_origins.end()) return "*";
  const std::string origin = req.get_header_value("Origin");
  if (origin.empty()) return {};
  return std::find(o.allowed_origins.begin(), o.allowed_origins.end(), origin) != o.allowed_origins.end() ? origin
                                                                                                           : "";
}

ApiError payload_too_large(const RouteContext& ctx) {
  return ApiError(413, "invalid_request_error",
                  "the request body is larger than " + std::to_string(ctx.options.max_body_bytes) + " bytes", "",
                  "payload_too_large");
}

}  // namespace

Server::Server(runtime::Engine& engine, chat::ChatTemplate tmpl, ServerOptions options)
    : engine_(engine), http_(std::make_unique<httplib::Server>()), options_(std::move(options)) {
  routes_ = std::make_unique<Routes>(engine_, std::move(tmpl), options_);
  install_routes();
}

Server::~Server() { stop(); }

void Server::install_routes() {
  RouteContext& ctx = *routes_;
  // Every handler's failures become an OpenAI error body; nothing a request does can escape into the server.
  const auto guard = [&ctx](bool needs_key, std::function<void(const httplib::Request&, httplib::Response&)> fn) {
    return [&ctx, needs_key, fn](const httplib::Request& req, httplib::Response& res) {
      try {
        if (needs_key && !authorized(req, ctx.options.api_key))
          throw ApiError(401, "authentication_error", "invalid or missing API key (send 'Authorization: Bearer KEY')",
                         "", "invalid_api_key");
        fn(req, res);
      } catch (const ApiError& e) {
        send_error(ctx, res, e);
      } catch (const std::exception& e) {
        log(ctx.options.log, runtime::LogLevel::Warning, req.method + " " + req.path + " failed: " + e.what());
        send_error(ctx, res, ApiError(500, "server_error", e.what()));
      }
    };
  };
  httplib::Server& h = *http_;
  h.Post("/v1/chat/completions", guard(true, [&ctx](const auto& req, auto& res) {
    handle_completion(ctx, req, res, Route::Chat);
  }));
  h.Post("/v1/completions", guard(true, [&ctx](const auto& req, auto& res) {
    handle_completion(ctx, req, res, Route::Completion);
  }));
  h.Get("/v1/models", guard(true, [&ctx](const auto&, auto& res) {
    send_json(res, models_json(ctx.options.model_id, ctx.started, ctx.engine.n_ctx()));
  }));
  // OpenAI's retrieve-model route: the served model by its id (which may hold '/'), 404 for any other.
  h.Get(R"(/v1/models/(.+))", guard(true, [&ctx](const auto& req, auto& res) {
    const std::string id = req.matches.size() > 1 ? std::string(req.matches[1]) : std::string();
    if (id != ctx.options.model_id)
      throw ApiError(404, "invalid_request_error", "the model '" + id + "' does not exist (this server serves '" +
                                                       ctx.options.model_id + "')", "model", "model_not_found");
    send_json(res, model_json(ctx.options.model_id, ctx.started, ctx.engine.n_ctx()));
  }));
  // Load balancers probe /health without credentials.
  h.Get("/health", guard(false, [&ctx](const auto&, auto& res) {
    if (ctx.stopping) throw ApiError(503, "server_error", "the server is shutting down", "", "shutting_down");
    send_json(res, "{\"status\":\"ok\"}");
  }));
  h.Get("/metrics", guard(true, [&ctx](const auto&, auto& res) {
    const HttpCounters http{ctx.http_requests.load(), ctx.client_errors.load(), ctx.server_errors.load()};
    res.set_content(metrics_text(ctx.engine.stats(), http), "text/plain; version=0.0.4");
  }));
  h.Post("/tokenize", guard(true, [&ctx](const auto& req, auto& res) { handle_tokenize(ctx, req, res); }));
  h.Post("/detokenize", guard(true, [&ctx](const auto& req, auto& res) { handle_detokenize(ctx, req, res); }));
  h.Post("/apply-template", guard(true, [&ctx](const auto& req, auto& res) { handle_apply_template(ctx, req, res); }));

  // Bodies are judged by their headers before httplib reads them (it reads the body before any route handler runs).
  // cpp-httplib 0.11.4 refuses a Content-Length over the limit only after reading and discarding that many bytes,
  // and reads a chunked body whole into memory with no limit at all; so an oversized length is answered at once, and
  // chunked request bodies are refused (OpenAI clients send a Content-Length). The unread body is then not consumed:
  // httplib's keep-alive limit (5 requests) bounds what it reads of it as further requests before it closes.
  h.set_pre_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    using R = httplib::Server::HandlerResponse;
    // A browser's preflight before a cross-origin POST with a JSON body or an Authorization header: what it may send.
    if (req.method == "OPTIONS" && !cors_origin(ctx.options, req).empty()) {
      res.status = 204;
      res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
      res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
      res.set_header("Access-Control-Max-Age", "600");
      return R::Handled;
    }
    if (req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos) {
      send_error(ctx, res, ApiError(411, "invalid_request_error",
                                    "send the request body with a Content-Length (chunked request bodies are not "
                                    "accepted)", "", "length_required"));
      return R::Handled;
    }
    const std::string length = req.get_header_value("Content-Length");
    uint64_t n = 0;
    const auto [end, ec] = std::from_chars(length.data(), length.data() + length.size(), n);
    const bool too_long = ec == std::errc::result_out_of_range || (ec == std::errc() && n > ctx.options.max_body_bytes);
    if (!too_long) return R::Unhandled;
    send_error(ctx, res, payload_too_large(ctx));
    return R::Handled;
  });

  // httplib's own refusals (no such route, a body over the limit, a malformed request) get an OpenAI body too;
  // responses that already have one (our ApiErrors) are left alone.
  h.set_error_handler(httplib::Server::HandlerWithResponse([&ctx](const httplib::Request& req,
                                                                  httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    if (res.status == 404) {
      send_error(ctx, res, ApiError(404, "invalid_request_error", "no route " + req.method + " " + req.path, "",
                                    "not_found"));
    } else if (res.status == 413) {
      send_error(ctx, res, payload_too_large(ctx));
    } else {
      send_error(ctx, res, ApiError(res.status, "invalid_request_error", "bad HTTP request"));
    }
    return httplib::Server::HandlerResponse::Handled;
  }));
  // Every answer (errors and streams included) names the origin that may read it, when CORS is on.
  h.set_post_routing_handler([&ctx](const httplib::Request& req, httplib::Response& res) {
    const std::string origin = cors_origin(ctx.options, req);
    if (origin.empty()) return;
    res.set_header("Access-Control-Allow-Origin", origin);
    if (origin != "*") res.set_header("Vary", "Origin");
  });
  h.set_logger([&ctx](const httplib::Request&, const httplib::Response& res) {
    ++ctx.http_requests;
    if (res.status >= 400 && res.status < 500) ++ctx.client_errors;
    if (res.status >= 500) ++ctx.server_errors;
  });

  h.set_payload_max_length(options_.max_body_bytes);
  // Idle keep-alive connections hold a thread until this runs out; short, so that stopping is quick.
  h.set_keep_alive_timeout(2);
  const size_t threads =
      options_.http_threads > 0 ? static_cast<size_t>(options_.http_threads) : options_.engine_queue + 8;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
}

int Server::bind() {
  // A client that disconnects mid-write must be a failed write, not a SIGPIPE that ends the process.
  std::signal(SIGPIPE, SIG_IGN);
  int port = options_.port;
  if (port == 0) {
    port = http_->bind_to_any_port(options_.host);
  } else if (!http_->bind_to_port(options_.host, port)) {
    port = -1;
  }
  if (port <= 0)
    throw ServerError("cannot listen on " + options_.host + ":" + std::to_string(options_.port) +
                      " (address in use, or a host that does not resolve)");
  return port;
}

void Server::run() {
  {
    std::lock_guard lock(routes_->run_mutex);
    if (routes_->stopping) return;
    routes_->in_run = true;
  }
  http_->listen_after_bind();
  std::lock_guard lock(routes_->run_mutex);
  routes_->in_run = false;
  routes_->run_changed.notify_all();
}

void Server::stop() {
  {
    std::lock_guard lock(stop_mutex_);
    if (stopped_) return;
    stopped_ = true;
  }
  Routes& r = *routes_;
  r.stopping = true;
  log(options_.log, runtime::LogLevel::Note, "stopping: cancelling queued and running requests");
  engine_.shutdown();
  // Every accepted request has its final event now; let the open responses write it.
  {
    std::unique_lock lock(r.open_mutex);
    r.open_changed.wait_for(lock, std::chrono::seconds(10), [&] { return r.open_responses == 0; });
  }
  // httplib's stop() does nothing if the listen loop has not started yet; repeat it until run() has returned.
  std::unique_lock lock(r.run_mutex);
  while (r.in_run) {
    http_->stop();
    r.run_changed.wait_for(lock, std::chrono::milliseconds(100), [&] { return !r.in_run; });
  }
}

}  // namespace server
