// Lowering of the mixture-of-experts ops (cuda/executor.h): routing (TopK, MoeWeights), the chosen experts'
// products (MulMatId: matvec_id.cuh for decode-sized batches, expert-grouped tiles, moe_gemm.cuh, for prefill),
// gpt-oss's clamped SwiGLU and the weighted sum. Every kernel reads the expert ids from device memory.
// Decode fusions, decided by plan_fusions in node order (each a whole launch less per layer, same values up to
// float rounding):
// - routing: Softmax (when present), TopK and MoeWeights as one launch (moe.cuh launch_moe_route), at any T;
// - the gate and up MulMatIds and their SwiGlu / SwiGluOai as one launch (expert_matvec.cuh expert_glu);
// - the down MulMatId, its WeightedSum and the residual Add after it as one launch (expert_down).
// Each checks on the plan that the fused launch, running at the first node's step, reads inputs that still hold
// their values and writes slots that no tensor alive meanwhile shares.
#include "cuda/executor.h"

#include "cuda/check.h"
#include "cuda/kernels/matvec_id.cuh"
#include "cuda/kernels/moe_gemm.cuh"

namespace cuda {

using graph::Node;
using graph::NodeId;
using graph::Op;

void Executor::plan_moe_route(const Node& mw) {
  if (!opt_.fuse) return;
  const auto& mp = ::std::get<graph::MoeWeightsParams>(mw.params);
  const Node& topk = g_.node(mw.inputs.at(1));
  if (topk.op != Op::TopK || topk.inputs.at(0) != mw.inputs.at(0)) return;
  const Node& scores = g_.node(mw.inputs[0]);
  NodeId logits = scores.id;
  const bool softmax_all = scores.op == Op::Softmax;
  if (softmax_all) {
    const auto& us = users_.at(size_t(scores.id));
    if (us.size() != 2 || mp.softmax) return;  // read by the TopK and the MoeWeights alone
    logits = scores.inputs.at(0);
  }
  const Node& l = g_.node(logits);
  const int64_t k = ::std::get<graph::TopKParams>(topk.params).k;
  if (l.op == Op::Weight || !plan_.owns(logits) || l.shape.ne[0] > kTopKMaxN || k > 64) return;
  // The launch runs at the MoeWeights' step: the logits must still hold their values then and share no bytes with
  // the TopK's or the MoeWeights' slot (both alive then, so slot_free_between sees them).
  if (!plan_.owns(topk.id) || !plan_.owns(mw.id)) return;
  if (!slot_free_between(logits, softmax_all ? scores.id : topk.id, mw.id, {scores.id})) return;
  MoeRouteParams p;
  p.logits = static_cast<const float*>(device_ptr(logits));
  p.ids = static_cast<int32_t*>(device_ptr(topk.id)), p.weights = f32_out(mw);
  p.n_expert = l.shape.ne[0], p.k = k, p.T = mw.shape.ne[1];
  p.softmax_all = softmax_all, p.softmax_chosen = mp.softmax, p.normalize = mp.normalize;
  if (softmax_all) lowering_.at(size_t(scores.id)) = Lowering::InRoute;
  lowering_.at(size_t(topk.id)) = Lowering::InRoute;
  moe_routes_.emplace(mw.id, p);
  count_fusion(Fusion::MoeRoute);
}

void Executor::plan_mul_mat_id(const Node& n) {
  if (!opt_.fuse || lowering(n.id) != Lowering::Own || n.shape.ne[2] > opt_.matvec_max_tokens) return;
  if (!plan_expert_glu(n)) plan_expert_down(n);
}

namespace {

// The expert tensor of a MulMatId as the fused kernels read it: a plain weight of a type they serve.
bool plain_experts(const graph::Graph& g, const Node& mm) {
  return g.node(mm.inputs.at(0)).op == Op::Weight;
}

}  // namespace

// n (the first of the pair in node order) and a later MulMatId of the same input and ids, each read only by one
// SwiGlu or SwiGluOai of the two: that launch writes the activation into the SwiGlu's slot.
bool Executor::plan_expert_glu(const Node& n) {
  const auto& us = users_.at(size_t(n.id));
  if (us.size() != 1) return false;
  const Node& sw = g_.node(us[0]);
  if ((sw.op != Op::SwiGlu && sw.op != Op::SwiGluOai) || sw.inputs.size() != 2) return false;
  const NodeId other = sw.inputs[0] == n.id ? sw.inputs[1] : sw.inputs[0];
  if (other == n.id || other < n.id) return false;
  const Node& m = g_.node(other);
  if (m.op != Op::MulMatId || users_.at(size_t(other)).size() != 1 || lowering(other) != Lowering::Own) return false;
  if (m.inputs.at(1) != n.inputs.at(1) || m.inputs.at(2) != n.inputs.at(2)) return false;
  if (!plain_experts(g_, n) || !plain_experts(g_, m)) return false;
  const Node& x = g_.node(n.inputs[1]);
  if (x.shape.ne[1] != 1) return false;  // one input column per token, shared by its k slots
  const Node& gate = g_.node(sw.inputs[0]);
  const Node& up = g_.node(sw.inputs[1]);
  const Node& wg = g_.node(gate.inputs[0]);
  const Node& wu = g_.node(up.inputs[0]);
  if (regrouped(wg) || regrouped(wu) || wg.shape.ne != wu.shape.ne) return false;
  const quant::Type type = ::std::get<graph::WeightParams>(wg.params).type;
  if (::std::get<graph::WeightParams>(wu.params).type != type) return false;
  if (!plan_.owns(sw.id) || plan_.last_use.at(size_t(sw.id)) >= int32_t(g_.nodes().size())) return false;
  // Neither product is stored: the SwiGlu's slot, written at n's step, may be theirs, but nothing else alive.
  if (!slot_free_between(sw.id, n.id, sw.id, {n.id, other})) return false;
  const auto bias = [&](const Node& mm) {
    return mm.inputs.size() > 3 && mm.inputs[3] != graph::kNoNode ? f32_in(mm, 3) : nullptr;
  };
  ExpertGluParams p;
  p.gate = weight_ptr(wg), p.up = weight_ptr(wu), p.type = type;
  p.gate_bias = bias(gate), p.up_bias = bias(up);
  p.x = f32_in(n, 1), p.ids = static_cast<const int32_t*>(device_ptr(n.inputs[2])), p.out = f32_out(sw);
  if (sw.op == Op::SwiGluOai) {
    const auto& op = ::std::get<graph::SwiGluOaiParams>(sw.params);
    p.act = ExpertAct::SwiGluOai, p.alpha = op.alpha, p.limit = op.limit;
  }
  p.K = wg.shape.ne[0], p.N = wg.shape.ne[1], p.n_expert = wg.shape.ne[2], p.k = n.shape.ne[1], p.T = n.shape.ne[2];
  if (!expert_glu_fits(p)) return false;
  lowering_.at(size_t(other)) = Lowering::InSibling;
  lowering_.at(size_t(sw.id)) = Lowering::Epilogue;
  expert_glus_.emplace(n.id, p);
  count_fusion(Fusion::ExpertGlu);
  return true;
}

// A down MulMatId read only by a WeightedSum (as its products), which the launch writes, or the residual Add that
// alone reads the WeightedSum (add_written_at's conditions, from the MulMatId's step on).
void Executor::plan_expert_down(const Node& n) {
  const auto& us = users_.at(size_t(n.id));
  if (us.size() != 1 || !plain_experts(g_, n)) return;
  const Node& ws = g_.node(us[0]);
  if (ws.op != Op::WeightedSum || ws.inputs.at(0) != n.id || !plan_.owns(ws.id)) return;
  const Node& w = g_.node(n.inputs[0]);
  if (regrouped(w) || g_.node(n.inputs.at(1)).shape.ne[1] != n.shape.ne[1]) return;  // one input column per slot
  ExpertDownParams p;
  p.w = weight_ptr(w), p.type = ::std::get<graph::WeightParams>(w.params).type;
  p.bias = n.inputs.size() > 3 && n.inputs[3] != graph::kNoNode ? f32_in(n, 3) : nullptr;
  p.x = f32_in(n, 1), p.ids = static_cast<const int32_t*>(device_ptr(n.inputs.at(2))), p.weights = f32_in(ws, 1);
  p.K = w.shape.ne[0], p.N = w.shape.ne[1], p.n_expert = w.shape.ne[2], p.k = n.shape.ne[1], p.T = n.shape.ne[2];
  NodeId add = add_written_at(ws, {n.id, ws.id});
  if (add != graph::kNoNode && !slot_free_between(add, n.id, add, {n.id, ws.id})) add = graph::kNoNode;
  if (add != graph::kNoNode) {
    const Node& a = g_.node(add);
    p.residual = f32_in(a, a.inputs[0] == ws.id ? 1 : 0), p.out = f32_out(a);
  } else {
    if (plan_.last_use.at(size_t(ws.id)) >= int32_t(g_.nodes().size()) ||
        !slot_free_between(ws.id, n.id, ws.id, {n.id}))
      return;
    p.out = f32_out(ws);
  }
  if (!expert_down_fits(p)) return;
  lowering_.at(size_t(ws.id)) = Lowering::Epilogue;
  if (add != graph::kNoNode) lowering_.at(size_t(add)) = Lowering::Epilogue;
  expert_downs_.emplace(n.id, p);
  count_fusion(Fusion::ExpertDown);
}

void Executor::lower_top_k(const Node& n) {
  if (lowering(n.id) == Lowering::InRoute) return;  // computed by its MoeWeights' routing launch
  const graph::Shape& a = g_.node(n.inputs.at(0)).shape;
  const TopKKernelParams p{f32_in(n, 0), static_cast<int32_t*>(device_ptr(n.id)), a.ne[0],
                           ::std::get<graph::TopKParams>(n.params).k, a.rows()};
  LLM_REQUIRE(p.n <= kTopKMaxN, "node '" + n.name + "': top-k over more than " + ::std::to_string(kTopKMaxN) +
                                    " values");
  steps_.push_back([p](cudaStream_t s) { launch_top_k(p, s); });
}

void Executor::lower_moe_weights(const Node& n) {
  if (const auto r = moe_routes_.find(n.id); r != moe_routes_.end()) {
    const MoeRouteParams p = r->second;
    steps_.push_back([p](cudaStream_t s) { launch_moe_route(p, s); });
    return;
  }
  const auto& mp = ::std::get<graph::MoeWeightsParams>(n.params);
  MoeWeightsKernelParams p;
  p.scores = f32_in(n, 0), p.ids = static_cast<const int32_t*>(device_ptr(n.inputs.at(1))), p.out = f32_out(n);
  p.n_expert = g_.node(n.inputs[0]).shape.ne[0], p.k = n.shape.ne[0], p.T = n.shape.ne[1];
  p.softmax = mp.softmax, p.normalize = mp.normalize;
  steps_.push_back([p](cudaStream_t s) { launch_moe_weights(p, s); });
}

void Executor::lower_mul_mat_id(const Node& n) {
  if (lowering(n.id) == Lowering::InSibling) return;  // computed by the gate/up launch of its pair
  if (const auto f = expert_glus_.find(n.id); f != expert_glus_.end()) {
    const ExpertGluParams p = f->second;
    steps_.push_back([p](cudaStream_t s) { launch_expert_glu(p, s); });
    return;
  }
  if (const auto f = expert_downs_.find(n.id); f != expert_downs_.end()) {
    const ExpertDownParams p = f->second;
    steps_.push_back([p](cudaStream_t s) { launch_expert_down(p, s); });
    return;
  }
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
  if (lowering(n.id) == Lowering::Epilogue) return;  // written by the gate/up launch (plan_expert_glu)
  const auto& op = ::std::get<graph::SwiGluOaiParams>(n.params);
  const SwiGluOaiKernelParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), n.shape.elements(), op.alpha, op.limit};
  steps_.push_back([p](cudaStream_t s) { launch_swiglu_oai(p, s); });
}

void Executor::lower_weighted_sum(const Node& n) {
  if (lowering(n.id) == Lowering::Epilogue) return;  // written by the down launch (plan_expert_down)
  const graph::Shape& a = g_.node(n.inputs.at(0)).shape;
  const WeightedSumParams p{f32_in(n, 0), f32_in(n, 1), f32_out(n), a.ne[0], a.ne[1], a.ne[2]};
  steps_.push_back([p](cudaStream_t s) { launch_weighted_sum(p, s); });
}

}  // namespace cuda
