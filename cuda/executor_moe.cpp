// Lowering of the mixture-of-experts ops (cuda/executor.h): routing (TopK, MoeWeights), the chosen experts'
// products (MulMatId: matvec_id.cuh for decode-sized batches, expert-grouped tiles, moe_gemm.cuh, for prefill),
// gpt-oss's clamped SwiGLU and the weighted sum. Every kernel reads the expert ids from device memory.
#include "cuda/executor.h"

#include "cuda/check.h"
#include "cuda/kernels/matvec_id.cuh"
#include "cuda/kernels/moe.cuh"
#include "cuda/kernels/moe_gemm.cuh"

namespace cuda {

using graph::Node;
using graph::Op;

void Executor::lower_top_k(const Node& n) {
  const graph::Shape& a = g_.node(n.inputs.at(0)).shape;
  const TopKKernelParams p{f32_in(n, 0), static_cast<int32_t*>(device_ptr(n.id)), a.ne[0],
                           ::std::get<graph::TopKParams>(n.params).k, a.rows()};
  LLM_REQUIRE(p.n <= kTopKMaxN, "node '" + n.name + "': top-k over more than " + ::std::to_string(kTopKMaxN) +
                                    " values");
  steps_.push_back([p](cudaStream_t s) { launch_top_k(p, s); });
}

void Executor::lower_moe_weights(const Node& n) {
  const auto& mp = ::std::get<graph::MoeWeightsParams>(n.params);
  MoeWeightsKernelParams p;
  p.scores = f32_in(n, 0), p.ids = static_cast<const int32_t*>(device_ptr(n.inputs.at(1))), p.out = f32_out(n);
  p.n_expert = g_.node(n.inputs[0]).shape.ne[0], p.k = n.shape.ne[0], p.T = n.shape.ne[1];
  p.softmax = mp.softmax, p.normalize = mp.normalize;
  steps_.push_back([p](cudaStream_t s) { launch_moe_weights(p, s); });
}

void Executor::lower_mul_mat_id(const Node& n) {
  const Node& w = g_.node(n.inputs.at(0));
  LLM_REQUIRE(w.op == Op::Weight && !regrouped(w), "node '" + n.name + "': the experts must be a plain weight");
  const Node& x = g_.node(n.inputs.at(1));
  MatvecIdParams p;
  p.w = weight_ptr(w), p.type = ::std::get<graph::WeightParams>(w.params).type;
  p.x = f32_in(n, 1), p.x_slots = x.shape.ne[1];
  p.ids = static_cast<const int32_t*>(device_ptr(n.inputs.at(2)));
  p.bias = n.inputs.size() > 3 && n.inputs[3] != graph::kNoNode ? f32_in(n, 3) : nullptr;
  p.y = f32_out(n);
  p.K = w.shape.ne[0], p.N = w.shape.ne[1], p.n_expert = w.shape.ne[2], p.k = n.shape.ne[1], p.T = n.shape.ne[2];
  if (p.T <= opt_.matvec_max_tokens) {
    steps_.push_back([p](cudaStream_t s) { launch_matvec_id(p, s); });
    return;
  }
  void* scratch = moe_scratch_.get();
  const size_t bytes = moe_scratch_.bytes();
  steps_.push_back([p, scratch, bytes](cudaStream_t s) { launch_moe_gemm(p, scratch, bytes, s); });
}

void Executor::lower_swiglu_oai(const Node& n) {
  const auto& op = ::std::get<graph::SwiGluOaiParams>(n.params);
  const SwiGluOaiKernelParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), n.shape.elements(), op.alpha, op.limit};
  steps_.push_back([p](cudaStream_t s) { launch_swiglu_oai(p, s); });
}

void Executor::lower_weighted_sum(const Node& n) {
  const graph::Shape& a = g_.node(n.inputs.at(0)).shape;
  const WeightedSumParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), a.ne[0], a.ne[1], a.ne[2]};
  steps_.push_back([p](cudaStream_t s) { launch_weighted_sum(p, s); });
}

}  // namespace cuda
