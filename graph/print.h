// A printable form of a graph: a header (node count, batch, outputs, arena size, KV cache) and one line per node with
// id, name, op, shape, dtype, inputs by name, arena offset and size, and the op's parameters. Backs
// `llm-run info --graph` and test failure messages.
#pragma once
#include <ostream>
#include <string>

#include "graph/ir.h"
#include "graph/plan.h"

namespace graph {

// plan may be null: the offset and arena columns then read "-".
void print(std::ostream& os, const Graph& g, const Plan* plan = nullptr);
std::string to_string(const Graph& g, const Plan* plan = nullptr);

// One node's parameters in words ("eps=1e-05", "neox n_rot=64 base=10000"), empty for ops without any.
std::string params_string(const Node& n);

}  // namespace graph
