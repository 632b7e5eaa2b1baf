// Warm-up: the first evaluation of a batch shape pays one-time costs (on CUDA: building and planning the graph,
// allocating its buffers, lazy kernel-module loading, cuBLAS heuristics, NVRTC kernels, capturing the decode graph;
// on the CPU reference: the KV-cache allocation and the float copies of quantized weights). These functions run
// that work once, untimed, before the timed prompt, so the reported prompt and generation speeds are the steady
// state. --no-warmup skips them.
//
// Results are discarded, and the output is identical with and without a warm-up: every evaluation writes the K/V of
// its positions before attending over slots [0, position], so the slots a warm-up wrote are rewritten by the real
// run before anything reads them. No other state survives an evaluation (sampling is counter-based).
#pragma once
#include <cstdint>
#include <span>

#include "runtime/generate.h"
#include "runtime/session.h"

namespace runtime {

// For generate(): evaluates `prompt` at options.n_past (the exact shape the timed prefill uses) and then, when the
// context has room for a generated token, the decode step twice at the next position, as the generate loop runs it
// (the CUDA session captures its decode graph on the second run). Returns the milliseconds it took.
double warm_up_generation(Session& session, std::span<const int32_t> prompt, const GenerateOptions& options);

// For batch scoring (perplexity): one evaluation of `tokens` from position 0, as the timed evaluations will run.
// Returns the milliseconds it took.
double warm_up_batch(Session& session, std::span<const int32_t> tokens, bool all_logits);

}  // namespace runtime
