// Decode fusions of the CUDA executor (cuda/executor.h, ExecutorOptions::fuse). Each removes a whole kernel per
// occurrence without changing what is computed:
// - RmsNorm folded into its readers: when every reader of a one-row RmsNorm is a matvec the int16 kernel serves,
//   each of them normalises x itself while quantizing it (cuda/kernels/matvec_i16.cu), and the RmsNorm node is
//   never computed. Its input must stay intact until its last reader runs (the plan's liveness, or no tensor alive
//   until then sharing its bytes).
// - RoPE of q and k with the KV-cache write: when an Attention's q and k come straight from two Rope nodes read by
//   nothing else, one kernel rotates q into the q rope's slot and writes rotated k and v into the cache
//   (cuda/kernels/rope.cuh, launch_rope_kv); only views lie between the ropes and the attention, so the raw q, k, v
//   are still intact when it runs.
// - Residual Add as a matvec epilogue: y = W x + r written straight into the Add's slot, when the matvec's only
//   reader is that Add and no tensor alive between the two steps shares the Add's slot (checked on the plan).
// - Sibling matvecs in one launch: later MulMats of the same K that read the same x (q/k/v, gate/up) are computed by
//   the first one's launch, when their output slots are free from that step on (checked on the plan); of the same
//   type, or Q6_K beside a Q4_K first one (Q4_K_M's attn_v), which the launch serves on its own blocks.
// - SwiGlu (or GeGlu) as the epilogue of the gate/up launch (fold_swiglu_epilogue): the launch interleaves gate and
//   up row groups so each block writes silu(gate) * up, and neither product is stored.
// - An RmsNorm read only by a residual Add (Gemma's post-norms, fold_norm_add): the norm's launch adds the residual
//   and writes the Add's value.
// - Per-head q/k RmsNorms before the ropes of a rope + KV write step (Gemma 3, Qwen 3, fold_qk_norms): that launch
//   normalises each head first, rotating q in place.
// - RoPE and the KV write as the epilogue of the q/k/v launch (fold_rope_kv_epilogue): where it applies, the rope
//   pairs above run in no launch of their own and the attention step only attends.
// - The o projection, its residual Add and (below Executor::kShortSlots positions) the attention as one split-K
//   launch (attention_o.cuh) where the session regrouped o by columns: the Add's value lives in a 64-bit
//   fixed-point accumulator, which the folded norm's Q4_0 readers take as x (MatvecParams::x_fixed), the first of
//   them writing the Add's float slot for the later residual add.
// - Products of a few tokens (the small-batch kernel): q/k/v and gate/up of one x, type and layout as one launch
//   (stack_small_batch); the SwiGLU as the up launch's epilogue at up to kBatchMmGluMaxTokens where gate and up do
//   not stack or take the few-column kernel (fold_glu_into_up); a norm before a product of many tokens writes its
//   half x (RmsNormParams::half_out, lower_rms_norm); a SwiGLU before a product on the wgmma (or i8) kernel is
//   formed by that product's x image launch (fold_glu_into_image).
// - A mixture's routing (Softmax, TopK, MoeWeights) as one launch, its gate/up products with the activation as
//   one, and its down products with the weighted sum and the residual Add as one (executor_moe.cpp).
// A paged graph (g.kv.paged()) does not take the attention + o launch, which addresses one sequence's cache by
// position; its one-token step (a single running sequence) takes the q/k/v rope + KV epilogue, which maps the
// token's position through its block-table row.
#include <algorithm>
#include <string>
#include <utility>

#include "cuda/executor.h"
#include "cuda/kernels/attention_o.cuh"
#include "cuda/kernels/rope.cuh"

namespace cuda {

using graph::Node;
using graph::NodeId;
using graph::Op;

namespace {

// Whether byte ranges [a, a + an) and [b, b + bn) share a byte.
bool ranges_overlap(int64_t a, uint64_t an, int64_t b, uint64_t bn) {
  return a < b + int64_t(bn) && b < a + int64_t(an);
}

}  // namespace

// Every fusion of the graph, decided in node order before any step is built (each decision may rely on the ones
// before it: a folded norm's slot is free, a sibling already merged, the q/k/v launch wrote K/V). lower() then only
// reads lowering_, matvecs_ and attention_o_plan_.
void Executor::plan_fusions() {
  lowering_.assign(g_.nodes().size(), Lowering::Own);
  expert_products_ =
      ::std::any_of(g_.nodes().begin(), g_.nodes().end(), [](const Node& n) { return n.op == Op::MulMatId; });
  fixed_acc_.assign(g_.nodes().size(), nullptr);
  // The attention + o launches first (their readers' conditions look ahead), and their accumulators, zero at first.
  for (const Node& a : g_.nodes())
    if (AttentionO f = attention_o_of(a); f.mulmat != graph::kNoNode) {
      f.acc = attention_o_plan_.size();
      attention_o_plan_[a.id] = f;
      const auto& ap = ::std::get<graph::AttentionParams>(a.params);
      fixed_d_ = int64_t(ap.n_head) * ap.head_dim;
    }
  if (!attention_o_plan_.empty()) {
    fixed_accs_ = DeviceBuffer(attention_o_plan_.size() * size_t(fixed_d_) * 8);
    CUDA_CHECK(cudaMemset(fixed_accs_.get(), 0, fixed_accs_.bytes()));
  }
  allocate_moe_buffers();
  for (const Node& n : g_.nodes()) {
    switch (n.op) {
      case Op::RmsNorm:
        if (!fold_norm(n)) fold_norm_add(n);
        if (lowering(n.id) == Lowering::Own) fold_add_norm(n);
        break;
      case Op::MulMat: plan_mul_mat(n); break;
      case Op::SwiGlu:
      case Op::GeGlu:
        fold_glu_into_up(n);
        fold_glu_into_image(n);
        break;
      case Op::MoeWeights: plan_moe_route(n); break;
      case Op::MulMatId: plan_mul_mat_id(n); break;
      case Op::Rope: plan_rope(n); break;
      case Op::Attention:
        if (lowering(n.id) != Lowering::AttendOnly && rope_kv_fusable(n)) {
          lowering_.at(size_t(n.id)) = Lowering::RopesAndAttend;
          fold_qk_norms(n);
        }
        break;
      default: break;
    }
  }
  // Last: it needs the stacks, the SwiGLU images and the add + norm folds decided.
  if (opt_.norm_images)
    for (const Node& n : g_.nodes())
      if (n.op == Op::RmsNorm) fold_norm_into_images(n);
}

// A MulMat: the o projection of an attention + o launch, a matvec with whatever fuses into it, or (many tokens, or o
// regrouped by columns, which only the attention + o launch and prefill read) a GEMM.
void Executor::plan_mul_mat(const Node& n) {
  const Node& w = g_.node(n.inputs.at(0));
  if (w.op != Op::Weight) throw InvalidArgument("node '" + n.name + "' (MulMat): the matrix must be a weight");
  if (const auto f = attention_o_plan_.find(n.inputs.at(1)); f != attention_o_plan_.end() && f->second.mulmat == n.id) {
    plan_attention_o(f->second);
    lowering_.at(size_t(n.id)) = Lowering::AttentionO;
    return;
  }
  // A mixture's router runs as a float32 matvec at any batch size: its matrix is small (n_embd x n_expert), and
  // the GEMM path's f16 operands could pick another expert than the reference where two scores nearly tie.
  const bool router = ::std::get<graph::WeightParams>(w.params).role == graph::WeightRole::FfnRouter;
  if (lowering(n.id) == Lowering::InSibling) return;  // computed with an earlier matrix that reads the same x
  if (batch_mm_takes(n) || matvec_cols_takes(n)) {  // the small-batch kernels (lower_gemm), stacked where they can
    stack_small_batch(n);
    return;
  }
  if ((n.shape.rows() > opt_.matvec_max_tokens && !router) || q4_0_cols(w)) {  // GEMM
    pair_gemm_siblings(n);
    return;
  }
  MatvecParams p = matvec_params(n);
  if (const Node& x = g_.node(n.inputs[1]); x.op == Op::RmsNorm && lowering(x.id) == Lowering::InReaders)
    p.x = f32_in(x, 0), p.norm_w = f32_in(x, 1), p.norm_eps = ::std::get<graph::RmsNormParams>(x.params).eps;
  fold_residual(n, p);
  if (!p.residual) merge_siblings(n, p);
  fold_swiglu_epilogue(n, p);
  fold_rope_kv_epilogue(n, p);
  read_fixed_point_x(n, p);
  matvecs_.emplace(n.id, p);
}

// A Rope read only by an attention whose q/k/v launch rotates it, or whose step rotates q and k itself.
void Executor::plan_rope(const Node& n) {
  const auto& us = users_.at(size_t(n.id));
  if (us.size() != 1) return;
  const Node& att = g_.node(us[0]);
  if (lowering(att.id) == Lowering::AttendOnly) {
    lowering_.at(size_t(n.id)) = Lowering::InQkv;
  } else if (rope_kv_fusable(att)) {
    lowering_.at(size_t(n.id)) = Lowering::InAttention;
    if (att.inputs[0] == n.id) count_fusion(Fusion::RopeKv);  // counted once per pair
  }
}

// The matvec of a MulMat node as lower() launches it, before fusions; y and x as planned.
MatvecParams Executor::matvec_params(const Node& n) const {
  const Node& w = g_.node(n.inputs[0]);
  const quant::Type type = ::std::get<graph::WeightParams>(w.params).type;
  const float* bias = product_bias(n);
  MatvecParams p{weight_ptr(w), type, f32_in(n, 1), bias, f32_out(n), w.shape.ne[0], w.shape.ne[1], n.shape.rows()};
  p.q6_kx8 = type == quant::Type::Q6_K && regrouped(w);
  return p;
}

bool Executor::fold_norm(const Node& norm) {
  if (!norm_foldable(norm)) return false;
  lowering_.at(size_t(norm.id)) = Lowering::InReaders;
  count_fusion(Fusion::Norm);
  return true;
}

bool Executor::norm_foldable(const Node& norm) const {
  if (!opt_.fuse || norm.shape.rows() != 1) return false;
  if (norm.inputs.size() < 2 || norm.inputs[1] == graph::kNoNode) return false;  // no weight: keep the node
  const auto id = size_t(norm.id);
  if (plan_.last_use.at(id) >= int32_t(g_.nodes().size())) return false;  // a graph output: must be computed
  const NodeId src = plan_.root.at(size_t(norm.inputs[0]));
  if (g_.node(src).op == Op::Weight) return false;
  NodeId last = norm.id;
  for (NodeId u : users_.at(id)) {
    const Node& m = g_.node(u);
    if (m.op != Op::MulMat || m.inputs.size() < 2 || m.inputs[1] != norm.id || m.inputs[0] == norm.id) return false;
    if (g_.node(m.inputs[0]).op != Op::Weight || m.shape.rows() > opt_.matvec_max_tokens) return false;
    MatvecParams p = matvec_params(m);
    p.x = f32_in(norm, 0), p.norm_w = f32_in(norm, 1);
    p.norm_eps = ::std::get<graph::RmsNormParams>(norm.params).eps;
    if (!matvec_fuses(p)) return false;
    last = ::std::max(last, u);
  }
  if (users_.at(id).empty()) return false;
  // Its readers read the norm's input: it must hold its value through the last of them — alive that long by the
  // plan, or (the final norm, whose input dies at the norm) its bytes untouched by everything alive until then.
  return plan_.last_use.at(size_t(src)) >= last || slot_free_between(src, norm.id, last);
}

// An RmsNorm read only by a residual Add (Gemma's post-norms): the norm's launch writes residual + norm(x) w into
// the Add's slot (RmsNormParams::residual) and the Add runs no launch of its own (add_written_at's conditions; the
// norm's own slot is never written). Any number of rows: prefill takes it too.
void Executor::fold_norm_add(const Node& norm) {
  if (!opt_.fuse || plan_.last_use.at(size_t(norm.id)) >= int32_t(g_.nodes().size())) return;  // an output: computed
  const NodeId add = add_written_at(norm, {norm.id});
  if (add == graph::kNoNode) return;
  lowering_.at(size_t(norm.id)) = Lowering::AddsResidual;
  lowering_.at(size_t(add)) = Lowering::Epilogue;
  count_fusion(Fusion::NormAdd);
}

// An RmsNorm (its own launch) whose input is a residual Add that it reads first (no step between them reads the
// sum): the norm's launch adds the Add's operands, writes the sum into the Add's slot and normalises it
// (RmsNormParams::add), and the Add runs no launch of its own. The operands must hold their values until the norm's
// launch (alive that long by the plan, or their bytes untouched by everything alive until then). Any number of rows:
// the batched decode steps (two such pairs a layer) and prefill take it.
void Executor::fold_add_norm(const Node& norm) {
  if (!opt_.fuse) return;
  const Node& a = g_.node(norm.inputs.at(0));
  if (a.op != Op::Add || lowering(a.id) != Lowering::Own || !plan_.owns(a.id) || a.inputs.size() != 2) return;
  for (const NodeId in : a.inputs)
    if (g_.node(in).shape.elements() != a.shape.elements() || g_.node(in).op == Op::Weight) return;
  for (const NodeId u : users_.at(size_t(a.id)))
    if (u < norm.id) return;  // read before the norm: the Add's value would not be there yet
  for (const NodeId in : a.inputs) {
    const NodeId r = plan_.root.at(size_t(in));
    if (g_.node(r).op == Op::Input) continue;  // staging, written once a run
    if (!plan_.owns(r)) return;
    // The launch's own outputs (the sum, the norm) may share an operand's bytes element for element: each element is
    // read before it is written, by the same thread. Any other overlap is refused.
    for (const NodeId o : {a.id, norm.id})
      if (plan_.owns(o) && plan_.offset.at(size_t(o)) != plan_.offset.at(size_t(r)) && slots_overlap(o, r)) return;
    if (plan_.last_use.at(size_t(r)) < norm.id && !slot_free_between(r, a.id, norm.id, {a.id, norm.id})) return;
  }
  lowering_.at(size_t(a.id)) = Lowering::InNorm;
  count_fusion(Fusion::AddNorm);
}

// A SwiGlu / GeGlu of a few tokens whose gate and up are products of their own (no matvec fused them), the up one
// launched after the gate one by the small-batch or few-column kernel: that launch reads the gate's product and
// writes the activation into the SwiGlu's slot (GluEpilogue); the SwiGlu runs no launch and up's own
// product is never stored. Both products must be read by the SwiGlu alone; its slot, written at up's step, shared by
// no tensor alive until its own step but up's (never written) and the gate's at the same offset (each element read
// before it is written, by one thread). At most kBatchMmGluMaxTokens tokens: the one-n-tile instances carry it
// (docs/kernel-notes.md, "Session 22").
void Executor::fold_glu_into_up(const Node& glu) {
  if (!opt_.fuse || lowering(glu.id) != Lowering::Own || glu.inputs.size() != 2 || !plan_.owns(glu.id)) return;
  if (glu.shape.rows() > kBatchMmGluMaxTokens) return;
  const Node& gate = g_.node(glu.inputs[0]);
  const Node& up = g_.node(glu.inputs[1]);
  if (gate.op != Op::MulMat || up.op != Op::MulMat || gate.id >= up.id || gate.id == up.id) return;
  if (lowering(gate.id) != Lowering::Own || lowering(up.id) != Lowering::Own || matvecs_.count(gate.id) ||
      matvecs_.count(up.id))
    return;
  // Gate and up stacked in one launch (stack_small_batch, planned before) are InSibling here, so the epilogue takes
  // only the pairs that could not stack, and the few-column kernel's.
  if (!batch_mm_takes(up) && !matvec_cols_takes(up)) return;
  for (const NodeId m : {gate.id, up.id})
    if (users_.at(size_t(m)).size() != 1 || !plan_.owns(m) ||
        plan_.bytes.at(size_t(m)) != plan_.bytes.at(size_t(glu.id)))
      return;
  if (plan_.last_use.at(size_t(glu.id)) >= int32_t(g_.nodes().size())) return;  // a graph output
  const bool gate_in_place = plan_.offset.at(size_t(gate.id)) == plan_.offset.at(size_t(glu.id));
  if (gate_in_place ? !slot_free_between(glu.id, up.id, glu.id, {up.id, gate.id})
                    : !slot_free_between(glu.id, up.id, glu.id, {up.id}))
    return;
  glu_epilogues_[up.id] = UpGlu{gate.id, glu.id, glu.op == Op::GeGlu};
  lowering_.at(size_t(glu.id)) = Lowering::Epilogue;
  count_fusion(Fusion::SmallBatchGlu);
}

// A SwiGlu read only by a product on the wgmma kernel (a down projection from kBatchMmWgmmaMinTokens tokens, or of
// a prompt: launch_prompt_wgmma), or with glu_images_i8 on the i8 kernel (a Q4_K down projection of 3..8 tokens):
// that launch's x image forms silu(gate) * up as it reads them (BatchMmParams::x_gate), so the element-wise launch
// and its float output go. Gate and up must stay as they are until the product runs: no tensor alive in between
// shares their slots but the SwiGlu's (never written now) and the product's (written after its image is formed).
void Executor::fold_glu_into_image(const Node& glu) {
  if (!opt_.fuse || !opt_.glu_images || glu.op != Op::SwiGlu || lowering(glu.id) != Lowering::Own ||
      glu.inputs.size() != 2 || glu.inputs[0] == glu.inputs[1] || !plan_.owns(glu.id) || glu.shape.rows() <= 1)
    return;
  const auto& us = users_.at(size_t(glu.id));
  if (us.size() != 1 || plan_.last_use.at(size_t(glu.id)) >= int32_t(g_.nodes().size())) return;  // one reader
  const Node& m = g_.node(us[0]);
  if (m.op != Op::MulMat || m.inputs.size() < 2 || m.inputs[1] != glu.id || m.inputs[0] == glu.id ||
      lowering(m.id) != Lowering::Own || matvec_cols_takes(m))
    return;
  // A prompt kernel's image forms x as the small-batch wgmma kernel's does.
  const bool prompt = prompt_takes(m);
  if (!prompt && !batch_mm_takes(m)) return;
  const Node& w = g_.node(m.inputs[0]);
  BatchMmChoices forming = opt_.batch_mm;  // the i8 kernel's image only with glu_images_i8
  forming.i8 = forming.i8 && opt_.glu_images_i8;
  if (!prompt && !batch_mm_forms_glu_x(::std::get<graph::WeightParams>(w.params).type, regrouped(w), w.shape.ne[0],
                                       w.shape.ne[1], m.shape.rows(), forming))
    return;
  for (const NodeId in : glu.inputs)
    if (!plan_.owns(in) || !slot_free_between(in, glu.id, m.id, {glu.id, m.id})) return;
  lowering_.at(size_t(glu.id)) = Lowering::InImage;
  count_fusion(Fusion::GluInImage);
}

// Later MulMats of the same x, type, K and layout taken by the same small-batch kernel as this one (the tensor-core
// or the few-column kernel: q/k/v; gate/up, but on the few-column kernel up to kBatchMmGluMaxTokens, where the
// SwiGLU epilogue takes them, and on either with ExecutorOptions::glu_epilogue)
// join this one's launch (ProductStack): their rows stacked after its own, their outputs written at its step, so no
// tensor alive in between may share their slots (checked on the plan). One launch instead of three: k's and v's few
// rows each paid a whole launch's latency.
void Executor::stack_small_batch(const Node& n) {
  if (!opt_.fuse || lowering(n.id) != Lowering::Own) return;
  const int64_t T = n.shape.rows();
  const bool few_cols = matvec_cols_takes(n);
  // fold_glu_into_up takes gate and up where the up launch can apply the activation and should.
  const bool glu_takes = T <= kBatchMmGluMaxTokens && (few_cols || opt_.glu_epilogue);
  if (glu_takes && feeds_glu(n)) return;
  const Node& w = g_.node(n.inputs[0]);
  const auto type = ::std::get<graph::WeightParams>(w.params).type;
  const int64_t K = w.shape.ne[0];
  const auto same_kernel = [&](const Node& m) { return few_cols ? matvec_cols_takes(m) : batch_mm_takes(m); };
  const auto takes_rows = [&](int64_t N) {
    return few_cols ? matvec_cols_supports(type, regrouped(w), K, N, T) : batch_mm_supports(type, regrouped(w), K, N, T);
  };
  ::std::vector<NodeId> members{n.id};
  int64_t rows = w.shape.ne[1];
  for (const NodeId u : users_.at(size_t(n.inputs[1]))) {
    if (u <= n.id || members.size() == size_t(ProductStack::kMax)) continue;
    const Node& m = g_.node(u);
    if (m.op != Op::MulMat || m.inputs.size() < 2 || m.inputs[1] != n.inputs[1] || lowering(u) != Lowering::Own)
      continue;
    const Node& mw = g_.node(m.inputs[0]);
    if (mw.op != Op::Weight || ::std::get<graph::WeightParams>(mw.params).type != type || mw.shape.ne[0] != K ||
        regrouped(mw) != regrouped(w) || !same_kernel(m) || (glu_takes && feeds_glu(m)))
      continue;
    // The rows so far end on a whole tile; the stack stays within what one launch takes (the tile counters).
    if (rows % 32 != 0 || !takes_rows(rows + mw.shape.ne[1])) continue;
    if (!plan_.owns(u) || !slot_free_between(u, n.id, u)) continue;
    members.push_back(u);
    rows += mw.shape.ne[1];
  }
  if (members.size() < 2) return;
  for (size_t i = 1; i < members.size(); ++i) {
    lowering_.at(size_t(members[i])) = Lowering::InSibling;
    count_fusion(Fusion::SmallBatchStack);
  }
  small_batch_stacks_[n.id] = ::std::move(members);
}

// A later MulMat of the same x and shape on the dequantising GEMM as this one (a layer's v beside its k; of any type
// and layout, each dequantized by its own) joins its launch as the second product of one batched cuBLAS call
// (GemmParams::w2), its output written at this one's step, so no tensor alive in between may share its slot. k and v
// of a prompt are small products (Qwen3-30B-A3B: 512 x 512 x 2048 at 512 tokens) whose few output tiles fill under
// half the GPU one at a time.
void Executor::pair_gemm_siblings(const Node& n) {
  if (!opt_.fuse || lowering(n.id) != Lowering::Own) return;
  const Node& w = g_.node(n.inputs[0]);  // a weight (plan_mul_mat), without a half copy (GemmHalf's route otherwise)
  const auto& wp = ::std::get<graph::WeightParams>(w.params);
  const ProductFacts f{wp.type, wp.role, regrouped(w), false, w.shape.ne[0], w.shape.ne[1], n.shape.rows()};
  if (!gemm_pair_candidate(opt_, f, route(n))) return;
  for (const NodeId u : users_.at(size_t(n.inputs[1]))) {
    if (u <= n.id) continue;
    const Node& m = g_.node(u);
    if (m.op != Op::MulMat || m.inputs.size() < 2 || m.inputs[1] != n.inputs[1] || lowering(u) != Lowering::Own ||
        route(m) != ProductRoute::GemmDequant || m.shape.rows() != n.shape.rows())
      continue;
    const Node& mw = g_.node(m.inputs[0]);
    if (mw.op != Op::Weight || mw.shape.ne[0] != w.shape.ne[0] || mw.shape.ne[1] != w.shape.ne[1]) continue;
    if (!plan_.owns(u) || !slot_free_between(u, n.id, u)) continue;
    lowering_.at(size_t(u)) = Lowering::InSibling;
    gemm_pairs_[n.id] = u;
    count_fusion(Fusion::GemmPair);
    return;
  }
}

// Whether a SwiGlu or GeGlu reads this product (a gate or an up).
bool Executor::feeds_glu(const Node& m) const {
  for (const NodeId u : users_.at(size_t(m.id)))
    if (g_.node(u).op == Op::SwiGlu || g_.node(u).op == Op::GeGlu) return true;
  return false;
}

// True when no tensor other than slot_owner's own that is alive at some step in [from, to] shares its arena bytes;
// `unwritten` are tensors the fused launch computes without storing (nothing there to overwrite either).
bool Executor::slot_free_between(NodeId slot_owner, NodeId from, NodeId to,
                                 ::std::initializer_list<NodeId> unwritten) const {
  const auto o = size_t(slot_owner);
  const int64_t off = plan_.offset.at(o);
  const uint64_t bytes = plan_.bytes.at(o);
  for (size_t j = 0; j < g_.nodes().size(); ++j) {
    // A folded RmsNorm's slot is planned but never written: nothing there to overwrite.
    if (j == o || !plan_.owns(NodeId(j)) || lowering_.at(j) == Lowering::InReaders ||
        lowering_.at(j) == Lowering::InRopeKv || lowering_.at(j) == Lowering::InImages)
      continue;
    if (::std::find(unwritten.begin(), unwritten.end(), NodeId(j)) != unwritten.end()) continue;
    const bool alive = NodeId(j) <= to && plan_.last_use.at(j) >= from;
    if (alive && ranges_overlap(off, bytes, plan_.offset.at(j), plan_.bytes.at(j))) return false;
  }
  return true;
}

// The residual Add that alone reads `producer`, when a launch at the producer's step may write the Add's value
// instead: same element counts, the Add's slot shared by no tensor alive from that step to the Add's (`unwritten`:
// tensors the launch computes without storing), and the other operand already holding its value. kNoNode when not.
NodeId Executor::add_written_at(const Node& producer, ::std::initializer_list<NodeId> unwritten) const {
  if (users_.at(size_t(producer.id)).size() != 1) return graph::kNoNode;
  const Node& a = g_.node(users_.at(size_t(producer.id))[0]);
  if (a.op != Op::Add || a.inputs.size() != 2 || a.inputs[0] == a.inputs[1]) return graph::kNoNode;
  const NodeId other = a.inputs[0] == producer.id ? a.inputs[1] : a.inputs[0];
  if (g_.node(other).shape.elements() != producer.shape.elements() ||
      a.shape.elements() != producer.shape.elements())
    return graph::kNoNode;
  if (!plan_.owns(a.id) || !slot_free_between(a.id, producer.id, a.id, unwritten)) return graph::kNoNode;
  const NodeId r = plan_.root.at(size_t(other));
  if (r > producer.id || (g_.node(r).op != Op::Weight && plan_.last_use.at(size_t(r)) < producer.id))
    return graph::kNoNode;
  return a.id;
}

// The Add that can be the epilogue of matvec m (kNoNode when none).
NodeId Executor::residual_add(const Node& m, const MatvecParams& p) const {
  if (!opt_.fuse || !matvec_fuses(p)) return graph::kNoNode;
  return add_written_at(m, {});
}

void Executor::fold_residual(const Node& m, MatvecParams& p) {
  const NodeId add = residual_add(m, p);
  if (add == graph::kNoNode) return;
  const Node& a = g_.node(add);
  p.residual = f32_in(a, a.inputs[0] == m.id ? 1 : 0);
  p.y = f32_out(a);
  lowering_.at(size_t(add)) = Lowering::Epilogue;
  count_fusion(Fusion::Residual);
}

namespace {

// Whether q's matrix may join p's launch as far as layouts go: a launch's Q6_K matrices are all regrouped or all as
// in GGUF (MatvecParams::q6_kx8 describes the type, not a matrix).
bool same_layouts(const MatvecParams& p, const MatvecParams& q) {
  const auto has = [&](quant::Type t) {
    if (p.type == t) return true;
    for (int i = 0; i < p.n_siblings; ++i)
      if (p.siblings[i].type == t) return true;
    return false;
  };
  return q.type != quant::Type::Q6_K || !has(quant::Type::Q6_K) || q.q6_kx8 == p.q6_kx8;
}

}  // namespace

void Executor::merge_siblings(const Node& n, MatvecParams& p) {
  if (!opt_.fuse || !matvec_fuses(p)) return;
  for (NodeId u : users_.at(size_t(n.inputs[1]))) {
    if (u <= n.id || p.n_siblings == MatvecParams::kMaxSiblings) continue;
    const Node& m = g_.node(u);
    if (m.op != Op::MulMat || m.inputs.size() < 2 || m.inputs[1] != n.inputs[1] || lowering(u) == Lowering::InSibling) continue;
    if (g_.node(m.inputs[0]).op != Op::Weight || m.shape.rows() != 1) continue;
    // A matvec whose only reader is an Add gets that Add as its epilogue instead (fold_residual).
    if (const auto& mu = users_.at(size_t(u)); mu.size() == 1 && g_.node(mu[0]).op == Op::Add) continue;
    const MatvecParams q = matvec_params(m);
    if (q.K != p.K || !same_layouts(p, q) || !plan_.owns(m.id) || !slot_free_between(m.id, n.id, m.id)) continue;
    const MatvecParams before = p;
    p.siblings[p.n_siblings++] = MatvecParams::Sibling{q.w, q.bias, q.y, q.N, q.type};
    p.q6_kx8 = p.q6_kx8 || q.q6_kx8;
    if (!matvec_fuses(p)) {
      p = before;
      continue;
    }
    lowering_.at(size_t(u)) = Lowering::InSibling;
    count_fusion(Fusion::Sibling);
  }
}

// gate and up merged into one launch (one sibling) and read only by one SwiGlu (or GeGlu): the launch writes
// silu(gate) * up (gelu_tanh(gate) * up) into its slot and neither product is stored. That slot is then written at
// this step instead of the SwiGlu's, so no tensor alive in between may share it (checked on the plan).
void Executor::fold_swiglu_epilogue(const Node& m, MatvecParams& p) {
  if (!opt_.fuse || p.n_siblings != 1 || p.residual) return;
  const auto& mu = users_.at(size_t(m.id));
  if (mu.size() != 1) return;
  const Node& sw = g_.node(mu[0]);
  if ((sw.op != Op::SwiGlu && sw.op != Op::GeGlu) || sw.inputs.size() != 2 || sw.shape.rows() != 1 ||
      !plan_.owns(sw.id))
    return;
  const NodeId other = sw.inputs[0] == m.id ? sw.inputs[1] : sw.inputs[0];
  if (other == m.id || f32_out(g_.node(other)) != p.siblings[0].y) return;  // the SwiGlu's other input: the sibling
  if (users_.at(size_t(other)).size() != 1) return;
  if (plan_.last_use.at(size_t(sw.id)) >= int32_t(g_.nodes().size())) return;  // a graph output
  // Neither product is stored, so the SwiGlu's slot may be the gate's (the planner runs it in place).
  if (!slot_free_between(sw.id, m.id, sw.id, {m.id, other})) return;
  MatvecParams q = p;
  q.swiglu_out = f32_out(sw), q.swiglu_gate_is_sibling = sw.inputs[0] == other, q.glu_gelu = sw.op == Op::GeGlu;
  if (!matvec_fuses(q)) return;
  p = q;
  lowering_.at(size_t(sw.id)) = Lowering::Epilogue;
  count_fusion(Fusion::SwiGlu);
}

bool Executor::rope_kv_fusable(const Node& att) const {
  if (!opt_.fuse || att.op != Op::Attention || att.inputs.size() < 4) return false;
  const Node& rq = g_.node(att.inputs[0]);
  const Node& rk = g_.node(att.inputs[1]);
  if (rq.op != Op::Rope || rk.op != Op::Rope || rq.id == rk.id) return false;
  for (const Node* r : {&rq, &rk})
    if (users_.at(size_t(r->id)).size() != 1 || r->inputs.size() < 2 || r->inputs[1] != att.inputs[3]) return false;
  const auto& pq = ::std::get<graph::RopeParams>(rq.params);
  const auto& pk = ::std::get<graph::RopeParams>(rk.params);
  const auto ff = [](const Node& r) { return r.inputs.size() > 2 ? r.inputs[2] : graph::kNoNode; };
  if (pq.mode != pk.mode || pq.n_rot != pk.n_rot || pq.freq_base != pk.freq_base || pq.freq_scale != pk.freq_scale ||
      ff(rq) != ff(rk) || rq.shape.ne[0] != rk.shape.ne[0])
    return false;
  for (NodeId i = ::std::min(rq.id, rk.id) + 1; i < att.id; ++i) {
    const Op op = g_.node(i).op;
    if (i != rq.id && i != rk.id && op != Op::Reshape && op != Op::Weight) return false;
  }
  return true;
}

// The per-head q and k RMS norms right before the ropes of a RopesAndAttend attention (Gemma 3, Qwen 3): its
// rope_kv launch normalises each head itself from the raw q and k (RopeKvParams::q_norm_w), rotating q in place over
// the raw q (the launch reads a head whole before writing it), which the attention then reads; the norms run no
// launch and the q rope's slot is never written. So the raw q and k must still hold their values at the attention's
// step: no tensor written from the norms' steps on may share their bytes (checked on the plan), and nothing but its
// norm may read the raw q. f16 cache only: the quantized rope_kv kernel has no norm. lower_attention finds the norms
// again as its ropes' inputs, lowered InRopeKv.
void Executor::fold_qk_norms(const Node& att) {
  if (!opt_.fuse || !kv_ || kv_->type() != graph::KvType::F16) return;
  const Node& rq = g_.node(att.inputs[0]);
  const Node& rk = g_.node(att.inputs[1]);
  const auto norm_of = [&](const Node& rope) -> NodeId {
    const Node& m = g_.node(rope.inputs[0]);
    if (m.op != Op::RmsNorm || m.inputs.size() < 2 || m.inputs[1] == graph::kNoNode) return graph::kNoNode;
    if (m.shape.ne[0] != rope.shape.ne[0] || users_.at(size_t(m.id)).size() != 1) return graph::kNoNode;
    if (plan_.last_use.at(size_t(m.id)) >= int32_t(g_.nodes().size())) return graph::kNoNode;  // a graph output
    return m.id;
  };
  const NodeId nq = norm_of(rq), nk = norm_of(rk);
  if (nq == graph::kNoNode || nk == graph::kNoNode) return;
  const float eps = ::std::get<graph::RmsNormParams>(g_.node(nq).params).eps;
  if (eps != ::std::get<graph::RmsNormParams>(g_.node(nk).params).eps) return;
  const NodeId q_in = g_.node(nq).inputs[0];
  const NodeId q_src = plan_.root.at(size_t(q_in)), k_src = plan_.root.at(size_t(g_.node(nk).inputs[0]));
  if (q_src == k_src || !plan_.owns(q_src) || !plan_.owns(k_src)) return;
  if (reader_past_views(q_src) != nq) return;  // rotated in place: no other reader may see it change
  if (!raw_heads_kept(att, q_src, k_src)) return;
  // The attention reads q there while it writes its output: the two must not share bytes.
  if (!plan_.owns(att.id) || slots_overlap(att.id, q_src)) return;
  lowering_.at(size_t(nq)) = lowering_.at(size_t(nk)) = Lowering::InRopeKv;
  count_fusion(Fusion::QkNorms);
}

// The q or k norm fold_qk_norms folded into this rope's launch (its input, lowered InRopeKv), or null: then the
// raw head is the rope's input itself (push_attention's launch parameters, raw_heads_intact's plan check).
const Node* Executor::folded_qk_norm(const Node& rope) const {
  const Node& m = g_.node(rope.inputs[0]);
  return lowering(m.id) == Lowering::InRopeKv ? &m : nullptr;
}

// Whether the raw q and k (slots q_src, k_src: the inputs of attention att's ropes, or of the q/k norms before
// them) keep their values from those ropes' inputs to the step before the attention's (whose output is written
// after its launch read them) when the ropes and norms write nothing: no other tensor alive then shares their bytes.
bool Executor::raw_heads_kept(const Node& att, NodeId q_src, NodeId k_src) const {
  const NodeId rq = att.inputs[0], rk = att.inputs[1];
  const NodeId q_in = g_.node(rq).inputs[0], k_in = g_.node(rk).inputs[0];
  for (const NodeId src : {q_src, k_src})
    if (!slot_free_between(src, ::std::min(q_in, k_in), att.id - 1, {q_in, k_in, rq, rk})) return false;
  return true;
}

// Whether the arena slots of owners a and b share a byte.
bool Executor::slots_overlap(NodeId a, NodeId b) const {
  return ranges_overlap(plan_.offset.at(size_t(a)), plan_.bytes.at(size_t(a)), plan_.offset.at(size_t(b)),
                        plan_.bytes.at(size_t(b)));
}

// The node that alone reads `id`, looking through views (kNoNode when there are several readers or none).
NodeId Executor::reader_past_views(NodeId id) const {
  for (;;) {
    const auto& us = users_.at(size_t(id));
    if (us.size() != 1) return graph::kNoNode;
    if (g_.node(us[0]).op != Op::Reshape) return us[0];
    id = us[0];
  }
}

// q/k/v merged into one launch (two siblings) whose products feed only Rope(q), Rope(k) and the Attention's v: the
// launch rotates q into the q Rope's slot and writes rotated k and v into the KV cache (MatvecRopeKv); the Ropes
// and the attention step's cache write are not launched. The q Rope's slot is then written at this step instead of
// its own, so no tensor alive in between may share it (checked on the plan). Only for an f16 cache: a q8_0 or q4_0
// block spans 32 rows of k or v, more than the launch's row groups give one block (the rope_kv launch writes it
// instead).
void Executor::fold_rope_kv_epilogue(const Node& m, MatvecParams& p) {
  if (!opt_.fuse || !kv_ || kv_->type() != graph::KvType::F16) return;
  if (p.n_siblings != 2 || p.residual || p.swiglu_out || m.shape.rows() != 1) return;
  const NodeId rq_id = reader_past_views(m.id);
  if (rq_id == graph::kNoNode || g_.node(rq_id).op != Op::Rope) return;
  const Node& rq = g_.node(rq_id);
  const NodeId att_id = reader_past_views(rq_id);
  if (att_id == graph::kNoNode || !rope_kv_fusable(g_.node(att_id))) return;
  const Node& att = g_.node(att_id);
  const Node& rk = g_.node(att.inputs[1]);
  const NodeId k_mm = plan_.root.at(size_t(rk.inputs[0])), v_mm = plan_.root.at(size_t(att.inputs[2]));
  if (att.inputs[0] != rq_id || reader_past_views(k_mm) != rk.id || reader_past_views(v_mm) != att_id) return;
  // The siblings must be exactly the k and v products, k first.
  const float* ky = f32_out(g_.node(k_mm));
  const float* vy = f32_out(g_.node(v_mm));
  MatvecParams q = p;
  if (q.siblings[0].y == vy) ::std::swap(q.siblings[0], q.siblings[1]);
  if (q.siblings[0].y != ky || q.siblings[1].y != vy) return;
  const RopeKernelParams rp = rope_params(rq);
  const auto& ap = ::std::get<graph::AttentionParams>(att.params);
  if (rp.mode != graph::RopeMode::Normal || rp.T != 1 || rp.head_dim != ap.head_dim || !attention_matches_kv(att))
    return;  // one token: a paged graph's epilogue maps its one position through that token's block-table row
  if (!opt_.scaled_rope_epilogue && !::std::get<graph::RopeParams>(rq.params).plain()) return;
  if (!plan_.owns(rq_id) || !slot_free_between(rq_id, m.id, rq_id)) return;
  q.rope_kv = MatvecRopeKv{rp.out,
                           static_cast<uint16_t*>(kv_->k(ap.layer)),
                           static_cast<uint16_t*>(kv_->v(ap.layer)),
                           rp.positions,  // the attention's (rope_kv_fusable)
                           rope_powers(rp.freq_base, rp.n_rot),
                           rp.freq_factors,
                           rp.freq_scale,
                           rp.n_rot,
                           int32_t(ap.head_dim),
                           int32_t(ap.head_dim_v),
                           kv_->spec().n_ctx,
                           paging_of(att),
                           rp.ext_factor,
                           rp.corr_low,
                           rp.corr_high,
                           rp.attn_factor};
  if (!matvec_fuses(q)) return;
  p = q;
  lowering_.at(size_t(att_id)) = Lowering::AttendOnly;
  count_fusion(Fusion::RopeKvEpilogue);
}

// base^(-2i/n_rot) in device memory for the q/k/v epilogue; allocated while planning (at construction).
const double* Executor::rope_powers(float freq_base, int32_t n_rot) {
  const auto key = ::std::make_pair(freq_base, n_rot);
  auto it = rope_powers_.find(key);
  if (it == rope_powers_.end()) {
    const ::std::vector<double> v = rope_base_powers(freq_base, n_rot);
    DeviceBuffer b(::std::max<size_t>(v.size(), 1) * sizeof(double));
    CUDA_CHECK(cudaMemcpy(b.get(), v.data(), v.size() * sizeof(double), cudaMemcpyHostToDevice));
    it = rope_powers_.emplace(key, ::std::move(b)).first;
  }
  return it->second.as<double>();
}

size_t Executor::n_fused() const {
  size_t n = 0;
  for (size_t c : fused_count_) n += c;
  return n;
}

// ": 65 RMS norms, 64 residual adds, ..." for the kinds that occurred (the -v capture note).
::std::string Executor::fusion_summary() const {
  static const char* const kNames[] = {"RMS norms into matvecs", "residual adds", "sibling matvecs",
                                       "SwiGLUs into gate/up", "SwiGLUs into small-batch up products",
                                       "rope pairs + KV write into attention",
                                       "rope pairs + KV write into q/k/v", "o projections with their attention",
                                       "residual adds into RMS norms", "residual adds before RMS norms",
                                       "q/k norms into rope + KV write",
                                       "mixture routings into one launch", "expert gate/up pairs with activation",
                                       "expert downs with weighted sum", "small-batch products stacked",
                                       "mixture routings into the expert launches",
                                       "q/k norms, rope + KV write into one-token attention",
                                       "SwiGLUs into wgmma x images",
                                       "feed-forward norms into a mixture's router",
                                       "expert gate/up activations into the later product (prefill)",
                                       "RMS norms into i8 x images", "prompt products paired on cuBLAS"};
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == size_t(Fusion::kCount));
  ::std::string s;
  for (size_t k = 0; k < size_t(Fusion::kCount); ++k)
    if (fused_count_[k]) s += (s.empty() ? ": " : ", ") + ::std::to_string(fused_count_[k]) + " " + kNames[k];
  return s;
}

// The o MulMat and residual Add that one attention + o launch computes with this attention (attention_o.cuh), when
// the session regrouped o by columns: one decode token, a supported head shape, o read by nothing else and added to
// a residual that is alive then, the sum read only as reads_fixed_point_ok allows. Otherwise both kNoNode.
Executor::AttentionO Executor::attention_o_of(const Node& att) const {
  if (!opt_.fuse || !kv_ || att.op != Op::Attention || att.shape.rows() != 1) return {};
  if (g_.kv.paged()) return {};  // the launch attends slots [0, position] of one sequence
  const auto& ap = ::std::get<graph::AttentionParams>(att.params);
  if (!attention_o_fits(ap.n_head, ap.n_head_kv, ap.head_dim, ap.head_dim_v)) return {};
  if (ap.window > 0) return {};  // the launch attends every slot up to the position
  if (ap.sinks) return {};       // and has no sink in its softmax
  const auto& au = users_.at(size_t(att.id));
  if (au.size() != 1) return {};
  const Node& m = g_.node(au[0]);
  if (m.op != Op::MulMat || m.inputs.size() < 2 || m.inputs[1] != att.id) return {};
  if (m.inputs.size() > 2 && m.inputs[2] != graph::kNoNode) return {};  // no bias in the launch
  const Node& w = g_.node(m.inputs[0]);
  const int64_t D = int64_t(ap.n_head) * ap.head_dim;
  if (!q4_0_cols(w) || w.shape.ne[0] != D || w.shape.ne[1] != D) return {};
  const auto& mu = users_.at(size_t(m.id));
  if (mu.size() != 1) return {};
  const Node& a = g_.node(mu[0]);
  if (a.op != Op::Add || a.inputs.size() != 2 || a.inputs[0] == a.inputs[1] || a.shape.elements() != D) return {};
  const NodeId other = a.inputs[0] == m.id ? a.inputs[1] : a.inputs[0];
  if (g_.node(other).shape.elements() != D || !plan_.owns(a.id)) return {};
  const NodeId r = plan_.root.at(size_t(other));  // the residual: produced before the launch, alive through it
  if (r > m.id || (g_.node(r).op != Op::Weight && plan_.last_use.at(size_t(r)) < m.id)) return {};
  if (!reads_fixed_point_ok(a)) return {};
  return {m.id, a.id};
}

// The readers of a fixed-point Add: one RmsNorm folded into Q4_0 matvecs that can read x in fixed point (the first
// writes the Add's float slot), and Adds after all of them that read that slot. Not a graph output.
bool Executor::reads_fixed_point_ok(const Node& add) const {
  if (plan_.last_use.at(size_t(add.id)) >= int32_t(g_.nodes().size())) return false;
  const Node* norm = nullptr;
  for (NodeId u : users_.at(size_t(add.id)))
    if (g_.node(u).op == Op::RmsNorm && !norm) norm = &g_.node(u);
  if (!norm || norm->inputs[0] != add.id || !norm_foldable(*norm)) return false;
  NodeId last = norm->id;
  for (NodeId u : users_.at(size_t(norm->id))) {
    const Node& m = g_.node(u);
    const Node& w = g_.node(m.inputs[0]);
    if (::std::get<graph::WeightParams>(w.params).type != quant::Type::Q4_0 || regrouped(w)) return false;
    MatvecParams p = matvec_params(m);
    p.x = nullptr, p.x_fixed = reinterpret_cast<const long long*>(f32_in(*norm, 0)), p.norm_w = f32_in(*norm, 1);
    if (!matvec_fuses(p)) return false;
    last = ::std::max(last, u);
  }
  for (NodeId u : users_.at(size_t(add.id)))
    if (u != norm->id && (g_.node(u).op != Op::Add || u <= last)) return false;
  return true;
}

// The residual Add of an attention + o launch lives in its fixed-point accumulator; its float slot is written by the
// first matvec that reads the accumulator (read_fixed_point_x).
void Executor::plan_attention_o(const AttentionO& f) {
  fixed_acc_.at(size_t(f.add)) = fixed_accs_.as<unsigned long long>() + f.acc * size_t(fixed_d_);
  lowering_.at(size_t(f.add)) = Lowering::Epilogue;
  count_fusion(Fusion::AttentionO);
}

// The o MulMat f.mulmat of an attention + o launch: one step, attending itself in the short graph where the q/k/v
// launch wrote the token's K/V into an f16 cache (attends_in_o), else taking the attention step's output.
void Executor::lower_attention_o(const Node& m, const AttentionO& f) {
  const Node& att = g_.node(m.inputs[1]);
  const Node& add = g_.node(f.add);
  const auto& ap = ::std::get<graph::AttentionParams>(att.params);
  const size_t n_acc = attention_o_plan_.size();
  LLM_REQUIRE(f.acc < n_acc && int64_t(ap.n_head) * ap.head_dim == fixed_d_, "attention_o: accumulators");
  unsigned long long* acc = fixed_acc_.at(size_t(f.add));
  AttentionOParams p;
  p.attn = f32_in(m, 1), p.o = weight_ptr(g_.node(m.inputs[0]));
  p.residual = f32_in(add, add.inputs[0] == m.id ? 1 : 0), p.acc = acc;
  // The accumulator of the next such launch (of the first, for the last one: the next token's) is zeroed here;
  // with only one, a memset before the launch does it.
  if (n_acc > 1) p.zero_next = fixed_accs_.as<unsigned long long>() + (f.acc + 1) % n_acc * size_t(fixed_d_);
  p.scale = ap.scale, p.n_ctx = kv_->spec().n_ctx, p.n_head = ap.n_head, p.n_head_kv = ap.n_head_kv;
  AttentionOParams attend = p;
  if (attends_in_o(att)) {
    attend.attn = nullptr, attend.q = f32_in(att, 0);
    attend.k_cache = static_cast<const uint16_t*>(kv_->k(ap.layer));
    attend.v_cache = static_cast<const uint16_t*>(kv_->v(ap.layer));
    attend.position = static_cast<const int32_t*>(device_ptr(att.inputs[3]));
  }
  const size_t acc_bytes = size_t(fixed_d_) * 8;
  steps_.push_back([p, attend, acc_bytes, this](cudaStream_t s) {
    if (!p.zero_next) CUDA_CHECK(cudaMemsetAsync(p.acc, 0, acc_bytes, s));
    launch_attention_o(short_now_ ? attend : p, s);
  });
}

// Whether the attention + o launch of this attention attends itself in the short graph: the q/k/v launch wrote the
// token's K/V (AttendOnly, decided when that launch was planned) into an f16 cache.
bool Executor::attends_in_o(const Node& att) const {
  return attention_o_plan_.contains(att.id) && lowering(att.id) == Lowering::AttendOnly &&
         kv_->spec().type == graph::KvType::F16;
}

// A matvec whose folded norm reads a fixed-point Add takes x from its accumulator and writes the Add's float slot.
void Executor::read_fixed_point_x(const Node& m, MatvecParams& p) const {
  if (!p.norm_w || m.inputs.size() < 2) return;
  const Node& norm = g_.node(m.inputs[1]);
  if (norm.op != Op::RmsNorm || lowering(norm.id) != Lowering::InReaders) return;
  unsigned long long* acc = fixed_acc_.at(size_t(norm.inputs[0]));
  if (!acc) return;
  p.x_fixed = reinterpret_cast<const long long*>(acc), p.x_copy = const_cast<float*>(p.x), p.x = nullptr;
  if (!matvec_fuses(p))
    throw InvalidArgument("node '" + m.name + "': cannot read its input from the fixed-point residual stream");
}

}  // namespace cuda
