// The HTTP request parser's fuzz target body: the input is a request body, read as each route reads it (chat and
// text completions, tokenize, detokenize, apply-template). ApiError is the only failure allowed; its error body must
// be JSON, and an accepted completion request must hold values the engine accepts (the sampler's domains, a token
// limit of -1 or more), since the parser is what stands between a client and the engine.
#include <string>
#include <string_view>

#include "chat/json.h"
#include "exercise.h"
#include "invariant.h"
#include "runtime/sampler.h"
#include "server/api_error.h"
#include "server/api_request.h"

namespace fuzz {
namespace {

void check_error(const server::ApiError& e) {
  if (e.status() != 400) broken("a parser error with status " + std::to_string(e.status()));
  try {
    (void)chat::parse_json(server::error_body(e));
  } catch (const chat::JsonError&) {
    broken("an error body that is not JSON: " + server::error_body(e));
  }
  note(std::string("refused: ") + e.what());
}

void check_accepted(const server::CompletionRequest& r) {
  try {
    runtime::validate(r.sampling);
  } catch (const std::invalid_argument& e) {
    broken(std::string("accepted sampling parameters the sampler refuses: ") + e.what());
  }
  if (r.max_tokens < -1) broken("accepted max_tokens " + std::to_string(r.max_tokens));
  for (const auto& p : r.prompts)
    for (int32_t id : p.ids)
      if (id < 0) broken("accepted a negative token id");
  if (r.sampling.logit_bias.size() > 1024) broken("accepted more than 1024 logit biases");
  for (const auto& [id, b] : r.sampling.logit_bias)
    if (id < 0 || !(b >= -100.0f && b <= 100.0f)) broken("accepted a logit bias out of range");
  if (r.n < 1 || r.n * int32_t(r.route == server::Route::Chat ? 1 : r.prompts.size()) > server::kMaxChoices)
    broken("accepted " + std::to_string(r.n) + " choices of " + std::to_string(r.prompts.size()) + " prompts");
  note("accepted");
}

}  // namespace

void exercise_api_request(Bytes input) {
  const std::string_view body(reinterpret_cast<const char*>(input.data()), input.size());
  for (server::Route route : {server::Route::Chat, server::Route::Completion}) {
    try {
      check_accepted(server::parse_completion_request(body, route));
    } catch (const server::ApiError& e) {
      check_error(e);
    }
  }
  try {
    (void)server::parse_tokenize_request(body);
  } catch (const server::ApiError& e) {
    check_error(e);
  }
  try {
    for (int32_t id : server::parse_detokenize_request(body))
      if (id < 0) broken("detokenize accepted a negative token id");
  } catch (const server::ApiError& e) {
    check_error(e);
  }
  try {
    (void)server::parse_apply_template_request(body);
  } catch (const server::ApiError& e) {
    check_error(e);
  }
}

}  // namespace fuzz
