// Device-memory arithmetic (see memory_plan.h).
#include "runtime/memory_plan.h"

#include <algorithm>
#include <cstdio>

namespace runtime {

namespace {

bool fits(const Footprint& fp, uint64_t free_bytes, int32_t n_ctx) { return fp.need(n_ctx).total() <= free_bytes; }

// A context size worth suggesting: a multiple of 256 from 512 up, as people type them.
int32_t round_ctx(int32_t n) { return n >= 512 ? n / 256 * 256 : n; }

}  // namespace

MemoryNeed Footprint::need(int32_t n_ctx) const {
  MemoryNeed m;
  m.weights = weights_bytes;
  m.kv_cache = kv_bytes_per_token * static_cast<uint64_t>(std::max(n_ctx, 0));
  m.work = work_bytes ? work_bytes(n_ctx) : 0;
  return m;
}

int32_t largest_fitting_ctx(const Footprint& fp, uint64_t free_bytes, int32_t max_ctx) {
  if (max_ctx < 1 || !fits(fp, free_bytes, 1)) return 0;
  // lo always fits (it was tested), hi + 1 never does or is past max_ctx; the answer is a tested value even where
  // the work buffers do not grow strictly with n_ctx.
  int32_t lo = 1, hi = max_ctx;
  while (lo < hi) {
    const int32_t mid = lo + (hi - lo + 1) / 2;
    if (fits(fp, free_bytes, mid)) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

int32_t default_ctx_that_fits(const Footprint& fp, uint64_t free_bytes, int32_t max_ctx) {
  max_ctx = std::max(max_ctx, 1);
  if (fits(fp, free_bytes, max_ctx)) return max_ctx;
  const int32_t n = largest_fitting_ctx(fp, free_bytes, max_ctx);
  if (n >= std::min(max_ctx, 256)) return round_ctx(n);
  throw DeviceMemoryError(shortfall_message(fp.need(max_ctx), max_ctx, free_bytes, n));
}

void require_fits(const Footprint& fp, uint64_t free_bytes, int32_t n_ctx) {
  if (fits(fp, free_bytes, n_ctx)) return;
  const int32_t n = largest_fitting_ctx(fp, free_bytes, n_ctx - 1);
  throw DeviceMemoryError(shortfall_message(fp.need(n_ctx), n_ctx, free_bytes, round_ctx(n)));
}

std::string smaller_cache_hint(const std::vector<CacheOption>& options, uint64_t free_bytes, int32_t n_ctx) {
  for (const CacheOption& o : options)
    if (fits(o.fp, free_bytes, n_ctx))
      return "; or keep -c " + std::to_string(n_ctx) + " with --cache-type " + o.name + " (KV cache " +
             format_bytes(o.fp.need(n_ctx).kv_cache) + ")";
  return "";
}

std::string larger_context_hint(const std::vector<CacheOption>& options, uint64_t free_bytes, int32_t n_ctx,
                                int32_t max_ctx) {
  for (const CacheOption& o : options) {
    const int32_t n =
        fits(o.fp, free_bytes, max_ctx) ? max_ctx : round_ctx(largest_fitting_ctx(o.fp, free_bytes, max_ctx));
    if (n > n_ctx) return ", or --cache-type " + o.name + " for up to " + std::to_string(n);
  }
  return "";
}

std::string format_bytes(uint64_t bytes) {
  char buf[32];
  if (bytes >= (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(uint64_t{1} << 30));
  } else {
    std::snprintf(buf, sizeof buf, "%llu MiB", static_cast<unsigned long long>((bytes + (1 << 20) - 1) >> 20));
  }
  return buf;
}

std::string shortfall_message(const MemoryNeed& need, int32_t n_ctx, uint64_t free_bytes, int32_t fits_ctx) {
  std::string m = "needs " + format_bytes(need.total()) + " of GPU memory (weights " + format_bytes(need.weights) +
                  ", KV cache " + format_bytes(need.kv_cache) + " for -c " + std::to_string(n_ctx) +
                  ", work buffers " + format_bytes(need.work) + ", headroom " + format_bytes(need.headroom) +
                  ") but " + format_bytes(free_bytes) + " is free; ";
  if (fits_ctx > 0) return m + "lower -c (at most " + std::to_string(fits_ctx) + " fits)";
  return m + "not even a small context fits: free GPU memory or use a smaller model or quantization";
}

}  // namespace runtime
