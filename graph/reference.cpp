// The CPU reference executor: binds a planned graph to one host arena, resolves weights to float data (dequantized
// once, cached), and runs the nodes in order through the kernels of reference_ops.h.
#include "graph/reference.h"

#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <thread>

#include "graph/reference_ops.h"
#include "graph/thread_pool.h"

namespace graph {
namespace {

[[noreturn]] void bad_node(const Node& n, const std::string& what) {
  throw std::invalid_argument("reference executor: node '" + n.name + "' (" + op_name(n.op) + "): " + what);
}

bool same_spec(const KvCacheSpec& a, const KvCacheSpec& b) {
  return a.n_layer == b.n_layer && a.n_ctx == b.n_ctx && a.n_head_kv == b.n_head_kv && a.head_dim_k == b.head_dim_k &&
         a.head_dim_v == b.head_dim_v && a.type == b.type && a.block_size == b.block_size &&
         a.max_blocks == b.max_blocks && a.n_seq == b.n_seq;
}

}  // namespace

ReferenceExecutor::ReferenceExecutor(int n_threads) {
  if (n_threads <= 0) n_threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  pool_ = std::make_unique<ThreadPool>(n_threads);
}

ReferenceExecutor::~ReferenceExecutor() = default;

int ReferenceExecutor::n_threads() const { return pool_->size(); }

void ReferenceExecutor::clear_weight_cache() {
  weight_cache_.clear();
  weight_cache_bytes_ = 0;
}

bool ReferenceExecutor::weight_cache_has_room(const Node& w) const {
  return weight_cache_bytes_ + static_cast<uint64_t>(w.shape.elements()) * sizeof(float) <= weight_cache_budget_;
}

void ReferenceExecutor::clear_kv() {
  std::fill(k_cache_.begin(), k_cache_.end(), 0.0f);
  std::fill(v_cache_.begin(), v_cache_.end(), 0.0f);
}

std::span<const float> ReferenceExecutor::k_cache(int32_t layer) const {
  if (!kv_allocated_ || layer < 0 || layer >= kv_spec_.n_layer)
    throw std::out_of_range("reference executor: no KV cache layer " + std::to_string(layer));
  const size_t n = size_t(kv_spec_.n_ctx) * kv_spec_.n_head_kv * kv_spec_.head_dim_k;
  return {k_cache_.data() + n * layer, n};
}

std::span<const float> ReferenceExecutor::v_cache(int32_t layer) const {
  if (!kv_allocated_ || layer < 0 || layer >= kv_spec_.n_layer)
    throw std::out_of_range("reference executor: no KV cache layer " + std::to_string(layer));
  const size_t n = size_t(kv_spec_.n_ctx) * kv_spec_.n_head_kv * kv_spec_.head_dim_v;
  return {v_cache_.data() + n * layer, n};
}

void ReferenceExecutor::ensure_kv(const KvCacheSpec& s) {
  if (kv_allocated_ && same_spec(s, kv_spec_)) return;
  if (s.paged() && (s.n_ctx % s.block_size != 0 || s.max_blocks <= 0 || s.n_seq <= 0))
    throw std::invalid_argument("reference executor: a paged KV cache needs whole blocks (" + std::to_string(s.n_ctx) +
                                " slots, blocks of " + std::to_string(s.block_size) + "), max_blocks " +
                                std::to_string(s.max_blocks) + " and n_seq " + std::to_string(s.n_seq) +
                                " positive");
  if (s.n_layer <= 0 || s.n_ctx <= 0 || s.n_head_kv <= 0 || s.head_dim_k <= 0 || s.head_dim_v <= 0)
    throw std::invalid_argument("reference executor: the graph has Attention nodes but its KV cache spec (n_layer " +
                                std::to_string(s.n_layer) + ", n_ctx " + std::to_string(s.n_ctx) + ", n_head_kv " +
                                std::to_string(s.n_head_kv) + ", head_dim_k " + std::to_string(s.head_dim_k) +
                                ", head_dim_v " + std::to_string(s.head_dim_v) + ") is not all positive");
  if (!kv_head_dims_fit(s.type, s.head_dim_k, s.head_dim_v))
    throw std::invalid_argument(std::string("reference executor: a ") + kv_type_name(s.type) +
                                " KV cache needs head dims that are multiples of " +
                                std::to_string(kv_block_values(s.type)) + ", not " + std::to_string(s.head_dim_k) +
                                "/" + std::to_string(s.head_dim_v));
  const size_t slots = size_t(s.n_layer) * s.n_ctx * s.n_head_kv;
  k_cache_.assign(slots * s.head_dim_k, 0.0f);
  v_cache_.assign(slots * s.head_dim_v, 0.0f);
  kv_spec_ = s;
  kv_allocated_ = true;
  scratch_.assign(size_t(ref::attention_scratch_per_thread(s)) * pool_->size(), 0.0);
}

const float* ReferenceExecutor::cached_weight_f32(const Node& w) const {
  const auto& p = std::get<WeightParams>(w.params);
  if (p.type == quant::Type::F32 && p.host && reinterpret_cast<uintptr_t>(p.host) % alignof(float) == 0)
    return static_cast<const float*>(p.host);
  auto it = weight_cache_.find(WeightKey{p.host, p.type, p.nbytes});
  return it == weight_cache_.end() ? nullptr : it->second.data();
}

const float* ReferenceExecutor::weight_f32(const Node& w) {
  const auto& p = std::get<WeightParams>(w.params);
  if (!p.host) bad_node(w, "weight tensor '" + p.tensor + "' has no host data");
  // F32 tensors in a GGUF mapping are aligned; they are read in place, with no copy.
  if (p.type == quant::Type::F32 && reinterpret_cast<uintptr_t>(p.host) % alignof(float) == 0)
    return static_cast<const float*>(p.host);
  const WeightKey key{p.host, p.type, p.nbytes};
  auto it = weight_cache_.find(key);
  if (it == weight_cache_.end()) {
    const int64_t ne0 = w.shape.ne[0], rows = w.shape.rows();
    const size_t rb = quant::row_bytes(p.type, ne0);
    std::vector<float> f(static_cast<size_t>(ne0 * rows));
    const auto* src = static_cast<const uint8_t*>(p.host);
    for (int64_t r = 0; r < rows; ++r) quant::dequantize_row(p.type, src + r * rb, f.data() + r * ne0, ne0);
    weight_cache_bytes_ += f.size() * sizeof(float);
    it = weight_cache_.emplace(key, std::move(f)).first;
  }
  return it->second.data();
}

bool ReferenceExecutor::check_and_bind(const Graph& g, const Plan& p) {
  const auto& nodes = g.nodes();
  const auto n = nodes.size();
  if (!p.covers(g) || p.bytes.size() != n || p.root.size() != n || p.last_use.size() != n)
    throw std::invalid_argument("reference executor: the plan covers " + std::to_string(p.offset.size()) +
                                " nodes but the graph has " + std::to_string(n) + " (plan made for another graph?)");
  if (p.arena_bytes > arena_capacity_) {
    constexpr size_t kAlign = 64;
    arena_storage_.assign(p.arena_bytes + kAlign, 0);
    const auto base = reinterpret_cast<uintptr_t>(arena_storage_.data());
    arena_ = arena_storage_.data() + (kAlign - base % kAlign) % kAlign;
    arena_capacity_ = p.arena_bytes;
  }
  src_.assign(n, nullptr);
  views_.resize(n);
  bool has_attention = false;
  const auto end = static_cast<int32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    const Node& nd = nodes[i];
    const uint64_t bytes = static_cast<uint64_t>(nd.shape.elements()) * dtype_size(nd.dtype);
    if (nd.dtype == DType::F16) bad_node(nd, "f16 activations are not supported by the reference executor");
    NodeView& v = views_[i];
    v = NodeView{nullptr, nd.shape.elements(), nd.dtype, false};
    const NodeId root = p.root[i];
    // Only views borrow another node's storage, and only their source's (the plan of another graph fails here).
    const NodeId want_root = nd.op == Op::Reshape ? p.root[static_cast<size_t>(nd.inputs[0])] : static_cast<NodeId>(i);
    if (root != want_root) bad_node(nd, "the plan gives it the storage of node " + std::to_string(root));
    if (nodes[static_cast<size_t>(root)].op == Op::Weight) continue;  // resolved on first use
    if (p.offset[i] < 0 || p.bytes[i] != bytes || static_cast<uint64_t>(p.offset[i]) + bytes > p.arena_bytes)
      bad_node(nd, "the plan places " + std::to_string(bytes) + " bytes at offset " + std::to_string(p.offset[i]) +
                       " of a " + std::to_string(p.arena_bytes) + "-byte arena");
    if (nd.op == Op::Reshape && p.offset[i] != p.offset[static_cast<size_t>(root)])
      bad_node(nd, "the plan places this view apart from its source");
    v.data = arena_ + p.offset[i];
    v.readable = p.last_use[static_cast<size_t>(root)] >= end;
    if (nd.dtype == DType::F32) src_[i] = static_cast<const float*>(v.data);
    if (nd.op == Op::Attention) {
      has_attention = true;
      const auto& ap = std::get<AttentionParams>(nd.params);
      const KvCacheSpec& kv = g.kv;
      if (ap.layer >= kv.n_layer || ap.n_head_kv != kv.n_head_kv || ap.head_dim != kv.head_dim_k ||
          ap.head_dim_v != kv.head_dim_v)
        bad_node(nd, "layer " + std::to_string(ap.layer) + ", n_head_kv " + std::to_string(ap.n_head_kv) +
                         ", head_dim " + std::to_string(ap.head_dim) + "/" + std::to_string(ap.head_dim_v) +
                         " do not fit the graph's KV cache (n_layer " + std::to_string(kv.n_layer) + ", n_head_kv " +
                         std::to_string(kv.n_head_kv) + ", head_dim " + std::to_string(kv.head_dim_k) + "/" +
                         std::to_string(kv.head_dim_v) + ")");
    }
  }
  if (has_attention) ensure_kv(g.kv);
  return has_attention;
}

const ReferenceExecutor::NodeView& ReferenceExecutor::view_of(NodeId id, DType want) const {
  if (id < 0 || static_cast<size_t>(id) >= views_.size())
    throw std::invalid_argument("reference executor: node id " + std::to_string(id) + " is not a node of the last run (" +
                                std::to_string(views_.size()) + " nodes)");
  const NodeView& v = views_[static_cast<size_t>(id)];
  if (!v.data) throw std::invalid_argument("reference executor: node " + std::to_string(id) + " is a weight");
  if (v.dtype != want)
    throw std::invalid_argument("reference executor: node " + std::to_string(id) + " is " + dtype_name(v.dtype) +
                                ", not " + dtype_name(want));
  if (!v.readable)
    throw std::invalid_argument("reference executor: node " + std::to_string(id) +
                                " is not a graph output, so its buffer may have been reused (mark_output it or run "
                                "with plan_all_live)");
  return v;
}

std::span<const float> ReferenceExecutor::output_f32(NodeId id) const {
  const NodeView& v = view_of(id, DType::F32);
  return {static_cast<const float*>(v.data), static_cast<size_t>(v.elements)};
}

std::span<const int32_t> ReferenceExecutor::output_i32(NodeId id) const {
  const NodeView& v = view_of(id, DType::I32);
  return {static_cast<const int32_t*>(v.data), static_cast<size_t>(v.elements)};
}

// The per-op code of run(): unpacks one node into the kernel arguments of reference_ops.h.
struct Runner {
  ReferenceExecutor& ex;
  const Graph& g;
  const Plan& p;
  int32_t n_ctx;  // positions must lie below this: the cache size when the graph attends, else any
  bool paged;     // positions may be -1 (padding)

  const Node& in(const Node& n, size_t i) const { return g.node(n.inputs[i]); }
  // Float data of any float node: an activation in the arena, or a weight (a view of one) dequantized once.
  const float* f32(NodeId id) const {
    const float*& s = ex.src_[static_cast<size_t>(id)];
    if (!s) s = ex.weight_f32(g.node(p.root[static_cast<size_t>(id)]));
    return s;
  }
  const float* f32_in(const Node& n, size_t i) const { return f32(n.inputs[i]); }
  const float* f32_opt(const Node& n, size_t i) const { return n.inputs.size() > i ? f32(n.inputs[i]) : nullptr; }
  const int32_t* i32_in(const Node& n, size_t i) const {
    return static_cast<const int32_t*>(ex.views_[static_cast<size_t>(n.inputs[i])].data);
  }
  void* out(const Node& n) const { return ex.arena_ + p.offset[static_cast<size_t>(n.id)]; }
  float* out_f32(const Node& n) const { return static_cast<float*>(out(n)); }

  void input(const Node& n, const RunInputs& inputs) const {
    const InputParams::Kind kind = std::get<InputParams>(n.params).kind;
    const std::span<const int32_t> src = inputs.of(kind);
    if (static_cast<int64_t>(src.size()) != n.shape.elements())
      throw std::invalid_argument("reference executor: input '" + n.name + "' needs " +
                                  std::to_string(n.shape.elements()) + " " + input_kind_name(kind) + " values, got " +
                                  std::to_string(src.size()));
    if (kind == InputParams::Kind::Positions)
      for (size_t t = 0; t < src.size(); ++t)
        if ((src[t] < 0 && !(paged && src[t] == -1)) || src[t] >= n_ctx)
          throw std::out_of_range("reference executor: position " + std::to_string(src[t]) + " (token " +
                                  std::to_string(t) + ") is outside [" + (paged ? "-1" : "0") + ", n_ctx = " +
                                  std::to_string(n_ctx) + ")");
    std::memcpy(out(n), src.data(), src.size_bytes());
  }

  void get_rows(const Node& n) const {
    const Node& table = in(n, 0);
    const int32_t* ids = i32_in(n, 1);
    const int64_t ne0 = table.shape.ne[0], n_rows = table.shape.ne[1], t_count = n.shape.ne[1];
    float* o = out_f32(n);
    // Only the rows asked for are dequantized, unless the whole table is at hand anyway (e.g. tied embeddings).
    const Node& root = g.node(p.root[static_cast<size_t>(table.id)]);
    const float* whole = root.op == Op::Weight ? ex.cached_weight_f32(root) : f32(table.id);
    for (int64_t t = 0; t < t_count; ++t) {
      const int64_t id = ids[t];
      if (id < 0 || id >= n_rows)
        throw std::out_of_range("reference executor: node '" + n.name + "': id " + std::to_string(id) +
                                " (entry " + std::to_string(t) + ") is outside table '" + table.name + "' of " +
                                std::to_string(n_rows) + " rows");
      if (whole) {
        std::memcpy(o + t * ne0, whole + id * ne0, sizeof(float) * static_cast<size_t>(ne0));
      } else {
        const auto& wp = std::get<WeightParams>(root.params);
        if (!wp.host) bad_node(root, "weight tensor '" + wp.tensor + "' has no host data");
        const auto* row = static_cast<const uint8_t*>(wp.host) + id * quant::row_bytes(wp.type, ne0);
        quant::dequantize_row(wp.type, row, o + t * ne0, ne0);
      }
    }
  }

  void rms_norm(const Node& n) const {
    ref::RmsNormArgs a;
    a.x = f32_in(n, 0);
    a.w = f32_opt(n, 1);
    a.out = out_f32(n);
    a.ne0 = n.shape.ne[0];
    a.rows = n.shape.rows();
    a.eps = std::get<RmsNormParams>(n.params).eps;
    ref::rms_norm(a);
  }

  void mul_mat(const Node& n) const {
    ref::MulMatArgs a;
    // Quantized / half weights past the cache budget are dequantized row by row inside the product (the same
    // floats, so the same results); cached and F32 weights and activations are read as floats.
    const Node& wroot = g.node(p.root[static_cast<size_t>(n.inputs[0])]);
    const auto* wp = wroot.op == Op::Weight ? &std::get<WeightParams>(wroot.params) : nullptr;
    if (wp && wp->host && !ex.cached_weight_f32(wroot) && !ex.weight_cache_has_room(wroot) &&
        wroot.shape.ne[0] == in(n, 0).shape.ne[0]) {
      a.wq = static_cast<const uint8_t*>(wp->host);
      a.wtype = wp->type;
      a.row_bytes = quant::row_bytes(wp->type, in(n, 0).shape.ne[0]);
    } else {
      a.w = f32_in(n, 0);
    }
    a.x = f32_in(n, 1);
    a.bias = f32_opt(n, 2);
    a.out = out_f32(n);
    a.k = in(n, 0).shape.ne[0];
    a.n = in(n, 0).shape.ne[1];
    a.t = in(n, 1).shape.elements() / a.k;
    ref::mul_mat(a, ex.pool_.get());
  }

  void rope(const Node& n) const {
    ref::RopeArgs a;
    a.x = f32_in(n, 0);
    a.positions = i32_in(n, 1);
    a.freq_factors = f32_opt(n, 2);
    a.out = out_f32(n);
    a.head_dim = n.shape.ne[0];
    a.n_head = n.shape.ne[1];
    a.t = n.shape.ne[2];
    a.p = std::get<RopeParams>(n.params);
    if (ex.trig_.size() < static_cast<size_t>(a.p.n_rot)) ex.trig_.resize(static_cast<size_t>(a.p.n_rot));
    a.trig = ex.trig_.data();
    ref::rope(a);
  }

  void attention(const Node& n) const {
    ref::AttentionArgs a;
    a.p = std::get<AttentionParams>(n.params);
    const KvCacheSpec& kv = ex.kv_spec_;
    const size_t layer_slots = size_t(kv.n_ctx) * kv.n_head_kv;
    a.q = f32_in(n, 0);
    a.k = f32_in(n, 1);
    a.v = f32_in(n, 2);
    a.positions = i32_in(n, 3);
    if (a.p.sinks) a.sinks = f32(n.inputs.back());  // last by convention (graph/ir.h AttentionParams::sinks)
    a.k_cache = ex.k_cache_.data() + layer_slots * kv.head_dim_k * a.p.layer;
    a.v_cache = ex.v_cache_.data() + layer_slots * kv.head_dim_v * a.p.layer;
    a.out = out_f32(n);
    a.t = in(n, 0).shape.ne[2];
    a.n_ctx = kv.n_ctx;
    a.kv_type = kv.type;
    if (kv.paged()) {
      a.kv_seq = i32_in(n, 4);
      a.block_table = i32_in(n, 5);
      a.block_size = kv.block_size;
      a.max_blocks = kv.max_blocks;
      a.n_seq = kv.n_seq;
    }
    a.scratch = ex.scratch_.data();
    a.scratch_stride = ref::attention_scratch_per_thread(kv);
    ref::attention(a, ex.pool_.get());
  }

  void mul_mat_id(const Node& n) const {
    ref::MulMatIdArgs a;
    const Node& w = in(n, 0);  // a weight (the builder checks): quantized ones past the cache budget are read by row
    const auto& wp = std::get<WeightParams>(w.params);
    if (wp.host && !ex.cached_weight_f32(w) && !ex.weight_cache_has_room(w)) {
      a.wq = static_cast<const uint8_t*>(wp.host);
      a.wtype = wp.type;
      a.row_bytes = quant::row_bytes(wp.type, w.shape.ne[0]);
    } else {
      a.w = f32(w.id);
    }
    a.x = f32_in(n, 1);
    a.ids = i32_in(n, 2);
    a.bias = f32_opt(n, 3);
    a.out = out_f32(n);
    a.K = w.shape.ne[0];
    a.N = w.shape.ne[1];
    a.n_expert = w.shape.ne[2];
    a.x_slots = in(n, 1).shape.ne[1];
    a.k = n.shape.ne[1];
    a.t = n.shape.ne[2];
    ref::mul_mat_id(a, ex.pool_.get());
  }

  void moe_weights(const Node& n) const {
    ref::MoeWeightsArgs a;
    a.scores = f32_in(n, 0);
    a.ids = i32_in(n, 1);
    a.out = out_f32(n);
    a.n_expert = in(n, 0).shape.ne[0];
    a.k = n.shape.ne[0];
    a.t = n.shape.ne[1];
    a.p = std::get<MoeWeightsParams>(n.params);
    ref::moe_weights(a);
  }

  void slice(const Node& n) const {
    const Node& a = in(n, 0);
    const auto& sp = std::get<SliceParams>(n.params);
    ref::slice(f32_in(n, 0), a.shape.ne[0], a.shape.rows(), sp.offset, sp.n, out_f32(n));
  }

  void gather(const Node& n) const {
    const Node& a = in(n, 0);
    const int32_t* rows = i32_in(n, 1);
    const int64_t ne0 = a.shape.ne[0], t_count = a.shape.ne[1];
    const float* src = f32(a.id);
    for (int64_t i = 0; i < n.shape.ne[1]; ++i) {
      if (rows[i] < 0 || rows[i] >= t_count)
        throw std::out_of_range("reference executor: node '" + n.name + "': row " + std::to_string(rows[i]) +
                                " (entry " + std::to_string(i) + ") is outside [0, " + std::to_string(t_count) + ")");
      std::memcpy(out_f32(n) + i * ne0, src + rows[i] * ne0, sizeof(float) * static_cast<size_t>(ne0));
    }
  }

  void last_token(const Node& n) const {
    const Node& a = in(n, 0);
    const size_t row = static_cast<size_t>(a.shape.ne[0]) * dtype_size(a.dtype);
    // A view of an F32 weight has no arena bytes: read it through f32().
    const auto* src = a.dtype == DType::F32 ? reinterpret_cast<const uint8_t*>(f32(a.id))
                                            : static_cast<const uint8_t*>(ex.views_[static_cast<size_t>(a.id)].data);
    std::memcpy(out(n), src + row * static_cast<size_t>(a.shape.ne[1] - 1), row);
  }
};

void ReferenceExecutor::run(const Graph& g, const Plan& p, std::span<const int32_t> tokens,
                            std::span<const int32_t> positions) {
  run(g, p, RunInputs{tokens, positions, {}, {}, {}});
}

void ReferenceExecutor::run(const Graph& g, const Plan& p, const RunInputs& inputs) {
  const bool attends = check_and_bind(g, p);
  const Runner r{*this, g, p, attends ? kv_spec_.seq_capacity() : std::numeric_limits<int32_t>::max(),
                 attends && kv_spec_.paged()};
  for (const Node& n : g.nodes()) {
    const int64_t ne = n.shape.elements();
    switch (n.op) {
      case Op::Input: r.input(n, inputs); break;
      case Op::Weight: break;
      case Op::GetRows: r.get_rows(n); break;
      case Op::RmsNorm: r.rms_norm(n); break;
      case Op::MulMat: r.mul_mat(n); break;
      case Op::Add: ref::add(r.f32_in(n, 0), r.f32_in(n, 1), r.out_f32(n), ne); break;
      case Op::Mul: ref::mul(r.f32_in(n, 0), r.f32_in(n, 1), r.in(n, 1).shape.elements(), r.out_f32(n), ne); break;
      case Op::Silu: ref::silu(r.f32_in(n, 0), r.out_f32(n), ne); break;
      case Op::SwiGlu: ref::swiglu(r.f32_in(n, 0), r.f32_in(n, 1), r.out_f32(n), ne); break;
      case Op::GeGlu: ref::geglu(r.f32_in(n, 0), r.f32_in(n, 1), r.out_f32(n), ne); break;
      case Op::Scale: ref::scale(r.f32_in(n, 0), std::get<ScaleParams>(n.params).scale, r.out_f32(n), ne); break;
      case Op::Softcap: ref::softcap(r.f32_in(n, 0), std::get<SoftcapParams>(n.params).cap, r.out_f32(n), ne); break;
      case Op::Slice: r.slice(n); break;
      case Op::Rope: r.rope(n); break;
      case Op::Attention: r.attention(n); break;
      case Op::Softmax: ref::softmax(r.f32_in(n, 0), r.out_f32(n), n.shape.ne[0], n.shape.rows()); break;
      case Op::Reshape: break;  // a view: shares its source's bytes
      case Op::LastToken: r.last_token(n); break;
      case Op::Gather: r.gather(n); break;
      case Op::Argmax:
        ref::argmax(r.f32_in(n, 0), static_cast<int32_t*>(r.out(n)), r.in(n, 0).shape.ne[0], ne);
        break;
      case Op::TopK:
        ref::top_k(r.f32_in(n, 0), static_cast<int32_t*>(r.out(n)), r.in(n, 0).shape.ne[0], n.shape.ne[0],
                   n.shape.ne[1]);
        break;
      case Op::MoeWeights: r.moe_weights(n); break;
      case Op::MulMatId: r.mul_mat_id(n); break;
      case Op::SwiGluOai:
        ref::swiglu_oai(r.f32_in(n, 0), r.f32_in(n, 1), r.out_f32(n), ne, std::get<SwiGluOaiParams>(n.params));
        break;
      case Op::WeightedSum:
        ref::weighted_sum(r.f32_in(n, 0), r.f32_in(n, 1), r.out_f32(n), n.shape.ne[0], r.in(n, 0).shape.ne[1],
                          n.shape.ne[1]);
        break;
      default: bad_node(n, "unknown op value " + std::to_string(static_cast<int>(n.op)));
    }
  }
}

}  // namespace graph
