// One request's generation inside the batching engine: what happens to each token it samples, with the same rules,
// in the same order, as the command line's generate loop (runtime/generate.cpp): cancellation, the token limit,
// end of generation, the streamed text and its stop strings, a full context. Kept apart from the scheduler so that
// what a request sees does not depend on how its steps were batched.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runtime/engine.h"
#include "runtime/logprobs.h"
#include "runtime/sampler.h"
#include "runtime/stop_text.h"
#include "tokenizer/tokenizer.h"

namespace runtime {

class SequenceGeneration {
 public:
  // request must outlive this; seq_capacity = positions one sequence may hold.
  SequenceGeneration(const tokenizer::Tokenizer& tok, const EngineRequest& request, int32_t seq_capacity);

  // Draws the next token from the logits of the sequence's last token (the prompt's, then each generated one's);
  // when the request asks for logprobs, they are taken from the same row and go with the token's Text event.
  int32_t sample(std::span<const float> logits);
  // Whether the next token is the logits' argmax (greedy, no penalties, no logprobs): then the device's argmax of the
  // row is the token sample() would draw, and the logits need not leave the device.
  bool argmax_is_sample() const;
  // Whether a paged session may draw the next token on its device (device_draw): every request but one that wants
  // logprobs, which come from the logits on the host, or one with a constraint, whose mask is applied there. What
  // the device cannot draw (a logit bias, parameters past its limits) the session leaves undrawn and returns the
  // logits for (Session::paged_draws).
  bool device_drawable() const { return req_.top_logprobs < 0 && !req_.constraint; }
  // The draw as sample() would make it: the parameters, the draw counter and the history.
  RowDraw device_draw() const;
  // A token the device took for this sequence (the argmax when argmax_is_sample(), or device_draw()'s draw), as
  // sample() would have taken it (the draw counter advances the same way).
  int32_t take_device_token(int32_t id);

  // Takes a sampled token: nullopt when it is to be evaluated next (its text, if any, went to `callback`), else
  // why the generation ends (the token then is not evaluated). The callback's false cancels, at the next token.
  std::optional<FinishReason> accept(int32_t token, const EngineCallback& callback, bool cancelled);

  // The text still held back (a possible stop string's start, an incomplete UTF-8 sequence), at the end.
  void flush(const EngineCallback& callback);

  // Every token of the sequence so far: the prompt, then the generated ones (an end-of-generation token that
  // stopped it excluded). Their K/V enters the cache in this order.
  const std::vector<int32_t>& tokens() const { return tokens_; }
  // Whether the next token accept() takes ends the generation whatever it is (max_tokens, or a full context): a
  // step computing one more token after it would be wasted.
  bool ends_at_next_token() const;
  int32_t n_prompt() const { return n_prompt_; }
  int32_t n_generated() const { return static_cast<int32_t>(tokens_.size()) - n_prompt_; }
  bool cancelled_by_callback() const { return callback_cancelled_; }

 private:
  void emit(const EngineCallback& callback, const std::string& text, std::span<const int32_t> ids,
            std::span<const TokenLogprobs> logprobs = {});

  const tokenizer::Tokenizer& tok_;
  const EngineRequest& req_;
  int32_t seq_capacity_;
  int32_t n_prompt_;
  std::vector<int32_t> tokens_;
  Sampler sampler_;
  uint64_t step_ = 0;
  tokenizer::StreamDecoder decoder_;
  StopText stop_;
  std::string generated_text_;      // kept only when stop strings are watched
  bool callback_cancelled_ = false;
  TokenLogprobs sampled_logprobs_;  // of the last sampled token, when the request asks
  std::vector<float> masked_;       // the logits row with the constraint's mask, when the request has one
};

}  // namespace runtime
