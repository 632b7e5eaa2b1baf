// The one switch from architecture to graph builder.
#include "model/build_graph.h"

namespace model {

graph::Graph build_graph(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx) {
  return build_graph(c, w, BatchShape{.n_tokens = n_tokens, .all_logits = all_logits, .n_ctx = n_ctx});
}

graph::Graph build_graph(const Config& c, const Weights& w, const BatchShape& b) {
  switch (c.arch) {
    case Arch::Llama: return build_llama(c, w, b);
    case Arch::Qwen2: return build_qwen2(c, w, b);
    case Arch::Qwen3: return build_qwen3(c, w, b);
    case Arch::Gemma3: return build_gemma3(c, w, b);
    case Arch::Phi3: return build_phi3(c, w, b);
    case Arch::Qwen3Moe: return build_qwen3moe(c, w, b);
    case Arch::GptOss: return build_gpt_oss(c, w, b);
  }
  throw ModelError("build_graph: unknown architecture id " + std::to_string(static_cast<int>(c.arch)));
}

}  // namespace model
