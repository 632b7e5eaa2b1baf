// The reference runtime's helper routes: POST /tokenize, /detokenize and /apply-template, with its field names, so
// tools written against it work unchanged.
#include "server/routes.h"
#include "tokenizer/tokenizer.h"

namespace server {

void handle_tokenize(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const TokenizeRequest r = parse_tokenize_request(req.body);
  const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
  std::vector<int32_t> ids;
  try {
    ids = tok.encode(r.content, r.add_special, r.parse_special);
  } catch (const tokenizer::TokenizerError& e) {
    throw invalid_field("content", e.what());
  }
  std::string body = "{\"tokens\":[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) body += ",";
    if (r.with_pieces) {
      body += "{\"id\":" + std::to_string(ids[i]) +
              ",\"piece\":" + json_string(tok.token_to_piece(ids[i], /*render_special=*/true)) + "}";
    } else {
      body += std::to_string(ids[i]);
    }
  }
  send_json(res, body + "]}");
}

void handle_detokenize(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const std::vector<int32_t> ids = parse_detokenize_request(req.body);
  const tokenizer::Tokenizer& tok = ctx.engine.tokenizer();
  for (int32_t id : ids)
    if (id >= tok.n_vocab())
      throw invalid_field("tokens", "token id " + std::to_string(id) + " is outside the vocabulary of " +
                                        std::to_string(tok.n_vocab()));
  send_json(res, "{\"content\":" + json_string(tok.decode(ids)) + "}");
}

void handle_apply_template(RouteContext& ctx, const httplib::Request& req, httplib::Response& res) {
  const CompletionRequest r = parse_apply_template_request(req.body);
  send_json(res, "{\"prompt\":" + json_string(render_chat(ctx, r)) + "}");
}

}  // namespace server
