// Weight upload with double-buffered pinned staging (cuda/weights.h). While the copy engine drains one staging
// buffer, the host fills the other; an event per buffer says when it may be overwritten.
#include "cuda/weights.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace cuda {

DeviceWeights::DeviceWeights(const Context& ctx, uint64_t arena_bytes, ::std::span<const WeightUpload> items,
                             const ProgressFn& progress, size_t staging_bytes)
    : buffer_(arena_bytes) {
  uint64_t total = 0;
  for (const auto& it : items) {
    LLM_REQUIRE(it.arena_offset + it.nbytes <= arena_bytes && it.arena_offset + it.nbytes >= it.arena_offset,
                "weight at offset " + ::std::to_string(it.arena_offset) + " (" + ::std::to_string(it.nbytes) +
                    " bytes) is outside the arena of " + ::std::to_string(arena_bytes) + " bytes");
    LLM_REQUIRE(it.host || it.nbytes == 0, "weight without host data");
    total += it.nbytes;
  }
  PinnedBuffer staging[2] = {PinnedBuffer(staging_bytes), PinnedBuffer(staging_bytes)};
  Event done[2] = {Event::create(), Event::create()};
  int cur = 0;
  size_t fill = 0;
  uint64_t sent = 0;
  const cudaStream_t s = ctx.copy();
  for (const auto& it : items) {
    for (uint64_t off = 0; off < it.nbytes;) {
      if (fill == staging_bytes) {
        // Switch buffers: mark this one in flight, wait until the other one's copies have drained.
        done[cur].record(s);
        cur ^= 1;
        done[cur].synchronize();
        fill = 0;
      }
      const size_t n = size_t(::std::min<uint64_t>(it.nbytes - off, staging_bytes - fill));
      uint8_t* st = staging[cur].as<uint8_t>() + fill;
      ::std::memcpy(st, static_cast<const uint8_t*>(it.host) + off, n);
      CUDA_CHECK(cudaMemcpyAsync(buffer_.as<uint8_t>() + it.arena_offset + off, st, n, cudaMemcpyHostToDevice, s));
      fill += n, off += n, sent += n;
      if (progress) progress(sent, total);
    }
  }
  CUDA_CHECK(cudaStreamSynchronize(s));
}

}  // namespace cuda
