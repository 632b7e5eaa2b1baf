// Graph construction: one short function per architecture (model/llama.cpp, qwen2.cpp, qwen3.cpp, gemma3.cpp,
// phi3.cpp, qwen3moe.cpp, gpt_oss.cpp) and the switch that picks one. A graph is built for one batch shape;
// sessions cache graphs per shape.
#pragma once
#include "graph/ir.h"
#include "model/config.h"
#include "model/weights.h"

namespace model {

// The batch a graph is built for.
struct BatchShape {
  int n_tokens = 1;
  bool all_logits = false;  // logits of every token; else of the last (one sequence) or of the output rows (paged)
  int n_ctx = 0;            // KV-cache slots per layer (paged: the whole pool)
  // Paged, many sequences (block_size > 0): the graph has the inputs "kv_seq" (I32 [n_tokens]), "block_table"
  // (I32 [max_blocks, n_seq]) and, unless all_logits, "output_rows" (I32 [n_outputs]: the tokens whose logits are
  // computed, in that order). See graph::KvCacheSpec and Op::Attention.
  int block_size = 0;
  int max_blocks = 0;
  int n_seq = 0;
  int n_outputs = 0;
};

// The graph of one forward pass over n_tokens tokens at the positions the caller supplies.
// Inputs: "tokens" and "positions" (I32 [n_tokens]), and the paged inputs above. Output: "result_output", logits
// [n_vocab, n_tokens] when all_logits, else [n_vocab, 1] for the last token (paged: [n_vocab, n_outputs]). graph.kv
// describes the cache. Throws std::invalid_argument for a shape that is not all positive (paged: block_size a power
// of two dividing n_ctx) and ModelError for a tensor the weights lack.
graph::Graph build_graph(const Config& c, const Weights& w, const BatchShape& b);
// One sequence: BatchShape{n_tokens, all_logits, n_ctx}.
graph::Graph build_graph(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);

// The per-architecture builders build_graph dispatches to.
graph::Graph build_llama(const Config& c, const Weights& w, const BatchShape& b);
graph::Graph build_qwen2(const Config& c, const Weights& w, const BatchShape& b);
graph::Graph build_qwen3(const Config& c, const Weights& w, const BatchShape& b);
graph::Graph build_gemma3(const Config& c, const Weights& w, const BatchShape& b);
graph::Graph build_phi3(const Config& c, const Weights& w, const BatchShape& b);
graph::Graph build_qwen3moe(const Config& c, const Weights& w, const BatchShape& b);
graph::Graph build_gpt_oss(const Config& c, const Weights& w, const BatchShape& b);

}  // namespace model
