// Graph builders: every builder checks its inputs' shapes and dtypes here, once, so executors can trust a graph and
// a mistake in an architecture function is reported at build time with the node's name and the offending shapes.
#include "graph/ir.h"

#include <cmath>
#include <sstream>
#include <stdexcept>

namespace graph {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "f32";
    case DType::F16: return "f16";
    case DType::I32: return "i32";
  }
  throw std::invalid_argument("graph: unknown dtype " + std::to_string(static_cast<int>(t)));
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32: return 4;
    case DType::F16: return 2;
    case DType::I32: return 4;
  }
  throw std::invalid_argument("graph: unknown dtype " + std::to_string(static_cast<int>(t)));
}

std::string to_string(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.ne.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s.ne[i]);
  }
  return out + "]";
}

const char* kv_type_name(KvType t) {
  switch (t) {
    case KvType::F16: return "f16";
    case KvType::Q8_0: return "q8_0";
    case KvType::Q4_0: return "q4_0";
  }
  return "?";
}

quant::Type kv_block_type(KvType t) {
  switch (t) {
    case KvType::F16: return quant::Type::F16;
    case KvType::Q8_0: return quant::Type::Q8_0;
    case KvType::Q4_0: return quant::Type::Q4_0;
  }
  return quant::Type::F16;
}

int64_t kv_block_values(KvType t) { return kv_quantized(t) ? quant::traits(kv_block_type(t)).block_elems : 1; }

bool kv_head_dims_fit(KvType t, int64_t head_dim_k, int64_t head_dim_v) {
  const int64_t b = kv_block_values(t);
  return head_dim_k % b == 0 && head_dim_v % b == 0;
}

bool parse_kv_type(std::string_view s, KvType& out) {
  for (KvType t : {KvType::F16, KvType::Q8_0, KvType::Q4_0})
    if (s == kv_type_name(t)) {
      out = t;
      return true;
    }
  return false;
}

const char* op_name(Op op) {
  switch (op) {
    case Op::Input: return "Input";
    case Op::Weight: return "Weight";
    case Op::GetRows: return "GetRows";
    case Op::RmsNorm: return "RmsNorm";
    case Op::MulMat: return "MulMat";
    case Op::Add: return "Add";
    case Op::Mul: return "Mul";
    case Op::Silu: return "Silu";
    case Op::SwiGlu: return "SwiGlu";
    case Op::GeGlu: return "GeGlu";
    case Op::Scale: return "Scale";
    case Op::Softcap: return "Softcap";
    case Op::Slice: return "Slice";
    case Op::Rope: return "Rope";
    case Op::Attention: return "Attention";
    case Op::Softmax: return "Softmax";
    case Op::Reshape: return "Reshape";
    case Op::LastToken: return "LastToken";
    case Op::Gather: return "Gather";
    case Op::Argmax: return "Argmax";
    case Op::TopK: return "TopK";
    case Op::MoeWeights: return "MoeWeights";
    case Op::MulMatId: return "MulMatId";
    case Op::SwiGluOai: return "SwiGluOai";
    case Op::WeightedSum: return "WeightedSum";
  }
  throw std::invalid_argument("graph: unknown op " + std::to_string(static_cast<int>(op)));
}

const char* weight_role_name(WeightRole role) {
  switch (role) {
    case WeightRole::Other: return "other";
    case WeightRole::TokenEmbedding: return "token_embd";
    case WeightRole::AttnNorm: return "attn_norm";
    case WeightRole::AttnQ: return "attn_q";
    case WeightRole::AttnK: return "attn_k";
    case WeightRole::AttnV: return "attn_v";
    case WeightRole::AttnQBias: return "attn_q_bias";
    case WeightRole::AttnKBias: return "attn_k_bias";
    case WeightRole::AttnVBias: return "attn_v_bias";
    case WeightRole::AttnQNorm: return "attn_q_norm";
    case WeightRole::AttnKNorm: return "attn_k_norm";
    case WeightRole::AttnQkv: return "attn_qkv";
    case WeightRole::AttnQkvBias: return "attn_qkv_bias";
    case WeightRole::AttnOutput: return "attn_output";
    case WeightRole::AttnOutputBias: return "attn_output_bias";
    case WeightRole::AttnPostNorm: return "attn_post_norm";
    case WeightRole::FfnNorm: return "ffn_norm";
    case WeightRole::FfnGate: return "ffn_gate";
    case WeightRole::FfnUp: return "ffn_up";
    case WeightRole::FfnDown: return "ffn_down";
    case WeightRole::FfnGateUp: return "ffn_gate_up";
    case WeightRole::FfnPostNorm: return "ffn_post_norm";
    case WeightRole::OutputNorm: return "output_norm";
    case WeightRole::Output: return "output";
    case WeightRole::RopeFreqs: return "rope_freqs";
    case WeightRole::RopeFactorsLong: return "rope_factors_long";
    case WeightRole::RopeFactorsShort: return "rope_factors_short";
    case WeightRole::AttnSinks: return "attn_sinks";
    case WeightRole::FfnRouter: return "ffn_router";
    case WeightRole::FfnRouterBias: return "ffn_router_bias";
    case WeightRole::FfnGateExps: return "ffn_gate_exps";
    case WeightRole::FfnUpExps: return "ffn_up_exps";
    case WeightRole::FfnDownExps: return "ffn_down_exps";
    case WeightRole::FfnGateExpsBias: return "ffn_gate_exps_bias";
    case WeightRole::FfnUpExpsBias: return "ffn_up_exps_bias";
    case WeightRole::FfnDownExpsBias: return "ffn_down_exps_bias";
    case WeightRole::kCount: break;
  }
  throw std::invalid_argument("graph: unknown weight role " + std::to_string(static_cast<int>(role)));
}

namespace {

// Collects the context of one builder call so every error names the node being built and its op.
class Check {
 public:
  Check(const std::vector<Node>& nodes, const std::string& name, Op op) : nodes_(nodes), name_(name), op_(op) {
    if (name.empty()) fail("every node needs a name");
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw std::invalid_argument("graph: node '" + name_ + "' (" + op_name(op_) + "): " + what);
  }

  // The input node `role` ("x", "weight"), which must exist already.
  const Node& in(NodeId id, const char* role) const {
    if (id < 0 || static_cast<size_t>(id) >= nodes_.size())
      fail(std::string("input ") + role + " has invalid node id " + std::to_string(id) + " (graph has " +
           std::to_string(nodes_.size()) + " nodes)");
    return nodes_[static_cast<size_t>(id)];
  }

  static std::string describe(const Node& n) {
    return "'" + n.name + "' " + to_string(n.shape) + " " +
           (n.op == Op::Weight ? quant::type_name(std::get<WeightParams>(n.params).type) : dtype_name(n.dtype));
  }

  // Weights of any quant type are read as float; activations must be F32.
  void is_float(const Node& n, const char* role) const {
    if (n.op != Op::Weight && n.dtype != DType::F32)
      fail(std::string(role) + " " + describe(n) + " must be f32 (or a weight)");
  }
  void is_i32(const Node& n, const char* role) const {
    if (n.op == Op::Weight || n.dtype != DType::I32) fail(std::string(role) + " " + describe(n) + " must be i32");
  }
  void require(bool ok, const std::string& what) const {
    if (!ok) fail(what);
  }

 private:
  const std::vector<Node>& nodes_;
  const std::string& name_;
  Op op_;
};

bool is_matrix(const Shape& s) { return s.ne[2] == 1 && s.ne[3] == 1; }

Node make(std::string name, Op op, std::vector<NodeId> inputs, Shape shape, DType dtype, Params params = {}) {
  Node n;
  n.op = op;
  n.inputs = std::move(inputs);
  n.shape = shape;
  n.dtype = dtype;
  n.name = std::move(name);
  n.params = std::move(params);
  return n;
}

}  // namespace

NodeId Graph::append(Node n) {
  n.id = static_cast<NodeId>(nodes_.size());
  nodes_.push_back(std::move(n));
  return nodes_.back().id;
}

void Graph::mark_output(NodeId id) {
  if (id < 0 || static_cast<size_t>(id) >= nodes_.size())
    throw std::invalid_argument("graph: mark_output: invalid node id " + std::to_string(id) + " (graph has " +
                                std::to_string(nodes_.size()) + " nodes)");
  for (NodeId o : outputs_)
    if (o == id) return;
  outputs_.push_back(id);
}

NodeId Graph::find(std::string_view name) const {
  for (const Node& n : nodes_)
    if (n.name == name) return n.id;
  return kNoNode;
}

NodeId Graph::input(std::string name, InputParams::Kind kind, int64_t n, int64_t rows) {
  Check c(nodes_, name, Op::Input);
  c.require(n > 0 && rows > 0, "shape [" + std::to_string(n) + ", " + std::to_string(rows) + "] must be positive");
  c.require(rows == 1 || kind == InputParams::Kind::BlockTable, "only a block table has rows");
  return append(make(std::move(name), Op::Input, {}, Shape{{n, rows, 1, 1}}, DType::I32, InputParams{kind}));
}

const char* input_kind_name(InputParams::Kind k) {
  switch (k) {
    case InputParams::Kind::Tokens: return "tokens";
    case InputParams::Kind::Positions: return "positions";
    case InputParams::Kind::KvSeq: return "kv_seq";
    case InputParams::Kind::BlockTable: return "block_table";
    case InputParams::Kind::OutputRows: return "output_rows";
  }
  return "?";
}

std::span<const int32_t> RunInputs::of(InputParams::Kind k) const {
  switch (k) {
    case InputParams::Kind::Tokens: return tokens;
    case InputParams::Kind::Positions: return positions;
    case InputParams::Kind::KvSeq: return kv_seq;
    case InputParams::Kind::BlockTable: return block_table;
    case InputParams::Kind::OutputRows: return output_rows;
  }
  return {};
}

NodeId Graph::weight(std::string name, WeightParams p, Shape shape) {
  Check c(nodes_, name, Op::Weight);
  for (int64_t d : shape.ne) c.require(d > 0, "shape " + to_string(shape) + " has a non-positive dimension");
  const quant::Traits& t = quant::traits(p.type);
  c.require(shape.ne[0] % t.block_elems == 0, "row length " + std::to_string(shape.ne[0]) +
                                                  " is not a multiple of the " + t.name + " block size " +
                                                  std::to_string(t.block_elems));
  const uint64_t expect = quant::row_bytes(p.type, shape.ne[0]) * static_cast<uint64_t>(shape.rows());
  c.require(p.nbytes == 0 || p.nbytes == expect, "tensor '" + p.tensor + "' " + to_string(shape) + " " + t.name +
                                                     " needs " + std::to_string(expect) + " bytes, nbytes says " +
                                                     std::to_string(p.nbytes));
  if (p.nbytes == 0) p.nbytes = expect;
  // A weight reads as float whatever its block format; the quant type lives in the params.
  return append(make(std::move(name), Op::Weight, {}, shape, DType::F32, std::move(p)));
}

NodeId Graph::get_rows(std::string name, NodeId table, NodeId ids) {
  Check c(nodes_, name, Op::GetRows);
  const Node& tb = c.in(table, "table");
  const Node& id = c.in(ids, "ids");
  c.is_float(tb, "table");
  c.is_i32(id, "ids");
  c.require(is_matrix(tb.shape), "table " + Check::describe(tb) + " must be a matrix [n_embd, n_rows]");
  const Shape out{{tb.shape.ne[0], id.shape.elements(), 1, 1}};
  return append(make(std::move(name), Op::GetRows, {table, ids}, out, DType::F32));
}

NodeId Graph::rms_norm(std::string name, NodeId x, NodeId w, float eps) {
  Check c(nodes_, name, Op::RmsNorm);
  const Node& xn = c.in(x, "x");
  c.is_float(xn, "x");
  c.require(eps >= 0.0f, "eps must be non-negative, got " + std::to_string(eps));
  std::vector<NodeId> ins{x};
  if (w != kNoNode) {
    const Node& wn = c.in(w, "weight");
    c.is_float(wn, "weight");
    c.require(wn.shape.elements() == xn.shape.ne[0], "weight " + Check::describe(wn) + " must have ne[0] = " +
                                                         std::to_string(xn.shape.ne[0]) + " elements to scale x " +
                                                         Check::describe(xn));
    ins.push_back(w);
  }
  return append(make(std::move(name), Op::RmsNorm, std::move(ins), xn.shape, DType::F32, RmsNormParams{eps}));
}

NodeId Graph::mul_mat(std::string name, NodeId w, NodeId x, NodeId bias) {
  Check c(nodes_, name, Op::MulMat);
  const Node& wn = c.in(w, "weight");
  const Node& xn = c.in(x, "x");
  c.is_float(wn, "weight");
  c.is_float(xn, "x");
  c.require(is_matrix(wn.shape), "weight " + Check::describe(wn) + " must be a matrix [K, N]");
  c.require(wn.shape.ne[0] == xn.shape.ne[0], "weight " + Check::describe(wn) + " and x " + Check::describe(xn) +
                                                  " disagree on K = ne[0]");
  const int64_t n_out = wn.shape.ne[1];
  std::vector<NodeId> ins{w, x};
  if (bias != kNoNode) {
    const Node& bn = c.in(bias, "bias");
    c.is_float(bn, "bias");
    c.require(bn.shape.elements() == n_out,
              "bias " + Check::describe(bn) + " must have N = " + std::to_string(n_out) + " elements");
    ins.push_back(bias);
  }
  const Shape out{{n_out, xn.shape.ne[1], xn.shape.ne[2], xn.shape.ne[3]}};
  return append(make(std::move(name), Op::MulMat, std::move(ins), out, DType::F32));
}

NodeId Graph::add(std::string name, NodeId a, NodeId b) {
  Check c(nodes_, name, Op::Add);
  const Node& an = c.in(a, "a");
  const Node& bn = c.in(b, "b");
  c.is_float(an, "a");
  c.is_float(bn, "b");
  c.require(an.shape.elements() == bn.shape.elements(),
            "a " + Check::describe(an) + " and b " + Check::describe(bn) + " differ in element count");
  return append(make(std::move(name), Op::Add, {a, b}, an.shape, DType::F32));
}

NodeId Graph::mul(std::string name, NodeId a, NodeId b) {
  Check c(nodes_, name, Op::Mul);
  const Node& an = c.in(a, "a");
  const Node& bn = c.in(b, "b");
  c.is_float(an, "a");
  c.is_float(bn, "b");
  c.require(an.shape.elements() == bn.shape.elements() || bn.shape.elements() == an.shape.ne[0],
            "b " + Check::describe(bn) + " must have as many elements as a " + Check::describe(an) +
                " or one row of ne[0] = " + std::to_string(an.shape.ne[0]));
  return append(make(std::move(name), Op::Mul, {a, b}, an.shape, DType::F32));
}

NodeId Graph::silu(std::string name, NodeId a) {
  Check c(nodes_, name, Op::Silu);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  return append(make(std::move(name), Op::Silu, {a}, an.shape, DType::F32));
}

// A gated unit (SwiGlu, GeGlu): gate and up of the same element count.
NodeId Graph::glu(std::string name, Op op, NodeId gate, NodeId up) {
  Check c(nodes_, name, op);
  const Node& gn = c.in(gate, "gate");
  const Node& un = c.in(up, "up");
  c.is_float(gn, "gate");
  c.is_float(un, "up");
  c.require(gn.shape.elements() == un.shape.elements(),
            "gate " + Check::describe(gn) + " and up " + Check::describe(un) + " differ in element count");
  return append(make(std::move(name), op, {gate, up}, gn.shape, DType::F32));
}

NodeId Graph::swiglu(std::string name, NodeId gate, NodeId up) { return glu(std::move(name), Op::SwiGlu, gate, up); }

NodeId Graph::geglu(std::string name, NodeId gate, NodeId up) { return glu(std::move(name), Op::GeGlu, gate, up); }

NodeId Graph::scale(std::string name, NodeId a, float s) {
  Check c(nodes_, name, Op::Scale);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  c.require(std::isfinite(s), "scale " + std::to_string(s) + " must be finite");
  return append(make(std::move(name), Op::Scale, {a}, an.shape, DType::F32, ScaleParams{s}));
}

NodeId Graph::softcap(std::string name, NodeId a, float cap) {
  Check c(nodes_, name, Op::Softcap);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  c.require(std::isfinite(cap) && cap > 0.0f, "cap " + std::to_string(cap) + " must be a positive number");
  return append(make(std::move(name), Op::Softcap, {a}, an.shape, DType::F32, SoftcapParams{cap}));
}

NodeId Graph::slice(std::string name, NodeId a, int64_t offset, int64_t n) {
  Check c(nodes_, name, Op::Slice);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  c.require(an.op != Op::Weight, "a " + Check::describe(an) + " must be an activation");
  c.require(offset >= 0 && n > 0 && offset + n <= an.shape.ne[0],
            "elements [" + std::to_string(offset) + ", " + std::to_string(offset + n) + ") do not lie in the rows of " +
                Check::describe(an));
  Shape out = an.shape;
  out.ne[0] = n;
  return append(make(std::move(name), Op::Slice, {a}, out, DType::F32, SliceParams{offset, n}));
}

NodeId Graph::rope(std::string name, NodeId x, NodeId positions, RopeParams p, NodeId freq_factors) {
  Check c(nodes_, name, Op::Rope);
  const Node& xn = c.in(x, "x");
  const Node& pn = c.in(positions, "positions");
  c.is_float(xn, "x");
  c.is_i32(pn, "positions");
  c.require(xn.shape.ne[3] == 1, "x " + Check::describe(xn) + " must be [head_dim, n_head, T]");
  c.require(pn.shape.elements() == xn.shape.ne[2], "positions " + Check::describe(pn) + " must have T = " +
                                                       std::to_string(xn.shape.ne[2]) + " elements for x " +
                                                       Check::describe(xn));
  c.require(p.n_rot > 0 && p.n_rot % 2 == 0 && p.n_rot <= xn.shape.ne[0],
            "n_rot " + std::to_string(p.n_rot) + " must be even and in [2, head_dim = " +
                std::to_string(xn.shape.ne[0]) + "]");
  c.require(p.freq_base > 0.0f && p.freq_scale > 0.0f, "freq_base " + std::to_string(p.freq_base) +
                                                           " and freq_scale " + std::to_string(p.freq_scale) +
                                                           " must be positive");
  c.require(std::isfinite(p.ext_factor) && p.ext_factor >= 0.0f && std::isfinite(p.corr_low) &&
                std::isfinite(p.corr_high) && std::isfinite(p.attn_factor) && p.attn_factor > 0.0f,
            "ext_factor " + std::to_string(p.ext_factor) + ", corr dims " + std::to_string(p.corr_low) + ".." +
                std::to_string(p.corr_high) + " and attn_factor " + std::to_string(p.attn_factor) +
                " must be finite (ext_factor >= 0, attn_factor > 0)");
  std::vector<NodeId> ins{x, positions};
  if (freq_factors != kNoNode) {
    const Node& fn = c.in(freq_factors, "freq_factors");
    c.is_float(fn, "freq_factors");
    c.require(fn.shape.elements() == p.n_rot / 2, "freq_factors " + Check::describe(fn) +
                                                      " must have n_rot/2 = " + std::to_string(p.n_rot / 2) +
                                                      " elements");
    ins.push_back(freq_factors);
  }
  return append(make(std::move(name), Op::Rope, std::move(ins), xn.shape, DType::F32, p));
}

NodeId Graph::attention(std::string name, NodeId q, NodeId k, NodeId v, NodeId positions, AttentionParams p,
                        PagedKv paged, NodeId sinks) {
  Check c(nodes_, name, Op::Attention);
  const Node& qn = c.in(q, "q");
  const Node& kn = c.in(k, "k");
  const Node& vn = c.in(v, "v");
  const Node& pn = c.in(positions, "positions");
  c.is_float(qn, "q");
  c.is_float(kn, "k");
  c.is_float(vn, "v");
  c.is_i32(pn, "positions");
  c.require(p.layer >= 0, "layer " + std::to_string(p.layer) + " must be non-negative");
  c.require(p.n_head > 0 && p.n_head_kv > 0 && p.n_head % p.n_head_kv == 0,
            "n_head " + std::to_string(p.n_head) + " must be a positive multiple of n_head_kv " +
                std::to_string(p.n_head_kv));
  c.require(p.head_dim > 0 && p.head_dim_v > 0, "head_dim " + std::to_string(p.head_dim) + " and head_dim_v " +
                                                    std::to_string(p.head_dim_v) + " must be positive");
  c.require(p.window >= 0, "window " + std::to_string(p.window) + " must be non-negative (0: no sliding window)");
  const int64_t t = qn.shape.ne[2];
  const Shape want_q{{p.head_dim, p.n_head, t, 1}};
  const Shape want_k{{p.head_dim, p.n_head_kv, t, 1}};
  const Shape want_v{{p.head_dim_v, p.n_head_kv, t, 1}};
  c.require(qn.shape == want_q, "q " + Check::describe(qn) + " must be " + to_string(want_q));
  c.require(kn.shape == want_k, "k " + Check::describe(kn) + " must be " + to_string(want_k));
  c.require(vn.shape == want_v, "v " + Check::describe(vn) + " must be " + to_string(want_v));
  c.require(pn.shape.elements() == t,
            "positions " + Check::describe(pn) + " must have T = " + std::to_string(t) + " elements");
  std::vector<NodeId> ins{q, k, v, positions};
  c.require((paged.kv_seq != kNoNode) == kv.paged() && (paged.block_table != kNoNode) == kv.paged(),
            kv.paged() ? "a paged KV cache needs the kv_seq and block_table inputs"
                       : "kv_seq and block_table belong to graphs with a paged KV cache (kv.block_size > 0)");
  if (kv.paged()) {
    const Node& sn = c.in(paged.kv_seq, "kv_seq");
    const Node& bn = c.in(paged.block_table, "block_table");
    c.is_i32(sn, "kv_seq");
    c.is_i32(bn, "block_table");
    c.require(sn.shape.elements() == t, "kv_seq " + Check::describe(sn) + " must have T = " + std::to_string(t) +
                                            " elements");
    const Shape want_table{{kv.max_blocks, kv.n_seq, 1, 1}};
    c.require(bn.shape == want_table, "block_table " + Check::describe(bn) + " must be " + to_string(want_table));
    ins.push_back(paged.kv_seq);
    ins.push_back(paged.block_table);
  }
  p.sinks = sinks != kNoNode;
  if (p.sinks) {
    const Node& sn = c.in(sinks, "sinks");
    c.is_float(sn, "sinks");
    c.require(sn.shape.elements() == p.n_head, "sinks " + Check::describe(sn) + " must have n_head = " +
                                                   std::to_string(p.n_head) + " elements");
    ins.push_back(sinks);  // last, whatever inputs a KV-cache layout adds before it
  }
  const Shape out{{int64_t{p.head_dim_v} * p.n_head, t, 1, 1}};
  return append(make(std::move(name), Op::Attention, std::move(ins), out, DType::F32, p));
}

NodeId Graph::softmax(std::string name, NodeId a) {
  Check c(nodes_, name, Op::Softmax);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  return append(make(std::move(name), Op::Softmax, {a}, an.shape, DType::F32));
}

NodeId Graph::reshape(std::string name, NodeId a, Shape shape) {
  Check c(nodes_, name, Op::Reshape);
  const Node& an = c.in(a, "a");
  for (int64_t d : shape.ne) c.require(d > 0, "shape " + to_string(shape) + " has a non-positive dimension");
  c.require(shape.elements() == an.shape.elements(), "cannot view a " + Check::describe(an) + " as " +
                                                         to_string(shape) + ": element counts differ");
  c.require(an.op != Op::Weight || shape.ne[0] == an.shape.ne[0] ||
                std::get<WeightParams>(an.params).type == quant::Type::F32,
            "a view of quantized weight " + Check::describe(an) + " must keep its row length");
  return append(make(std::move(name), Op::Reshape, {a}, shape, an.dtype));
}

NodeId Graph::last_token(std::string name, NodeId a) {
  Check c(nodes_, name, Op::LastToken);
  const Node& an = c.in(a, "a");
  c.require(an.op != Op::Weight, "a " + Check::describe(an) + " must be an activation");
  c.require(is_matrix(an.shape), "a " + Check::describe(an) + " must be [ne0, T]");
  return append(make(std::move(name), Op::LastToken, {a}, Shape{{an.shape.ne[0], 1, 1, 1}}, an.dtype));
}

NodeId Graph::gather(std::string name, NodeId a, NodeId rows) {
  Check c(nodes_, name, Op::Gather);
  const Node& an = c.in(a, "a");
  const Node& rn = c.in(rows, "rows");
  c.require(an.op != Op::Weight && an.dtype == DType::F32, "a " + Check::describe(an) + " must be an f32 activation");
  c.require(is_matrix(an.shape), "a " + Check::describe(an) + " must be [ne0, T]");
  c.is_i32(rn, "rows");
  c.require(is_matrix(rn.shape) && rn.shape.ne[1] == 1, "rows " + Check::describe(rn) + " must be [n]");
  return append(make(std::move(name), Op::Gather, {a, rows}, Shape{{an.shape.ne[0], rn.shape.ne[0], 1, 1}},
                     DType::F32));
}

NodeId Graph::argmax(std::string name, NodeId a) {
  Check c(nodes_, name, Op::Argmax);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  const Shape out{{an.shape.ne[1], an.shape.ne[2], an.shape.ne[3], 1}};
  return append(make(std::move(name), Op::Argmax, {a}, out, DType::I32));
}

NodeId Graph::top_k(std::string name, NodeId a, int32_t k) {
  Check c(nodes_, name, Op::TopK);
  const Node& an = c.in(a, "a");
  c.is_float(an, "a");
  c.require(an.op != Op::Weight && is_matrix(an.shape), "a " + Check::describe(an) + " must be an activation [n, T]");
  c.require(k > 0 && k <= an.shape.ne[0], "k " + std::to_string(k) + " must be in [1, " +
                                              std::to_string(an.shape.ne[0]) + "] for a " + Check::describe(an));
  const Shape out{{k, an.shape.ne[1], 1, 1}};
  return append(make(std::move(name), Op::TopK, {a}, out, DType::I32, TopKParams{k}));
}

NodeId Graph::moe_weights(std::string name, NodeId scores, NodeId ids, MoeWeightsParams p) {
  Check c(nodes_, name, Op::MoeWeights);
  const Node& sn = c.in(scores, "scores");
  const Node& in = c.in(ids, "ids");
  c.is_float(sn, "scores");
  c.is_i32(in, "ids");
  c.require(sn.op != Op::Weight && is_matrix(sn.shape), "scores " + Check::describe(sn) + " must be [n_expert, T]");
  c.require(is_matrix(in.shape) && in.shape.ne[1] == sn.shape.ne[1] && in.shape.ne[0] <= sn.shape.ne[0],
            "ids " + Check::describe(in) + " must be [k <= n_expert, T] for scores " + Check::describe(sn));
  return append(make(std::move(name), Op::MoeWeights, {scores, ids}, in.shape, DType::F32, p));
}

NodeId Graph::mul_mat_id(std::string name, NodeId w, NodeId x, NodeId ids, NodeId bias) {
  Check c(nodes_, name, Op::MulMatId);
  const Node& wn = c.in(w, "weight");
  const Node& xn = c.in(x, "x");
  const Node& in = c.in(ids, "ids");
  c.require(wn.op == Op::Weight, "weight " + Check::describe(wn) + " must be a weight tensor");
  c.is_float(xn, "x");
  c.is_i32(in, "ids");
  c.require(wn.shape.ne[3] == 1, "weight " + Check::describe(wn) + " must be [K, N, n_expert]");
  const int64_t K = wn.shape.ne[0], N = wn.shape.ne[1], k = in.shape.ne[0], T = in.shape.ne[1];
  c.require(is_matrix(in.shape), "ids " + Check::describe(in) + " must be [k, T]");
  c.require(xn.shape.ne[0] == K && xn.shape.ne[2] == T && xn.shape.ne[3] == 1 &&
                (xn.shape.ne[1] == 1 || xn.shape.ne[1] == k),
            "x " + Check::describe(xn) + " must be [K = " + std::to_string(K) + ", 1 or k = " + std::to_string(k) +
                ", T = " + std::to_string(T) + "] for weight " + Check::describe(wn) + " and ids " +
                Check::describe(in));
  std::vector<NodeId> ins{w, x, ids};
  if (bias != kNoNode) {
    const Node& bn = c.in(bias, "bias");
    c.is_float(bn, "bias");
    c.require(bn.shape.ne[0] == N && bn.shape.elements() == N * wn.shape.ne[2],
              "bias " + Check::describe(bn) + " must be [N = " + std::to_string(N) + ", n_expert = " +
                  std::to_string(wn.shape.ne[2]) + "]");
    ins.push_back(bias);
  }
  const Shape out{{N, k, T, 1}};
  return append(make(std::move(name), Op::MulMatId, std::move(ins), out, DType::F32));
}

NodeId Graph::swiglu_oai(std::string name, NodeId gate, NodeId up, SwiGluOaiParams p) {
  {
    Check c(nodes_, name, Op::SwiGluOai);
    c.require(std::isfinite(p.alpha) && std::isfinite(p.limit) && p.limit > 0.0f,
              "alpha " + std::to_string(p.alpha) + " and limit " + std::to_string(p.limit) +
                  " must be finite (limit > 0)");
  }
  const NodeId id = glu(std::move(name), Op::SwiGluOai, gate, up);
  nodes_.back().params = p;
  return id;
}

NodeId Graph::weighted_sum(std::string name, NodeId a, NodeId w) {
  Check c(nodes_, name, Op::WeightedSum);
  const Node& an = c.in(a, "a");
  const Node& wn = c.in(w, "w");
  c.is_float(an, "a");
  c.is_float(wn, "w");
  c.require(an.op != Op::Weight && an.shape.ne[3] == 1, "a " + Check::describe(an) + " must be [ne0, k, T]");
  c.require(wn.op != Op::Weight && wn.shape == (Shape{{an.shape.ne[1], an.shape.ne[2], 1, 1}}),
            "w " + Check::describe(wn) + " must be [k, T] = [" + std::to_string(an.shape.ne[1]) + ", " +
                std::to_string(an.shape.ne[2]) + "] for a " + Check::describe(an));
  const Shape out{{an.shape.ne[0], an.shape.ne[2], 1, 1}};
  return append(make(std::move(name), Op::WeightedSum, {a, w}, out, DType::F32));
}

}  // namespace graph
