// Lowering of graph nodes to pre-bound steps, and capture / replay (cuda/executor.h). One flat switch over the ops;
// each case fills one kernel's params struct from the node and the plan and stores a launcher closure.
#include "cuda/executor.h"

#include <algorithm>
#include <cstring>

#include "cuda/capabilities.h"
#include "cuda/kernels/attention.cuh"
#include "cuda/kernels/attention_o.cuh"
#include "cuda/kernels/attention_prefill.cuh"
#include "cuda/kernels/batch_mm_wgmma.cuh"
#include "cuda/kernels/elementwise.cuh"
#include "cuda/kernels/gemm.cuh"
#include "cuda/kernels/get_rows.cuh"
#include "cuda/kernels/matvec.cuh"
#include "cuda/kernels/norm.cuh"
#include "cuda/kernels/rope.cuh"
#include "cuda/kernels/softmax.cuh"
#include "cuda/paged_batch.h"
#include "cuda/work_buffers.h"

namespace cuda {

using graph::Node;
using graph::NodeId;
using graph::Op;

// ---- KvCache ----

namespace {

size_t align256(size_t n) { return (n + 255) / 256 * 256; }

// A quantized cache (q8_0, q4_0) holds the GGUF blocks of that name split in two arrays: the quants in the f16
// layout (each slot's quant bytes contiguous: q8_0 one int8 per value; q4_0 a block's 16 nibble bytes, element j
// in the low nibble of byte j and j + 16 in its high nibble, as in GGUF), the binary16 scales beside them. Per
// value: the f16 cache's 2 bytes, or the block's bytes over its values (q8_0 34 / 32, q4_0 18 / 32).
constexpr size_t kScaleBytes = 2;  // a block's binary16 scale

// The GGUF block a quantized cache stores; null for f16.
const quant::Traits* kv_block(graph::KvType t) {
  return graph::kv_quantized(t) ? &quant::traits(graph::kv_block_type(t)) : nullptr;
}

// Bytes of the quants (f16: the values) of one slot's head of hd values.
size_t slot_value_bytes(graph::KvType t, int64_t hd) {
  const quant::Traits* b = kv_block(t);
  return b ? size_t(hd / b->block_elems) * (b->block_bytes - kScaleBytes) : size_t(hd) * 2;
}

void check_kv_spec(const graph::KvCacheSpec& s) {
  LLM_REQUIRE(s.n_layer > 0 && s.n_ctx > 0 && s.n_head_kv > 0 && s.head_dim_k > 0 && s.head_dim_v > 0,
              "empty KV cache spec");
  LLM_REQUIRE(graph::kv_head_dims_fit(s.type, s.head_dim_k, s.head_dim_v),
              ::std::string("a ") + graph::kv_type_name(s.type) + " KV cache needs head dims that are whole "
                  "blocks of " + ::std::to_string(graph::kv_block_values(s.type)));
}

}  // namespace

KvCache::LayerLayout KvCache::layout(const graph::KvCacheSpec& s) {
  const size_t slots = size_t(s.n_ctx) * size_t(s.n_head_kv);
  const quant::Traits* b = kv_block(s.type);
  LayerLayout l;
  l.k = 0;
  l.v = align256(slots * slot_value_bytes(s.type, s.head_dim_k));
  l.k_scales = l.v + align256(slots * slot_value_bytes(s.type, s.head_dim_v));
  l.v_scales = l.k_scales + (b ? align256(slots * size_t(s.head_dim_k / b->block_elems) * kScaleBytes) : 0);
  l.bytes = l.v_scales + (b ? align256(slots * size_t(s.head_dim_v / b->block_elems) * kScaleBytes) : 0);
  return l;
}

size_t KvCache::bytes_for(const graph::KvCacheSpec& spec) {
  check_kv_spec(spec);
  return size_t(spec.n_layer) * layout(spec).bytes;
}

double KvCache::bytes_per_slot(const graph::KvCacheSpec& s) {
  const double values = double(s.n_layer) * s.n_head_kv * (s.head_dim_k + s.head_dim_v);
  const quant::Traits* b = kv_block(s.type);
  return b ? values * double(b->block_bytes) / double(b->block_elems) : values * 2.0;
}

KvCache::KvCache(const graph::KvCacheSpec& spec) : spec_(spec), layout_(layout(spec)), buffer_(bytes_for(spec)) {
  CUDA_CHECK(cudaMemset(buffer_.get(), 0, buffer_.bytes()));
}
uint8_t* KvCache::layer_base(int32_t layer) const { return buffer_.as<uint8_t>() + size_t(layer) * layout_.bytes; }
void* KvCache::k(int32_t layer) const { return layer_base(layer) + layout_.k; }
void* KvCache::v(int32_t layer) const { return layer_base(layer) + layout_.v; }
uint16_t* KvCache::k_scales(int32_t layer) const {
  return kv_block(spec_.type) ? reinterpret_cast<uint16_t*>(layer_base(layer) + layout_.k_scales) : nullptr;
}
uint16_t* KvCache::v_scales(int32_t layer) const {
  return kv_block(spec_.type) ? reinterpret_cast<uint16_t*>(layer_base(layer) + layout_.v_scales) : nullptr;
}
void KvCache::clear(cudaStream_t stream) const { CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, buffer_.bytes(), stream)); }

// ---- Executor ----

::std::string Executor::describe(const Node& n) {
  return "node " + ::std::to_string(n.id) + " '" + n.name + "' (" + graph::op_name(n.op) + ")";
}

Executor::Executor(const Context& ctx, const graph::Graph& g, const graph::Plan& plan, const uint8_t* weights,
                   KvCache* kv, ExecutorOptions options)
    : ctx_(ctx), g_(g), plan_(plan), weights_(weights), kv_(kv), opt_(options) {
  LLM_REQUIRE(plan.covers(g), "the plan was made for another graph");
  if (g.kv.paged() && !paged_block_size_supported(g.kv.block_size)) throw InvalidArgument(graph_refusal(g));
  // Sizes from the same function the sessions' memory checks use (cuda/work_buffers.h), allocated once here.
  const WorkBuffers sizes = work_buffers(g, plan, ctx.sm_count(), opt_);
  if (opt_.cuda_graph && opt_.lab_pad_bytes) lab_pad_ = DeviceBuffer(opt_.lab_pad_bytes);  // before every buffer
  arena_ = DeviceBuffer(sizes.arena);
  paged_tiles_ = DeviceBuffer(sizes.paged_tiles);
  // The blocks write_inputs checks a token reaches: from its position minus the widest window, or (a layer that
  // attends every position) from position 0.
  bool attends_all = false;
  for (const Node& n : g.nodes())
    if (n.op == Op::Attention) {
      const int32_t w = ::std::get<graph::AttentionParams>(n.params).window;
      attends_all = attends_all || w == 0, paged_reach_ = ::std::max(paged_reach_, w);
    }
  if (attends_all) paged_reach_ = 0;
  gemm_scratch_ = DeviceBuffer(sizes.gemm_scratch);
  dequant_ahead_ = DequantAhead(opt_, sizes.dequant_ring);
  attn_scratch_ = DeviceBuffer(sizes.attn_scratch);
  moe_scratch_ = DeviceBuffer(sizes.moe_scratch);
  if (attn_scratch_.bytes()) CUDA_CHECK(cudaMemset(attn_scratch_.get(), 0, attn_scratch_.bytes()));  // counters
  batch_mm_counters_ = DeviceBuffer(sizes.batch_mm_counters);
  if (batch_mm_counters_.bytes()) CUDA_CHECK(cudaMemset(batch_mm_counters_.get(), 0, batch_mm_counters_.bytes()));
  input_staging_ = PinnedBuffer(::std::max<size_t>(sizes.staging, 4));
  users_.resize(g.nodes().size());
  for (const Node& n : g.nodes())
    for (NodeId i : n.inputs)
      if (i != graph::kNoNode && (users_[size_t(i)].empty() || users_[size_t(i)].back() != n.id))
        users_[size_t(i)].push_back(n.id);
  plan_fusions();  // every fusion decided before the first step is built (executor_fusion.cpp)
  const auto omitted = [&](const ::std::string& name) {  // "blk.3.ffn_down" is one of "ffn_down"
    for (const ::std::string& s : opt_.omit_steps_of)
      if (!s.empty() && name.ends_with(s) && (name.size() == s.size() || name[name.size() - s.size() - 1] == '.'))
        return true;
    return false;
  };
  for (const Node& n : g.nodes()) {
    const size_t before = steps_.size();
    lower(n);
    if (omitted(n.name)) {
      steps_.resize(before);
      dequant_ahead_.drop_from(before);
      moe_scratch_holds_ = {};  // an omitted product leaves no grouping for the next to reuse
    }
  }
  dequant_ahead_.attach(steps_);  // before the input copies go in front: the steps' indices as lowered
  // The Input nodes' values: one kernel reading the page-locked staging (write_inputs), first of every run; a
  // block table, which can be long, by its own copy (the kernel reads host memory a few bytes per thread), or with
  // paged_host_io in that kernel over up to 64 blocks, only the rows the run's tokens use (table_count_).
  const auto* st = static_cast<const int32_t*>(device_address_of_pinned(input_staging_.get()));
  ::std::vector<Step> table_copies;
  for (const auto& [id, kind] : inputs_) {
    const auto n = int32_t(g_.node(id).shape.elements());
    if (kind == graph::InputParams::Kind::BlockTable && opt_.paged_host_io) {
      table_count_ = PinnedBuffer(4);
      *table_count_.as<int32_t>() = n;
      add_host_input(st, device_ptr(id), n, static_cast<const int32_t*>(device_address_of_pinned(table_count_.get())));
      host_inputs_.c[host_inputs_.n - 1].blocks = ::std::clamp((n + 255) / 256, 1, 64);
      input_copy_.push_back(host_inputs_.n - 1);
    } else if (kind == graph::InputParams::Kind::BlockTable) {
      void* dst = device_ptr(id);
      table_copies.push_back([dst, st, n](cudaStream_t s) {
        CUDA_CHECK(cudaMemcpyAsync(dst, st, size_t(n) * 4, cudaMemcpyDefault, s));
      });
      input_copy_.push_back(-1);
    } else {
      add_host_input(st, device_ptr(id), n);
      input_copy_.push_back(host_inputs_.n - 1);
    }
    st += n;
  }
  if (paged_tiles_.bytes()) add_host_input(st, paged_tiles_.get(), int32_t(paged_tiles_.bytes() / 4));
  steps_.insert(steps_.begin(), [this](cudaStream_t s) {
    launch_copy_from_host(host_inputs_, s);
    // staging_event: the staging is free again once this kernel (and the table's copy before it) ran; an event
    // node in a captured graph (cudaEventRecordExternal).
    if (opt_.staging_event) {
      cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
      CUDA_CHECK(cudaStreamIsCapturing(s, &capturing));
      CUDA_CHECK(cudaEventRecordWithFlags(inputs_read_.get(), s,
                                          capturing == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : 0));
    }
  });
  steps_.insert(steps_.begin(), table_copies.begin(), table_copies.end());
}

bool Executor::regrouped(const Node& w) const {
  return w.op == Op::Weight && regrouped_at_upload(opt_, ::std::get<graph::WeightParams>(w.params));
}

bool Executor::q4_0_cols(const Node& w) const {
  return regrouped(w) && ::std::get<graph::WeightParams>(w.params).type == quant::Type::Q4_0;
}

// The launch product_route chooses for a MulMat of a weight, from the weight's layout and copy as uploaded.
ProductRoute Executor::route(const Node& n) const {
  const Node& w = g_.node(n.inputs.at(0));
  if (w.op != Op::Weight) return ProductRoute::Matvec;  // not one of lower_gemm's launches (plan_mul_mat refuses it)
  const auto& wp = ::std::get<graph::WeightParams>(w.params);
  return product_route(opt_, ProductFacts{wp.type, wp.role, regrouped(w), half_copy(w) != nullptr, w.shape.ne[0],
                                          w.shape.ne[1], n.shape.rows()});
}

const void* Executor::weight_ptr(const Node& w) const {
  const auto& p = ::std::get<graph::WeightParams>(w.params);
  return weights_ + p.arena_offset;
}

const uint16_t* Executor::half_copy(const Node& w) const {
  if (!opt_.half_weights || w.op != Op::Weight) return nullptr;
  return opt_.half_weights->rows(::std::get<graph::WeightParams>(w.params), w.shape.ne[0]);
}

// F32 data of input i of n: an activation in the arena, or an F32 weight (norm weights, biases, rope factors).
const float* Executor::f32_in(const Node& n, size_t i) const {
  const Node& in = g_.node(n.inputs.at(i));
  if (in.op == Op::Weight) {
    const auto& p = ::std::get<graph::WeightParams>(in.params);
    if (p.type != quant::Type::F32)
      throw InvalidArgument(describe(n) + ": input " + describe(in) + " must be an F32 weight, it is " +
                            quant::type_name(p.type));
    return static_cast<const float*>(weight_ptr(in));
  }
  if (in.dtype != graph::DType::F32) throw InvalidArgument(describe(n) + ": input " + describe(in) + " is not F32");
  return static_cast<const float*>(device_ptr(in.id));
}

// The rope kernel's parameters for a Rope node, as planned.
RopeKernelParams Executor::rope_params(const Node& n) const {
  const auto& rp = ::std::get<graph::RopeParams>(n.params);
  RopeKernelParams p;
  p.x = f32_in(n, 0), p.out = f32_out(n);
  p.positions = static_cast<const int32_t*>(device_ptr(n.inputs[1]));
  p.freq_factors = n.inputs.size() > 2 && n.inputs[2] != graph::kNoNode ? f32_in(n, 2) : nullptr;
  p.head_dim = n.shape.ne[0], p.n_head = n.shape.ne[1], p.T = n.shape.ne[2];
  p.n_rot = rp.n_rot, p.mode = rp.mode, p.freq_base = rp.freq_base, p.freq_scale = rp.freq_scale;
  // q and k reordered at upload (ExecutorOptions::rope_pairs_adjacent): NeoX's pairs are neighbours now.
  if (opt_.rope_pairs_adjacent && p.mode == graph::RopeMode::Neox) p.mode = graph::RopeMode::Normal;
  p.ext_factor = rp.ext_factor, p.corr_low = rp.corr_low, p.corr_high = rp.corr_high, p.attn_factor = rp.attn_factor;
  return p;
}

// True when an Attention node's layer and head shapes are those of the KV cache it will read.
bool Executor::attention_matches_kv(const Node& att) const {
  if (!kv_) return false;
  const auto& ap = ::std::get<graph::AttentionParams>(att.params);
  const auto& spec = kv_->spec();
  return ap.layer >= 0 && ap.layer < spec.n_layer && ap.n_head_kv == spec.n_head_kv &&
         ap.head_dim == spec.head_dim_k && ap.head_dim_v == spec.head_dim_v && spec.n_ctx == g_.kv.n_ctx &&
         spec.type == g_.kv.type;
}

float* Executor::f32_out(const Node& n) const {
  if (n.dtype != graph::DType::F32) throw InvalidArgument(describe(n) + ": output is not F32");
  return static_cast<float*>(device_ptr(n.id));
}

void* Executor::device_ptr(NodeId id) const {
  const Node& n = g_.node(id);
  if (n.op == Op::Weight) return const_cast<void*>(weight_ptr(n));
  const NodeId root = plan_.root.at(size_t(id));
  if (g_.node(root).op == Op::Weight) return const_cast<void*>(weight_ptr(g_.node(root)));
  const int64_t off = plan_.offset.at(size_t(id));
  if (off < 0) throw InvalidArgument(describe(n) + " has no arena slot");
  return arena_.as<uint8_t>() + off;
}

// One line per op: the plan (plan_fusions) already said which nodes run inside another node's launch.
void Executor::lower(const Node& n) {
  switch (n.op) {
    case Op::Input: inputs_.emplace_back(n.id, ::std::get<graph::InputParams>(n.params).kind); return;
    case Op::Weight:
    case Op::Reshape: return;  // a view: the plan gives it its source's storage
    case Op::GetRows: lower_get_rows(n); return;
    case Op::RmsNorm: lower_rms_norm(n); return;
    case Op::MulMat: lower_mul_mat(n); return;
    case Op::Add:
    case Op::Mul: lower_binary(n); return;
    case Op::Silu: lower_unary(n); return;
    case Op::SwiGlu: lower_swiglu(n); return;
    case Op::GeGlu: lower_geglu(n); return;
    case Op::Scale:
    case Op::Softcap: lower_unary(n); return;
    case Op::Slice: lower_slice(n); return;
    case Op::Rope: lower_rope(n); return;
    case Op::Attention: lower_attention(n); return;
    case Op::Softmax: lower_softmax(n); return;
    case Op::LastToken: lower_last_token(n); return;
    case Op::Gather: lower_gather(n); return;
    case Op::Argmax: lower_argmax(n); return;
    case Op::TopK: lower_top_k(n); return;
    case Op::MoeWeights: lower_moe_weights(n); return;
    case Op::MulMatId: lower_mul_mat_id(n); return;
    case Op::SwiGluOai: lower_swiglu_oai(n); return;
    case Op::WeightedSum: lower_weighted_sum(n); return;
  }
  throw InvalidArgument(describe(n) + ": op " + ::std::to_string(int(n.op)) + " has no CUDA lowering");
}

void Executor::lower_get_rows(const Node& n) {
  const Node& table = g_.node(n.inputs[0]);
  GetRowsParams p;
  if (table.op == Op::Weight) {
    if (regrouped(table)) throw InvalidArgument(describe(n) + ": its table was regrouped at upload as a matrix");
    p.table = weight_ptr(table), p.type = ::std::get<graph::WeightParams>(table.params).type;
  } else {
    p.table = f32_in(n, 0), p.type = quant::Type::F32;
  }
  p.ids = static_cast<const int32_t*>(device_ptr(n.inputs[1]));
  p.out = f32_out(n), p.K = table.shape.ne[0], p.n_rows = table.shape.rows(), p.T = n.shape.ne[1];
  steps_.push_back([p](cudaStream_t s) { launch_get_rows(p, s); });
}

void Executor::lower_rms_norm(const Node& n) {
  const Lowering how = lowering(n.id);
  if (how == Lowering::InReaders || how == Lowering::InRopeKv || how == Lowering::InImages)
    return;  // computed in its readers' launches
  RmsNormParams p{f32_in(n, 0), n.inputs.size() > 1 && n.inputs[1] != graph::kNoNode ? f32_in(n, 1) : nullptr,
                  f32_out(n), n.shape.ne[0], n.shape.rows(), ::std::get<graph::RmsNormParams>(n.params).eps};
  if (how == Lowering::AddsResidual) {  // fold_norm_add: its one reader, the residual Add's value, instead
    const Node& a = g_.node(users_.at(size_t(n.id))[0]);
    p.residual = f32_in(a, a.inputs[0] == n.id ? 1 : 0), p.out = f32_out(a);
  }
  if (const Node& a = g_.node(n.inputs[0]); lowering(a.id) == Lowering::InNorm)  // fold_add_norm: the Add first
    p.x = f32_in(a, 0), p.add = f32_in(a, 1), p.sum = f32_out(a);
  if (p.out == f32_out(n)) p.half_out = half_x_for(n);
  const bool programmatic = opt_.programmatic_norms && p.rows > 1;
  steps_.push_back([p, programmatic](cudaStream_t s) { launch_rms_norm(p, s, programmatic); });
  if (p.half_out) last_gemm_ = {steps_.size(), p.out, p.ne0, p.rows};
}

void Executor::lower_mul_mat(const Node& n) {
  switch (lowering(n.id)) {
    case Lowering::InSibling: return;  // computed with an earlier matrix that reads the same x
    case Lowering::AttentionO: lower_attention_o(n, attention_o_plan_.at(n.inputs[1])); return;
    case Lowering::RouterParts: {  // the routing launch adds the partial products (executor_moe.cpp)
      const RouterPartsParams p = router_parts_.at(n.id);
      steps_.push_back([p](cudaStream_t s) { launch_router_parts(p, s); });
      return;
    }
    default: break;
  }
  if (const auto it = matvecs_.find(n.id); it != matvecs_.end()) {
    const MatvecParams p = it->second;
    steps_.push_back([p](cudaStream_t s) { launch_matvec(p, s); });
    return;
  }
  lower_gemm(n);
}

// A product of many tokens reading this node right after it takes x as half from the GEMM scratch: the node's launch
// (a norm, a SwiGLU) writes it there beside its float output, and the product's launch finds it (last_gemm_, set by
// the caller once the step is pushed) instead of converting x itself. Null where no such product follows.
void* Executor::half_x_for(const Node& n) const {
  const auto& us = users_.at(size_t(n.id));
  if (!opt_.fuse || n.shape.rows() <= 1 || us.empty() || !product_converts_x(g_.node(us.front()))) return nullptr;
  if (size_t(n.shape.elements()) * 2 > gemm_scratch_.bytes()) return nullptr;
  return gemm_scratch_.get();
}

// Whether lower_gemm's launch for this MulMat reads x as float (the few-column kernel, the small-batch fragment
// kernel at up to 8 tokens, the wgmma kernels, which write their own image of x) rather than as half from the GEMM
// scratch, which it converts first unless the step before left it there.
bool Executor::gemm_reads_float_x(const Node& m) const {
  const ProductRoute r = route(m);
  if (r == ProductRoute::FewColumns || r == ProductRoute::PromptWgmma) return true;
  const Node& w = g_.node(m.inputs[0]);
  const auto type = ::std::get<graph::WeightParams>(w.params).type;
  return r == ProductRoute::SmallBatch &&
         batch_mm_reads_float_x(type, regrouped(w), w.shape.ne[0], launch_rows(m), m.shape.rows(), opt_.batch_mm);
}

// The rows of this MulMat's launch: its matrix's, and those of the matrices stacked after it (stack_small_batch).
int64_t Executor::launch_rows(const Node& m) const {
  int64_t rows = g_.node(m.inputs[0]).shape.ne[1];
  if (const auto st = small_batch_stacks_.find(m.id); st != small_batch_stacks_.end())
    for (size_t i = 1; i < st->second.size(); ++i) rows += g_.node(g_.node(st->second[i]).inputs[0]).shape.ne[1];
  return rows;
}

// Whether this MulMat's launch is lower_gemm's, converting its x to half (gemm_reads_float_x false).
bool Executor::product_converts_x(const Node& m) const {
  if (m.op != Op::MulMat || m.inputs.size() < 2 || lowering(m.id) != Lowering::Own || matvecs_.contains(m.id) ||
      router_parts_.contains(m.id) || g_.node(m.inputs[0]).op != Op::Weight)
    return false;
  return m.shape.rows() > 1 && !gemm_reads_float_x(m);
}

void Executor::lower_gemm(const Node& n) {
  const Node& w = g_.node(n.inputs[0]);
  if (w.op != Op::Weight) throw InvalidArgument(describe(n) + ": the matrix must be a weight");
  const quant::Type type = ::std::get<graph::WeightParams>(w.params).type;
  const int64_t K = w.shape.ne[0], N = w.shape.ne[1], T = n.shape.rows();
  const float* bias = product_bias(n);
  GemmParams p{weight_ptr(w), type, f32_in(n, 1), bias, f32_out(n), K, N, T, gemm_scratch_.get(), gemm_scratch_.bytes()};
  p.regrouped = regrouped(w);
  // A product right after another of the same x (no step between, so x and the scratch's f16 copy of it are
  // unchanged) reuses that copy: q/k/v and gate/up convert their input once. Both kernels keep it at the scratch's
  // start in the same layout, so either may follow the other. A small-batch or few-column launch that reads x as
  // float neither writes nor reads the copy: it passes on what the launch before it left.
  p.x_in_scratch = last_gemm_.step == steps_.size() && last_gemm_.x == p.x && last_gemm_.K == K && last_gemm_.T == T;
  const ProductRoute by = route(n);  // one of them: the few-column, small-batch or prompt kernel, or cuBLAS
  const bool few_cols = by == ProductRoute::FewColumns, small_batch = by == ProductRoute::SmallBatch;
  const bool prompt = by == ProductRoute::PromptWgmma;
  const bool reads_float_x = gemm_reads_float_x(n);
  if (!reads_float_x) last_gemm_ = {steps_.size() + 1, p.x, K, T};
  else if (p.x_in_scratch) last_gemm_.step = steps_.size() + 1;
  else last_gemm_ = {};
  // fold_glu_into_up: this launch writes the activation of the gate's product and its own into the SwiGlu's slot.
  const auto it = glu_epilogues_.find(n.id);
  GluEpilogue glu;
  if (it != glu_epilogues_.end()) glu = {f32_out(g_.node(it->second.gate)), it->second.gelu};
  float* y = glu.gate ? f32_out(g_.node(it->second.glu)) : p.y;
  ProductStack stack;  // stack_small_batch: the later matrices of the same x in this launch
  if (const auto st = small_batch_stacks_.find(n.id); st != small_batch_stacks_.end()) {
    for (const graph::NodeId id : st->second) {
      const Node& m = g_.node(id);
      const Node& mw = g_.node(m.inputs[0]);
      stack.w[stack.n] = weight_ptr(mw), stack.y[stack.n] = f32_out(m), stack.N[stack.n] = mw.shape.ne[1];
      stack.bias[stack.n++] = product_bias(m);
    }
  }
  const int64_t rows = launch_rows(n);  // the stack's in all
  if (few_cols) {
    MatvecColsParams c{p.w, type, p.x, bias, y, K, rows, T, p.regrouped, glu};
    steps_.push_back([c, stack](cudaStream_t s) { launch_matvec_cols(c, s, stack.n ? &stack : nullptr); });
    return;
  }
  LLM_REQUIRE(!glu.gate || small_batch, describe(n) + ": a SwiGLU epilogue planned for a launch that cannot apply it");
  if (small_batch || prompt) {
    BatchMmParams b{p.w, type, p.x, bias, y, K, rows, T, p.scratch, p.scratch_bytes, p.x_in_scratch, p.regrouped};
    b.tile_counters = static_cast<uint32_t*>(batch_mm_counters_.get());
    if (const Node& act = g_.node(n.inputs[1]); lowering(act.id) == Lowering::InImage)  // fold_glu_into_image
      b.x = f32_in(act, 1), b.x_gate = f32_in(act, 0);
    if (prompt) {  // the image of x the product before left, where it is this one's too
      const LastImage& l = last_image_;
      const bool ready = l.step == steps_.size() && l.x == b.x && l.gate == b.x_gate && l.K == K && l.T == T &&
                         l.type == type && l.regrouped == b.regrouped;
      last_image_ = {steps_.size() + 1, b.x, b.x_gate, K, T, type, b.regrouped};
      const bool live = live_columns_apply(T);  // the image and the tiles of the live tokens alone
      steps_.push_back([this, b, ready, live](cudaStream_t s) {
        BatchMmParams q = b;
        if (live) q.T = live_columns(b.T);
        launch_prompt_wgmma(q, s, ready);
      });
      return;
    }
    const BatchMmChoices choices = opt_.batch_mm;
    const auto link = norm_links_.find(n.id);  // fold_norm_into_images: the Add's slot instead of its own
    const bool linked = link != norm_links_.end();
    const I8NormLink l = linked ? link->second.link : I8NormLink{};
    if (linked && link->second.x) b.x = link->second.x;
    if (linked && link->second.y) b.y = link->second.y;
    steps_.push_back([b, glu, stack, choices, linked, l](cudaStream_t s) {
      launch_batch_mm(b, s, glu, stack.n ? &stack : nullptr, choices, linked ? &l : nullptr);
    });
    return;
  }
  if (const auto pair = gemm_pairs_.find(n.id); pair != gemm_pairs_.end()) {  // pair_gemm_siblings
    const Node& m = g_.node(pair->second);
    const Node& mw = g_.node(m.inputs[0]);
    p.w2 = weight_ptr(mw), p.type2 = ::std::get<graph::WeightParams>(mw.params).type, p.regrouped2 = regrouped(mw);
    p.y2 = f32_out(m), p.bias2 = product_bias(m);
  }
  if (const uint16_t* copy = half_copy(w)) {  // cuBLAS on the copy, as on an F16 model's matrix
    p.w = copy;
    p.type = quant::Type::F16;
    p.regrouped = false;
  }
  const Blas* blas = &ctx_.blas();
  const bool live = live_columns_apply(T);  // x's conversion, the product and the bias on the live columns alone
  const int ahead = dequant_ahead_.take(p, by, steps_.size());  // W's half copies made ahead, or -1
  steps_.push_back([this, p, blas, live, ahead](cudaStream_t s) {
    GemmParams q = p;
    if (live) q.T = live_columns(p.T);
    if (ahead >= 0) q.w_half = dequant_ahead_.ready(ahead, s);
    launch_gemm(q, *blas, s);
  });
}

bool Executor::live_columns_apply(int64_t T) const {
  return opt_.live_tokens && !opt_.cuda_graph && !expert_products_ && T == g_.n_tokens;
}

void Executor::set_live_tokens(int32_t n) {
  if (n < 0 || n > g_.n_tokens)
    throw InvalidArgument("live tokens " + ::std::to_string(n) + " outside 0.." + ::std::to_string(g_.n_tokens));
  live_tokens_ = n;
}

void Executor::lower_rope(const Node& n) {
  if (lowering(n.id) != Lowering::Own) return;  // applied by the attention step or the q/k/v launch
  const RopeKernelParams p = rope_params(n);
  steps_.push_back([p](cudaStream_t s) { launch_rope(p, s); });
}

void Executor::lower_attention(const Node& n) {
  const auto& ap = ::std::get<graph::AttentionParams>(n.params);
  if (!kv_) throw InvalidArgument(describe(n) + ": no KV cache");
  const auto& spec = kv_->spec();
  if (!attention_matches_kv(n)) throw InvalidArgument(describe(n) + ": parameters do not match the KV cache");
  const int64_t T = g_.node(n.inputs.at(0)).shape.ne[2];
  const auto* pos = static_cast<const int32_t*>(device_ptr(n.inputs[3]));
  if (graph::kv_quantized(spec.type) && !kv_quant_supported(ap.n_head, ap.n_head_kv, ap.head_dim, ap.head_dim_v))
    throw InvalidArgument(describe(n) + ": " +
                          kv_quant_refusal(spec.type, ap.n_head, ap.n_head_kv, ap.head_dim, ap.head_dim_v));
  AttentionKernelParams a;
  a.q = f32_in(n, 0), a.positions = pos, a.k_cache = kv_->k(ap.layer), a.v_cache = kv_->v(ap.layer);
  a.out = f32_out(n), a.partial = attn_scratch_.as<float>(), a.n_ctx = spec.n_ctx, a.n_head = ap.n_head;
  a.n_head_kv = ap.n_head_kv, a.hd = ap.head_dim, a.hd_v = ap.head_dim_v, a.T = T, a.scale = ap.scale;
  a.max_splits = attention_max_splits(g_.kv.seq_capacity(), ap.n_head_kv, T, ctx_.sm_count());  // work_buffers'
  a.kv_type = spec.type, a.k_scales = kv_->k_scales(ap.layer), a.v_scales = kv_->v_scales(ap.layer);
  a.window = ap.window;
  a.paging = paging_of(n);
  if (ap.sinks) a.sinks = f32_in(n, n.inputs.size() - 1);  // always the last input (graph/ir.h)
  if (a.paging.block_table && T >= kPrefillMinTokens) {  // the prefill kernel's tiles, planned per run
    a.tiles = paged_tiles_.as<int32_t>(), a.max_tiles = PagedTiles::max_tiles(T);
    a.tiled = a.tiles + 1 + 2 * int64_t(a.max_tiles);
    a.tiles_after_split = opt_.tiles_after_split;
  }
  // A product of many tokens right after it (the o projection) reads its x in half: the launch writes that too, so
  // the product's conversion launch goes and the product starts on its weights during the attention's tail. 8B
  // Q4_K_M, H100 (session 62): B = 12 / 16 +1.0% (the wide kernel in two register sets), pp512 +1.1%; not at 17..64
  // tokens, where B = 24 and 32 measured 0.4% slower twice (o on the wide kernel in three register sets; why is not
  // known: the attention's later trigger for o's launch lost more) and the wgmma and i8 kernels read float x anyway.
  const bool three_sets = T >= opt_.batch_mm.wide_three_sets_min_tokens && T <= kBatchMmMaxTokens;
  if (opt_.attention_half_x && !three_sets) a.out_half = static_cast<__half*>(half_x_for(n));
  push_attention(n, a);
  if (a.out_half) last_gemm_ = {steps_.size(), a.out, a.n_head * a.hd_v, a.T};
}

// The attention's step(s), by its lowering: the attention alone, rope + KV write first, or the KV write first.
void Executor::push_attention(const Node& n, const AttentionKernelParams& a) {
  const auto& ap = ::std::get<graph::AttentionParams>(n.params);
  const auto& spec = kv_->spec();
  switch (lowering(n.id)) {
    case Lowering::AttendOnly:  // q rotated and K/V in the cache: the q/k/v launch did both
      if (attends_in_o(n)) {
        has_short_ = true;  // the o launch attends in the short graph
        steps_.push_back([a, this](cudaStream_t s) {
          if (!short_now_) launch_attention(a, s);
        });
        return;
      }
      steps_.push_back([a](cudaStream_t s) { launch_attention(a, s); });
      return;
    case Lowering::RopesAndAttend: {
      const Node& rq = g_.node(n.inputs[0]);
      const Node& rk = g_.node(n.inputs[1]);
      RopeKvParams f;
      f.rope = rope_params(rq);  // its positions are the attention's (rope_kv_fusable)
      f.k = f32_in(rk, 0), f.v = f32_in(n, 2), f.k_cache = kv_->k(ap.layer), f.v_cache = kv_->v(ap.layer);
      f.n_head_kv = spec.n_head_kv, f.hd_v = ap.head_dim_v, f.n_ctx = spec.n_ctx;
      f.kv_type = spec.type, f.k_scales = kv_->k_scales(ap.layer), f.v_scales = kv_->v_scales(ap.layer);
      f.paging = a.paging;
      AttentionKernelParams at = a;
      if (const Node* folded_q = folded_qk_norm(rq)) {
        // fold_qk_norms: from the raw q and k, q rotated in place and attended there
        const Node& nq = *folded_q;
        const Node& nk = g_.node(rk.inputs[0]);  // folded with q's (fold_qk_norms folds both or neither)
        f.rope.x = f.rope.out = const_cast<float*>(f32_in(nq, 0)), f.k = f32_in(nk, 0);
        f.q_norm_w = f32_in(nq, 1), f.k_norm_w = f32_in(nk, 1);
        f.norm_eps = ::std::get<graph::RmsNormParams>(nq.params).eps;
        at.q = f.rope.out;
        if (attend_new_token(at, f, rq)) {  // one decode token: the attention launch forms it, no rope_kv launch
          const int32_t shift = new_token_q_split_shift(at);
          if (shift == 0) {
            steps_.push_back([at](cudaStream_t s) { launch_attention(at, s); });
            return;
          }
          AttentionKernelParams at_short = at;  // the short graph's: more blocks a KV head
          at_short.new_token.q_split_shift = shift;
          has_short_ = true;
          steps_.push_back([at, at_short, this](cudaStream_t s) { launch_attention(short_now_ ? at_short : at, s); });
          return;
        }
      }
      LLM_REQUIRE(rk.shape.ne[1] == spec.n_head_kv && rk.shape.ne[0] == ap.head_dim, "rope k shape");
      AttentionKernelParams fused = at;
      if (attend_new_tokens(fused, f, n)) {
        if (fused.T == 1) {  // one token is always alone
          steps_.push_back([fused](cudaStream_t s) { launch_attention(fused, s); });
          return;
        }
        has_alone_ = true;
        steps_.push_back([f, at, fused, this](cudaStream_t s) {
          if (alone_now_) return launch_attention(fused, s);
          launch_rope_kv(f, s);
          launch_attention(at, s);
        });
        return;
      }
      steps_.push_back([f, at](cudaStream_t s) {
        launch_rope_kv(f, s);
        launch_attention(at, s);
      });
      return;
    }
    default: break;
  }
  KvWriteParams w{f32_in(n, 1), f32_in(n, 2), a.positions, kv_->k(ap.layer), kv_->v(ap.layer), spec.n_ctx,
                  spec.n_head_kv, ap.head_dim, ap.head_dim_v, a.T};
  w.kv_type = spec.type, w.k_scales = kv_->k_scales(ap.layer), w.v_scales = kv_->v_scales(ap.layer);
  w.paging = a.paging;
  steps_.push_back([w, a](cudaStream_t s) {
    launch_kv_write(w, s);
    launch_attention(a, s);
  });
}

void Executor::lower_softmax(const Node& n) {
  if (lowering(n.id) == Lowering::InRoute) return;  // its values live only inside the routing launch
  const SoftmaxParams p{f32_in(n, 0), f32_out(n), n.shape.ne[0], n.shape.rows()};
  steps_.push_back([p](cudaStream_t s) { launch_softmax(p, s); });
}

void Executor::lower_last_token(const Node& n) {
  const auto& a = g_.node(n.inputs.at(0)).shape;
  const float* src = f32_in(n, 0) + (a.rows() - 1) * a.ne[0];
  float* dst = f32_out(n);
  const size_t bytes = size_t(a.ne[0]) * 4;
  steps_.push_back([src, dst, bytes](cudaStream_t s) {
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
  });
}

// The columns a paged batch wants logits of: the embedding-row gather of an f32 table (ids checked by write_inputs).
void Executor::lower_gather(const Node& n) {
  const graph::Shape& a = g_.node(n.inputs.at(0)).shape;
  GetRowsParams p;
  p.table = f32_in(n, 0), p.type = quant::Type::F32, p.ids = static_cast<const int32_t*>(device_ptr(n.inputs[1]));
  p.out = f32_out(n), p.K = a.ne[0], p.n_rows = a.ne[1], p.T = n.shape.ne[1];
  steps_.push_back([p](cudaStream_t s) { launch_get_rows(p, s); });
}

KvPaging Executor::paging_of(const Node& att) const {
  KvPaging pg;
  if (!g_.kv.paged()) return pg;
  pg.kv_seq = static_cast<const int32_t*>(device_ptr(att.inputs.at(4)));
  pg.block_table = static_cast<const int32_t*>(device_ptr(att.inputs.at(5)));
  pg.max_blocks = g_.kv.max_blocks;
  while ((int64_t(1) << pg.block_shift) < g_.kv.block_size) ++pg.block_shift;  // a power of two (graph/ir.h)
  const int64_t T = g_.node(att.inputs.at(0)).shape.ne[2];
  if (opt_.paged_run_bases) pg.run_base = paged_tiles_.as<int32_t>() + PagedTiles::ints(T);  // plan_run_bases
  return pg;
}

void Executor::lower_argmax(const Node& n) {
  const auto& in = g_.node(n.inputs.at(0)).shape;
  ArgmaxParams p{f32_in(n, 0), static_cast<int32_t*>(device_ptr(n.id)), in.ne[0], in.rows()};
  if (p.rows <= kArgmaxPartsRows) {
    if (!argmax_scratch_.bytes()) {  // at lowering, not on a request's path
      argmax_scratch_ = DeviceBuffer(argmax_parts_scratch_bytes());
      CUDA_CHECK(cudaMemset(argmax_scratch_.get(), 0, argmax_scratch_.bytes()));  // the counters
    }
    p.scratch = argmax_scratch_.get();
  }
  steps_.push_back([this, p, id = n.id](cudaStream_t s) {
    ArgmaxParams q = p;
    if (ring_ && id == ring_node_)  // set_argmax_ring, read when the step is launched or captured
      q.host_out = ring_, q.host_slot = ring_slot_device_.as<int32_t>(), q.host_stride = ring_stride_;
    launch_argmax(q, s);
  });
}

const FusedElementwise* Executor::fused(const FusedShape& shape) {
  if (!opt_.rtc || rtc_failed_) return nullptr;
  const auto key = ::std::make_tuple(int(shape.kind), shape.n, shape.nb);
  if (auto it = fused_.find(key); it != fused_.end()) return it->second.get();
  try {
    auto f = ::std::make_unique<FusedElementwise>(*opt_.rtc, ctx_.arch(), shape);
    return fused_.emplace(key, ::std::move(f)).first->second.get();
  } catch (const Error& e) {
    // A toolkit without a working NVRTC still runs, on the ahead-of-time kernels.
    if (opt_.log)
      opt_.log(true, ::std::string("cuda: run-time compilation failed, using ahead-of-time kernels: ") + e.what());
    rtc_failed_ = true;
    return nullptr;
  }
}

void Executor::drop_capture() {
  for (Variant& v : variants_) v = Variant{};
}

void Executor::append_step(::std::function<void(cudaStream_t)> step) {
  steps_.push_back(::std::move(step));
  drop_capture();
}

void Executor::launch_all(cudaStream_t s) const {
  for (const auto& step : steps_) step(s);
}

void Executor::run() {
  const cudaStream_t s = ctx_.compute();
  short_now_ = short_next();
  alone_now_ = alone_next();
  Variant& v = variants_[variant_next()];
  // The first run is plain launches (warm-up: lazy module loading and cuBLAS heuristics happen outside capture).
  if (!opt_.cuda_graph || v.runs == 0) {
    launch_all(s);
    ++v.runs;
    done_.record(s);
    return;
  }
  if (!v.exec) {
    if (opt_.verbose && opt_.log)
      opt_.log(false, "cuda: capturing " + ::std::to_string(steps_.size()) + " steps into a CUDA graph" +
                          (short_now_ ? " for positions below " + ::std::to_string(kShortSlots) : "") +
                          (alone_now_ ? " for tokens each of its own sequence" : "") + " (" +
                          ::std::to_string(n_fused()) + " nodes fused into neighbours" + fusion_summary() + ")");
    cudaGraph_t cg = nullptr;
    CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    try {
      launch_all(s);
    } catch (...) {
      (void)cudaStreamEndCapture(s, &cg);
      if (cg) (void)cudaGraphDestroy(cg);
      throw;
    }
    CUDA_CHECK(cudaStreamEndCapture(s, &cg));
    v.graph = Graph(cg);
    cudaGraphExec_t ge = nullptr;
    // The side stream's copies keep the priority they were captured with (DequantAhead; the others' is the default).
    const bool priorities = dequant_ahead_.uses() > 0 && opt_.dequant_ahead_urgent;
    CUDA_CHECK(cudaGraphInstantiate(&ge, cg, priorities ? cudaGraphInstantiateFlagUseNodePriority : 0));
    v.exec = GraphExec(ge);
  }
  CUDA_CHECK(cudaGraphLaunch(v.exec.get(), s));
  ++v.runs;
  done_.record(s);
}

::std::vector<float> Executor::read_f32(NodeId id) const {
  const Node& n = g_.node(id);
  if (n.dtype != graph::DType::F32) throw InvalidArgument(describe(n) + " is not F32");
  ::std::vector<float> out(size_t(n.shape.elements()));
  CUDA_CHECK(cudaStreamSynchronize(ctx_.compute()));
  CUDA_CHECK(cudaMemcpy(out.data(), device_ptr(id), out.size() * 4, cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace cuda
