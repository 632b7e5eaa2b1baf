// CUDA session footprint (see cuda_footprint.h).
#ifdef LLM_HAVE_CUDA_SESSION
#include "runtime/cuda_footprint.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "cuda/executor.h"
#include "cuda/kernels/sampling.cuh"
#include "cuda/work_buffers.h"
#include "graph/plan.h"
#include "model/build_graph.h"

namespace runtime {

namespace {

// Device bytes of the executor for one graph shape; the graph is built and planned on the host only.
uint64_t graph_device_bytes(const model::Model& m, int32_t n_tokens, bool all_logits, int32_t n_ctx, int sm_count,
                            const cuda::ExecutorOptions& exec) {
  const graph::Graph g = model::build_graph(m.config(), m.weights(), n_tokens, all_logits, n_ctx);
  const graph::Plan p = graph::plan(g);
  return cuda::work_buffers(g, p, sm_count, exec).device_bytes();
}

}  // namespace

CudaDeviceFacts cuda_device_facts(const cuda::Context& ctx, int32_t n_vocab) {
  return CudaDeviceFacts{ctx.sm_count(), cuda::sampling_scratch_bytes(n_vocab)};
}

Footprint cuda_session_footprint(const model::Model& model, const CudaDeviceFacts& device, CudaPlanShape shape,
                                 graph::KvType kv_type, const cuda::ExecutorOptions& exec) {
  const model::Config& c = model.config();
  Footprint fp;
  fp.weights_bytes = model.weights().arena_bytes();
  // cuda::KvCache: K [head_dim, n_ctx, n_head_kv] and V [head_dim_v, n_ctx, n_head_kv] per layer, f16, q8_0 or
  // q4_0; the per-layer alignment padding (< 1 KiB per layer) is left to the headroom.
  fp.kv_bytes_per_token = uint64_t(::std::ceil(cuda::KvCache::bytes_per_slot(
      graph::KvCacheSpec{c.n_layer, 1, c.n_head_kv, c.head_dim, c.head_dim_v, kv_type})));
  // Captures the model by address: the footprint is used while the caller holds the model.
  const model::Model* m = &model;
  // The products' routes as the session's switches choose them; its weights' layouts are not known yet (either).
  cuda::ExecutorOptions routes = exec;
  routes.regrouped_offsets = nullptr, routes.half_weights = nullptr, routes.rtc = nullptr, routes.log = nullptr;
  fp.work_bytes = [m, device, shape, routes](int32_t n_ctx) -> uint64_t {
    n_ctx = std::max(n_ctx, 1);
    const int32_t batch = std::min(n_ctx, shape.batch > 0 ? shape.batch : kPlannedPrefillTokens);
    // CudaSession's history window, sampling state and sampling scratch.
    const uint64_t sampler = uint64_t(n_ctx) * 4 + sizeof(cuda::SamplingState) + device.sampling_scratch_bytes;
    // The prompt graph, the plain decode graph and the two sampling decode graphs (CudaSession::decode_).
    return graph_device_bytes(*m, batch, shape.all_logits, n_ctx, device.sm_count, routes) +
           3 * graph_device_bytes(*m, 1, false, n_ctx, device.sm_count, routes) + sampler;
  };
  return fp;
}

}  // namespace runtime
#endif  // LLM_HAVE_CUDA_SESSION
