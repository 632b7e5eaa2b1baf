// The model fuzz target's body: a file that parses goes through Model::from_file (which must either accept it or
// throw GgufError / ModelError naming the file) and through Tokenizer::from_gguf (TokenizerError). A model that
// loads must build its one-token graph, plan it and, when small, run two decode steps on the CPU reference without
// any further error: Weights::load promised that every shape and type is usable.
#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "exercise.h"
#include "gguf/gguf.h"
#include "graph/plan.h"
#include "graph/reference.h"
#include "invariant.h"
#include "model/build_graph.h"
#include "model/model.h"
#include "tokenizer/tokenizer.h"

namespace fuzz {
namespace {

constexpr const char* kName = "fuzz-model.gguf";

void check_names_file(const std::exception& e, const char* kind) {
  if (std::string_view(e.what()).find(kName) == std::string_view::npos)
    broken(std::string(kind) + " does not name the file: " + e.what());
}

// The vocabulary in the same metadata, as `llm-run` loads it next to the model.
void exercise_vocabulary(const gguf::File& f) {
  std::optional<tokenizer::Tokenizer> tok;
  try {
    tok.emplace(tokenizer::Tokenizer::from_gguf(f));
  } catch (const tokenizer::TokenizerError& e) {
    note(std::string("tokenizer: ") + e.what());
    return;
  }
  const int32_t n = tok->n_vocab();
  if (n <= 0) broken("a tokenizer with " + std::to_string(n) + " tokens");
  for (int32_t id : {tok->bos(), tok->eos(), tok->eot(), tok->unk(), tok->pad()})
    if (id < -1 || id >= n) broken("special token id " + std::to_string(id) + " outside the vocabulary");
  std::vector<int32_t> ids;
  try {
    ids = tok->encode("Hello world, <s> \xe2\x9c\x85 12345 \n\n  don't", false, true);
  } catch (const tokenizer::TokenizerError& e) {
    note(std::string("encode: ") + e.what());  // e.g. SentencePiece refusing a vocabulary it cannot encode with
    return;
  }
  for (int32_t id : ids)
    if (id < 0 || id >= n) broken("encode produced id " + std::to_string(id) + " outside the vocabulary");
  (void)tok->decode(ids);
  tokenizer::StreamDecoder stream(*tok);
  for (int32_t id : ids) (void)stream.push(id);
  (void)stream.flush();
  note("tokenizer: " + std::to_string(n) + " tokens, encoded to " + std::to_string(ids.size()) + " ids");
  for (int32_t id = 0; id < std::min(n, 64); ++id) {
    (void)tok->token_to_piece(id, true);
    (void)tok->token_text(id);
    (void)tok->is_eog(id);
  }
}

void check_weights(const model::Model& m) {
  const gguf::File& f = m.file();
  uint64_t end = 0;
  for (const model::WeightInfo& w : m.weights().all()) {
    const auto& p = w.params;
    const auto* host = static_cast<const uint8_t*>(p.host);
    if (host < f.base() || host > f.base() + f.file_size() ||
        p.nbytes > static_cast<uint64_t>(f.base() + f.file_size() - host))
      broken("weight " + p.tensor + " points outside the file");
    if (p.arena_offset % model::Weights::kArenaAlignment != 0 || p.arena_offset < end)
      broken("weight " + p.tensor + " overlaps the previous one in the arena");
    end = p.arena_offset + p.nbytes;
  }
  if (end > m.weights().arena_bytes()) broken("weights extend past arena_bytes");
}

// Float copies the reference executor makes of quantized weights, in bytes.
uint64_t dequantized_bytes(const model::Weights& w) {
  uint64_t n = 0;
  for (const model::WeightInfo& info : w.all()) {
    uint64_t e = 1;
    for (int64_t d : info.shape.ne) e *= static_cast<uint64_t>(d);
    n += e * sizeof(float);
  }
  return n;
}

void run_graph(const model::Model& m, Bytes input) {
  const model::Config& c = m.config();
  const int n_ctx = std::min(c.n_ctx_train, 4);
  graph::Graph g = model::build_graph(c, m.weights(), 1, false, n_ctx);
  const graph::Plan p = graph::plan(g);
  if (p.arena_bytes % p.alignment != 0 || !p.covers(g)) broken("plan does not cover the graph");
  // Running costs float copies of the weights and a KV cache; keep it to inputs of ordinary size.
  const uint64_t kv = uint64_t(c.n_layer) * n_ctx * c.n_head_kv * (c.head_dim + c.head_dim_v) * sizeof(float);
  if (dequantized_bytes(m.weights()) + p.arena_bytes + kv > 16 * input.size() + (1u << 20)) {
    note("graph of " + std::to_string(g.nodes().size()) + " nodes built; too large to run");
    return;
  }
  graph::ReferenceExecutor ex(1);
  for (int32_t pos = 0; pos < std::min(n_ctx, 2); ++pos) {
    const int32_t token = pos == 0 ? 0 : c.n_vocab - 1;
    ex.run(g, p, std::span<const int32_t>(&token, 1), std::span<const int32_t>(&pos, 1));
    const std::span<const float> logits = ex.output_f32(g.outputs().at(0));
    if (logits.size() != static_cast<size_t>(c.n_vocab)) broken("logits are not [n_vocab]");
  }
  note("ran " + std::to_string(g.nodes().size()) + " nodes for " + std::to_string(std::min(n_ctx, 2)) + " tokens");
}

}  // namespace

void exercise_model(Bytes input) {
  std::optional<gguf::File> f;
  try {
    f.emplace(gguf::File::parse(input.data(), input.size(), kName));
  } catch (const gguf::GgufError& e) {
    note(e.what());  // the GGUF target checks the reader's messages
    return;
  }
  exercise_vocabulary(*f);
  std::shared_ptr<const model::Model> m;
  try {
    m = model::Model::from_file(std::move(*f));
  } catch (const model::ModelError& e) {
    note(e.what());
    check_names_file(e, "ModelError");
    return;
  } catch (const gguf::GgufError& e) {
    note(e.what());
    check_names_file(e, "GgufError");
    return;
  }
  (void)model::describe(m->config());
  check_weights(*m);
  run_graph(*m, input);
}

}  // namespace fuzz
