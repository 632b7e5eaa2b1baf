// Text dump of a graph and its buffer plan (see print.h).
#include "graph/print.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace graph {
namespace {

std::string num(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

std::string human_bytes(uint64_t b) {
  const char* unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(b);
  int u = 0;
  while (v >= 1024.0 && u < 4) {
    v /= 1024.0;
    ++u;
  }
  std::ostringstream s;
  s << std::fixed << std::setprecision(u == 0 ? 0 : 2) << v << ' ' << unit[u];
  return s.str();
}

std::string inputs_string(const Graph& g, const Node& n) {
  if (n.inputs.empty()) return "-";
  std::string s;
  for (NodeId i : n.inputs) {
    if (!s.empty()) s += ", ";
    s += g.node(i).name;
  }
  return s;
}

std::string dtype_string(const Node& n) {
  if (n.op == Op::Weight) return quant::type_name(std::get<WeightParams>(n.params).type);
  return dtype_name(n.dtype);
}

// Arena placement: the offset for owners, "view of <name>" for views, "weights" for weight-arena data.
std::string offset_string(const Graph& g, const Plan* p, const Node& n) {
  if (n.op == Op::Weight) return "weights+" + std::to_string(std::get<WeightParams>(n.params).arena_offset);
  if (!p) return "-";
  const auto i = static_cast<size_t>(n.id);
  if (p->root[i] != n.id) return "view of " + g.node(p->root[i]).name;
  return std::to_string(p->offset[i]);
}

std::string size_string(const Node& n, const Plan* p) {
  if (n.op == Op::Weight) return std::to_string(std::get<WeightParams>(n.params).nbytes);
  if (!p) return std::to_string(static_cast<uint64_t>(n.shape.elements()) * dtype_size(n.dtype));
  return std::to_string(p->bytes[static_cast<size_t>(n.id)]);
}

}  // namespace

std::string params_string(const Node& n) {
  std::ostringstream s;
  if (const auto* ip = std::get_if<InputParams>(&n.params)) {
    s << (ip->kind == InputParams::Kind::Tokens ? "tokens" : "positions");
  } else if (const auto* wp = std::get_if<WeightParams>(&n.params)) {
    s << wp->tensor;
  } else if (const auto* rp = std::get_if<RmsNormParams>(&n.params)) {
    s << "eps=" << num(rp->eps);
  } else if (const auto* rp = std::get_if<RopeParams>(&n.params)) {
    s << (rp->mode == RopeMode::Neox ? "neox" : "normal") << " n_rot=" << rp->n_rot << " base=" << num(rp->freq_base)
      << " scale=" << num(rp->freq_scale);
    if (rp->ext_factor != 0.0f)
      s << " yarn ext=" << num(rp->ext_factor) << " corr=" << num(rp->corr_low) << ".." << num(rp->corr_high);
    if (rp->attn_factor != 1.0f) s << " attn_factor=" << num(rp->attn_factor);
  } else if (const auto* ap = std::get_if<AttentionParams>(&n.params)) {
    s << "layer=" << ap->layer << " heads=" << ap->n_head << "/" << ap->n_head_kv << " head_dim=" << ap->head_dim
      << "/" << ap->head_dim_v << " scale=" << num(ap->scale);
    if (ap->window > 0) s << " window=" << ap->window;
    if (ap->sinks) s << " sinks";
  } else if (const auto* kp = std::get_if<TopKParams>(&n.params)) {
    s << "k=" << kp->k;
  } else if (const auto* mp = std::get_if<MoeWeightsParams>(&n.params)) {
    s << (mp->softmax ? "softmax" : "") << (mp->softmax && mp->normalize ? " " : "")
      << (mp->normalize ? "normalize" : "");
  } else if (const auto* op = std::get_if<SwiGluOaiParams>(&n.params)) {
    s << "alpha=" << num(op->alpha) << " limit=" << num(op->limit);
  } else if (const auto* sp = std::get_if<ScaleParams>(&n.params)) {
    s << "scale=" << num(sp->scale);
  } else if (const auto* cp = std::get_if<SoftcapParams>(&n.params)) {
    s << "cap=" << num(cp->cap);
  } else if (const auto* lp = std::get_if<SliceParams>(&n.params)) {
    s << "elements " << lp->offset << ".." << lp->offset + lp->n;
  }
  return s.str();
}

void print(std::ostream& os, const Graph& g, const Plan* plan) {
  if (plan && !plan->covers(g)) plan = nullptr;  // a stale plan would print wrong offsets; say nothing instead
  const auto& nodes = g.nodes();
  os << "graph: " << nodes.size() << " nodes, n_tokens " << g.n_tokens << ", outputs:";
  for (NodeId o : g.outputs()) os << ' ' << g.node(o).name;
  if (g.outputs().empty()) os << " (none)";
  os << '\n';
  if (plan) {
    os << "arena: " << plan->arena_bytes << " bytes (" << human_bytes(plan->arena_bytes) << "), alignment "
       << plan->alignment << '\n';
  } else {
    os << "arena: - (not planned)\n";
  }
  const KvCacheSpec& kv = g.kv;
  os << "kv cache: n_layer " << kv.n_layer << ", n_ctx " << kv.n_ctx << ", n_head_kv " << kv.n_head_kv
     << ", head_dim " << kv.head_dim_k << "/" << kv.head_dim_v << ", " << kv_type_name(kv.type) << '\n';

  struct Row {
    std::string cols[9];
  };
  std::vector<Row> rows;
  rows.push_back({{"id", "name", "op", "shape", "dtype", "inputs", "offset", "bytes", "params"}});
  for (const Node& n : nodes)
    rows.push_back({{std::to_string(n.id), n.name, op_name(n.op), to_string(n.shape), dtype_string(n),
                     inputs_string(g, n), offset_string(g, plan, n), size_string(n, plan), params_string(n)}});
  size_t width[9] = {};
  for (const Row& r : rows)
    for (size_t c = 0; c < 9; ++c) width[c] = std::max(width[c], r.cols[c].size());
  for (const Row& r : rows) {
    std::string line;
    for (size_t c = 0; c < 9; ++c) {
      std::string cell = r.cols[c];
      if (c + 1 < 9) cell.resize(width[c] + 2, ' ');
      line += cell;
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    os << line << '\n';
  }
}

std::string to_string(const Graph& g, const Plan* plan) {
  std::ostringstream s;
  print(s, g, plan);
  return s.str();
}

}  // namespace graph
