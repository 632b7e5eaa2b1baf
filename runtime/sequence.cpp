// One request's generation in the batching engine (see sequence.h); the order of the checks is generate()'s.
#include "runtime/sequence.h"

#include "runtime/engine_job.h"

namespace runtime {

SequenceGeneration::SequenceGeneration(const tokenizer::Tokenizer& tok, const EngineRequest& request,
                                       int32_t seq_capacity)
    : tok_(tok),
      req_(request),
      seq_capacity_(seq_capacity),
      n_prompt_(static_cast<int32_t>(request.prompt.size())),
      tokens_(request.prompt),
      sampler_(request.sampling),
      decoder_(tok),
      stop_(request.stop) {
  // The prompt goes through the decoder unseen: it settles the SentencePiece leading-space rule, so the first
  // generated piece keeps its space exactly when decode(prompt + generated) would.
  for (int32_t id : request.prompt) decoder_.push(id);
}

int32_t SequenceGeneration::sample(std::span<const float> logits) {
  // With a constraint, the sampler sees only what may come next.
  const int32_t id = sampler_.sample(masked_row(req_.constraint.get(), logits, masked_), tokens_, step_++);
  if (req_.constraint) req_.constraint->accept(id);
  // The model's own probabilities, as OpenAI reports them with a response format too.
  if (req_.top_logprobs >= 0) sampled_logprobs_ = token_logprobs(logits, id, req_.top_logprobs);
  return id;
}

bool SequenceGeneration::argmax_is_sample() const {
  const SamplerParams& p = req_.sampling;
  return p.temp <= 0.0f && !p.penalties() && p.logit_bias.empty() && req_.top_logprobs < 0 && !req_.constraint;
}

RowDraw SequenceGeneration::device_draw() const { return RowDraw{&req_.sampling, step_, tokens_}; }

int32_t SequenceGeneration::take_device_token(int32_t id) {
  ++step_;
  return id;
}

void SequenceGeneration::emit(const EngineCallback& callback, const std::string& text, std::span<const int32_t> ids,
                              std::span<const TokenLogprobs> logprobs) {
  if (!send_text(callback, text, ids, logprobs)) callback_cancelled_ = true;
}

std::optional<FinishReason> SequenceGeneration::accept(int32_t token, const EngineCallback& callback, bool cancelled) {
  const auto limit_reached = [&] { return req_.max_tokens >= 0 && n_generated() >= req_.max_tokens; };
  if (cancelled || callback_cancelled_) return FinishReason::Cancelled;
  if (limit_reached()) return FinishReason::Length;
  if (!req_.ignore_eos && tok_.is_eog(token)) return FinishReason::Stop;
  const std::string piece = decoder_.push(token);
  emit(callback, stop_.push(piece), std::span(&token, 1),
       std::span<const TokenLogprobs>(&sampled_logprobs_, req_.top_logprobs >= 0 ? 1 : 0));
  tokens_.push_back(token);
  if (!req_.stop.empty()) {
    generated_text_ += piece;
    if (contains_stop(generated_text_, piece.size(), req_.stop)) return FinishReason::Stop;
  }
  if (limit_reached()) return FinishReason::Length;
  // The new token is evaluated next, at the position after everything before it.
  if (static_cast<int64_t>(tokens_.size()) - 1 >= seq_capacity_) return FinishReason::Length;
  return std::nullopt;
}

bool SequenceGeneration::ends_at_next_token() const {
  return (req_.max_tokens >= 0 && n_generated() + 1 >= req_.max_tokens) ||
         static_cast<int64_t>(tokens_.size()) >= seq_capacity_;
}

void SequenceGeneration::flush(const EngineCallback& callback) {
  emit(callback, stop_.push(decoder_.flush()), {});
  emit(callback, stop_.flush(), {});
}

}  // namespace runtime
