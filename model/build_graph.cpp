// The one switch from architecture to graph builder.
#include "model/build_graph.h"

namespace model {

graph::Graph build_graph(const Config& c, const Weights& w, int n_tokens, bool all_logits, int n_ctx) {
  switch (c.arch) {
    case Arch::Llama: return build_llama(c, w, n_tokens, all_logits, n_ctx);
    case Arch::Qwen2: return build_qwen2(c, w, n_tokens, all_logits, n_ctx);
    case Arch::Qwen3: return build_qwen3(c, w, n_tokens, all_logits, n_ctx);
    case Arch::Gemma3: return build_gemma3(c, w, n_tokens, all_logits, n_ctx);
    case Arch::Phi3: return build_phi3(c, w, n_tokens, all_logits, n_ctx);
    case Arch::Qwen3Moe: return build_qwen3moe(c, w, n_tokens, all_logits, n_ctx);
    case Arch::GptOss: return build_gpt_oss(c, w, n_tokens, all_logits, n_ctx);
  }
  throw ModelError("build_graph: unknown architecture id " + std::to_string(static_cast<int>(c.arch)));
}

}  // namespace model
