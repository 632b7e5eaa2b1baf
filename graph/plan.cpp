// Liveness analysis and best-fit placement of a graph's activations in one arena.
// Steps are node indices: node i is computed at step i, so a buffer is busy from its own step to its last reader's.
#include "graph/plan.h"

#include <algorithm>
#include <map>
#include <stdexcept>
#include <string>

namespace graph {
namespace {

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Free gaps of the arena, by offset; neighbours are merged on release so gaps stay maximal.
class FreeList {
 public:
  // Best fit: the smallest gap that holds `size`; otherwise grow the arena (reusing a gap that touches its end).
  uint64_t take(uint64_t size) {
    auto best = gaps_.end();
    for (auto it = gaps_.begin(); it != gaps_.end(); ++it)
      if (it->second >= size && (best == gaps_.end() || it->second < best->second)) best = it;
    if (best != gaps_.end()) {
      const uint64_t off = best->first, len = best->second;
      gaps_.erase(best);
      if (len > size) gaps_.emplace(off + size, len - size);
      return off;
    }
    uint64_t off = end_;
    if (!gaps_.empty()) {
      auto last = std::prev(gaps_.end());
      if (last->first + last->second == end_) {
        off = last->first;
        gaps_.erase(last);
      }
    }
    end_ = off + size;
    return off;
  }

  void give(uint64_t off, uint64_t size) {
    auto it = gaps_.emplace(off, size).first;
    if (auto next = std::next(it); next != gaps_.end() && off + size == next->first) {
      it->second += next->second;
      gaps_.erase(next);
    }
    if (it != gaps_.begin()) {
      auto prev = std::prev(it);
      if (prev->first + prev->second == it->first) {
        prev->second += it->second;
        gaps_.erase(it);
      }
    }
  }

  uint64_t end() const { return end_; }

 private:
  std::map<uint64_t, uint64_t> gaps_;  // offset -> size
  uint64_t end_ = 0;
};

// The buffer a SwiGlu writes in place: its gate's, when this node is the gate's last reader, the two are the same
// size, and the gate is neither its up input nor an input of the node just before (that rule still holds). The
// op is element-wise (out[i] from gate[i] and up[i] only), so every executor can run it in place; in a 512-token
// prefill of an 8B model the gate is 28 MiB.
NodeId in_place_source(const Graph& g, const Plan& p, int32_t i) {
  const Node& nd = g.nodes()[static_cast<size_t>(i)];
  if (nd.op != Op::SwiGlu || nd.inputs.size() != 2 || i == 0) return kNoNode;
  const NodeId gate = p.root[static_cast<size_t>(nd.inputs[0])];
  const auto sg = static_cast<size_t>(gate);
  const Op op = g.nodes()[sg].op;
  if (op == Op::Weight || op == Op::Input || p.offset[sg] < 0 || p.last_use[sg] != i) return kNoNode;
  if (p.bytes[sg] != p.bytes[static_cast<size_t>(i)] || gate == p.root[static_cast<size_t>(nd.inputs[1])])
    return kNoNode;
  // By bytes, not by node: the gate may itself hold a buffer passed on in place.
  for (NodeId in : g.nodes()[static_cast<size_t>(i - 1)].inputs)
    if (in != kNoNode && p.offset[static_cast<size_t>(p.root[static_cast<size_t>(in)])] == p.offset[sg])
      return kNoNode;
  return gate;
}

Plan make_plan(const Graph& g, uint64_t alignment, bool all_live) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0)
    throw std::invalid_argument("graph::plan: alignment " + std::to_string(alignment) + " is not a power of two");
  const auto& nodes = g.nodes();
  const auto n = static_cast<int32_t>(nodes.size());
  Plan p;
  p.alignment = alignment;
  p.offset.assign(nodes.size(), -1);
  p.bytes.assign(nodes.size(), 0);
  p.root.assign(nodes.size(), kNoNode);
  p.last_use.assign(nodes.size(), -1);

  // Roots and liveness: a read of a view is a read of the buffer it views.
  for (int32_t i = 0; i < n; ++i) {
    const Node& nd = nodes[static_cast<size_t>(i)];
    p.bytes[static_cast<size_t>(i)] = static_cast<uint64_t>(nd.shape.elements()) * dtype_size(nd.dtype);
    p.root[static_cast<size_t>(i)] = nd.op == Op::Reshape ? p.root[static_cast<size_t>(nd.inputs.at(0))] : i;
    p.last_use[static_cast<size_t>(i)] = (all_live || nd.op == Op::Input) ? n : i;
    for (NodeId in : nd.inputs) {
      int32_t& lu = p.last_use[static_cast<size_t>(p.root[static_cast<size_t>(in)])];
      if (lu < i) lu = i;
    }
  }
  for (NodeId o : g.outputs()) p.last_use[static_cast<size_t>(p.root[static_cast<size_t>(o)])] = n;

  // Placement in step order; buffers whose last reader is step i are released only after node i + 1 got its
  // space, so an output never aliases one of its own inputs, nor an input of the step just before it. The second
  // rule is what lets an executor run a node inside the previous node's kernel (the CUDA executor's epilogue
  // fusions: a matvec writing straight into the residual Add that follows it) without reading what it overwrites.
  std::vector<std::vector<int32_t>> release_at(nodes.size());
  FreeList free;
  for (int32_t i = 0; i < n; ++i) {
    const Node& nd = nodes[static_cast<size_t>(i)];
    const auto si = static_cast<size_t>(i);
    if (nd.op == Op::Reshape) {
      p.offset[si] = p.offset[static_cast<size_t>(p.root[si])];
    } else if (const NodeId src = all_live ? kNoNode : in_place_source(g, p, i); src != kNoNode) {
      // The source's bytes pass to this node: its release at this step is cancelled.
      p.offset[si] = p.offset[static_cast<size_t>(src)];
      std::erase(release_at[si], src);
      if (p.last_use[si] < n) release_at[static_cast<size_t>(p.last_use[si])].push_back(i);
    } else if (nd.op != Op::Weight) {
      p.offset[si] = static_cast<int64_t>(free.take(align_up(p.bytes[si], alignment)));
      if (p.last_use[si] < n) release_at[static_cast<size_t>(p.last_use[si])].push_back(i);
    }
    if (i == 0) continue;
    for (int32_t r : release_at[si - 1])
      free.give(static_cast<uint64_t>(p.offset[static_cast<size_t>(r)]),
                align_up(p.bytes[static_cast<size_t>(r)], alignment));
  }
  p.arena_bytes = free.end();
  return p;
}

}  // namespace

Plan plan(const Graph& g, uint64_t alignment) { return make_plan(g, alignment, false); }
Plan plan_all_live(const Graph& g, uint64_t alignment) { return make_plan(g, alignment, true); }

}  // namespace graph
