// Effective special-token attributes, the end-of-generation set and the special-token split (see special.h).
// The steps follow the order of llama.cpp's vocabulary loader (src/llama-vocab.cpp, load()), because later steps
// see the attributes earlier ones set; the text lists are that version's (de3ff81).
#include "tokenizer/special.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <span>
#include <string>

namespace tokenizer {

namespace {

// When tokenizer.ggml.eot_token_id is absent, the first of these the vocabulary has is the end-of-turn token.
// (The reference takes whichever its hash map yields first; all of them are end-of-generation texts below anyway.)
constexpr std::string_view kEotTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>", "<EOT>", "_<EOT>",
    "[EOT]", "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜>
    "<end_of_utterance>"};

// Tokens with these texts end generation and become control tokens, whatever their type in the file. "</s>"
// is one: a user-defined "</s>" (phi-3) or a plain BPE token spelled "</s>" (qwen2) is then matched only with
// parse_special, so text typed by a user never turns into it.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>", "<end_of_turn>",
    "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]", "<|end_of_text|>",
    "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // <｜end▁of▁sentence｜>
    "[e~["};

// Fill-in-the-middle texts per role, used (and made control tokens) when the role's id key is absent.
// "\xEF\xBD\x9C" is U+FF5C (｜), "\xE2\x96\x81" U+2581 (▁).
constexpr std::string_view kFimPre[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"};
constexpr std::string_view kFimSuf[] = {
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"};
constexpr std::string_view kFimMid[] = {
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"};
constexpr std::string_view kFimPad[] = {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"};
constexpr std::string_view kFimRep[] = {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"};
constexpr std::string_view kFimSep[] = {"<|file_sep|>"};

// gpt-oss: always user-defined (matched in both modes, rendered when decoding), whatever the file says.
constexpr std::string_view kUserDefinedTexts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};

uint8_t attr_of_type(TokenType t) {
  switch (t) {
    case TokenType::CONTROL: return kAttrControl;
    case TokenType::USER_DEFINED: return kAttrUserDefined;
    case TokenType::UNKNOWN: return kAttrUnknown;
    default: return 0;  // normal, byte, unused, undefined: never split out of text
  }
}

bool contains_any(const std::string& s, std::initializer_list<std::string_view> parts) {
  return std::any_of(parts.begin(), parts.end(), [&](std::string_view p) { return s.find(p) != std::string::npos; });
}

// The reference strips with isspace() in the C locale: ASCII space, \t, \n, \v, \f, \r.
bool is_strip_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

}  // namespace

SpecialTokens::SpecialTokens(const Vocab& v, const StringIndex& index) : texts_(v.tokens) {
  const size_t n = v.tokens.size();
  attr_.resize(n);
  for (size_t id = 0; id < n; ++id) attr_[id] = attr_of_type(v.types[id]);
  const auto find = [&](std::string_view text) { return index.find(text); };
  const auto promote = [&](int32_t id) { attr_[id] |= kAttrControl; };

  // Roles found by text when their key is absent; the token found becomes a control token.
  const auto by_text = [&](int32_t key_id, std::span<const std::string_view> texts) {
    if (key_id >= 0) return key_id;
    for (const auto text : texts) {
      if (const int32_t id = find(text); id >= 0) {
        promote(id);
        return id;
      }
    }
    return int32_t{-1};
  };
  eot_ = by_text(v.eot, kEotTexts);
  constexpr std::string_view kEom[] = {"<|eom_id|>"};
  const int32_t eom = by_text(v.eom, kEom);
  by_text(v.fim_pre, kFimPre);
  by_text(v.fim_suf, kFimSuf);
  by_text(v.fim_mid, kFimMid);
  const int32_t fim_pad = by_text(v.fim_pad, kFimPad);
  const int32_t fim_rep = by_text(v.fim_rep, kFimRep);
  const int32_t fim_sep = by_text(v.fim_sep, kFimSep);

  eog_.assign(n, 0);
  for (const int32_t id : {fim_pad, fim_rep, fim_sep})
    if (id >= 0) eog_[id] = 1;
  for (const auto text : kEogTexts) {
    if (const int32_t id = find(text); id >= 0) {
      eog_[id] = 1;
      promote(id);
    }
  }
  for (const auto text : kUserDefinedTexts)
    if (const int32_t id = find(text); id >= 0) attr_[id] = kAttrUserDefined;
  for (const int32_t id : {v.eos, eot_, eom})
    if (id >= 0) eog_[id] = 1;

  // o200k_harmony (gpt-oss) and solar-open end a message with <|end|> but not generation: when their own end
  // markers are present, <|end|> leaves the set and becomes user-defined.
  const auto eog_text = [&](std::string_view text) {
    const int32_t id = find(text);
    return id >= 0 && eog_[id] ? id : -1;
  };
  const bool has_call = eog_text("<|call|>") >= 0 || eog_text("<|calls|>") >= 0;
  if (const int32_t end = eog_text("<|end|>");
      end >= 0 && has_call && (eog_text("<|return|>") >= 0 || eog_text("<|flush|>") >= 0)) {
    eog_[end] = 0;
    attr_[end] = kAttrUserDefined;
  }
  // gemma4 and paddleocr: with <|tool_response> present, </s> is a plain token.
  if (const int32_t s = eog_text("</s>"); s >= 0 && eog_text("<|tool_response>") >= 0) {
    eog_[s] = 0;
    attr_[s] = 0;
  }

  for (size_t id = 0; id < n; ++id)
    if ((attr_[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) && !v.tokens[id].empty())
      order_.push_back(static_cast<int32_t>(id));
  std::stable_sort(order_.begin(), order_.end(),
                   [&](int32_t a, int32_t b) { return v.tokens[a].size() > v.tokens[b].size(); });

  // Strip attributes, set per model by name as the reference does (GGUF files do not store them).
  std::string name = v.name;
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const auto set = [&](std::string_view text, uint8_t flag, bool on) {
    if (const int32_t id = find(text); id >= 0) attr_[id] = on ? (attr_[id] | flag) : (attr_[id] & ~flag);
  };
  if (contains_any(v.pre, {"jina-v2-de", "jina-v2-es", "jina-v2-code"}) ||
      contains_any(v.architecture, {"nomic-bert-moe", "jina-bert-v3"})) {
    set("<mask>", kAttrLstrip, true);
  } else if (contains_any(name, {"phi-3", "phi3"})) {
    // Phi-3: every special token eats the whitespace after it ("<|user|>\nHi" is <|user|> "Hi"), except these.
    for (const int32_t id : order_) attr_[id] |= kAttrRstrip;
    set("</s>", kAttrRstrip, true);
    for (const auto text : {"<unk>", "<s>", "<|endoftext|>"}) set(text, kAttrRstrip, false);
  } else if (contains_any(name, {"modern-bert"})) {
    set("[MASK]", kAttrLstrip, true);
  }

  rank_.assign(n, 0);
  for (size_t k = 0; k < order_.size(); ++k) {
    const int32_t id = order_[k];
    rank_[id] = static_cast<uint32_t>(k);
    const uint8_t first = static_cast<uint8_t>(v.tokens[id][0]);
    if (!(attr_[id] & (kAttrControl | kAttrUnknown))) {
      by_first_[0][first].push_back(id);
      any_[0] = true;
    }
    by_first_[1][first].push_back(id);
    any_[1] = true;
  }
}

std::vector<SpecialTokens::Fragment> SpecialTokens::partition(std::string_view text, bool parse_special) const {
  const auto& by_first = by_first_[parse_special ? 1 : 0];
  if (!any_[parse_special ? 1 : 0] || text.empty()) return {Fragment{-1, 0, text.size()}};
  struct Hit {
    uint32_t rank;  // priority: index in order_, then left to right
    int32_t id;
    size_t pos;
  };
  std::vector<Hit> hits;
  for (size_t pos = 0; pos < text.size(); ++pos) {
    for (const int32_t id : by_first[static_cast<uint8_t>(text[pos])]) {
      const std::string& tok = texts_[id];
      if (text.compare(pos, tok.size(), tok) == 0) hits.push_back(Hit{rank_[id], id, pos});
    }
  }
  if (hits.empty()) return {Fragment{-1, 0, text.size()}};
  std::sort(hits.begin(), hits.end(),
            [](const Hit& a, const Hit& b) { return a.rank != b.rank ? a.rank < b.rank : a.pos < b.pos; });
  // Taking hits in priority order reproduces the reference's fragment-by-fragment search: a hit is found only
  // inside raw text (no byte taken by an earlier match or strip), and a strip stops where raw text ends.
  enum : uint8_t { kRaw = 0, kToken = 1, kStripped = 2 };
  std::vector<uint8_t> state(text.size(), kRaw);
  std::vector<Hit> accepted;
  for (const auto& h : hits) {
    const size_t end = h.pos + texts_[h.id].size();
    if (std::any_of(state.begin() + h.pos, state.begin() + end, [](uint8_t s) { return s != kRaw; })) continue;
    std::fill(state.begin() + h.pos, state.begin() + end, kToken);
    if (attr_[h.id] & kAttrLstrip) {
      for (size_t i = h.pos; i > 0 && state[i - 1] == kRaw && is_strip_space(text[i - 1]); --i)
        state[i - 1] = kStripped;
    }
    if (attr_[h.id] & kAttrRstrip) {
      for (size_t i = end; i < text.size() && state[i] == kRaw && is_strip_space(text[i]); ++i) state[i] = kStripped;
    }
    accepted.push_back(h);
  }
  std::sort(accepted.begin(), accepted.end(), [](const Hit& a, const Hit& b) { return a.pos < b.pos; });
  // Raw fragments are the runs of untouched bytes; stripped bytes always lie beside a token, so two runs are
  // never adjacent.
  std::vector<Fragment> out;
  size_t i = 0, next = 0;
  while (i < text.size()) {
    if (next < accepted.size() && accepted[next].pos == i) {
      const size_t len = texts_[accepted[next].id].size();
      out.push_back(Fragment{accepted[next].id, i, len});
      i += len;
      ++next;
    } else if (state[i] == kStripped) {
      ++i;
    } else {
      const size_t from = i;
      while (i < text.size() && state[i] == kRaw) ++i;
      out.push_back(Fragment{-1, from, i - from});
    }
  }
  return out;
}

}  // namespace tokenizer
