// The JSON-schema fuzz target's last part: the schema's grammar held after a lead-in (runtime/lead_in.h) over a
// small vocabulary of byte tokens, pieces that cross the lead-ins' markers and control-token markers, each step's
// token picked among the mask's allowed ones by the next input byte. A mask must never allow nothing (an end of
// generation at least), and nothing may fail.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "exercise.h"
#include "invariant.h"
#include "runtime/json_constraint.h"
#include "runtime/lead_in.h"
#include "tokenizer/tokenizer.h"

namespace fuzz {
namespace {

constexpr int32_t kToolCalls = 3, kArgs = 4;  // control tokens standing for Mistral's markers

const tokenizer::Tokenizer& lead_vocabulary() {
  static const tokenizer::Tokenizer tok = [] {
    using tokenizer::TokenType;
    tokenizer::Vocab v;
    v.model_name = "llama";
    const auto add = [&](std::string text, TokenType type) {
      v.tokens.push_back(std::move(text));
      v.types.push_back(type);
    };
    add("<unk>", TokenType::UNKNOWN);
    add("<s>", TokenType::CONTROL);
    add("</s>", TokenType::CONTROL);
    add("[TOOL_CALLS]", TokenType::CONTROL);
    add("[ARGS]", TokenType::CONTROL);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      add(name, TokenType::BYTE);
    }
    for (const char* piece : {"<think>", "</think>", "</", "think", ">", ">\n\n", "\xE2\x96\x81{", "{\"", "\":",
                              "\"}", "\xE2\x96\x81\"", "true", "null", "<|channel|>", "analysis<|message|>", "final",
                              "<|message|>", "<|end|>", "<|start|>assistant", "commentary", "f", "fg"})
      add(piece, TokenType::NORMAL);
    v.unk = 0, v.bos = 1, v.eos = 2;
    return tokenizer::Tokenizer::from_vocab(std::move(v));
  }();
  return tok;
}

runtime::Lead lead_of(uint8_t pick) {
  switch (pick % 6) {
    case 0: return runtime::Lead::think(false);
    case 1: return runtime::Lead::think(true);
    case 2: return runtime::Lead::harmony_final();
    case 3: return runtime::Lead::harmony_call();
    case 4: return runtime::Lead::marker_then_held(kToolCalls);
    default: return runtime::Lead::marker_name_arguments(kToolCalls, {"", "f", "fg"}, kArgs);
  }
}

}  // namespace

void exercise_lead_in(const std::shared_ptr<const runtime::ByteGrammar>& grammar, std::string_view text) {
  if (text.empty()) return;
  const tokenizer::Tokenizer& tok = lead_vocabulary();
  static const auto vocab = std::make_shared<const runtime::ConstraintVocabulary>(tok);
  const auto pick = static_cast<uint8_t>(text[0]);
  text.remove_prefix(1);
  const std::shared_ptr<runtime::TokenConstraint> c =
      pick & 0x80 ? runtime::lead_in_json(vocab, lead_of(pick))
                  : runtime::lead_in_grammar(vocab, {grammar, grammar, grammar}, lead_of(pick));  // one per name
  std::vector<float> logits(static_cast<size_t>(tok.n_vocab()));
  std::vector<int32_t> allowed;
  // A few dozen steps: a held text's mask under a schema of patterns costs tens of milliseconds under the
  // sanitizers, and the lead-ins' own paths are a few tokens long in this vocabulary.
  for (size_t i = 0; i < text.size() && i < 40; ++i) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    c->mask(logits);
    allowed.clear();
    for (size_t id = 0; id < logits.size(); ++id)
      if (logits[id] == 0.0f) allowed.push_back(static_cast<int32_t>(id));
    if (allowed.empty()) broken("a lead-in's mask allowed nothing, not even an end");
    const int32_t id = allowed[static_cast<uint8_t>(text[i]) % allowed.size()];
    if (tok.is_eog(id)) {
      note("lead-in: ended");
      return;
    }
    c->accept(id);
  }
  note("lead-in: read");
}

}  // namespace fuzz
