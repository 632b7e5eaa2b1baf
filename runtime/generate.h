// The generate loop shared by the root command, chat and bench: prefill the prompt in one batch, then sample and
// decode one token per step until end-of-generation, the token limit or a full context, streaming text as it
// becomes complete.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/token_constraint.h"
#include "runtime/sampler.h"
#include "runtime/session.h"

namespace tokenizer {
class Tokenizer;
}

namespace runtime {

struct GenerateOptions {
  int32_t n_predict = -1;      // tokens to generate; -1 = until end-of-generation or a full context
  bool ignore_eos = false;     // keep going past EOS/EOT (their text is not rendered)
  bool echo_prompt = true;     // stream the prompt's text before the continuation
  int32_t n_past = 0;          // positions the session's KV cache already holds (a chat's earlier turns): the
                               // prompt is evaluated from here; penalties see only this call's tokens
  bool warmup = false;         // run warm_up_generation (runtime/warmup.h) first, untimed; the CLI's default
  SamplerParams sampling;
  // -r/--reverse-prompt: generation stops once the generated text contains one of these (the text up to and
  // including it is still emitted).
  std::vector<std::string> stop_strings;
  // Polled before each generated token; true stops the loop with StopReason::Interrupted (the CLI's Ctrl-C, a
  // server's cancelled request). None: never.
  std::function<bool()> stop_requested;
  // Called with each generated id just before its text goes to the sink (a server streams ids with the text).
  std::function<void(int32_t id)> on_token;
  // Called with each sampled id and the logits row it was drawn from (before on_token, and also for an id that
  // then ends the loop), for callers that need the distribution (a server's logprobs). Set, it keeps every step on
  // eval() and the CPU sampler: a session that samples on its device (Session::decode_sample) has no logits to
  // show. Unset, nothing changes for the command line.
  std::function<void(int32_t id, std::span<const float> logits)> on_sample;
  // What may come next (token_constraint.h): each step is drawn from the logits with its mask, and the constraint
  // takes the token. Set, every step goes through eval() and the CPU sampler, as with on_sample.
  TokenConstraint* constraint = nullptr;
};

enum class StopReason { EndOfGeneration, TokenLimit, ContextFull, Interrupted, StopString };
const char* stop_reason_name(StopReason r);

struct GenerateResult {
  std::vector<int32_t> prompt;     // the ids that were evaluated as the prompt (BOS included)
  std::vector<int32_t> generated;  // sampled ids, in order (an end-of-generation id that stopped the loop excluded)
  StopReason stop = StopReason::TokenLimit;
  double prompt_ms = 0;            // prefill: eval of the whole prompt
  double generate_ms = 0;          // from the first sample to the last token's text (sampling + decode evals)
  double warmup_ms = 0;            // the untimed warm-up before the prompt (0 without one)
};

// Text sink, called once per token with the bytes that became complete (may be empty), then once with what the
// streaming decoder flushes at the end.
using TextSink = std::function<void(std::string_view text)>;

// Runs the loop over already-tokenized prompt ids (must not be empty). Throws SessionError when n_past + the prompt
// does not fit the session's context ("prompt has N tokens but the context holds M").
GenerateResult generate(Session& session, const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TextSink& sink);

// The prompt ids for text: BOS per the vocabulary, special tokens in the text recognised (as llama.cpp's CLI does).
// Throws SessionError when the result is empty (empty text and a vocabulary without BOS).
std::vector<int32_t> tokenize_prompt(const tokenizer::Tokenizer& tok, std::string_view text);

}  // namespace runtime
