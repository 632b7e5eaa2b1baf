// Kernel lab timing (the LLM_CUDA_BENCH=1 tests): the median of 50 timed launches after 5 untimed, each between two
// events on the stream, so one launch's time includes its launch latency on the device, as a decode step sees it.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "cuda/context.h"
#include "cuda/raii.h"

// Skips the test unless a device is present and LLM_CUDA_BENCH=1 asks for timings.
#define REQUIRE_LAB_TIMINGS()                                                                  \
  do {                                                                                         \
    if (!cuda::device_available()) GTEST_SKIP() << "no CUDA device";                           \
    if (const char* e = std::getenv("LLM_CUDA_BENCH"); !e || std::string(e) != "1")            \
      GTEST_SKIP() << "timings run only with LLM_CUDA_BENCH=1";                                 \
  } while (0)

namespace gpu_test {

// launch(i) queues launch number i on `stream` (i lets the caller rotate inputs past L2). Microseconds.
inline double median_launch_us(cudaStream_t stream, const std::function<void(int)>& launch) {
  auto a = cuda::Event::create(true), b = cuda::Event::create(true);
  for (int i = 0; i < 5; ++i) launch(i);
  std::vector<float> ms;
  for (int i = 0; i < 50; ++i) {
    a.record(stream);
    launch(i);
    b.record(stream);
    b.synchronize();
    ms.push_back(b.since(a));
  }
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]) * 1e3;
}

// The median over 30 samples of `batch` launches queued back to back (as a captured decode step runs them, no event
// between them), per launch. Microseconds.
inline double median_batch_us(cudaStream_t stream, int batch, const std::function<void(int)>& launch) {
  auto a = cuda::Event::create(true), b = cuda::Event::create(true);
  for (int i = 0; i < batch; ++i) launch(i);
  std::vector<float> ms;
  for (int r = 0; r < 30; ++r) {
    a.record(stream);
    for (int i = 0; i < batch; ++i) launch(r * batch + i);
    b.record(stream);
    b.synchronize();
    ms.push_back(b.since(a) / float(batch));
  }
  std::sort(ms.begin(), ms.end());
  return double(ms[ms.size() / 2]) * 1e3;
}

// A lab's list of counts from the environment ("128,512"), or `defaults` where the variable is unset or empty.
inline std::vector<int64_t> lab_counts(const char* env, std::vector<int64_t> defaults) {
  const char* e = std::getenv(env);
  if (!e || !*e) return defaults;
  std::vector<int64_t> v;
  std::stringstream ss(e);
  for (std::string item; std::getline(ss, item, ',');) v.push_back(std::stoll(item));  // throws on a non-number
  return v;
}

}  // namespace gpu_test
