// Benchmark results and their tables (markdown, CSV, JSON), in the style of the popular *-bench tool so numbers
// compare directly, with achieved bandwidth and device memory beside tokens/s.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace app {

struct BenchTest {
  std::string name;             // "pp512", "tg128", "pp512+tg128", with " @ d4096" when a depth is set
  int32_t n_prompt = 0, n_gen = 0, depth = 0;
  std::vector<double> seconds;  // one per repetition
  double tokens() const { return n_prompt + n_gen; }
  double mean_tps() const;
  double sd_tps() const;
};

struct BenchContext {
  std::string model;            // file name
  uint64_t model_bytes = 0;     // file size
  uint64_t n_params = 0;
  uint64_t weight_bytes_per_token = 0;  // weight bytes one decode step reads (model/decode_bytes.h)
  // A mixture of experts: weight_bytes_per_token counts n_expert_used of n_expert experts (the active bytes), and
  // the reports say so. n_expert 0: dense, and the reports are as they always were.
  int32_t n_expert = 0, n_expert_used = 0;
  uint64_t expert_bytes = 0;    // all experts' bytes, of which a token reads n_expert_used / n_expert
  std::string backend;          // "CUDA" / "CPU"
  std::string device;           // "NVIDIA H200"
  double copy_gbs = 0;          // measured device copy bandwidth, read + write
  uint64_t weights_bytes = 0;   // resident weights
  uint64_t kv_bytes = 0;        // KV cache
  uint64_t half_copies_bytes = 0;  // half-precision weight copies for prompts (--half-weights)
  std::string kv_type = "f16";  // its element type (--cache-type)
  uint64_t peak_mem_bytes = 0;  // device memory this process added (0 = not measured)
};

// Achieved bandwidth of a test: weight bytes per token × tokens/s, only for pure generation tests (prefill reads
// each weight once per batch, so the figure would mean nothing there). Negative when not applicable.
double achieved_gbs(const BenchContext& c, const BenchTest& t);

// Whether the bandwidth counts only the routed experts' bytes (a mixture of experts using fewer than all).
bool counts_active_bytes(const BenchContext& c);

std::string report_markdown(const BenchContext& c, const std::vector<BenchTest>& tests);
std::string report_csv(const BenchContext& c, const std::vector<BenchTest>& tests);
std::string report_json(const BenchContext& c, const std::vector<BenchTest>& tests);

}  // namespace app
