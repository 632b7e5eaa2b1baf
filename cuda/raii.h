// RAII owners for CUDA resources: device and pinned buffers, streams, events, captured graphs. Move-only; the
// destructors never throw (a failed free at teardown cannot be handled anyway), everything else checks.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <utility>

#include "cuda/check.h"

namespace cuda {

// A handle with a deleter, move-only. Deleter is a function object taking the handle.
template <class H, class Deleter>
class Unique {
 public:
  Unique() = default;
  explicit Unique(H h) : h_(h) {}
  Unique(Unique&& o) noexcept : h_(::std::exchange(o.h_, H{})) {}
  Unique& operator=(Unique&& o) noexcept {
    if (this != &o) {
      reset();
      h_ = ::std::exchange(o.h_, H{});
    }
    return *this;
  }
  Unique(const Unique&) = delete;
  Unique& operator=(const Unique&) = delete;
  ~Unique() { reset(); }
  void reset() {
    if (h_) Deleter{}(h_);
    h_ = H{};
  }
  H get() const { return h_; }
  explicit operator bool() const { return h_ != H{}; }

 private:
  H h_{};
};

struct StreamDeleter {
  void operator()(cudaStream_t s) const { (void)cudaStreamDestroy(s); }
};
struct EventDeleter {
  void operator()(cudaEvent_t e) const { (void)cudaEventDestroy(e); }
};
struct GraphDeleter {
  void operator()(cudaGraph_t g) const { (void)cudaGraphDestroy(g); }
};
struct GraphExecDeleter {
  void operator()(cudaGraphExec_t g) const { (void)cudaGraphExecDestroy(g); }
};

class Stream : public Unique<cudaStream_t, StreamDeleter> {
 public:
  Stream() = default;
  static Stream create() {
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    return Stream(s);
  }
  // A stream whose blocks the device schedules before those of lower-priority streams (the default's is the lowest).
  static Stream create_urgent() {
    int least = 0, greatest = 0;
    CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s = nullptr;
    CUDA_CHECK(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest));
    return Stream(s);
  }
  void synchronize() const { CUDA_CHECK(cudaStreamSynchronize(get())); }

 private:
  explicit Stream(cudaStream_t s) : Unique(s) {}
};

class Event : public Unique<cudaEvent_t, EventDeleter> {
 public:
  Event() = default;
  // timing = false makes record/wait cheaper (no timestamp).
  static Event create(bool timing = false) {
    cudaEvent_t e = nullptr;
    CUDA_CHECK(cudaEventCreateWithFlags(&e, timing ? cudaEventDefault : cudaEventDisableTiming));
    return Event(e);
  }
  void record(cudaStream_t s) const { CUDA_CHECK(cudaEventRecord(get(), s)); }
  void synchronize() const { CUDA_CHECK(cudaEventSynchronize(get())); }
  // Milliseconds from `start` to this event (both recorded with timing).
  float since(const Event& start) const {
    float ms = 0;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.get(), get()));
    return ms;
  }

 private:
  explicit Event(cudaEvent_t e) : Unique(e) {}
};

using Graph = Unique<cudaGraph_t, GraphDeleter>;
using GraphExec = Unique<cudaGraphExec_t, GraphExecDeleter>;

// Bytes of uninitialised memory from an allocator's pair of calls (Memory::allocate / Memory::release), move-only.
template <class Memory>
class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : bytes_(bytes) {
    if (bytes) ptr_ = Memory::allocate(bytes);
  }
  Buffer(Buffer&& o) noexcept : ptr_(::std::exchange(o.ptr_, nullptr)), bytes_(::std::exchange(o.bytes_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      if (ptr_) Memory::release(ptr_);
      ptr_ = ::std::exchange(o.ptr_, nullptr);
      bytes_ = ::std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() {
    if (ptr_) Memory::release(ptr_);
  }
  void* get() const { return ptr_; }
  template <class T>
  T* as() const { return static_cast<T*>(ptr_); }
  size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// Global memory (cudaMalloc; never managed memory).
struct DeviceMemory {
  static void* allocate(size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMalloc(&p, bytes));
    return p;
  }
  static void release(void* p) { (void)cudaFree(p); }
};

// Page-locked host memory, so that async copies really overlap with the host.
struct PinnedMemory {
  static void* allocate(size_t bytes) {
    void* p = nullptr;
    CUDA_CHECK(cudaMallocHost(&p, bytes));
    return p;
  }
  static void release(void* p) { (void)cudaFreeHost(p); }
};

using DeviceBuffer = Buffer<DeviceMemory>;
using PinnedBuffer = Buffer<PinnedMemory>;

}  // namespace cuda
