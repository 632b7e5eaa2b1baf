// A small persistent thread pool for the CPU reference: workers sleep between jobs, so splitting a large matrix
// product costs two condition-variable round trips, and no thread is created per node or per run.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace graph {

// The most threads a pool takes (the reference runtime's bound too): more only exhaust the process's threads.
inline constexpr int kMaxThreads = 512;

class ThreadPool {
 public:
  // n_threads counts the calling thread, which always takes part; n_threads <= 1 starts no workers. Throws
  // std::invalid_argument above kMaxThreads, and std::system_error (the workers it started stopped and joined) when
  // the system refuses a thread.
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end, thread_index) on contiguous chunks covering [0, n), one chunk per thread, and returns when
  // all are done. thread_index is in [0, size()) so callers can give each thread its own scratch memory.
  // The first exception thrown by any chunk is rethrown here.
  template <class F>
  void parallel_for(int64_t n, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    auto call = [](void* ctx, int64_t b, int64_t e, int t) { (*static_cast<Fn*>(ctx))(b, e, t); };
    run(n, call, const_cast<void*>(static_cast<const void*>(&fn)));
  }

 private:
  using ChunkFn = void (*)(void* ctx, int64_t begin, int64_t end, int thread);
  void run(int64_t n, ChunkFn fn, void* ctx);
  void worker(int index);
  void stop_workers() noexcept;
  void chunk(int index, int64_t n, ChunkFn fn, void* ctx) noexcept;

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable wake_, done_;
  uint64_t generation_ = 0;   // bumped per job; workers run each generation once
  int pending_ = 0;           // workers still busy with the current job
  bool stop_ = false;
  int64_t job_n_ = 0;
  ChunkFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  std::exception_ptr error_;
};

}  // namespace graph
