// A chat reply held to a structured form (JSON mode, a JSON schema, a forced tool call) after a lead-in: what the
// model writes first by its template's markup, before the held text begins.
//
// Qwen 3, QwQ, DeepSeek-R1 and others think first, between <think> and </think> (chat/reasoning_split.h); gpt-oss
// writes analysis messages before its final one (chat/harmony_split.h). Held from its first byte, such a reply could
// not think, and where the prompt had opened a <think> block (DeepSeek-R1's generation prompt ends with "<think>\n")
// the held text was read as reasoning that never closed: the answer came back empty. As the reference runtime's
// server reads such replies, a reply may now write a lead-in first (Lead: the block, or the analysis messages and
// the final channel's header), then the held text; an end of generation is allowed only once the held text is whole.
// Mistral's and Granite's calls begin with markers that are control tokens, which no byte grammar writes: their
// lead-in takes those tokens (Token nodes) around the held texts.
//
// The ways the bytes so far can be read are kept side by side (Tracks), so every prefix is judged exactly: a token is
// allowed when one way takes all its bytes. A step's mask is the union of each way's tokens: the held text's from
// the vocabulary's mask for its state (json_constraint.h); free text's (the reasoning) as every token with text but
// those that end it into bytes the rest refuses (only tokens holding the end tag's last byte can end it); a literal's
// or whitespace's by trying the tokens that can go on with it; a marker's, its token.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/byte_grammar.h"
#include "runtime/json_constraint.h"
#include "runtime/token_constraint.h"

namespace runtime {

// What a reply may write before its held text: a small program of nodes, each going on to the next.
class Lead {
 public:
  enum class Kind : uint8_t {
    Literal,  // these bytes
    Spaces,   // up to JsonPrefix::kMaxSpaces whitespace bytes
    Until,    // free text up to and including the first `text` (the end tag)
    Choice,   // either `next` or `alt`
    Token,    // one control token (no text: a marker such as Mistral's [TOOL_CALLS])
    Held,     // held text number `held` (`spaced`: whitespace may come first); the reply ends with it
  };
  struct Node {
    Kind kind;
    std::string text = {};
    uint32_t next = 0, alt = 0;
    bool spaced = false;
    uint32_t held = 0;
    int32_t token = -1;
  };

  // <think> blocks: the held text; or whitespace, "<think>", its text, "</think>", then the held text (whitespace
  // first allowed). starts_inside: the prompt opened the block, so the reply is its text, "</think>", the held text.
  static Lead think(bool starts_inside);
  // gpt-oss's harmony messages, after the prompt's "<|start|>assistant": analysis messages ("<|channel|>analysis
  // <|message|>" text "<|end|><|start|>assistant"), then "<|channel|>final", " <|constrain|>json" or not,
  // "<|message|>" and the held text; or the held text alone (a reply without a header is content as written).
  static Lead harmony_final();
  // The same analysis messages, then "<|channel|>" and the held text: a call's header and arguments
  // (harmony_call_grammar), which must come.
  static Lead harmony_call();
  // A control token, one space or none, then the held text: Mistral's [TOOL_CALLS] or Granite's <|tool_call|>
  // before a JSON list of calls (Mistral v0.3's template writes "[TOOL_CALLS] [").
  static Lead marker_then_held(int32_t marker);
  // Mistral's later form: [TOOL_CALLS], one of `names`, [ARGS], then held text number i (name i's arguments).
  static Lead marker_name_arguments(int32_t calls, const std::vector<std::string>& names, int32_t args);

  const std::vector<Node>& nodes() const { return nodes_; }
  uint32_t start() const { return start_; }

 private:
  uint32_t add(Node n);
  // Harmony's analysis messages: the "<|channel|>" node, after which either an analysis message leads back to it
  // or `then` follows.
  static uint32_t harmony_messages(Lead& l, uint32_t then);
  std::vector<Node> nodes_;
  uint32_t start_ = 0;
};

// The grammar's texts with up to JsonPrefix::kMaxSpaces whitespace bytes first: the held text after a <think> block
// (a model writes "</think>\n\n" before its answer). JSON mode's automaton already takes them.
std::shared_ptr<const ByteGrammar> with_leading_space(const ByteGrammar& grammar);

// What every reply held after a lead-in shares (a request's n choices): the vocabulary, the lead-in, its held texts'
// starting states, per node the tokens worth trying and an end tag's automaton. Built once a request: the scans of
// the vocabulary and the grammars' spaced copies are not repeated per choice.
template <class State>
struct LeadInPlan {
  // `plain[i]` / `spaced[i]`: held text i's state before its first byte, without and with leading whitespace (for a
  // grammar, of the grammar and of with_leading_space's). `owner` keeps alive what they read. Throws
  // std::invalid_argument where the lead-in enters a held text they do not have.
  LeadInPlan(std::shared_ptr<const ConstraintVocabulary> vocab, Lead lead, std::vector<State> plain,
             std::vector<State> spaced, std::shared_ptr<const void> owner = nullptr);

  std::shared_ptr<const ConstraintVocabulary> vocab;
  std::shared_ptr<const void> owner;
  Lead lead;
  std::vector<State> plain, spaced;
  // Per node: the tokens worth trying from a cursor there (Spaces: whitespace, then a byte the next node may begin
  // with, or nothing more; an Until node's, the tokens that hold the end tag's last byte, are the vocabulary's
  // tokens_containing list, not copied here) and an Until node's tag automaton.
  std::vector<std::vector<int32_t>> candidates;
  std::vector<std::vector<std::array<uint8_t, 256>>> tag_steps;
};

// One reply's place after a lead-in: the constraint the engine applies.
template <class State>
class LeadIn final : public TokenConstraint {
 public:
  explicit LeadIn(std::shared_ptr<const LeadInPlan<State>> plan);
  void mask(std::span<float> logits) const override;
  void accept(int32_t token) override;

 private:
  struct Cursor {
    uint32_t node;
    uint32_t at;  // Literal: bytes matched; Spaces: whitespace read; Until: bytes of the end tag the text ends with
    bool operator==(const Cursor&) const = default;
  };
  // Each way the bytes so far can be read: a place in the lead-in, or in the held text.
  struct Tracks {
    std::vector<Cursor> cursors;
    std::vector<State> held;
    bool alive() const { return !cursors.empty() || !held.empty(); }
    void clear() { cursors.clear(), held.clear(); }
  };
  const Lead::Node& node(uint32_t i) const { return plan_->lead.nodes()[i]; }
  void enter(uint32_t node, Tracks& out) const;  // the ways that begin at a node (through Choice and Spaces)
  void step(const Tracks& from, unsigned char c, Tracks& out) const;
  void step_marker(const Tracks& from, int32_t token, Tracks& out) const;  // a control token (Token nodes)
  // Whether one cursor's way takes all of a token's bytes.
  bool takes(Cursor cursor, std::string_view bytes) const;
  // Ors into allowed_ the tokens a lone held text in `state` allows (no end of generation; the caller decides it).
  void allow_held(const State& state) const;

  std::shared_ptr<const LeadInPlan<State>> plan_;
  Tracks tracks_;
  mutable std::vector<uint8_t> allowed_, scratch_;
  mutable Tracks try_a_, try_b_;  // takes()' scratch
};

extern template struct LeadInPlan<JsonPrefix>;
extern template struct LeadInPlan<GrammarState>;
extern template class LeadIn<JsonPrefix>;
extern template class LeadIn<GrammarState>;

// JSON mode (every held text an object), or grammars' texts (a schema's, a forced call's: held text i is
// grammars[i]'s), after a lead-in: prepared once, then start() gives each reply its constraint.
class LeadInForm {
 public:
  static LeadInForm json(std::shared_ptr<const ConstraintVocabulary> vocab, Lead lead);
  static LeadInForm grammars(std::shared_ptr<const ConstraintVocabulary> vocab,
                             std::vector<std::shared_ptr<const ByteGrammar>> grammars, Lead lead);
  std::shared_ptr<TokenConstraint> start() const;

 private:
  std::shared_ptr<const LeadInPlan<JsonPrefix>> json_;
  std::shared_ptr<const LeadInPlan<GrammarState>> grammar_;
};

// One reply's constraint at once (LeadInForm's json or grammars, then start()).
std::shared_ptr<TokenConstraint> lead_in_json(std::shared_ptr<const ConstraintVocabulary> vocab, Lead lead);
std::shared_ptr<TokenConstraint> lead_in_grammar(std::shared_ptr<const ConstraintVocabulary> vocab,
                                                 std::vector<std::shared_ptr<const ByteGrammar>> grammars, Lead lead);

}  // namespace runtime
