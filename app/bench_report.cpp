// Formatting of benchmark results; see bench_report.h.
#include "app/bench_report.h"

#include <cmath>
#include <cstdio>
#include <numeric>

#include "chat/json.h"

namespace app {
namespace {

std::string fmt(const char* f, auto... args) {
  const int n = std::snprintf(nullptr, 0, f, args...);
  std::string s(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  std::snprintf(s.data(), s.size() + 1, f, args...);
  return s;
}

std::string gib(uint64_t b) { return fmt("%.2f GiB", static_cast<double>(b) / (1u << 30)); }

}  // namespace

double BenchTest::mean_tps() const {
  if (seconds.empty()) return 0;
  double sum = 0;
  for (double s : seconds) sum += tokens() / s;
  return sum / static_cast<double>(seconds.size());
}

double BenchTest::sd_tps() const {
  if (seconds.size() < 2) return 0;
  const double m = mean_tps();
  double sq = 0;
  for (double s : seconds) sq += (tokens() / s - m) * (tokens() / s - m);
  return std::sqrt(sq / static_cast<double>(seconds.size() - 1));
}

double achieved_gbs(const BenchContext& c, const BenchTest& t) {
  if (t.n_prompt != 0 || t.n_gen == 0) return -1;
  return static_cast<double>(c.weight_bytes_per_token) * t.mean_tps() / 1e9;
}

bool counts_active_bytes(const BenchContext& c) { return c.n_expert > 0 && c.n_expert_used < c.n_expert; }

std::string report_markdown(const BenchContext& c, const std::vector<BenchTest>& tests) {
  std::string out = fmt("device: %s (%s), copy bandwidth %.0f GB/s (read + write)\n", c.device.c_str(),
                        c.backend.c_str(), c.copy_gbs);
  const std::string copies =
      c.half_copies_bytes ? " + half weight copies " + gib(c.half_copies_bytes) + " (--half-weights)" : "";
  out += fmt("memory: weights %s + KV cache %s (%s)%s; peak in use %s\n", gib(c.weights_bytes).c_str(),
             gib(c.kv_bytes).c_str(), c.kv_type.c_str(), copies.c_str(),
             c.peak_mem_bytes ? gib(c.peak_mem_bytes).c_str() : "n/a");
  if (counts_active_bytes(c))
    out += fmt("GB/s counts active bytes: %s per token, the non-expert weights and %d of %d experts (%s of all "
               "experts' %s)\n",
               gib(c.weight_bytes_per_token).c_str(), c.n_expert_used, c.n_expert,
               gib(c.expert_bytes / static_cast<uint64_t>(c.n_expert) * static_cast<uint64_t>(c.n_expert_used))
                   .c_str(),
               gib(c.expert_bytes).c_str());
  out += "\n";
  out += "| model | size | params | backend | test | t/s | GB/s | % of copy bw |\n";
  out += "| --- | ---: | ---: | --- | --- | ---: | ---: | ---: |\n";
  for (const auto& t : tests) {
    const double g = achieved_gbs(c, t);
    out += fmt("| %s | %s | %.2f B | %s | %s | %.2f ± %.2f | %s | %s |\n", c.model.c_str(), gib(c.model_bytes).c_str(),
               c.n_params / 1e9, c.backend.c_str(), t.name.c_str(), t.mean_tps(), t.sd_tps(),
               g < 0 ? "-" : fmt("%.0f", g).c_str(),
               g < 0 || c.copy_gbs <= 0 ? "-" : fmt("%.1f%%", 100.0 * g / c.copy_gbs).c_str());
  }
  return out;
}

std::string report_csv(const BenchContext& c, const std::vector<BenchTest>& tests) {
  // A mixture of experts adds three columns at the end saying what gbs counts; dense rows keep their columns.
  const bool active = counts_active_bytes(c);
  std::string out =
      "model,size_bytes,params,backend,device,test,n_prompt,n_gen,depth,reps,tps_mean,tps_sd,gbs,copy_gbs,"
      "weights_bytes,kv_bytes,peak_mem_bytes,kv_type";
  out += active ? ",active_bytes_per_token,n_expert,n_expert_used\n" : "\n";
  for (const auto& t : tests) {
    out += fmt("%s,%llu,%llu,%s,\"%s\",%s,%d,%d,%d,%zu,%.3f,%.3f,%.1f,%.1f,%llu,%llu,%llu,%s", c.model.c_str(),
               (unsigned long long)c.model_bytes, (unsigned long long)c.n_params, c.backend.c_str(),
               c.device.c_str(), t.name.c_str(), t.n_prompt, t.n_gen, t.depth, t.seconds.size(), t.mean_tps(),
               t.sd_tps(), achieved_gbs(c, t), c.copy_gbs, (unsigned long long)c.weights_bytes,
               (unsigned long long)c.kv_bytes, (unsigned long long)c.peak_mem_bytes, c.kv_type.c_str());
    out += active ? fmt(",%llu,%d,%d\n", (unsigned long long)c.weight_bytes_per_token, c.n_expert, c.n_expert_used)
                  : "\n";
  }
  return out;
}

std::string report_json(const BenchContext& c, const std::vector<BenchTest>& tests) {
  // A mixture of experts adds what gbs counts; dense objects keep their keys.
  const std::string moe = counts_active_bytes(c)
                              ? fmt("\"active_bytes_per_token\": %llu, \"n_expert\": %d, \"n_expert_used\": %d, ",
                                    (unsigned long long)c.weight_bytes_per_token, c.n_expert, c.n_expert_used)
                              : "";
  std::string out = "[\n";
  for (size_t i = 0; i < tests.size(); ++i) {
    const auto& t = tests[i];
    std::string samples;
    for (size_t r = 0; r < t.seconds.size(); ++r) samples += fmt("%s%.9g", r ? ", " : "", t.seconds[r]);
    out += fmt(
        "  {\"model\": %s, \"size_bytes\": %llu, \"params\": %llu, \"backend\": \"%s\", \"device\": %s, "
        "\"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"depth\": %d, \"tps_mean\": %.3f, \"tps_sd\": %.3f, "
        "\"gbs\": %.1f, \"copy_gbs\": %.1f, \"weights_bytes\": %llu, \"kv_bytes\": %llu, \"peak_mem_bytes\": %llu, "
        "\"kv_type\": \"%s\", %s"
        "\"seconds\": [%s]}%s\n",
        chat::json_quote(c.model).c_str(), (unsigned long long)c.model_bytes, (unsigned long long)c.n_params,
        c.backend.c_str(), chat::json_quote(c.device).c_str(), t.name.c_str(), t.n_prompt, t.n_gen, t.depth,
        t.mean_tps(), t.sd_tps(), achieved_gbs(c, t), c.copy_gbs, (unsigned long long)c.weights_bytes,
        (unsigned long long)c.kv_bytes, (unsigned long long)c.peak_mem_bytes, c.kv_type.c_str(), moe.c_str(),
        samples.c_str(),
        i + 1 < tests.size() ? "," : "");
  }
  return out + "]\n";
}

}  // namespace app
