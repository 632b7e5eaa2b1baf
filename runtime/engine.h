// The serving engine: one loaded model, its tokenizer and one Session, and a worker thread that runs submitted
// requests. Each request carries its own prompt ids, sampling parameters (and seed), token limit and stop strings,
// and streams its text to a callback that ends with one final event.
//
// With a paged session (SessionOptions::n_seq > 0) the worker batches continuously (engine_batched.cpp): every step
// runs one ragged batch in which the running sequences decode a token each and waiting prompts fill the rest of a
// token budget in chunks; requests join at the next step and leave when done; blocks of the KV cache are shared by
// prefix (runtime/kv_blocks.h). With a one-sequence session it runs one request at a time, first in first out,
// through the command line's generate loop. Either way a request's tokens depend only on the request.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "runtime/token_constraint.h"
#include "runtime/events.h"
#include "runtime/logprobs.h"
#include "runtime/sampler.h"
#include "runtime/session.h"
#include "tokenizer/tokenizer.h"

namespace model {
class Model;
}

namespace runtime {

// A request the engine can never run, whatever the load: the caller's mistake (a server answers 400).
class RequestError : public std::invalid_argument {
 public:
  enum class Kind {
    EmptyPrompt,    // no prompt ids
    ContextLength,  // the prompt leaves no room for a token in the context
    BadToken,       // a prompt id outside the vocabulary
    BadSampling,    // a sampling parameter outside its domain (runtime::validate)
    BadLimit,       // max_tokens < -1
    BadLogprobs,    // top_logprobs outside [-1, kMaxTopLogprobs]
    BadLogitBias,   // a logit bias on a token id outside the vocabulary
  };
  RequestError(Kind kind, const std::string& message) : std::invalid_argument(message), kind_(kind) {}
  Kind kind() const noexcept { return kind_; }

 private:
  Kind kind_;
};

struct EngineRequest {
  std::vector<int32_t> prompt;     // token ids, BOS included where the model wants one
  SamplerParams sampling;          // seed included: a request's tokens depend only on its own parameters
  int32_t max_tokens = -1;         // -1: until end of generation or a full context
  // Generation stops at the first of these in the generated text; as OpenAI's `stop`, the match and anything after
  // it are never streamed.
  std::vector<std::string> stop;
  bool ignore_eos = false;         // keep going past end-of-generation tokens
  // >= 0: each generated token comes with its logprob and this many most likely alternatives (runtime/logprobs.h),
  // computed from the raw logits; -1: none, and nothing is computed.
  int32_t top_logprobs = -1;
  // With top_logprobs >= 0: every prompt token after the first comes with its own logprob and alternatives as well
  // (the log-softmax of the logits of the token before it: how evaluation harnesses score a text). Such a prompt is
  // computed whole (none of it from the prefix cache), and a step holds as many of its tokens as the session gives
  // output rows. Paged sessions only.
  bool prompt_logprobs = false;
  // Set: what may come next, token by token (JSON mode: json_constraint.h); this request's own, since it keeps the
  // request's place. Its steps are drawn on the host from the masked logits.
  std::shared_ptr<TokenConstraint> constraint;
};

enum class FinishReason { Stop, Length, Cancelled, Error };
// "stop" (end of generation or a stop string), "length" (max_tokens or a full context), "cancelled", "error".
const char* finish_reason_name(FinishReason r);

struct Usage {
  int32_t prompt_tokens = 0;
  int32_t completion_tokens = 0;
  int32_t cached_tokens = 0;       // prompt tokens whose K/V came from the prefix cache
};

struct EngineEvent {
  enum class Kind { Text, Final };
  Kind kind = Kind::Text;
  // Text: the text that became complete (never part of a possible stop string; may be empty while text is held
  // back) and the generated ids since the previous event. Valid during the call only.
  std::string_view text;
  std::span<const int32_t> tokens;
  // Text, when the request asked for them (top_logprobs >= 0): one entry per id of tokens, in the same order.
  std::span<const TokenLogprobs> logprobs;
  // Text, when the request asked for them (prompt_logprobs): the logprobs of the prompt's tokens 1, 2, ... that
  // became known since the previous event, in order (none for token 0); they all come before the first generated
  // token's event.
  std::span<const TokenLogprobs> prompt_logprobs;
  // Final: why it ended, the token counts, and for Error what went wrong.
  FinishReason finish = FinishReason::Stop;
  Usage usage;
  std::string error;
};

// Called on the engine's worker thread, never concurrently for one request: zero or more Text events, then exactly
// one Final (for a request cancelled while still queued, the Final comes on the thread that called cancel()). Returning false asks to cancel (a client that went away); it takes effect before the next token, and
// the Final event still comes (Cancelled). The return value of the Final call is ignored.
using EngineCallback = std::function<bool(const EngineEvent&)>;

enum class SubmitStatus { Accepted, QueueFull, ShuttingDown };

struct SubmitResult {
  SubmitStatus status = SubmitStatus::Accepted;
  uint64_t id = 0;                 // Accepted: the request's id, for cancel()
};

struct EngineStats {
  uint64_t requests_accepted = 0;
  uint64_t requests_rejected = 0;  // queue full or shutting down
  uint64_t finished_stop = 0, finished_length = 0, finished_cancelled = 0, finished_error = 0;
  uint64_t prompt_tokens = 0;      // of finished requests
  uint64_t completion_tokens = 0;
  size_t queue_length = 0;         // accepted, not started
  size_t running = 0;              // started, not finished
  // Paged sessions: the KV-cache pool and the prefix cache (zero otherwise).
  int32_t kv_blocks_total = 0, kv_blocks_used = 0, kv_blocks_cached = 0;
  uint64_t prefix_cached_tokens = 0;  // prompt tokens served from the prefix cache
  uint64_t preemptions = 0;        // sequences sent back to wait for blocks (their work is recomputed)
  uint64_t steps = 0;              // batches run
  uint64_t step_tokens = 0;        // tokens in those batches
  // Paged sessions: seconds the worker was busy (requests running or queued), and of those, seconds it waited for
  // the device (launching a step, taking its results); the rest is the host's share of a step.
  double busy_seconds = 0, device_wait_seconds = 0;
};

struct EngineOptions {
  size_t max_queue = 64;           // waiting requests beyond the running ones; submit refuses more (QueueFull)
  int32_t step_tokens = 512;       // paged sessions: tokens one batch holds at most (decodes first, then prompt chunks)
  // Paged sessions: launch each step before taking the results of the one before (engine_batched.cpp); false
  // takes every step's results first (an A/B switch: LLM_PIPELINE_STEPS=0 for `serve`).
  bool pipeline_steps = true;
  LogSink log;                     // failures of single requests, for the server's log
};

class Engine {
 public:
  // Starts the worker. The tokenizer must describe the session's model.
  Engine(std::shared_ptr<const model::Model> model, tokenizer::Tokenizer tok, std::unique_ptr<Session> session,
         EngineOptions options = {});
  ~Engine();  // shutdown()
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request. Throws RequestError for a request that could never run (checked here, before queueing, so
  // the caller can answer at once). Otherwise returns Accepted (the callback will get its events), or QueueFull /
  // ShuttingDown (the callback is never called).
  SubmitResult submit(EngineRequest request, EngineCallback callback);

  // Cancels a request (no-op for an unknown or finished id). A running one stops before its next token, as when
  // its callback returns false; a queued one leaves the queue now and gets its Final before this returns.
  void cancel(uint64_t id);

  // Stops accepting, cancels every queued request, cancels the running one (finish_running = false) or lets it
  // finish, and joins the worker. Every accepted request has had its Final event when this returns. Idempotent.
  void shutdown(bool finish_running = false);

  // Waits until nothing is queued or running; false when the timeout passed first.
  bool wait_idle(std::chrono::milliseconds timeout);

  EngineStats stats() const;
  const tokenizer::Tokenizer& tokenizer() const { return tok_; }
  const model::Model& model() const { return *model_; }
  int32_t n_ctx() const { return n_ctx_; }
  std::string device_name() const { return device_name_; }

 private:
  struct Job;
  struct Running;    // a started request of the batching worker (engine_batched.cpp)
  struct LaunchedStep;  // a step of the batching worker whose results are not taken yet (engine_batched.cpp)
  void worker();
  void run(Job& job);
  void worker_batched();
  // Takes the first queued job when `admit` says it can start now (under the lock); null when none can.
  std::shared_ptr<Job> take_queued(const std::function<bool(const Job&)>& admit);
  void finish(Job& job, FinishReason reason, Usage usage, const std::string& error);

  std::shared_ptr<const model::Model> model_;
  tokenizer::Tokenizer tok_;
  std::unique_ptr<Session> session_;
  EngineOptions options_;
  int32_t n_ctx_ = 0;
  int32_t n_vocab_ = 0;
  std::string device_name_;
  bool paged_ = false;             // the batching worker runs (the session is paged)

  mutable std::mutex mutex_;
  std::condition_variable wake_;   // worker: a job or shutdown
  std::condition_variable idle_;   // wait_idle: a job finished
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> active_;  // started, not finished
  int cancelling_ = 0;             // queued requests cancel() took out whose Final is still being delivered
  bool stopping_ = false;
  uint64_t next_id_ = 1;
  EngineStats stats_;
  std::thread thread_;
};

}  // namespace runtime
