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

std::string report_markdown(const BenchContext& c, const std::vector<BenchTest>& tests) {
  std::string out = fmt("device: %s (%s), copy bandwidth %.0f GB/s (read + write)\n", c.device.c_str(),
                        c.backend.c_str(), c.copy_gbs);
  out += fmt("memory: weights %s + KV cache %s (%s); peak in use %s\n\n", gib(c.weights_bytes).c_str(),
             gib(c.kv_bytes).c_str(), c.kv_type.c_str(), c.peak_mem_bytes ? gib(c.peak_mem_bytes).c_str() : "n/a");
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
  std::string out =
      "model,size_bytes,params,backend,device,test,n_prompt,n_gen,depth,reps,tps_mean,tps_sd,gbs,copy_gbs,"
      "weights_bytes,kv_bytes,peak_mem_bytes,kv_type\n";
  for (const auto& t : tests) {
    out += fmt("%s,%llu,%llu,%s,\"%s\",%s,%d,%d,%d,%zu,%.3f,%.3f,%.1f,%.1f,%llu,%llu,%llu,%s\n", c.model.c_str(),
               (unsigned long long)c.model_bytes, (unsigned long long)c.n_params, c.backend.c_str(),
               c.device.c_str(), t.name.c_str(), t.n_prompt, t.n_gen, t.depth, t.seconds.size(), t.mean_tps(),
               t.sd_tps(), achieved_gbs(c, t), c.copy_gbs, (unsigned long long)c.weights_bytes,
               (unsigned long long)c.kv_bytes, (unsigned long long)c.peak_mem_bytes, c.kv_type.c_str());
  }
  return out;
}

std::string report_json(const BenchContext& c, const std::vector<BenchTest>& tests) {
  std::string out = "[\n";
  for (size_t i = 0; i < tests.size(); ++i) {
    const auto& t = tests[i];
    std::string samples;
    for (size_t r = 0; r < t.seconds.size(); ++r) samples += fmt("%s%.9g", r ? ", " : "", t.seconds[r]);
    out += fmt(
        "  {\"model\": %s, \"size_bytes\": %llu, \"params\": %llu, \"backend\": \"%s\", \"device\": %s, "
        "\"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"depth\": %d, \"tps_mean\": %.3f, \"tps_sd\": %.3f, "
        "\"gbs\": %.1f, \"copy_gbs\": %.1f, \"weights_bytes\": %llu, \"kv_bytes\": %llu, \"peak_mem_bytes\": %llu, "
        "\"kv_type\": \"%s\", "
        "\"seconds\": [%s]}%s\n",
        chat::json_quote(c.model).c_str(), (unsigned long long)c.model_bytes, (unsigned long long)c.n_params,
        c.backend.c_str(), chat::json_quote(c.device).c_str(), t.name.c_str(), t.n_prompt, t.n_gen, t.depth,
        t.mean_tps(), t.sd_tps(), achieved_gbs(c, t), c.copy_gbs, (unsigned long long)c.weights_bytes,
        (unsigned long long)c.kv_bytes, (unsigned long long)c.peak_mem_bytes, c.kv_type.c_str(), samples.c_str(),
        i + 1 < tests.size() ? "," : "");
  }
  return out + "]\n";
}

}  // namespace app
