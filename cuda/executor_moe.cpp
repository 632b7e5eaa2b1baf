// Lowering of the mixture-of-experts ops (cuda/executor.h): routing (TopK, MoeWeights), the chosen experts'
// products (MulMatId: matvec_id.cuh for decode-sized batches, expert-grouped tiles, moe_gemm.cuh, for prefill),
// gpt-oss's clamped SwiGLU and the weighted sum. Every kernel reads the expert ids from device memory.
// Decode fusions, decided by plan_fusions in node order (each a whole launch less per layer, same values up to
// float rounding):
// - routing: Softmax (when present), TopK and MoeWeights as one launch (moe.cuh launch_moe_route), at any T;
// - the gate and up MulMatIds and their SwiGlu / SwiGluOai as one launch (expert_matvec.cuh expert_glu);
// - the down MulMatId, its WeightedSum and the residual Add after it as one launch (expert_down);
// - up to 64 experts, the routing taken into those two launches, each block routing its token (route_in_experts);
// - one token's feed-forward RmsNorm taken into the router's parts launch (fold_moe_norm).
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

// A mixture's private buffers, each with room for its largest user (one layer's at a time): h handed from the gate/up
// launch to the down launch as int16 runs of 16 (kExpertRunBytes), the routers' partial products (router_parts_of;
// 8 x 4 bytes a token and expert at n_embd 2048: 2 MiB at T = 512), the routing launches' copies of ids and weights,
// a folded feed-forward norm's x w and sums of squares (fold_moe_norm). None without fusions.
void Executor::allocate_moe_buffers() {
  if (!opt_.fuse) return;
  size_t runs_bytes = 0, parts_bytes = 0, route_bytes = 0, norm_bytes = 0;
  for (const Node& n : g_.nodes()) {
    if (n.op == Op::MoeWeights) route_bytes = ::std::max(route_bytes, size_t(n.shape.elements()) * 8);
    if (n.op == Op::MulMatId && n.shape.ne[2] <= opt_.matvec_max_tokens)
      runs_bytes = ::std::max(runs_bytes, size_t(n.shape.elements() / 16) * kExpertRunBytes);
    if (n.op == Op::MulMat && n.inputs.size() >= 2 && g_.node(n.inputs[0]).op == Op::Weight &&
        ::std::get<graph::WeightParams>(g_.node(n.inputs[0]).params).role == graph::WeightRole::FfnRouter) {
      const int64_t K = g_.node(n.inputs[0]).shape.ne[0];
      const size_t n_parts = size_t(router_parts_count(K));
      parts_bytes = ::std::max(parts_bytes, n_parts * size_t(n.shape.elements()) * sizeof(float));
      norm_bytes = ::std::max(norm_bytes, (size_t(K) + n_parts) * sizeof(float));  // one token's (fold_moe_norm)
    }
  }
  if (runs_bytes) expert_runs_ = DeviceBuffer(runs_bytes);
  if (parts_bytes) router_parts_buffer_ = DeviceBuffer(parts_bytes), router_norm_ = DeviceBuffer(norm_bytes);
  if (route_bytes) route_copy_ = DeviceBuffer(route_bytes);
}

// Routing as one launch at the MoeWeights' step (launch_moe_route), and, where the logits are a float32 router
// MulMat read by nothing but the routing, the router as partial products over slices of K (launch_router_parts)
// into router_parts_, which the routing launch adds up: the logits are then never stored.
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
  if (l.op == Op::Weight || !plan_.owns(logits) || l.shape.ne[0] > kTopKMaxN || k > 32) return;
  if (!plan_.owns(topk.id) || !plan_.owns(mw.id)) return;
  const int64_t T = mw.shape.ne[1];
  MoeRouteParams p;
  p.ids = static_cast<int32_t*>(device_ptr(topk.id)), p.weights = f32_out(mw);
  p.n_expert = l.shape.ne[0], p.k = k, p.T = T;
  p.softmax_all = softmax_all, p.softmax_chosen = mp.softmax, p.normalize = mp.normalize;
  RouterPartsParams rp;
  if (router_parts_of(l, softmax_all ? ::std::vector<NodeId>{scores.id} : ::std::vector<NodeId>{topk.id, mw.id},
                      rp)) {
    p.logits = rp.parts, p.n_parts = rp.n_parts;
    p.bias = product_bias(l);
    lowering_.at(size_t(logits)) = Lowering::RouterParts;
    matvecs_.erase(logits);
    router_parts_.emplace(logits, rp);
  } else {
    // The launch reads the logits at the MoeWeights' step: they must still hold their values then. Where the
    // planner gave the TopK's or the MoeWeights' slot some of their bytes (the logits die at the Softmax), one
    // block reads every token's row before writing (MoeRouteParams::per_block), if the rows fit its shared memory.
    const NodeId from = softmax_all ? scores.id : topk.id;
    if (!slot_free_between(logits, from, mw.id, {scores.id, topk.id, mw.id})) return;
    const bool disjoint = slot_free_between(logits, from, mw.id, {scores.id});
    if (!disjoint && moe_route_smem(l.shape.ne[0], T) > kMoeRouteMaxSmem) return;
    p.per_block = disjoint ? 1 : T;
    p.logits = static_cast<const float*>(device_ptr(logits));
  }
  if (route_copy_.bytes() >= size_t(k * T) * 8) {
    p.ids_copy = route_copy_.as<int32_t>(), p.weights_copy = reinterpret_cast<float*>(p.ids_copy + k * T);
  }
  if (softmax_all) lowering_.at(size_t(scores.id)) = Lowering::InRoute;
  lowering_.at(size_t(topk.id)) = Lowering::InRoute;
  moe_routes_.emplace(mw.id, p);
  count_fusion(Fusion::MoeRoute);
}

// The router MulMat l as partial products into router_parts_: a float32 weight, read only by `readers` (the
// routing), its input stored (not a norm folded into its readers), aligned for float4 loads.
bool Executor::router_parts_of(const Node& l, const ::std::vector<NodeId>& readers, RouterPartsParams& rp) const {
  // Any T: from kF32ColumnsMin tokens the parts are tiles that read the matrix once per 32 columns
  // (launch_router_parts, matvec_f32_cols).
  if (l.op != Op::MulMat || users_.at(size_t(l.id)) != readers) return false;
  const Node& w = g_.node(l.inputs.at(0));
  if (w.op != Op::Weight || ::std::get<graph::WeightParams>(w.params).type != quant::Type::F32) return false;
  const Node& x = g_.node(l.inputs.at(1));
  if (lowering(x.id) == Lowering::InReaders || lowering(x.id) == Lowering::InRopeKv) return false;
  rp.w = static_cast<const float*>(weight_ptr(w)), rp.x = f32_in(l, 1);
  rp.K = w.shape.ne[0], rp.n_expert = w.shape.ne[1], rp.T = l.shape.ne[1], rp.n_parts = router_parts_count(rp.K);
  rp.parts = router_parts_buffer_.as<float>();
  rp.outer_tiles = opt_.router_outer_tiles;
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  return rp.K % 4 == 0 && rp.T <= 65535 && a16(rp.w) && a16(rp.x) && rp.parts &&
         size_t(rp.n_parts) * size_t(rp.T * rp.n_expert) * 4 <= router_parts_buffer_.bytes();
}

// A MulMatId's expert biases (input 3), or null.
const float* Executor::expert_bias(const Node& mm) const {
  return mm.inputs.size() > 3 && mm.inputs[3] != graph::kNoNode ? f32_in(mm, 3) : nullptr;
}

// The second of a gate/up pair whose first, in node order, is n: a later MulMatId of the same input and ids, lowered
// on its own, both read only by one SwiGlu or SwiGluOai of the two (out: that activation). Null where there is none.
const Node* Executor::glu_pair_second(const Node& n, const Node*& sw_out) const {
  const auto& us = users_.at(size_t(n.id));
  if (us.size() != 1) return nullptr;
  const Node& sw = g_.node(us[0]);
  if ((sw.op != Op::SwiGlu && sw.op != Op::SwiGluOai) || sw.inputs.size() != 2) return nullptr;
  const NodeId other = sw.inputs[0] == n.id ? sw.inputs[1] : sw.inputs[0];
  if (other == n.id || other < n.id) return nullptr;
  const Node& m = g_.node(other);
  if (m.op != Op::MulMatId || users_.at(size_t(other)).size() != 1 || lowering(other) != Lowering::Own) return nullptr;
  if (m.inputs.at(1) != n.inputs.at(1) || m.inputs.at(2) != n.inputs.at(2)) return nullptr;
  sw_out = &sw;
  return &m;
}

void Executor::plan_mul_mat_id(const Node& n) {
  if (!opt_.fuse || lowering(n.id) != Lowering::Own) return;
  if (n.shape.ne[2] > opt_.matvec_max_tokens) {
    plan_moe_glu_out(n);
    return;
  }
  if (expert_downs_.count(n.id) || plan_expert_glu(n)) return;  // a down taken with its gate/up pair
  ExpertDown d;
  if (expert_down_of(n, graph::kNoNode, d)) take_expert_down(n, d);
}

// Prefill (launch_moe_gemm): n, the first of a gate/up pair in node order, and a later MulMatId m of the same input and
// ids, each read only by one SwiGlu or SwiGluOai of the two, which only a down MulMatId (also prefill) reads: the
// activation is written as half into moe_scratch_ past what the pair's launches use (MoeGluOut), and the down launch
// takes it as its x. Where moe_gemm_pairs takes the pair, one launch at n's step computes both products (m runs no
// launch) and neither is stored; else m's launch reads n's product back (alive until the activation's step, after
// m's) and m's floats are never stored. So the activation runs no launch and the down launch no x pass. Same bits as
// unfused: the same float activation, rounded to half as the x pass rounds (moe_tiles.cuh, store_tile_outputs).
void Executor::plan_moe_glu_out(const Node& n) {
  if (!opt_.moe_glu_out) return;
  const Node* swp = nullptr;
  const Node* mp = glu_pair_second(n, swp);
  if (!mp) return;
  const Node &m = *mp, &sw = *swp;
  const NodeId other = m.id;
  if (lowering(sw.id) != Lowering::Own || m.shape.ne != n.shape.ne || sw.shape.ne != n.shape.ne || !plan_.owns(n.id))
    return;
  const auto& su = users_.at(size_t(sw.id));
  if (su.size() != 1 || plan_.last_use.at(size_t(sw.id)) >= int32_t(g_.nodes().size())) return;
  const Node& down = g_.node(su[0]);
  if (down.op != Op::MulMatId || down.inputs.at(1) != sw.id || lowering(down.id) != Lowering::Own ||
      down.shape.ne[2] <= opt_.matvec_max_tokens)
    return;
  const Node& w = g_.node(m.inputs.at(0));
  const Node& x = g_.node(m.inputs.at(1));
  const int64_t N = n.shape.ne[0], k = n.shape.ne[1], T = n.shape.ne[2], n_expert = w.shape.ne[2];
  if (N % 64 != 0 || moe_scratch_.bytes() < moe_glu_scratch_bytes(n_expert, k, T, x.shape.ne[0], x.shape.ne[1], N))
    return;
  MoeGluLaunch l;
  MoeGluOut& o = l.glu;
  o.out = reinterpret_cast<__half*>(static_cast<uint8_t*>(moe_scratch_.get()) +
                                    moe_glu_out_offset(n_expert, k, T, x.shape.ne[0], x.shape.ne[1]));
  if (sw.op == Op::SwiGluOai) {
    const auto& op = ::std::get<graph::SwiGluOaiParams>(sw.params);
    o.act = ExpertAct::SwiGluOai, o.alpha = op.alpha, o.limit = op.limit;
  }
  const Node& gate = g_.node(sw.inputs[0]);
  const Node& up = g_.node(sw.inputs[1]);
  const Node& wg = g_.node(gate.inputs[0]);
  const Node& wu = g_.node(up.inputs[0]);
  const auto type_of = [](const Node& wn) { return ::std::get<graph::WeightParams>(wn.params).type; };
  const bool pair = opt_.moe_glu_pairs && opt_.moe_fragments && wg.op == Op::Weight && wu.op == Op::Weight &&
                    type_of(wg) == type_of(wu) && !regrouped(wg) && !regrouped(wu) && wg.shape.ne == wu.shape.ne &&
                    moe_gemm_pairs(type_of(wg), n_expert, k, T) &&
                    reinterpret_cast<uintptr_t>(weight_ptr(wu)) % 16 == 0;
  NodeId launching = other;
  if (pair) {  // at n's step, the earlier of the two; m runs no launch
    o.up_w = weight_ptr(wu), o.up_bias = expert_bias(up);
    l.w = weight_ptr(wg), l.bias = expert_bias(gate);
    launching = n.id;
    lowering_.at(size_t(other)) = Lowering::InSibling;
  } else {
    o.other = static_cast<const float*>(device_ptr(n.id));
    o.acc_is_gate = sw.inputs[0] == other;
  }
  moe_glu_outs_.emplace(launching, l);
  moe_glu_x_.emplace(down.id, o.out);
  lowering_.at(size_t(sw.id)) = Lowering::Epilogue;
  count_fusion(Fusion::MoeGluOut);
}

namespace {

// The expert tensor of a MulMatId as the fused kernels read it: a plain weight of a type they serve.
bool plain_experts(const graph::Graph& g, const Node& mm) {
  return g.node(mm.inputs.at(0)).op == Op::Weight;
}

}  // namespace

// n (the first of the pair in node order) and a later MulMatId of the same input and ids, each read only by one
// SwiGlu or SwiGluOai of the two: that launch computes the activation. When the activation's one reader is a down
// MulMatId that fuses too, h goes to it as int16 runs in expert_runs_ (not stored as floats: the down launch then
// neither re-quantizes nor reads them, and h's slot no longer constrains where the residual Add may be written).
bool Executor::plan_expert_glu(const Node& n) {
  const Node* swp = nullptr;
  const Node* mp = glu_pair_second(n, swp);
  if (!mp) return false;
  const Node &m = *mp, &sw = *swp;
  const NodeId other = m.id;
  if (!plain_experts(g_, n) || !plain_experts(g_, m)) return false;
  const Node& x = g_.node(n.inputs[1]);
  if (x.shape.ne[1] != 1) return false;  // one input column per token, shared by its k slots
  const Node& gate = g_.node(sw.inputs[0]);
  const Node& up = g_.node(sw.inputs[1]);
  const Node& wg = g_.node(gate.inputs[0]);
  const Node& wu = g_.node(up.inputs[0]);
  if (regrouped(wg) != regrouped(wu) || wg.shape.ne != wu.shape.ne) return false;
  const quant::Type type = ::std::get<graph::WeightParams>(wg.params).type;
  if (::std::get<graph::WeightParams>(wu.params).type != type) return false;
  ExpertGluParams p;
  p.gate = weight_ptr(wg), p.up = weight_ptr(wu), p.type = type;
  p.recoded = regrouped(wg);  // MXFP4 recoded at upload (weight_layouts.h); expert_glu_fits refuses other types
  p.gate_bias = expert_bias(gate), p.up_bias = expert_bias(up);
  p.x = f32_in(n, 1), p.ids = static_cast<const int32_t*>(device_ptr(n.inputs[2]));
  if (const MoeRouteParams* r = route_with_copies(n.inputs[2], nullptr)) p.ids = r->ids_copy;
  if (sw.op == Op::SwiGluOai) {
    const auto& op = ::std::get<graph::SwiGluOaiParams>(sw.params);
    p.act = ExpertAct::SwiGluOai, p.alpha = op.alpha, p.limit = op.limit;
  }
  p.K = wg.shape.ne[0], p.N = wg.shape.ne[1], p.n_expert = wg.shape.ne[2], p.k = n.shape.ne[1], p.T = n.shape.ne[2];
  // h as runs for a fused down launch, or as floats in the SwiGlu's slot.
  ExpertDown d;
  const auto& su = users_.at(size_t(sw.id));
  const bool runs = su.size() == 1 && g_.node(su[0]).op == Op::MulMatId && g_.node(su[0]).inputs.at(1) == sw.id &&
                    lowering(su[0]) == Lowering::Own && expert_down_of(g_.node(su[0]), sw.id, d);
  if (runs) {
    p.runs_out = expert_runs_.get();
    route_in_experts(n, m, su[0], p, d);
  } else {
    if (!plan_.owns(sw.id) || plan_.last_use.at(size_t(sw.id)) >= int32_t(g_.nodes().size())) return false;
    // Neither product is stored: the SwiGlu's slot, written at n's step, may be theirs, but nothing else alive.
    if (!slot_free_between(sw.id, n.id, sw.id, {n.id, other})) return false;
    p.out = f32_out(sw);
  }
  if (!expert_glu_fits(p)) return false;
  fold_moe_norm(n, m, p, runs ? &d : nullptr);
  glu_after_route(n, p);
  lowering_.at(size_t(other)) = Lowering::InSibling;
  lowering_.at(size_t(sw.id)) = Lowering::Epilogue;
  expert_glus_.emplace(n.id, p);
  count_fusion(Fusion::ExpertGlu);
  if (runs) take_expert_down(g_.node(su[0]), d);
  return true;
}

// A one-token feed-forward RmsNorm read by nothing but the router (its parts launch planned: plan_moe_route) and this
// gate/up pair, folded into the router's parts launch: its blocks of the first expert rows also write x w and their
// slice's sum of squares of x (RouterPartsParams::norm_w), the routing (its launch's, or each expert block's own)
// scales the logits by 1 / rms(x), and the gate/up launch quantizes x w and scales the runs. The norm's launch goes;
// its input must hold its value until the router's launch, and no launch may compute something else with the norm
// (the residual Add of fold_add_norm, a fixed-point stream).
void Executor::fold_moe_norm(const Node& gate, const Node& up, ExpertGluParams& glu, ExpertDown* down) {
  if (!opt_.moe_norm || !router_norm_.get() || glu.T != 1) return;
  const NodeId xe = gate.inputs.at(1);  // the norm, or a view of it (moe_ffn's reshape to one slot a token)
  const Node& norm = g_.node(plan_.root.at(size_t(xe)));
  if (norm.op != Op::RmsNorm || norm.shape.rows() != 1 || lowering(norm.id) != Lowering::Own) return;
  if (norm.inputs.size() < 2 || norm.inputs[1] == graph::kNoNode) return;
  const NodeId src = norm.inputs[0];
  if (lowering(src) == Lowering::InNorm || fixed_acc_.at(size_t(src))) return;
  if (g_.node(plan_.root.at(size_t(src))).op == Op::Weight) return;
  if (plan_.last_use.at(size_t(norm.id)) >= int32_t(g_.nodes().size())) return;  // a graph output
  const auto gate_or_up = [&](NodeId u) { return u == gate.id || u == up.id; };
  if (xe != norm.id) {
    const auto& vu = users_.at(size_t(xe));
    if (vu.size() != 2 || !gate_or_up(vu[0]) || !gate_or_up(vu[1])) return;
  }
  const auto& us = users_.at(size_t(norm.id));
  NodeId router = graph::kNoNode;
  for (const NodeId u : us) {
    if (xe != norm.id ? u == xe : gate_or_up(u)) continue;
    if (router != graph::kNoNode || lowering(u) != Lowering::RouterParts) return;
    router = u;
  }
  if (router == graph::kNoNode || us.size() != (xe != norm.id ? 2u : 3u)) return;
  RouterPartsParams& rp = router_parts_.at(router);
  const float* x = f32_in(norm, 0);
  const float* w = f32_in(norm, 1);
  const auto a16 = [](const void* q) { return reinterpret_cast<uintptr_t>(q) % 16 == 0; };
  if (rp.T != 1 || rp.K != norm.shape.ne[0] || rp.K != glu.K || !a16(x) || !a16(w)) return;
  if (plan_.last_use.at(size_t(src)) < router && !slot_free_between(src, norm.id, router)) return;
  // The routing's source: its launch's, or (route_in_experts) the expert launches' own copies.
  MoeRouteParams* route = routing_launch_of(gate.inputs.at(2));
  if (route && route->logits != rp.parts) route = nullptr;
  if (!route && glu.route.logits != rp.parts) return;
  float* xw = router_norm_.as<float>();
  float* ss = xw + rp.K;
  ExpertGluParams g = glu;
  g.x = xw, g.norm_ss = ss, g.norm_parts = rp.n_parts;
  g.norm_eps = ::std::get<graph::RmsNormParams>(norm.params).eps;
  if (!expert_glu_fits(g)) return;
  const auto finish = [&](MoeRouteSource& r) { r.norm_ss = ss, r.norm_k = rp.K, r.norm_eps = g.norm_eps; };
  if (route) finish(*route);
  if (g.route.logits) finish(g.route);
  if (down && down->p.route.logits) finish(down->p.route);
  glu = g;
  rp.x = x, rp.norm_w = w, rp.norm_ss = ss, rp.xw = xw;
  lowering_.at(size_t(norm.id)) = Lowering::InReaders;
  count_fusion(Fusion::MoeNorm);
}

// The gate/up launch as a programmatic dependent of its routing launch (ExpertGluParams::programmatic), which lets it
// start once the logits are read (MoeRouteParams::late_dependents): its blocks become resident while the routing
// ranks and weighs, and wait there. Qwen3-30B-A3B tg128 543.9 -> 551.5 (H200, session 46; with the start let only
// after the rank, 540.2). One token a step (what was measured), and only where a routing launch computes the ids
// (not the expert launches themselves); lower_mul_mat_id launches it plainly unless the routing's step is the one
// right before it.
void Executor::glu_after_route(const Node& gate, ExpertGluParams& glu) {
  if (!opt_.glu_pdl || glu.route.logits || glu.T != 1) return;
  if (MoeRouteParams* r = routing_launch_of(gate.inputs.at(2))) r->late_dependents = true, glu.programmatic = true;
}

// The routing launch (plan_moe_route) that computes TopK `topk`, or nullptr (none, or the expert launches route).
MoeRouteParams* Executor::routing_launch_of(NodeId topk) {
  for (const NodeId u : users_.at(size_t(topk)))
    if (const auto r = moe_routes_.find(u); r != moe_routes_.end()) return &r->second;
  return nullptr;
}

// A down MulMatId read only by a WeightedSum (as its products), which the launch writes, or the residual Add that
// alone reads the WeightedSum (add_written_at's conditions, from the MulMatId's step on). h_as_runs: the down's
// input node when a gate/up launch hands it over as runs (never stored); kNoNode: read as floats from its slot.
bool Executor::expert_down_of(const Node& n, NodeId h_as_runs, ExpertDown& d) const {
  if (n.shape.ne[2] > opt_.matvec_max_tokens) return false;
  const auto& us = users_.at(size_t(n.id));
  if (us.size() != 1 || !plain_experts(g_, n)) return false;
  const Node& ws = g_.node(us[0]);
  if (ws.op != Op::WeightedSum || ws.inputs.at(0) != n.id || !plan_.owns(ws.id)) return false;
  const Node& w = g_.node(n.inputs[0]);
  if (g_.node(n.inputs.at(1)).shape.ne[1] != n.shape.ne[1]) return false;  // a column per slot
  ExpertDownParams& p = d.p;
  p.w = weight_ptr(w), p.type = ::std::get<graph::WeightParams>(w.params).type;
  p.recoded = regrouped(w);  // as the gate/up launch's
  p.bias = expert_bias(n);
  if (h_as_runs != graph::kNoNode) {
    p.x_runs = expert_runs_.get();
    p.ids_before_wait = true;  // the gate/up launch, begun after the routing (or past its wait), runs right before
  } else {
    p.x = f32_in(n, 1);
  }
  p.ids = static_cast<const int32_t*>(device_ptr(n.inputs.at(2))), p.weights = f32_in(ws, 1);
  // The routing launch's copies, when it made them for these ids and weights: then nothing reads the TopK's and
  // MoeWeights' slots after this launch, and the Add's value may take their bytes.
  NodeId topk = graph::kNoNode, mw = graph::kNoNode;
  if (const MoeRouteParams* r = route_with_copies(n.inputs[2], &mw); r && mw == ws.inputs[1]) {
    p.ids = r->ids_copy, p.weights = r->weights_copy;
    topk = n.inputs[2];
  } else {
    mw = graph::kNoNode;
  }
  p.K = w.shape.ne[0], p.N = w.shape.ne[1], p.n_expert = w.shape.ne[2], p.k = n.shape.ne[1], p.T = n.shape.ne[2];
  d.sum = ws.id;
  d.add = add_written_at(ws, {n.id, ws.id, h_as_runs, topk, mw});
  if (d.add != graph::kNoNode && !slot_free_between(d.add, n.id, d.add, {n.id, ws.id, h_as_runs, topk, mw}))
    d.add = graph::kNoNode;
  if (d.add != graph::kNoNode) {
    const Node& a = g_.node(d.add);
    p.residual = f32_in(a, a.inputs[0] == ws.id ? 1 : 0), p.out = f32_out(a);
  } else {
    if (plan_.last_use.at(size_t(ws.id)) >= int32_t(g_.nodes().size()) ||
        !slot_free_between(ws.id, n.id, ws.id, {n.id, h_as_runs}))
      return false;
    p.out = f32_out(ws);
  }
  return expert_down_fits(p);
}

// The routing launch (plan_moe_route) that computes TopK `topk` and keeps copies of its ids and weights, and its
// MoeWeights node; nullptr when there is none.
const MoeRouteParams* Executor::route_with_copies(NodeId topk, NodeId* moe_weights) const {
  for (const NodeId u : users_.at(size_t(topk)))
    if (const auto r = moe_routes_.find(u); r != moe_routes_.end() && r->second.ids_copy) {
      if (moe_weights) *moe_weights = u;
      return &r->second;
    }
  return nullptr;
}

// The routing launch of a gate/up + down pair's ids taken into both launches (MoeRouteSource): each block routes its
// token itself from the router's partial products, and the routing launch, its ids and its weights go. Only where
// nothing else reads the ids or the weights (the TopK read by the three products and the MoeWeights, the
// MoeWeights by the down launch's WeightedSum, neither a graph output), and the scores are the router's parts:
// written by the router launch right before the gate/up launch, overwritten only by the next layer's, after the
// down launch. Both launches must still fit with the block's routing scratch; otherwise the routing launch stays.
// Up to kRouteInExpertsMaxExperts experts: every block's routing sits on the critical path of both launches, and
// it grows with the experts (the softmax over all of them, ranks over all pairs). Measured (H200, tg128, same
// machine): gpt-oss-20b (32 experts) 609.5 -> 619.7 tok/s with it, Qwen3-30B-A3B (128) 473.2 -> 468.6 without.
void Executor::route_in_experts(const Node& gate, const Node& up, NodeId down_mm, ExpertGluParams& glu,
                                ExpertDown& down) {
  if (!opt_.moe_route_in_experts) return;
  const NodeId topk = gate.inputs.at(2);
  const Node* mw = nullptr;
  for (const NodeId u : users_.at(size_t(topk)))
    if (moe_routes_.contains(u)) mw = &g_.node(u);
  if (!mw || lowering(topk) != Lowering::InRoute) return;
  const MoeRouteParams& r = moe_routes_.at(mw->id);
  constexpr int64_t kRouteInExpertsMaxExperts = 64;
  if (r.logits != router_parts_buffer_.as<float>() || r.n_expert > kRouteInExpertsMaxExperts || r.k > 32) return;
  const int32_t n_nodes = int32_t(g_.nodes().size());
  if (plan_.last_use.at(size_t(topk)) >= n_nodes || plan_.last_use.at(size_t(mw->id)) >= n_nodes) return;
  for (const NodeId u : users_.at(size_t(topk)))
    if (u != gate.id && u != up.id && u != down_mm && u != mw->id) return;
  if (users_.at(size_t(mw->id)) != ::std::vector<NodeId>{down.sum}) return;
  ExpertGluParams g = glu;
  ExpertDownParams d = down.p;
  g.route = d.route = r;
  if (!expert_glu_fits(g) || !expert_down_fits(d)) return;
  glu = g, down.p = d;
  moe_routes_.erase(mw->id);
  lowering_.at(size_t(mw->id)) = Lowering::InExperts;
  --fused_count_[size_t(Fusion::MoeRoute)];  // no routing launch after all
  count_fusion(Fusion::RouteInExperts);
}

void Executor::take_expert_down(const Node& n, const ExpertDown& d) {
  lowering_.at(size_t(d.sum)) = Lowering::Epilogue;
  if (d.add != graph::kNoNode) lowering_.at(size_t(d.add)) = Lowering::Epilogue;
  expert_downs_.emplace(n.id, d.p);
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
  if (lowering(n.id) == Lowering::InExperts) return;  // routed by the expert launches themselves
  if (const auto r = moe_routes_.find(n.id); r != moe_routes_.end()) {
    const MoeRouteParams p = r->second;
    steps_.push_back([p](cudaStream_t s) { launch_moe_route(p, s); });
    route_step_end_ = steps_.size();
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
    ExpertGluParams p = f->second;
    if (steps_.size() != route_step_end_) p.programmatic = false;  // its routing is not the launch right before
    steps_.push_back([p](cudaStream_t s) { launch_expert_glu(p, s); });
    return;
  }
  if (const auto f = expert_downs_.find(n.id); f != expert_downs_.end()) {
    const ExpertDownParams p = f->second;
    steps_.push_back([p](cudaStream_t s) { launch_expert_down(p, s); });
    return;
  }
  const Node& w = g_.node(n.inputs.at(0));
  LLM_REQUIRE(w.op == Op::Weight, "node '" + n.name + "': the experts must be a plain weight");
  const Node& x = g_.node(n.inputs.at(1));
  MatvecIdParams p;
  p.w = weight_ptr(w), p.type = ::std::get<graph::WeightParams>(w.params).type;
  p.recoded = regrouped(w);  // MXFP4 experts recoded at upload: both launchers below read them
  p.x = f32_in(n, 1), p.x_slots = x.shape.ne[1];
  p.ids = static_cast<const int32_t*>(device_ptr(n.inputs.at(2)));
  p.bias = expert_bias(n);
  p.y = f32_out(n);
  p.K = w.shape.ne[0], p.N = w.shape.ne[1], p.n_expert = w.shape.ne[2], p.k = n.shape.ne[1], p.T = n.shape.ne[2];
  if (p.T <= opt_.matvec_max_tokens) {
    steps_.push_back([p](cudaStream_t s) { launch_matvec_id(p, s); });
    return;
  }
  void* scratch = moe_scratch_.get();
  const size_t bytes = moe_scratch_.bytes();
  // A layer's gate and up read the same ids and x, its down the same ids: their grouping and half x are made once.
  const MoeScratchHolds holds{n.inputs[2], n.inputs[1], p.n_expert, p.K, p.x_slots};
  MoeGemmOptions o;
  o.half_tiles = !opt_.moe_fragments;
  o.compact_tiles = opt_.moe_compact_tiles;
  if (const auto f = moe_glu_outs_.find(n.id); f != moe_glu_outs_.end()) {
    o.glu = f->second.glu;
    if (f->second.w) p.w = f->second.w, p.bias = f->second.bias;  // the pair in one launch: the gate's
  }
  if (const auto f = moe_glu_x_.find(n.id); f != moe_glu_x_.end()) o.x_half = f->second;
  o.reuse_groups = holds.ids == moe_scratch_holds_.ids && holds.n_expert == moe_scratch_holds_.n_expert;
  o.reuse_x = !o.x_half && o.reuse_groups && holds.x == moe_scratch_holds_.x && holds.K == moe_scratch_holds_.K &&
              holds.x_slots == moe_scratch_holds_.x_slots;
  moe_scratch_holds_ = holds;
  if (o.x_half) moe_scratch_holds_.x = graph::kNoNode;  // its x pass never ran: the half copy is not of this x
  if (!o.reuse_groups) dequant_ahead_.anchor(steps_.size());  // a layer's first expert launch (its gate/up)
  steps_.push_back([p, scratch, bytes, o](cudaStream_t s) { launch_moe_gemm(p, scratch, bytes, s, o); });
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
