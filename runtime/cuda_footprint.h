// The CUDA session's device memory as a memory_plan.h Footprint: the weight arena, the f16 KV cache, and the work
// buffers of the graphs a session keeps alive, sized by cuda::work_buffers on graphs built and planned here without
// touching the device. Only in builds with the CUDA session.
#pragma once
#ifdef LLM_HAVE_CUDA_SESSION
#include <cstdint>

#include "cuda/context.h"
#include "cuda/executor_options.h"
#include "model/model.h"
#include "runtime/memory_plan.h"

namespace runtime {

// Prompts up to this many tokens are covered by the plan made at load; a longer one is checked when its graph is
// built (CudaSession::compile).
inline constexpr int32_t kPlannedPrefillTokens = 512;

struct CudaPlanShape {
  int32_t batch = 0;        // the largest evaluation planned for; 0 = min(n_ctx, kPlannedPrefillTokens)
  bool all_logits = false;  // that evaluation returns logits for every token (perplexity)
};

// What the footprint needs to know of the device; both come from device queries (cuda_device_facts), so tests
// without a GPU pass their own.
struct CudaDeviceFacts {
  int sm_count = 0;                     // attention splits its work by it
  uint64_t sampling_scratch_bytes = 0;  // cuda::sampling_scratch_bytes(n_vocab) (asks CUB, which needs the device)
};
CudaDeviceFacts cuda_device_facts(const cuda::Context& ctx, int32_t n_vocab);

// The work buffers of a context of n_ctx slots are those of the planned batch graph, the decode graph twice (plain,
// and captured with the sampler) and the sampler's buffers.
// kv_type: the KV cache's element type (its bytes per slot); exec: the session's switches, which choose each product's
// kernel and so its scratch (cuda/product_route.h).
Footprint cuda_session_footprint(const model::Model& model, const CudaDeviceFacts& device, CudaPlanShape shape = {},
                                 graph::KvType kv_type = graph::KvType::F16, const cuda::ExecutorOptions& exec = {});

}  // namespace runtime
#endif  // LLM_HAVE_CUDA_SESSION
