// Buffer planning: places every activation of a graph in one arena so that tensors that are live at the same time
// never overlap. Executors allocate plan.arena_bytes once and address node i at arena + plan.offset[i], which is what
// lets the CUDA executor capture a decode step once and replay it with new inputs written to fixed addresses.
#pragma once
#include <cstdint>
#include <vector>

#include "graph/ir.h"

namespace graph {

// Per-node placement, all vectors indexed by NodeId.
struct Plan {
  // Byte offset of the node's data in the activation arena, a multiple of `alignment`.
  // -1 for Weight nodes (and views of them): their data lives in the weight arena / the mapped file.
  // Reshape (a view) gets its source's offset.
  std::vector<int64_t> offset;
  // Bytes of the node's data (elements * dtype size), views and weights included; the arena space a node owns is
  // bytes[i] rounded up to `alignment` when owns(i).
  std::vector<uint64_t> bytes;
  // The node whose storage this node uses: itself, or for a Reshape the (transitively) viewed node.
  std::vector<NodeId> root;
  // Liveness in node-index steps, for owners only (root[i] == i, not a Weight): the buffer is written at step i and
  // must stay intact through step last_use[i] inclusive (n_nodes for graph outputs and Input nodes: to the end).
  std::vector<int32_t> last_use;
  uint64_t arena_bytes = 0;   // total arena size, a multiple of `alignment`
  uint64_t alignment = 256;

  // True when node i has arena space of its own (not a view, not a weight).
  bool owns(NodeId i) const { return root[static_cast<size_t>(i)] == i && offset[static_cast<size_t>(i)] >= 0; }
  // True when the plan was made for a graph of this many nodes (a cheap guard executors apply before running).
  bool covers(const Graph& g) const { return offset.size() == g.nodes().size(); }
};

// Liveness-based placement: buffers are reused once their last reader has run (greedy best fit, smallest suitable
// free gap first). A node's output never shares memory with its own inputs, nor with the inputs of the node just
// before it (so an executor may compute a node in its predecessor's kernel). One exception to the first rule: a
// SwiGlu takes its gate's buffer when it is the gate's last reader (in place, element-wise; never a graph output
// or an Input). Throws std::invalid_argument when
// alignment is not a power of two.
Plan plan(const Graph& g, uint64_t alignment = 256);

// Every node keeps its own buffer until the end of the run, so every intermediate can be read afterwards
// (debugging, node-by-node comparison of executors). Larger arena; same invariants otherwise.
Plan plan_all_live(const Graph& g, uint64_t alignment = 256);

}  // namespace graph
