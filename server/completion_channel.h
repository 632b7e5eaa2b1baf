// The hand-off between the engine's worker thread (which produces a request's text) and the HTTP thread that
// writes it to the client: text accumulates until the writer takes it, and the writer's "the client is gone" goes
// back to the engine as the callback's cancel answer.
#pragma once
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/engine.h"

namespace server {

// Wakes the one writer that reads several channels (a request with several choices) when any of them has news.
struct ChannelWakeup {
  std::mutex mutex;
  std::condition_variable cv;
  uint64_t events = 0;  // bumped at every event of every channel
};

class CompletionChannel {
 public:
  explicit CompletionChannel(std::shared_ptr<ChannelWakeup> wakeup = nullptr) : wakeup_(std::move(wakeup)) {}

  // What the writer takes at once: the text since its last take and, when the request ended, how.
  struct Take {
    std::string text;
    std::vector<int32_t> tokens;  // the generated ids behind text (tool calls are read from them)
    std::vector<runtime::TokenLogprobs> logprobs;  // theirs, when the request asked
    // The prompt's tokens 1, 2, ... when the request asked (EngineRequest::prompt_logprobs); all of them come before
    // the first generated id, so the first take with news holds them all.
    std::vector<runtime::TokenLogprobs> prompt_logprobs;
    bool done = false;
    runtime::FinishReason finish = runtime::FinishReason::Stop;
    runtime::Usage usage;
    std::string error;
  };

  // The engine callback (runtime::EngineCallback) that feeds this channel.
  bool on_event(const runtime::EngineEvent& e) {
    const bool gone = on_event_locked(e);
    if (wakeup_) {
      std::lock_guard lock(wakeup_->mutex);
      ++wakeup_->events;
      wakeup_->cv.notify_all();
    }
    return !gone;
  }

  // What came since the last take, once there is text, ids or the end; nullopt when nothing came within max_wait
  // (the writer then looks at its connection). The engine guarantees a Final event for every accepted request
  // (shutdown included), so a writer that keeps taking reaches the end.
  std::optional<Take> take_for(std::chrono::milliseconds max_wait) {
    std::unique_lock lock(mutex_);
    if (!ready_.wait_for(lock, max_wait, [&] { return has_news(); })) return std::nullopt;
    return take_locked();
  }
  // The same without waiting.
  std::optional<Take> take_now() {
    std::lock_guard lock(mutex_);
    if (!has_news()) return std::nullopt;
    return take_locked();
  }

  void client_gone() {
    std::lock_guard lock(mutex_);
    gone_ = true;
  }

 private:
  // Returns whether the client is gone (the callback's cancel answer).
  bool on_event_locked(const runtime::EngineEvent& e) {
    std::lock_guard lock(mutex_);
    if (e.kind == runtime::EngineEvent::Kind::Text) {
      pending_.text.append(e.text);
      pending_.tokens.insert(pending_.tokens.end(), e.tokens.begin(), e.tokens.end());
      pending_.logprobs.insert(pending_.logprobs.end(), e.logprobs.begin(), e.logprobs.end());
      pending_.prompt_logprobs.insert(pending_.prompt_logprobs.end(), e.prompt_logprobs.begin(),
                                      e.prompt_logprobs.end());
    } else {
      pending_.done = true;
      pending_.finish = e.finish;
      pending_.usage = e.usage;
      pending_.error = e.error;
    }
    ready_.notify_all();
    return gone_;
  }

  // Ids alone are news too: text held back (a possible stop string) may be a tool call's marker.
  bool has_news() const { return pending_.done || !pending_.text.empty() || !pending_.tokens.empty(); }

  // The pending text and, once ended, the end (kept, so that a later take sees it again).
  Take take_locked() {
    Take t = std::move(pending_);
    pending_ = Take{};
    if (t.done) pending_.done = true, pending_.finish = t.finish, pending_.usage = t.usage;
    return t;
  }

  std::shared_ptr<ChannelWakeup> wakeup_;
  std::mutex mutex_;
  std::condition_variable ready_;
  Take pending_;
  bool gone_ = false;
};

}  // namespace server
