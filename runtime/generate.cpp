// The shared generate loop (see generate.h).
#include "runtime/generate.h"

#include <chrono>
#include <optional>

#include "runtime/stop_text.h"
#include "runtime/warmup.h"
#include "tokenizer/tokenizer.h"

namespace runtime {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

const char* stop_reason_name(StopReason r) {
  switch (r) {
    case StopReason::EndOfGeneration: return "end of generation";
    case StopReason::TokenLimit: return "token limit";
    case StopReason::ContextFull: return "context full";
    case StopReason::Interrupted: return "interrupted";
    case StopReason::StopString: return "stop string";
  }
  return "?";
}

std::vector<int32_t> tokenize_prompt(const tokenizer::Tokenizer& tok, std::string_view text) {
  std::vector<int32_t> ids = tok.encode(text, /*add_special=*/true, /*parse_special=*/true);
  if (ids.empty()) throw SessionError("the prompt is empty and the vocabulary has no BOS token to start from");
  return ids;
}

GenerateResult generate(Session& session, const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt,
                        const GenerateOptions& options, const TextSink& sink) {
  if (prompt.empty()) throw SessionError("generate: empty prompt");
  const int64_t n_ctx = session.n_ctx();
  if (options.n_past < 0 || options.n_past > n_ctx)
    throw SessionError("generate: n_past " + std::to_string(options.n_past) + " is outside the context of " +
                       std::to_string(n_ctx));
  if (options.n_past + static_cast<int64_t>(prompt.size()) > n_ctx)
    throw SessionError("prompt has " + std::to_string(prompt.size()) + " tokens but the context holds " +
                       std::to_string(n_ctx - options.n_past) + (options.n_past ? " more" : "") +
                       " (raise -c or shorten the prompt)");
  Sampler sampler(options.sampling);
  GenerateResult r;
  r.prompt.assign(prompt.begin(), prompt.end());
  if (options.warmup) r.warmup_ms = warm_up_generation(session, prompt, options);

  tokenizer::StreamDecoder decoder(tok);
  // The prompt goes through the decoder even when not shown: it settles the SentencePiece leading-space rule, so
  // the continuation's first piece keeps its space exactly when decode(prompt + generated) would.
  for (int32_t id : prompt) {
    std::string text = decoder.push(id);
    if (options.echo_prompt) sink(text);
  }

  auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits = session.eval(prompt, options.n_past, /*all_logits=*/false);
  r.prompt_ms = ms_since(t0);

  std::vector<int32_t> history(prompt.begin(), prompt.end());  // prompt + generated: the penalty window's source
  t0 = std::chrono::steady_clock::now();
  uint64_t step = 0;
  std::string generated_text;  // only kept when stop strings are watched
  std::vector<float> masked;   // a constrained step's logits
  const auto draw = [&](std::span<const float> row) {
    const int32_t id = sampler.sample(masked_row(options.constraint, row, masked), history, step);
    if (options.constraint) options.constraint->accept(id);
    if (options.on_sample) options.on_sample(id, row);
    return id;
  };
  int32_t next = draw(logits);
  for (;;) {
    if (options.stop_requested && options.stop_requested()) {
      r.stop = StopReason::Interrupted;
      break;
    }
    if (options.n_predict >= 0 && static_cast<int64_t>(r.generated.size()) >= options.n_predict) {
      r.stop = StopReason::TokenLimit;
      break;
    }
    if (!options.ignore_eos && tok.is_eog(next)) {
      r.stop = StopReason::EndOfGeneration;
      break;
    }
    const std::string piece = decoder.push(next);
    if (options.on_token) options.on_token(next);
    sink(piece);
    r.generated.push_back(next);
    history.push_back(next);
    if (!options.stop_strings.empty()) {
      generated_text += piece;
      if (contains_stop(generated_text, piece.size(), options.stop_strings)) {
        r.stop = StopReason::StopString;
        break;
      }
    }
    if (options.n_predict >= 0 && static_cast<int64_t>(r.generated.size()) >= options.n_predict) {
      r.stop = StopReason::TokenLimit;
      break;
    }
    // The newest token still has to be evaluated, at the position after everything before it.
    const int64_t pos = options.n_past + static_cast<int64_t>(history.size()) - 1;
    if (pos >= n_ctx) {
      r.stop = StopReason::ContextFull;
      break;
    }
    ++step;
    // Another step follows this one unless the token it returns reaches the token limit (or is an end of text).
    const bool more = options.n_predict < 0 || static_cast<int64_t>(r.generated.size()) + 1 < options.n_predict;
    const SampleRequest req{&options.sampling, step, history, more};
    std::optional<int32_t> fused;
    if (!options.on_sample && !options.constraint) fused = session.decode_sample(next, static_cast<int32_t>(pos), req);
    if (fused) {
      next = *fused;
    } else {
      logits = session.eval(std::span<const int32_t>(&next, 1), static_cast<int32_t>(pos), /*all_logits=*/false);
      next = draw(logits);
    }
  }
  sink(decoder.flush());
  r.generate_ms = ms_since(t0);
  return r;
}

}  // namespace runtime
