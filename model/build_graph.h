// Graph construction: one short function per architecture (model/llama.cpp, qwen2.cpp, qwen3.cpp, gemma3.cpp,
// phi3.cpp, qwen3moe.cpp, gpt_oss.cpp) and the switch that picks one. A graph is built for one batch size;
// executors cache graphs per (n_tokens, all_logits).
#pragma once
#include "graph/ir.h"
#include "model/config.h"
#include "model/weights.h"

namespace model {

// The graph of one forward pass over n_tokens tokens at the positions the caller supplies.
// Inputs: "tokens" and "positions" (I32 [n_tokens]). Output: "result_output", logits [n_vocab, n_tokens] when
// all_logits, else [n_vocab, 1] for the last token. graph.kv describes a cache of n_ctx slots per layer.
// Throws std::invalid_argument for n_tokens or n_ctx <= 0 and ModelError for a tensor the weights lack.
graph::Graph build_graph(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);

// The per-architecture builders build_graph dispatches to.
graph::Graph build_llama(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);
graph::Graph build_qwen2(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);
graph::Graph build_qwen3(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);
graph::Graph build_gemma3(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);
graph::Graph build_phi3(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);
graph::Graph build_qwen3moe(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);
graph::Graph build_gpt_oss(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx);

}  // namespace model
