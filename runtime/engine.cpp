// The serving engine's queue, its event contract and the one-sequence worker (see engine.h); the batching worker of
// paged sessions is in engine_batched.cpp.
#include "runtime/engine.h"
#include "runtime/engine_job.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>

#include "model/model.h"
#include "runtime/generate.h"
#include "runtime/stop_text.h"

namespace runtime {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::Stop: return "stop";
    case FinishReason::Length: return "length";
    case FinishReason::Cancelled: return "cancelled";
    case FinishReason::Error: return "error";
  }
  return "?";
}

Engine::Engine(std::shared_ptr<const model::Model> model, tokenizer::Tokenizer tok, std::unique_ptr<Session> session,
               EngineOptions options)
    : model_(std::move(model)), tok_(std::move(tok)), session_(std::move(session)), options_(std::move(options)) {
  n_ctx_ = session_->n_ctx();
  n_vocab_ = session_->n_vocab();
  device_name_ = session_->device_name();
  if (const auto layout = session_->paged_layout()) {
    paged_ = true;
    // Every batch shape a step can take, built now: no request pays for a graph build or a kernel compile.
    const auto t0 = std::chrono::steady_clock::now();
    const int32_t shapes = session_->prepare_paged(step_budget(options_, *layout));
    if (shapes > 0)
      log(options_.log, LogLevel::Note,
          "prepared " + std::to_string(shapes) + " batch shapes in " +
              std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                                                  t0)
                                 .count()) +
              " ms");
    thread_ = std::thread([this] { worker_batched(); });
  } else {
    thread_ = std::thread([this] { worker(); });
  }
}

Engine::~Engine() { shutdown(); }

SubmitResult Engine::submit(EngineRequest request, EngineCallback callback) {
  using K = RequestError::Kind;
  if (request.prompt.empty()) throw RequestError(K::EmptyPrompt, "the prompt has no tokens");
  // At least one token must fit after the prompt, or there is nothing to generate.
  if (static_cast<int64_t>(request.prompt.size()) >= n_ctx_)
    throw RequestError(K::ContextLength, "the prompt has " + std::to_string(request.prompt.size()) +
                                             " tokens but the context holds " + std::to_string(n_ctx_) +
                                             " (the prompt and at least one generated token)");
  for (int32_t id : request.prompt)
    if (id < 0 || id >= n_vocab_)
      throw RequestError(K::BadToken, "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                          std::to_string(n_vocab_));
  if (request.max_tokens < -1) throw RequestError(K::BadLimit, "max_tokens must be -1 or more");
  for (const auto& [id, b] : request.sampling.logit_bias)
    if (id < 0 || id >= n_vocab_)
      throw RequestError(K::BadLogitBias, "logit_bias names token id " + std::to_string(id) +
                                              ", outside the vocabulary of " + std::to_string(n_vocab_));
  if (request.top_logprobs < -1 || request.top_logprobs > kMaxTopLogprobs)
    throw RequestError(K::BadLogprobs, "top_logprobs must be between 0 and " + std::to_string(kMaxTopLogprobs) +
                                           " (or -1 for none)");
  if (request.prompt_logprobs && request.top_logprobs < 0)
    throw RequestError(K::BadLogprobs, "the prompt's logprobs come with the generated tokens' (top_logprobs >= 0)");
  if (request.prompt_logprobs && !paged_)
    throw RequestError(K::BadLogprobs, "the prompt's logprobs need the batching engine (a paged session)");
  try {
    validate(request.sampling);
  } catch (const std::invalid_argument& e) {
    throw RequestError(K::BadSampling, e.what());
  }

  std::lock_guard lock(mutex_);
  if (stopping_ || queue_.size() >= options_.max_queue) {
    ++stats_.requests_rejected;
    return {stopping_ ? SubmitStatus::ShuttingDown : SubmitStatus::QueueFull, 0};
  }
  auto job = std::make_shared<Job>();
  job->id = next_id_++;
  job->request = std::move(request);
  job->callback = std::move(callback);
  queue_.push_back(job);
  ++stats_.requests_accepted;
  stats_.queue_length = queue_.size();
  wake_.notify_one();
  return {SubmitStatus::Accepted, job->id};
}

void Engine::cancel(uint64_t id) {
  std::shared_ptr<Job> queued;
  {
    std::lock_guard lock(mutex_);
    for (auto& job : active_)
      if (job->id == id) job->cancelled = true;
    for (auto it = queue_.begin(); it != queue_.end(); ++it) {
      if ((*it)->id == id) {
        // Out of the queue at once: a client that went away should not hold a place another could take.
        queued = std::move(*it);
        queue_.erase(it);
        ++cancelling_;  // not idle until its Final is out
        break;
      }
    }
  }
  if (!queued) return;
  queued->cancelled = true;
  finish(*queued, FinishReason::Cancelled, {static_cast<int32_t>(queued->request.prompt.size()), 0}, "");
  std::lock_guard lock(mutex_);
  --cancelling_;
  idle_.notify_all();
}

void Engine::shutdown(bool finish_running) {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
    if (!finish_running)
      for (auto& job : active_) job->cancelled = true;
    for (auto& job : queue_) job->cancelled = true;
    wake_.notify_all();
  }
  if (thread_.joinable()) thread_.join();
}

bool Engine::wait_idle(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  return idle_.wait_for(lock, timeout, [&] { return queue_.empty() && active_.empty() && cancelling_ == 0; });
}

EngineStats Engine::stats() const {
  std::lock_guard lock(mutex_);
  EngineStats s = stats_;
  s.queue_length = queue_.size();
  s.running = active_.size();
  return s;
}

void Engine::worker() {
  for (;;) {
    std::shared_ptr<Job> job;
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      job = std::move(queue_.front());
      queue_.pop_front();
      if (stopping_) job->cancelled = true;  // shutdown cancels what is queued, even if it was queued just now
      active_.push_back(job);
    }
    if (job->cancelled) {
      finish(*job, FinishReason::Cancelled, {static_cast<int32_t>(job->request.prompt.size()), 0}, "");
    } else {
      run(*job);
    }
    std::lock_guard lock(mutex_);
    active_.clear();
    idle_.notify_all();
  }
}

bool send_text(const EngineCallback& callback, std::string_view text, std::span<const int32_t> ids,
               std::span<const TokenLogprobs> logprobs) {
  if (text.empty() && ids.empty()) return true;
  EngineEvent e;
  e.kind = EngineEvent::Kind::Text;
  e.text = text;
  e.tokens = ids;
  e.logprobs = logprobs;
  return callback(e);
}

bool send_prompt_logprobs(const EngineCallback& callback, std::span<const TokenLogprobs> logprobs) {
  if (logprobs.empty()) return true;
  EngineEvent e;
  e.kind = EngineEvent::Kind::Text;
  e.prompt_logprobs = logprobs;
  return callback(e);
}

std::shared_ptr<Engine::Job> Engine::take_queued(const std::function<bool(const Job&)>& admit) {
  std::lock_guard lock(mutex_);
  if (queue_.empty() || !admit(*queue_.front())) return nullptr;
  std::shared_ptr<Job> job = std::move(queue_.front());
  queue_.pop_front();
  if (stopping_) job->cancelled = true;  // shutdown cancels what is queued, even if it was queued just now
  active_.push_back(job);
  return job;
}

void Engine::run(Job& job) {
  const EngineRequest& req = job.request;
  GenerateOptions g;
  g.n_predict = req.max_tokens;
  g.ignore_eos = req.ignore_eos;
  g.echo_prompt = false;
  g.sampling = req.sampling;
  g.stop_strings = req.stop;  // the loop stops at once; StopText decides what is shown
  g.stop_requested = [&job] { return job.cancelled.load(); };
  g.constraint = req.constraint.get();
  std::vector<int32_t> ids;  // generated since the last Text event
  std::vector<TokenLogprobs> logprobs;  // theirs, when asked
  TokenLogprobs sampled;                // the last sampled id's, until it turns out to be generated
  g.on_token = [&](int32_t id) {
    ids.push_back(id);
    if (req.top_logprobs >= 0) logprobs.push_back(std::move(sampled));
  };
  if (req.top_logprobs >= 0)
    g.on_sample = [&](int32_t id, std::span<const float> logits) {
      sampled = token_logprobs(logits, id, req.top_logprobs);
    };

  StopText stop(req.stop);
  const auto emit = [&](const std::string& text) {
    if (!send_text(job.callback, text, ids, logprobs)) job.cancelled = true;
    ids.clear();
    logprobs.clear();
  };
  Usage usage{static_cast<int32_t>(req.prompt.size()), 0};
  try {
    const GenerateResult r =
        generate(*session_, tok_, req.prompt, g, [&](std::string_view piece) { emit(stop.push(piece)); });
    emit(stop.flush());
    usage.completion_tokens = static_cast<int32_t>(r.generated.size());
    FinishReason reason = FinishReason::Stop;
    switch (r.stop) {
      case StopReason::EndOfGeneration:
      case StopReason::StopString: reason = FinishReason::Stop; break;
      case StopReason::TokenLimit:
      case StopReason::ContextFull: reason = FinishReason::Length; break;
      case StopReason::Interrupted: reason = FinishReason::Cancelled; break;
    }
    finish(job, reason, usage, "");
  } catch (const std::exception& e) {
    // One request's failure (a device error, an exception from its callback) ends that request, not the engine.
    log(options_.log, LogLevel::Warning, "request " + std::to_string(job.id) + " failed: " + e.what());
    finish(job, FinishReason::Error, usage, e.what());
  }
}

void Engine::finish(Job& job, FinishReason reason, Usage usage, const std::string& error) {
  {
    std::lock_guard lock(mutex_);
    switch (reason) {
      case FinishReason::Stop: ++stats_.finished_stop; break;
      case FinishReason::Length: ++stats_.finished_length; break;
      case FinishReason::Cancelled: ++stats_.finished_cancelled; break;
      case FinishReason::Error: ++stats_.finished_error; break;
    }
    stats_.prompt_tokens += static_cast<uint64_t>(usage.prompt_tokens);
    stats_.completion_tokens += static_cast<uint64_t>(usage.completion_tokens);
  }
  EngineEvent e;
  e.kind = EngineEvent::Kind::Final;
  e.finish = reason;
  e.usage = usage;
  e.error = error;
  try {
    job.callback(e);
  } catch (const std::exception& ex) {
    log(options_.log, LogLevel::Warning, "request " + std::to_string(job.id) + ": final callback failed: " + ex.what());
  }
}

}  // namespace runtime
