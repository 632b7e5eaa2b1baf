// A reply's logprobs (`logprobs` / `top_logprobs`) in OpenAI's two shapes, and which generated tokens they cover.
// Chat: {"content": [{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob", "bytes"}]}], "refusal":
// null}. Completions: {"tokens", "token_logprobs", "top_logprobs": [{token: logprob}], "text_offset"}.
//
// The engine sends a token's logprobs with its id, but text that may begin a stop string comes later or never; so
// each token is placed in the reply's text by decoding the ids as the engine does (the prompt first, for the
// leading-space rule), and an entry goes out with the text that completes its token. Text a stop string cut off
// takes its tokens' entries with it, so streamed and whole replies list the same tokens as their text shows.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/logprobs.h"
#include "server/api_request.h"
#include "tokenizer/tokenizer.h"

namespace server {

class LogprobsReply {
 public:
  // tok must outlive this; prompt: the request's prompt ids.
  LogprobsReply(const tokenizer::Tokenizer& tok, std::span<const int32_t> prompt, Route route);

  // Completions' echo with logprobs, before anything is pushed: the prompt's tokens become ready first, at their
  // offsets in the prompt decoded (the echoed text), the first without a logprob (nothing precedes it; `lps` are
  // tokens 1, 2, ...), and the generated tokens' offsets then count from the end of that text.
  void prompt(std::span<const int32_t> ids, std::span<const runtime::TokenLogprobs> lps);

  // Newly generated tokens' logprobs, in order.
  void push(std::span<const runtime::TokenLogprobs> logprobs);
  // The reply's text grew by `text`: tokens whose text is now wholly shown become ready.
  void show(std::string_view text);
  // The end of the reply. all: every token not out yet becomes ready (a tool-call reply, whose content is not the
  // engine's text). Otherwise those whose text begins in what was shown do; when the text was cut short (a stop
  // string), the rest are dropped.
  void end(bool all);

  bool has_ready() const { return !ready_.empty(); }
  // The `logprobs` object of the ready entries (possibly none), which are then out.
  std::string take_json();

 private:
  struct Entry {
    runtime::TokenLogprobs lp;
    size_t begin = 0, end = 0;  // its text: bytes [begin, end) of the reply's text
    bool scored = true;         // false: the prompt's first token, which has no logprob
    bool in_prompt = false;     // an echoed prompt token: begin counts from the prompt's start
  };

  const tokenizer::Tokenizer& tok_;
  Route route_;
  tokenizer::StreamDecoder decoder_;
  size_t decoded_ = 0;            // bytes of text the pushed tokens spell
  size_t shown_ = 0;              // bytes of text the reply showed
  size_t offset_base_ = 0;        // echo: the echoed prompt's bytes, before the generated text's offsets
  std::vector<Entry> pending_;    // pushed, not ready
  std::vector<Entry> ready_;
};

}  // namespace server
