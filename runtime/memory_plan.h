// Device-memory planning for a session: what a model needs for a context of n_ctx tokens (weights, KV cache, work
// buffers), the largest context that fits in the free memory, and the one-line message when it does not fit. Pure
// arithmetic over a Footprint, so it is tested without a GPU; runtime/cuda_footprint.h supplies the CUDA session's
// footprint, and the session compares it with cudaMemGetInfo before any large allocation.
#pragma once
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

namespace runtime {

// The requested context (or the model) does not fit in the device's free memory; the message says what is needed,
// what is free and what to lower. Never answered by falling back to another device.
class DeviceMemoryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Device memory kept free beyond the estimate: CUDA graphs, kernel modules loaded on first use, run-time compiled
// kernels, allocation rounding.
inline constexpr uint64_t kMemoryHeadroom = uint64_t{256} << 20;

struct MemoryNeed {
  uint64_t weights = 0;
  uint64_t kv_cache = 0;
  uint64_t work = 0;                    // activations, scratch and sampling buffers of the graphs a session keeps
  uint64_t headroom = kMemoryHeadroom;
  uint64_t total() const { return weights + kv_cache + work + headroom; }
};

struct Footprint {
  uint64_t weights_bytes = 0;
  uint64_t kv_bytes_per_token = 0;                   // K and V of every layer, for one cache slot
  std::function<uint64_t(int32_t n_ctx)> work_bytes;  // work buffers for a session of n_ctx slots
  MemoryNeed need(int32_t n_ctx) const;
};

// The largest n_ctx in [1, max_ctx] whose need fits in free_bytes, or 0 when not even one slot fits. Assumes the
// need grows with n_ctx (the KV cache does; work buffers grow or stay flat), and checks the answer it returns.
int32_t largest_fitting_ctx(const Footprint& fp, uint64_t free_bytes, int32_t max_ctx);

// For a default context (requested 0): max_ctx when it fits, else the largest fitting context rounded down to a
// multiple of 256 (when that is at least 256). Throws DeviceMemoryError when not even a small context fits.
int32_t default_ctx_that_fits(const Footprint& fp, uint64_t free_bytes, int32_t max_ctx);

// Throws DeviceMemoryError when a context of n_ctx slots does not fit in free_bytes.
void require_fits(const Footprint& fp, uint64_t free_bytes, int32_t n_ctx);

// "needs 9.1 GiB of GPU memory (weights 4.6 GiB, KV cache 4.0 GiB for -c 32768, work buffers 0.5 GiB, headroom
// 0.2 GiB) but 7.8 GiB is free; lower -c (at most 20224 fits)", or, when fits_ctx is 0, "...; not even a small
// context fits: free GPU memory or use a smaller model".
std::string shortfall_message(const MemoryNeed& need, int32_t n_ctx, uint64_t free_bytes, int32_t fits_ctx);

// A smaller KV cache the session could store instead (--cache-type q8_0 or q4_0), with the footprint it gives.
struct CacheOption {
  std::string name;  // "q8_0"
  Footprint fp;
};

// "; or keep -c 32768 with --cache-type q8_0 (KV cache 2.1 GiB)": the first option under which n_ctx fits in
// free_bytes, for the end of a shortfall message; empty when none does.
std::string smaller_cache_hint(const std::vector<CacheOption>& options, uint64_t free_bytes, int32_t n_ctx);

// ", or --cache-type q8_0 for up to 40960": the first option that fits more than n_ctx slots (at most max_ctx), for
// the note of a default context capped to what fits; empty when none does.
std::string larger_context_hint(const std::vector<CacheOption>& options, uint64_t free_bytes, int32_t n_ctx,
                                int32_t max_ctx);

// "4.6 GiB" (one decimal; MiB below 1 GiB).
std::string format_bytes(uint64_t bytes);

}  // namespace runtime
