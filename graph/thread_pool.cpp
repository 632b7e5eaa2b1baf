// The reference executor's worker threads (see thread_pool.h).
#include "graph/thread_pool.h"

#include <exception>
#include <stdexcept>
#include <string>

namespace graph {

ThreadPool::ThreadPool(int n_threads) {
  if (n_threads > kMaxThreads)
    throw std::invalid_argument(std::to_string(n_threads) + " threads asked for; at most " +
                                std::to_string(kMaxThreads));
  try {
    for (int i = 1; i < n_threads; ++i) workers_.emplace_back([this, i] { worker(i); });
  } catch (...) {
    stop_workers();  // the destructor does not run for a constructor that throws
    throw;
  }
}

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::stop_workers() noexcept {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::chunk(int index, int64_t n, ChunkFn fn, void* ctx) noexcept {
  const int64_t parts = size();
  const int64_t begin = n * index / parts, end = n * (index + 1) / parts;
  if (begin >= end) return;
  try {
    fn(ctx, begin, end, index);
  } catch (...) {
    std::lock_guard lock(mu_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadPool::run(int64_t n, ChunkFn fn, void* ctx) {
  if (n <= 0) return;
  if (workers_.empty()) {
    fn(ctx, 0, n, 0);
    return;
  }
  {
    std::lock_guard lock(mu_);
    job_n_ = n;
    job_fn_ = fn;
    job_ctx_ = ctx;
    pending_ = static_cast<int>(workers_.size());
    error_ = nullptr;
    ++generation_;
  }
  wake_.notify_all();
  chunk(0, n, fn, ctx);
  std::exception_ptr err;
  {
    std::unique_lock lock(mu_);
    done_.wait(lock, [this] { return pending_ == 0; });
    err = error_;
    error_ = nullptr;
  }
  if (err) std::rethrow_exception(err);
}

void ThreadPool::worker(int index) {
  uint64_t seen = 0;
  for (;;) {
    int64_t n;
    ChunkFn fn;
    void* ctx;
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      n = job_n_;
      fn = job_fn_;
      ctx = job_ctx_;
    }
    chunk(index, n, fn, ctx);
    {
      std::lock_guard lock(mu_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace graph
