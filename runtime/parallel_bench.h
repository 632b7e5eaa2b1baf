// The engine's throughput at a fixed number of sequences, without HTTP, scheduling or sampling (in the manner of
// the reference runtime's batched bench): n_parallel sequences prefill n_prompt tokens each, in batches of at most
// batch_tokens, then decode n_gen steps of one token per sequence, on a paged session. Prompt ids are random.
#pragma once
#include <cstdint>

#include "runtime/sampler.h"
#include "runtime/session.h"

namespace runtime {

struct ParallelBenchResult {
  double prefill_s = 0;  // every prompt, all sequences
  double decode_s = 0;   // n_gen steps of n_parallel tokens
};

// Throws SessionError when the session is not paged or its pool or block table cannot hold n_parallel sequences of
// n_prompt + n_gen tokens, OptionsError for non-positive sizes.
//
// sampling null: every decode step evaluates random tokens and copies the logits out (as the reference runtime's
// bench). Otherwise each sequence draws its next token with these parameters (its own seed: seed + sequence) as the
// serving engine does — on the device where the session draws (PagedBatch::draws), else on the host from the
// logits — and evaluates it in the next step.
// pipeline (greedy only; OptionsError with sampling): the decode as the serving engine runs greedy sequences — each
// step's tokens are the previous step's argmax on the device (PagedBatch::token_from_row), no logits are copied out,
// and each step is queued before the previous one's results are taken (Session::launch_paged), so the device does
// not wait for the host between steps.
ParallelBenchResult run_parallel_bench(Session& session, int32_t n_parallel, int32_t n_prompt, int32_t n_gen,
                                       int32_t batch_tokens, uint32_t seed, const SamplerParams* sampling = nullptr,
                                       bool pipeline = false);

}  // namespace runtime
