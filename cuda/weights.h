// The device weight arena: one allocation holding every weight tensor at its model-assigned offset, filled from the
// mapped file through two pinned staging buffers so that host reads (page cache -> staging) overlap the copies.
#pragma once
#include <cstdint>
#include <functional>
#include <span>

#include "cuda/context.h"

namespace cuda {

struct WeightUpload {
  const void* host = nullptr;  // the tensor's bytes (usually in the mapped GGUF)
  uint64_t arena_offset = 0;   // where they go in the arena
  uint64_t nbytes = 0;
};

// Called after each staged piece with (bytes done, bytes total); may be empty.
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

class DeviceWeights {
 public:
  DeviceWeights() = default;
  // Allocates arena_bytes and uploads every item on ctx.copy(); returns when all copies are complete. Throws
  // cuda::InvalidArgument when an item lies outside the arena.
  DeviceWeights(const Context& ctx, uint64_t arena_bytes, std::span<const WeightUpload> items,
                const ProgressFn& progress = {}, size_t staging_bytes = 64u << 20);

  const uint8_t* base() const { return buffer_.as<const uint8_t>(); }
  uint64_t bytes() const { return buffer_.bytes(); }

 private:
  DeviceBuffer buffer_;
};

}  // namespace cuda
