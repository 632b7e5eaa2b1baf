// `llm-run bench`: prompt-processing (pp) and generation (tg) speed, with the same flags and table as the popular
// *-bench tool, plus achieved bandwidth against the device's measured copy bandwidth and device memory in use.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "app/bench_parallel.h"
#include "app/bench_report.h"
#include "app/cli.h"
#include "app/session_flags.h"
#include "model/decode_bytes.h"
#include "runtime/sampler.h"

#ifdef LLM_HAVE_CUDA
#include "cuda/check.h"
#include "cuda/device_info.h"
#endif

namespace app {
namespace {

struct BenchOptions {
  RunFlags run;
  std::vector<int32_t> n_prompt{512};
  std::vector<int32_t> n_gen{128};
  std::vector<std::string> pg;      // "512,128" pairs
  std::vector<int32_t> depth{0};
  int32_t reps = 5;
  std::string output = "md";
  std::vector<int32_t> parallel;  // --parallel: the batched table instead (bench_parallel.h)
  int32_t batch_tokens = 2048;
  float temp = 0;                 // --temp with --parallel: sequences draw their tokens (bench_parallel.h)
  bool pipeline = false;          // --pipeline with --parallel: greedy steps queued ahead (bench_parallel.h)
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Host memcpy bandwidth (read + write), the CPU's counterpart of the device copy probe.
double measure_host_copy_gbs() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  for (int i = 0; i < 5; ++i) {
    const double t0 = now_s();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, now_s() - t0);
    a[static_cast<size_t>(i)] = b[static_cast<size_t>(i) + 1];  // keeps the copies observable
  }
  return 2.0 * static_cast<double>(bytes) / best / 1e9;
}

class Runner {
 public:
  Runner(Loaded& l, int32_t n_vocab) : l_(l), rng_(1234), dist_(0, n_vocab - 1) {}

  // Fills the cache up to `depth` (untimed, in evaluations of at most kDepthChunk tokens, as the popular tool's
  // 512-token physical batch does, so a deep fill needs no larger work buffers than the tests), then times the test.
  static constexpr int32_t kDepthChunk = 512;
  double run(const BenchTest& t) {
    for (int32_t done = 0; done < t.depth; done += kDepthChunk)
      prefill(done, std::min(kDepthChunk, t.depth - done));
    const double t0 = now_s();
    if (t.n_prompt > 0) prefill(t.depth, t.n_prompt);
    if (t.n_gen > 0) decode(t.depth + t.n_prompt, t.n_gen);
    return now_s() - t0;
  }

 private:
  void prefill(int32_t start, int32_t n) {
    std::vector<int32_t> tokens(static_cast<size_t>(n));
    for (auto& id : tokens) id = dist_(rng_);
    l_.session->eval(tokens, start, false);
  }
  // Greedy decoding, as generation runs it: on the device when the session samples there.
  void decode(int32_t start, int32_t n) {
    runtime::SamplerParams greedy;
    greedy.temp = 0;
    std::vector<int32_t> history{dist_(rng_)};
    for (int32_t i = 0; i < n; ++i) {
      const int32_t pos = start + i;
      runtime::SampleRequest req{&greedy, static_cast<uint64_t>(i), history, i + 1 < n};
      std::optional<int32_t> next = l_.session->decode_sample(history.back(), pos, req);
      if (!next) next = runtime::argmax(l_.session->eval(std::span<const int32_t>(&history.back(), 1), pos, false));
      history.push_back(*next);
    }
  }
  Loaded& l_;
  std::mt19937 rng_;
  std::uniform_int_distribution<int32_t> dist_;
};

std::vector<BenchTest> plan_tests(const BenchOptions& o) {
  std::vector<BenchTest> tests;
  for (int32_t d : o.depth) {
    const std::string at = d > 0 ? " @ d" + std::to_string(d) : "";
    for (int32_t p : o.n_prompt) {
      if (p > 0) tests.push_back({"pp" + std::to_string(p) + at, p, 0, d, {}});
    }
    for (int32_t n : o.n_gen) {
      if (n > 0) tests.push_back({"tg" + std::to_string(n) + at, 0, n, d, {}});
    }
    for (const auto& pair : o.pg) {
      const auto comma = pair.find(',');
      int32_t p = 0, n = 0;
      try {
        if (comma == std::string::npos) throw std::invalid_argument(pair);
        p = std::stoi(pair.substr(0, comma));
        n = std::stoi(pair.substr(comma + 1));
      } catch (const std::exception&) {
        throw UsageError("-pg expects PROMPT,GEN (e.g. -pg 512,128), got '" + pair + "'");
      }
      if (p <= 0 || n <= 0) throw UsageError("-pg values must be positive, got '" + pair + "'");
      tests.push_back({"pp" + std::to_string(p) + "+tg" + std::to_string(n) + at, p, n, d, {}});
    }
  }
  if (tests.empty()) throw UsageError("nothing to run: every -p, -n and -pg value is 0");
  return tests;
}

int run_bench(BenchOptions& o) {
  if (!o.parallel.empty()) {
    if (o.output == "csv") throw UsageError("--parallel writes md or json");
    if (o.pipeline && o.temp > 0) throw UsageError("--pipeline is greedy: not with --temp");
    return run_parallel_bench(o.run, ParallelBenchFlags{o.parallel, o.n_prompt, o.n_gen, o.batch_tokens, o.output,
                                                        o.temp, o.pipeline});
  }
  if (o.pipeline) throw UsageError("--pipeline goes with --parallel");
  if (o.reps < 1) throw UsageError("-r must be at least 1");
  std::vector<BenchTest> tests = plan_tests(o);
  int32_t needed = 1, largest_batch = 1;
  for (const auto& t : tests) {
    needed = std::max(needed, t.depth + t.n_prompt + t.n_gen + 1);
    // The prompt test is one evaluation; the depth fill goes in chunks (Runner::run).
    largest_batch = std::max({largest_batch, std::min(t.depth, Runner::kDepthChunk), t.n_prompt});
  }
  o.run.session.plan_batch = largest_batch;
  if (o.run.session.n_ctx == 0) o.run.session.n_ctx = needed;
  if (o.run.session.n_ctx < needed)
    throw UsageError("the tests need a context of " + std::to_string(needed) + " tokens but -c is " +
                     std::to_string(o.run.session.n_ctx));

  BenchContext c;
#ifdef LLM_HAVE_CUDA
  const bool on_cuda = o.run.session.device != "cpu" && cuda::device_available();
#else
  [[maybe_unused]] const bool on_cuda = false;
#endif
  [[maybe_unused]] uint64_t mem_before = 0;
#ifdef LLM_HAVE_CUDA
  if (on_cuda) {
    std::fprintf(stderr, "bench: measuring device copy bandwidth...\n");
    c.copy_gbs = cuda::measure_copy_bandwidth_gbs();
    mem_before = cuda::device_memory_used();
  }
#endif
  Loaded l = load_for_run(o.run);
  const std::string device = l.session->device_name();
  c.backend = device.rfind("CPU", 0) == 0 ? "CPU" : "CUDA";
  if (c.backend == "CPU") c.copy_gbs = measure_host_copy_gbs();
  c.device = device;
  c.model = std::filesystem::path(l.model->file().path()).filename().string();
  c.model_bytes = l.model->file().file_size();
  for (const auto& w : l.model->weights().all()) c.n_params += static_cast<uint64_t>(w.shape.elements());
  c.weights_bytes = l.model->weights().arena_bytes();
  const model::DecodeBytes bytes = model::decode_bytes(l.model->config(), l.model->weights());
  c.weight_bytes_per_token = bytes.per_token;
  c.n_expert = bytes.n_expert;
  c.n_expert_used = bytes.n_expert_used;
  c.expert_bytes = bytes.expert_total;
  c.kv_bytes = l.session->kv_cache_bytes();
  c.half_copies_bytes = l.session->half_weights_bytes();
  c.kv_type = graph::kv_type_name(o.run.session.kv_type);

  Runner runner(l, l.session->n_vocab());
  uint64_t peak = 0;
  auto sample_memory = [&] {
#ifdef LLM_HAVE_CUDA
    if (on_cuda && c.backend == "CUDA") peak = std::max(peak, cuda::device_memory_used() - mem_before);
#endif
  };
  for (auto& t : tests) {
    std::fprintf(stderr, "bench: %s ", t.name.c_str());
    if (o.run.warmup) runner.run(t);
    for (int r = 0; r < o.reps; ++r) {
      t.seconds.push_back(runner.run(t));
      sample_memory();
      std::fputc('.', stderr);
    }
    std::fprintf(stderr, " %.2f t/s\n", t.mean_tps());
  }
  c.peak_mem_bytes = peak;
  const std::string out = o.output == "json" ? report_json(c, tests)
                          : o.output == "csv" ? report_csv(c, tests)
                                              : report_markdown(c, tests);
  std::fputs(out.c_str(), stdout);
  return 0;
}

}  // namespace

void register_bench(CLI::App& root, Action& chosen) {
  auto o = std::make_shared<BenchOptions>();
  auto* cmd = root.add_subcommand("bench", "Measure prompt processing and generation speed");
  cmd->footer("Example: llm-run bench -m model.gguf -p 512 -n 128 -pg 512,128 -d 0,4096 -r 5 -o md");
  add_run_flags(*cmd, o->run);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt lengths to test (comma list)")->delimiter(',');
  cmd->add_option("-n,--n-gen", o->n_gen, "generation lengths to test (comma list)")->delimiter(',');
  // Declared as --pg because CLI11 has no one-dash long names; main() turns the usual `-pg` into it.
  cmd->add_option("--pg", o->pg,
                  "-pg 512,128 (or --pg): a prompt of 512 tokens then 128 generated, timed together (repeatable)")
      ->type_name("PROMPT,GEN");
  cmd->add_option("-d,--n-depth", o->depth, "context depths before each test (comma list)")->delimiter(',');
  cmd->add_option("-r,--repetitions", o->reps, "repetitions per test")->capture_default_str();
  cmd->add_option("-o,--output", o->output, "output format")->check(CLI::IsMember({"md", "csv", "json"}));
  cmd->add_option("--parallel", o->parallel,
                  "sequence counts (comma list): aggregate prefill and decode tokens/s with that many sequences "
                  "batched on a paged KV cache, each a prompt of -p tokens then -n generated (batched-bench style)")
      ->delimiter(',');
  cmd->add_option("--batch-tokens", o->batch_tokens, "with --parallel: prompt tokens per batch at most")
      ->capture_default_str()
      ->check(at_least(1));
  cmd->add_option("--temp", o->temp,
                  "with --parallel: each sequence draws its tokens at this temperature (top-k 40, top-p 0.95, "
                  "min-p 0.05: the server's defaults) and evaluates them, as the server does; 0: random tokens, "
                  "logits copied out (batched-bench style)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 100.0));
  cmd->add_flag("--pipeline", o->pipeline,
                "with --parallel: greedy decode as the server runs it: each step's tokens the previous step's "
                "argmax on the device, no logits copied out, the next step queued before the last one's results "
                "are read");
  add_warmup_flag(*cmd, o->run, "each test run once before the timed repetitions");
  cmd->callback([o, &chosen] {
    for (int32_t v : o->n_prompt)
      if (v < 0) throw CLI::ValidationError("-p", "values must be >= 0");
    for (int32_t v : o->n_gen)
      if (v < 0) throw CLI::ValidationError("-n", "values must be >= 0");
    for (int32_t v : o->depth)
      if (v < 0) throw CLI::ValidationError("-d", "values must be >= 0");
    chosen = [o] { return run_bench(*o); };
  });
}

}  // namespace app
