// Run-time compilation with NVRTC and an on-disk cache of the compiled cubins. Kernels whose best form depends on
// the model's shapes are generated as source at load, compiled for the device's architecture, and stored under
// $XDG_CACHE_HOME/llm-run/ (else ~/.cache/llm-run/) keyed by a hash of source + architecture + NVRTC version.
// Every entry carries its length and a checksum; an entry that fails verification is recompiled and rewritten,
// never loaded.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "cuda/check.h"

namespace cuda {

// A loaded cubin (cudaLibrary_t), unloaded on destruction.
class RtcModule {
 public:
  RtcModule() = default;
  explicit RtcModule(const std::vector<char>& cubin);  // loads it (needs a device)
  RtcModule(RtcModule&& o) noexcept;
  RtcModule& operator=(RtcModule&& o) noexcept;
  RtcModule(const RtcModule&) = delete;
  RtcModule& operator=(const RtcModule&) = delete;
  ~RtcModule();
  // The kernel's handle, castable to the `func` of cudaLaunchKernel. Throws cuda::Error when absent.
  cudaKernel_t kernel(const char* name) const;

 private:
  cudaLibrary_t lib_ = nullptr;
};

struct RtcStats {
  int compiled = 0;   // NVRTC invocations
  int loaded = 0;     // cache hits
  int rejected = 0;   // cache entries that failed verification (then recompiled)
};

class RtcCache {
 public:
  // dir empty: default_dir(). The directory is created on first store; an unwritable cache only costs recompiles.
  explicit RtcCache(std::filesystem::path dir = {});

  static std::filesystem::path default_dir();

  // The cubin for `source` on sm_<arch>: from the cache when a verified entry exists, else compiled (and stored).
  // Throws cuda::Error with NVRTC's log when compilation fails. Works without a GPU.
  std::vector<char> cubin(const std::string& name, const std::string& source, int arch);

  // The path of the entry cubin() would use (tests corrupt it on purpose).
  std::filesystem::path entry_path(const std::string& name, const std::string& source, int arch) const;

  const RtcStats& stats() const { return stats_; }
  const std::filesystem::path& dir() const { return dir_; }

  // Compiles without touching the cache.
  static std::vector<char> compile(const std::string& name, const std::string& source, int arch);

 private:
  std::filesystem::path dir_;
  RtcStats stats_;
};

// FNV-1a 64-bit, the cache's key and checksum function.
uint64_t fnv1a64(const void* data, size_t n, uint64_t h = 0xcbf29ce484222325ull);

}  // namespace cuda
